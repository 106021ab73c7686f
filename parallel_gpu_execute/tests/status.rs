//! `--status` on the hosts operators meet: the process that really holds a
//! slot (a classic script's shell, not its exited `flock -n` child; the
//! child of a test that forked and exited), every slot of the settings,
//! stopped waiters, when a slot was granted, btrfs, PID namespaces, and
//! that `--status` takes no lock.
//!
//! The tests wait for locks by reading `/proc/locks` and `/proc/<pid>`,
//! never by trying a lock themselves: a try at the wrong instant would make
//! a classic script's `flock -n` fail.

mod common;

use common::{Fixture, bin, slot_json, status, waiters_json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use test_support::mounts::Mounted;
use test_support::{Cmd, Running, hold_lock, wait_until};

/// The inode of `path` as `/proc/locks` ends its device field with.
fn inode(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| std::os::unix::fs::MetadataExt::ino(&m))
}

/// `/proc/locks` lines on `path`'s inode (on any device), held ones and
/// blocked ones; by inode alone, as the device differs on btrfs.
fn proc_locks(path: &Path) -> (Vec<i64>, usize) {
    let Some(ino) = inode(path) else { return (Vec::new(), 0) };
    let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let (mut held, mut blocked) = (Vec::new(), 0);
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (pid, dev) = if words.get(1) == Some(&"->") { (words[5], words[6]) } else { (words[4], words[5]) };
        if dev.rsplit(':').next() != Some(&ino.to_string()) {
            continue;
        }
        if words.get(1) == Some(&"->") {
            blocked += 1;
        } else {
            held.push(pid.parse().unwrap_or(0));
        }
    }
    (held, blocked)
}

fn listed_held(path: &Path) -> bool {
    !proc_locks(path).0.is_empty()
}

/// The value of `"key": "…"` at its first place in `text`.
fn string_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(&format!("\"{key}\": \""))? + key.len() + 5;
    Some(&text[at..at + text[at..].find('"')?])
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ`.
fn epoch_seconds(iso: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| iso[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

/// The classic script's way of holding a slot: `exec {fd}>file` (which
/// truncates it), `flock -n` in a child that exits at once, then the work,
/// here `sleep` (a child, which inherits the descriptor) and `true` (so
/// that the shell stays and does not exec the sleep).
fn classic_holder(file: &Path, before: &str) -> Running {
    let script = format!("{before}exec {{fd}}>\"$0\"; flock -n $fd || exit 9; sleep 30; true");
    let mut c = Cmd::new("/bin/bash");
    c.args(["-c", &script]).arg(file).own_process_group();
    c.spawn()
}

fn stop(mut p: Running) {
    p.signal_group(libc::SIGKILL);
    let _ = p.has_exited();
    p.wait();
}

#[test]
fn a_classic_script_holder_is_its_shell_not_the_exited_flock_child() {
    let f = Fixture::new("status-classic");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let shell = classic_holder(&f.lock("1", 0), "");
    let mut taker = 0; // the flock child, named by the kernel; it exits
    let locked = wait_until(Duration::from_secs(10), || {
        taker = proc_locks(&f.lock("1", 0)).0.first().copied().unwrap_or(0);
        taker != 0
    });
    assert!(locked, "the script never locked");
    assert_ne!(taker, i64::from(shell.pid()));
    assert!(wait_until(Duration::from_secs(5), || !Path::new(&format!("/proc/{taker}")).exists()));
    // Its `sleep 30` started (the shell forks it after the flock child exits).
    let sleeping = wait_until(Duration::from_secs(5), || shell.has_child_named("sleep"));
    assert!(sleeping, "the script never started its sleep");

    let out = status(&f, 2, 1, "json");
    let slot = slot_json(&out, &f.lock("1", 0));
    // Its shell first (the oldest holder), then the sleep that shares the lock.
    assert!(
        slot.contains(&format!("\"held\": true, \"holders\": [{{\"pid\": {}, \"visible\": true, ", shell.pid())),
        "the shell holds it\n{}",
        out.explain()
    );
    assert!(slot.contains("\"command\": \"sleep 30\""), "its sleep shares the lock\n{}", out.explain());
    assert!(!out.stdout.contains(&format!("\"pid\": {taker},")), "the exited taker is named\n{}", out.explain());
    assert!(!out.stdout.contains("\"visible\": false"), "nothing here is hidden\n{}", out.explain());

    let text = status(&f, 2, 1, "text");
    let row = text.stdout.lines().find(|l| l.starts_with("xla      1 ")).unwrap();
    assert!(row.contains(&format!(" held  {:<12} sleeping ", shell.pid())), "{}", text.explain());
    stop(shell);
}

#[test]
fn a_test_that_forked_and_exited_leaves_its_child_named_as_the_holder() {
    let mut f = Fixture::new("status-forked");
    f.runfiles.add("ws/pkg/fork_test", "#!/bin/sh\nsleep 30 </dev/null >/dev/null 2>&1 &\necho child=$!\n", true);
    let out = f.cmd().env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("./pkg/fork_test").run();
    out.assert_success();
    let child: i32 = out.stdout.trim().strip_prefix("child=").and_then(|p| p.parse().ok()).unwrap();
    // Its taker has exited; a long /proc/locks, read a page at a time, can skip a line.
    assert!(wait_until(Duration::from_secs(2), || listed_held(&f.lock("0", 0))), "{}", out.explain());

    let st = status(&f, 1, 1, "json");
    let slot = slot_json(&st, &f.lock("0", 0));
    assert!(
        slot.contains(&format!("\"holders\": [{{\"pid\": {child}, \"visible\": true, \"command\": \"sleep 30\"")),
        "the child\n{}",
        st.explain()
    );
    assert_eq!(slot.matches("\"pid\": ").count(), 1, "only the child holds it\n{}", st.explain());
    // SAFETY: kill(2) of the sleep this test started.
    unsafe { libc::kill(child, libc::SIGKILL) };
}

#[test]
fn every_slot_of_the_settings_is_listed_held_or_free_then_other_lock_files() {
    let f = Fixture::new("status-all-slots");
    // One test ran (GPU 0 slot 0 has a lock file, free now); GPU 1 slot 1
    // is held; two lock files are not of these settings.
    f.cmd().env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "2").arg("./pkg/gpu_test").run().assert_success();
    // Held by one process alone (this one's threads fork for other tests).
    let mut lone = Cmd::new("/bin/bash");
    lone.args(["-c", "exec 9>\"$0\"; flock -n 9 || exit 9; exec sleep 30"]).arg(f.lock("1", 1)).own_process_group();
    let lone = lone.spawn();
    assert!(wait_until(Duration::from_secs(10), || listed_held(&f.lock("1", 1))), "never locked");
    test_support::write_file(f.lock("7", 0), "");
    test_support::write_file(f.lock_dir.join("jax_accelerator_lock_0_0"), "");

    let out = status(&f, 2, 2, "text");
    let lines: Vec<&str> = out.stdout.lines().collect();
    // The slots of these settings counted, the other lock files apart.
    assert!(lines[0].ends_with(": 4 slot(s), 1 held, 0 waiting"), "{}", out.explain());
    assert!(lines[1].starts_with("PROFILE  GPU SLOT  STATE PID "), "{}", out.explain());
    assert_eq!(lines[2..5], ["xla      0      0  free", "xla      0      1  free", "xla      1      0  free"]);
    assert!(lines[5].starts_with(&format!("xla      1      1  held  {:<12} ", lone.pid())), "{}", out.explain());
    assert_eq!(
        lines[6..],
        [
            "other lock files in the directory (2, not slots of these settings):",
            "jax      0      0  free",
            "xla      7      0  free",
            "gpus:",
            "GPU HEALTH KERNEL USERS (PID)       STATE",
            "0   ok     -                        in service",
            "1   ok     -                        in service",
        ],
        "{}",
        out.explain()
    );
    // In 100 columns, with room left for a command.
    assert!(lines.iter().filter(|l| !l.contains(" held ")).all(|l| l.len() <= 100), "{}", out.explain());
    let command_at = lines[5].find(" ago) ").map(|at| at + " ago) ".len());
    assert!(command_at.is_some_and(|at| at < 85), "{}", out.explain());

    let json = status(&f, 2, 2, "json");
    let free_no_file = slot_json(&json, &f.lock("0", 1));
    assert!(
        free_no_file.ends_with(
            "\"held\": false, \"holders\": [], \"since\": null, \"file_exists\": false, \"configured\": true}"
        ),
        "{}",
        json.explain()
    );
    assert!(slot_json(&json, &f.lock("0", 0)).ends_with("\"file_exists\": true, \"configured\": true}"));
    assert!(slot_json(&json, &f.lock("7", 0)).ends_with("\"file_exists\": true, \"configured\": false}"));

    // A pool variable: its GPUs, in its order.
    let pool = f
        .cmd()
        .env("TF_GPU_COUNT", "4")
        .env("TF_TESTS_PER_GPU", "1")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .env("ROCR_VISIBLE_DEVICES", "3,1")
        .arg("--status")
        .run();
    let rows: Vec<&str> = pool.assert_success().stdout.lines().skip(2).take(2).collect();
    assert_eq!(rows, ["xla      3      0  free", "xla      1      0  free"], "{}", pool.explain());
    stop(lone);
}

/// Waiters stopped (SIGSTOP) are listed stopped, in arrival order, and
/// without a beat once a second has passed: nobody waits for them. Let go,
/// they beat again.
#[test]
fn stopped_waiters_are_shown_stopped_and_without_a_beat() {
    let f = Fixture::new("status-stopped");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let waiter = || {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").args(["/bin/true"]);
        c.spawn()
    };
    let first = waiter();
    assert!(f.queued(1), "the first never queued");
    let second = waiter();
    assert!(f.queued(2), "the second never queued");
    first.signal(libc::SIGSTOP);
    second.signal(libc::SIGSTOP);
    for p in [&first, &second] {
        assert!(
            wait_until(Duration::from_secs(5), || test_support::process_state(p.pid()) == Some('T')),
            "not stopped"
        );
    }
    std::thread::sleep(Duration::from_millis(1300));

    let out = status(&f, 1, 1, "json");
    let waiters = waiters_json(&out);
    let at = |pid: i32| waiters.find(&format!("{{\"pid\": {pid}, "));
    let (a, b) = (at(first.pid()), at(second.pid()));
    assert!(a.is_some_and(|a| b.is_some_and(|b| a < b)), "not both listed, in arrival order\n{}", out.explain());
    for p in [&first, &second] {
        let at = at(p.pid()).unwrap();
        let object = &waiters[at..at + waiters[at..].find('}').unwrap()];
        assert!(object.contains("\"state\": \"stopped\""), "{}", out.explain());
        assert!(object.contains("\"position\": \"queued\""), "{}", out.explain());
        let age = object.split("\"beat_age_seconds\": ").nth(1).unwrap().split(',').next().unwrap();
        let age: f64 = age.parse().unwrap();
        assert!(age > 1.0, "a beat {age} s old from a stopped waiter\n{}", out.explain());
    }
    let text = status(&f, 1, 1, "text");
    let row = text.stdout.lines().find(|l| l.starts_with("queued ")).unwrap_or_else(|| panic!("{}", text.explain()));
    assert!(row.contains(&format!(" {:<12} stopped ", first.pid())), "{}", text.explain());
    // Stopped some 1.3 s before this look: whole seconds, more on a slow run.
    let none_for =
        row.split(" none for ").nth(1).and_then(|r| r.split(" s ").next()).and_then(|n| n.parse::<u64>().ok());
    assert!(none_for.is_some_and(|s| (1..=5).contains(&s)), "{}", text.explain());

    // Let go, they beat again.
    for p in [&first, &second] {
        p.signal(libc::SIGCONT);
    }
    let mut out = status(&f, 1, 1, "text");
    let both_ok = |out: &test_support::Output| {
        out.stdout.lines().filter(|l| l.starts_with("queued ") && l.contains(" ok ")).count() == 2
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !both_ok(&out) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        out = status(&f, 1, 1, "text");
    }
    assert!(both_ok(&out), "{}", out.explain());
    drop(held);
    first.wait().assert_success();
    second.wait().assert_success();
}

#[test]
fn since_is_when_the_slot_was_granted_not_when_its_holder_started() {
    let f = Fixture::new("status-since");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    // A script that starts, works 2 s, then takes the slot (its truncation
    // of the lock file is the grant time, as the wrapper's own update is).
    let late = classic_holder(&f.lock("0", 0), "sleep 2; ");
    assert!(wait_until(Duration::from_secs(10), || listed_held(&f.lock("0", 0))), "never locked");
    // A lock file last written long ago, held without writing it.
    test_support::write_file(f.lock("1", 0), "");
    let old = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options().write(true).open(f.lock("1", 0)).unwrap().set_modified(old).unwrap();
    let _held = hold_lock(f.lock("1", 0));

    let out = status(&f, 2, 1, "json");
    let slot = slot_json(&out, &f.lock("0", 0));
    let since = epoch_seconds(string_field(slot, "since").unwrap_or_else(|| panic!("no since\n{}", out.explain())));
    let started = epoch_seconds(string_field(slot, "started").unwrap());
    assert!(since - started >= 1, "granted {since}, started {started}: the start, not the grant\n{}", out.explain());
    assert!(slot_json(&out, &f.lock("1", 0)).contains("\"since\": null"), "a stale time is unknown\n{}", out.explain());
    let text = status(&f, 2, 1, "text");
    let row = text.stdout.lines().find(|l| l.starts_with("xla      1 ")).unwrap();
    assert!(row.contains(" - "), "no grant time shown for GPU 1\n{}", text.explain());
    // A time given by hand since, after the holder's start (`touch -d`, as
    // the file's owner may): unknown, not the time given.
    let given = format!("@{}", started + 1);
    let touched = std::process::Command::new("touch").args(["-m", "-d", &given]).arg(f.lock("0", 0)).status();
    assert!(touched.is_ok_and(|s| s.success()));
    let out = status(&f, 2, 1, "json");
    assert!(slot_json(&out, &f.lock("0", 0)).contains("\"since\": null"), "a time given by hand\n{}", out.explain());
    stop(late);
}

/// Runs `--status` (text and JSON in turn) until `stop` is set; how many times.
fn status_loop(f: &Fixture, stop: &std::sync::atomic::AtomicBool) -> usize {
    let mut runs = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        status(f, 2, 1, if runs % 2 == 0 { "text" } else { "json" });
        runs += 1;
    }
    runs
}

/// `--status` used to try a shared lock on lock files it found no holder
/// for: a `--wait=0` wrapper or a classic script's `flock -n` that tried
/// the slot in that instant saw it busy and failed (about 1 run in 3,000).
/// It takes no lock now: tries beside a `--status` loop never fail.
/// `STATUS_READ_ONLY_SECONDS` (default 3) sets how long each half runs.
#[test]
fn status_takes_no_lock_so_tries_beside_it_never_fail() {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    let seconds: u64 = std::env::var("STATUS_READ_ONLY_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let f = Fixture::new("status-read-only");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let files: Vec<PathBuf> = [f.lock("0", 0), f.lock("1", 0), f.lock_dir.join("gpulock.queue")].into_iter().collect();
    let open: Vec<std::fs::File> = files
        .iter()
        .map(|p| std::fs::File::options().read(true).write(true).create(true).truncate(false).open(p).unwrap())
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let looping = s.spawn(|| status_loop(&f, &stop));
        // As `flock -n` tries: an exclusive try and a release, as fast as
        // this process can.
        let (start, mut tries) = (Instant::now(), 0u64);
        while start.elapsed() < Duration::from_secs(seconds) {
            for (file, path) in open.iter().zip(&files) {
                // SAFETY: flock(2) on a descriptor `file` owns.
                let got = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
                if !got {
                    stop.store(true, Ordering::Relaxed);
                    panic!("try {tries}: {} was busy, with only --status beside", path.display());
                }
                // SAFETY: as above.
                unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
                tries += 1;
            }
        }
        // And wrappers with --wait=0, one after another.
        let (start, mut runs) = (Instant::now(), 0u64);
        while start.elapsed() < Duration::from_secs(seconds) {
            let out =
                f.cmd().env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").args(["--wait=0", "/bin/true"]).run();
            if out.code() != 0 {
                stop.store(true, Ordering::Relaxed);
                panic!("run {runs} failed beside --status\n{}", out.explain());
            }
            runs += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let statuses = looping.join().unwrap();
        eprintln!("{tries} tries and {runs} --wait=0 runs beside {statuses} --status runs");
        assert!(statuses >= 10 && runs >= 10, "too few runs to tell: {statuses} --status, {runs} wrappers");
    });
}

/// A new btrfs under `dir` with a subvolume `sub`, or why it cannot be
/// had: in CI (`CI=true`) that fails the test, elsewhere it skips it.
fn btrfs_or_skip(dir: &Path) -> Option<Mounted> {
    Mounted::btrfs_image(&dir.join("btrfs.img"), &dir.join("mnt"))
        .map_err(|why| test_support::prerequisite(false, &why, "--status on a btrfs subvolume"))
        .ok()
}

/// On btrfs, `stat` gives a file in a subvolume the subvolume's anonymous
/// device, while `/proc/locks` names the superblock's: matched by `stat`'s,
/// every holder was hidden, nobody waited, and the wait lines said "0 of 1
/// slots busy" and "second in the queue" for the third waiter.
#[test]
fn holders_waiters_and_wait_lines_on_a_btrfs_subvolume() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new("status-btrfs");
    let Some(fs) = btrfs_or_skip(f.dir.path()) else { return };
    let lock_dir = fs.path().join("sub/locks");
    std::fs::create_dir_all(&lock_dir).unwrap();
    let lock = lock_dir.join("gpulock0_0");
    let cmd = || {
        let mut c = f.cmd();
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir).env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
        c
    };
    let holder = classic_holder(&lock, "");
    assert!(wait_until(Duration::from_secs(10), || listed_held(&lock)), "the script never locked");
    // The premise: the two devices differ.
    let dev = std::fs::metadata(&lock).unwrap().dev();
    let listed = std::fs::read_to_string("/proc/locks").unwrap();
    let shown = format!("{:02x}:{:02x}:{} ", libc::major(dev), libc::minor(dev), inode(&lock).unwrap());
    assert!(!listed.contains(&shown), "stat's device is /proc/locks' here: not the btrfs case\n{listed}");

    let waiter = || {
        let mut c = cmd();
        c.arg("/bin/true");
        c.spawn()
    };
    let queued = |n: usize| wait_until(Duration::from_secs(10), || test_support::queued_pids(&lock_dir).len() >= n);
    let first = waiter();
    assert!(queued(1), "the first never queued");
    let second = waiter();
    assert!(queued(2), "the second never queued");
    let third = waiter();
    assert!(queued(3), "the third never queued");

    let out = cmd().arg("--status=json").run();
    out.assert_success();
    let slot = slot_json(&out, &lock);
    assert!(
        slot.contains(&format!("\"held\": true, \"holders\": [{{\"pid\": {}, \"visible\": true, ", holder.pid())),
        "{}",
        out.explain()
    );
    let waiters = waiters_json(&out);
    for p in [&first, &second, &third] {
        let position = "queued";
        let at = waiters.find(&format!("{{\"pid\": {}, ", p.pid())).unwrap_or_else(|| panic!("{}", out.explain()));
        let object = &waiters[at..at + waiters[at..].find('}').unwrap()];
        assert!(object.contains(&format!("\"position\": \"{position}\"")), "{position}\n{}", out.explain());
    }
    assert!(!out.stdout.contains("\"visible\": false"), "{}", out.explain());
    let text = cmd().arg("--status").run();
    text.assert_success().assert_stdout_contains(": 1 slot(s), 1 held, 3 waiting\n");

    stop(holder);
    for (p, place) in
        [(first, "first in the queue"), (second, "second in the queue"), (third, "in the queue behind 2 others")]
    {
        let out = p.wait();
        out.assert_success();
        let line = out.stderr.lines().next().unwrap_or("");
        assert!(line.ends_with(&format!(": 1 of 1 slots busy, {place}")), "{}", out.explain());
    }
    drop(fs);
}

/// Two lock directories in two subvolumes of one btrfs: their lock files
/// share the inode number, and `/proc/locks` names a file by the
/// superblock's device and its inode alone. A lock held on the other
/// subvolume's file, and a `flock` waiting for it, are none of this one's:
/// its slot is free, as a test that takes it at once shows.
#[test]
fn a_lock_on_a_twin_in_another_btrfs_subvolume_is_not_this_slots() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new("status-btrfs-twins");
    let Some(fs) = btrfs_or_skip(f.dir.path()) else { return };
    let other = fs.path().join("other");
    let made = std::process::Command::new("btrfs").args(["subvolume", "create"]).arg(&other).output();
    assert!(made.is_ok_and(|o| o.status.success()), "btrfs subvolume create {}", other.display());
    let (mine, theirs) = (fs.path().join("sub/locks"), other.join("locks"));
    for dir in [&mine, &theirs] {
        std::fs::create_dir_all(dir).unwrap();
        test_support::write_file(dir.join("gpulock0_0"), "");
    }
    let (lock, twin) = (mine.join("gpulock0_0"), theirs.join("gpulock0_0"));
    let (a, b) = (std::fs::metadata(&lock).unwrap(), std::fs::metadata(&twin).unwrap());
    assert!(a.ino() == b.ino() && a.dev() != b.dev(), "the premise: one inode number, two devices");
    let holder = classic_holder(&twin, "");
    assert!(wait_until(Duration::from_secs(10), || listed_held(&twin)), "the script never locked");
    let mut blocked = Cmd::new("flock");
    blocked.arg(&twin).arg("true").timeout(Duration::from_secs(30));
    let blocked = blocked.spawn();
    assert!(wait_until(Duration::from_secs(10), || proc_locks(&twin).1 > 0), "flock never waited");
    let cmd = || {
        let mut c = f.cmd();
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &mine).env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
        c
    };
    let out = cmd().arg("--status=json").run();
    let taken = cmd().args(["--wait=0", "/bin/true"]).run();
    stop(holder);
    blocked.wait();
    out.assert_success();
    let slot = slot_json(&out, &lock);
    assert!(slot.contains("\"held\": false, \"holders\": []"), "a twin's lock shown as this slot's\n{}", out.explain());
    assert!(out.stdout.contains("\"waiters\": [],"), "a twin's waiter shown as this slot's\n{}", out.explain());
    taken.assert_success();
    drop(fs);
}

/// From inside a PID namespace of its own, `/proc/locks` leaves out every
/// lock whose taker is outside. A waiter outside is still listed, from its
/// record: as a hidden process, with what its record says and who owns it;
/// the waiters inside are listed with their processes, in arrival order.
#[test]
fn waiters_outside_the_pid_namespace_are_listed_from_their_records() {
    let pid_namespace = test_support::is_root() && Path::new("/usr/bin/unshare").exists();
    if !test_support::prerequisite(pid_namespace, "root and unshare(1)", "waiters seen from a PID namespace") {
        return;
    }
    let f = Fixture::new("status-pidns");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut first = f.cmd();
    first.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("/bin/true");
    let first = first.spawn();
    assert!(f.queued(1), "no first waiter");

    let dir = f.dir.path().display();
    let script = format!(
        "queued() {{ for i in $(seq 500); do [ $(ls {queue} | wc -l) -ge $1 ] && break; sleep 0.02; done; \
                     for i in $(seq 500); do [ \"$(cut -d' ' -f3 /proc/$2/stat)\" = S ] && return; sleep 0.02; done; }}\n\
         {bin} /bin/true 2>{dir}/second.err & queued 2 $!\n\
         {bin} /bin/true 2>{dir}/third.err & queued 3 $!\n\
         {bin} --status=json >{dir}/status.json; {bin} --status >{dir}/status.txt; : >{dir}/done\n\
         wait",
        queue = f.lock_dir.join("gpuqueue").display(),
        bin = bin(),
    );
    let mut inside = Cmd::new("/usr/bin/unshare");
    inside
        .args(["--pid", "--fork", "--mount-proc", "--mount", "sh", "-c", &script])
        .env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
        .env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1");
    let mut inside = inside.spawn();
    let done = f.dir.join("done");
    assert!(wait_until(Duration::from_secs(20), || done.exists() || inside.has_exited()), "no status");
    if !done.exists() {
        let out = inside.wait();
        if out.stderr.contains("unshare") {
            let why = format!("PID namespace (unshare failed: {})", out.stderr.trim());
            test_support::prerequisite(false, &why, "waiters seen from a PID namespace");
            return;
        }
        panic!("the namespace's script ended early\n{}", out.explain());
    }
    let json = std::fs::read_to_string(f.dir.join("status.json")).unwrap();
    let text = std::fs::read_to_string(f.dir.join("status.txt")).unwrap();
    let hidden = "\"waiters\": [{\"pid\": 0, \"visible\": false, \"command\": null, \"started\": null, \"state\": null, \"uid\": null, \"position\": \"queued\", ";
    assert!(json.contains(hidden), "the first, outside, hidden\n{json}");
    assert!(json.contains("\"owner_uid\": 0, \"record_test\": \"/bin/true\"}"), "{json}");
    assert_eq!(json.matches("\"position\": \"queued\"").count(), 3, "{json}");
    assert_eq!(json.matches("\"state\": \"sleeping\", \"uid\": 0, \"position\": \"queued\", ").count(), 2, "{json}");
    // The waiters inside prove the slot held, unseen: unknown, never free.
    assert!(text.contains(": 1 slot(s), 0 held, 1 unknown, 3 waiting\n"), "{text}");
    assert!(text.contains("/bin/true (as its record says; made by uid 0)"), "{text}");
    assert!(text.contains("note: no kernel threads in /proc"), "{text}");
    assert!(json.contains("\"host_pid_namespace\": false, \"gpus\": ["), "{json}");

    drop(held);
    first.wait().assert_success();
    inside.wait().assert_success();
    for (name, place) in [("second", "second in the queue"), ("third", "in the queue behind 2 others")] {
        let err = std::fs::read_to_string(f.dir.join(format!("{name}.err"))).unwrap();
        let line = err.lines().next().unwrap_or("");
        let end = format!(" slots busy as seen from this PID namespace, {place}");
        assert!(line.ends_with(&end), "{name}:\n{err}");
    }
}

/// Without root, another user's `/proc/<pid>/fd` cannot be read, so
/// nothing shows that the process `/proc/locks` names still has the file
/// open: the holder is hidden, not named on trust.
#[test]
fn another_users_holder_is_hidden_from_a_user_who_is_not_root() {
    if !test_support::prerequisite(test_support::is_root(), "root", "--status run as another user") {
        return;
    }
    let f = common::shared_fixture("status-other-user");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1")
        .arg("--status=json")
        .as_user(common::NOBODY, common::NOBODY);
    let out = c.run();
    out.assert_success();
    assert!(
        slot_json(&out, &f.lock("0", 0)).contains(
            "\"held\": true, \"holders\": [{\"pid\": 0, \"visible\": false, \"command\": null, \"started\": null, \"state\": null, \"uid\": null}], \"since\": null"
        ),
        "{}",
        out.explain()
    );
    // As root, the same holder is this process.
    let out = status(&f, 1, 1, "json");
    let me = std::process::id();
    assert!(slot_json(&out, &f.lock("0", 0)).contains(&format!("\"holders\": [{{\"pid\": {me}, \"visible\": true")));
}
