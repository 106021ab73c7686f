//! The slot contract where real setups tried to break it: no slot given
//! twice, and no test kept from a free slot, with age-based cleaners, a
//! stopped waiter at the head of the queue, a full file system, a disk
//! quota, a lock file another user may not open, and lock files opened for
//! writing.

mod common;

use common::{Fixture, NOBODY, Record, set_mode};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use test_support::{hold_lock, is_root, lock_is_free, prerequisite, wait_until, write_file};

/// A test that prints the open flags (octal, from fdinfo) of each lock
/// descriptor it inherited, then sleeps `$SLEEP` seconds.
const FD_FLAGS_TEST: &str = r#"#!/bin/sh
for f in /proc/$$/fd/*; do
  n=${f##*/}
  case "$(readlink "$f" 2>/dev/null)" in
    */gpulock*) echo "lock ${n} $(sed -n 's/^flags:[[:space:]]*//p' /proc/$$/fdinfo/$n)";;
  esac
done
[ -n "${SLEEP:-}" ] && sleep "$SLEEP"
exit 0
"#;

/// Whether systemd-tmpfiles and root (to act on any file) are here; in CI
/// both must be.
fn have_tmpfiles() -> bool {
    let found = Command::new("systemd-tmpfiles").arg("--version").output().is_ok_and(|o| o.status.success());
    prerequisite(found && is_root(), "root and systemd-tmpfiles", "a held lock file against an age-based cleaner")
}

fn tmpfiles_clean(config: &Path, body: &str) {
    write_file(config, body);
    let out = Command::new("systemd-tmpfiles").arg("--clean").arg(config).output().unwrap();
    assert!(out.status.success(), "systemd-tmpfiles --clean {}: {:?}\n{body}", config.display(), out);
}

/// `touch -m -d '2 hours ago'`: a file as old as one created long ago.
fn age(path: &Path) {
    let st = Command::new("touch").args(["-m", "-d", "2 hours ago"]).arg(path).status().unwrap();
    assert!(st.success());
}

#[test]
fn a_held_lock_file_outlives_an_age_based_cleaner() {
    if !have_tmpfiles() {
        return;
    }
    let f = Fixture::new("tmpfiles");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    // Both slots' files were created two hours ago, by earlier tests.
    let (held, free) = (f.lock("0", 0), f.lock("1", 0));
    for p in [&held, &free] {
        write_file(p, "");
        age(p);
    }
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").env("SLEEP", "30").arg("./pkg/gpu_test");
    c.own_process_group();
    let running = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || !lock_is_free(&held)), "the first test never took GPU 0");
    // A cleaner that removes files unmodified for an hour (by mtime: this
    // test cannot age a file's ctime), as /tmp's aging does.
    let config = f.dir.join("tmpfiles.conf");
    tmpfiles_clean(&config, &format!("d {} - - - m:1h\n", f.lock_dir.display()));
    assert!(held.exists(), "the cleaner removed the held lock file {}", held.display());
    assert!(!free.exists(), "the cleaner did not run: {} (old, unheld) is still there", free.display());
    // So the next test is not given GPU 0 a second time.
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").arg("--wait=0");
        },
        &[],
    );
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock1_0"], "{}", out.explain());
    // The documented exclusion keeps even unheld files.
    age(&held);
    write_file(&free, "");
    age(&free);
    let parent = f.lock_dir.parent().unwrap();
    tmpfiles_clean(&config, &format!("d {} - - - m:1h\nx {}\n", parent.display(), f.lock_dir.display()));
    assert!(held.exists() && free.exists(), "the x line did not keep the lock directory");
    running.signal_group(libc::SIGKILL);
    running.wait();
}

#[test]
fn a_stopped_head_of_the_queue_keeps_no_one_from_a_free_slot() {
    let f = Fixture::new("stopped-head");
    let records = f.dir.join("records");
    std::fs::create_dir_all(&records).unwrap();
    let base = |c: &mut test_support::Cmd| {
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
    };
    let holder = hold_lock({
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        f.lock("0", 0)
    });
    let spawn = |name: &str, sleep: &str| {
        let mut c = f.cmd();
        base(&mut c);
        c.env("SLEEP", sleep).env("RECORD_FILE", records.join(name)).arg("./pkg/gpu_test").arg(name);
        c.spawn()
    };
    let first = spawn("first", "0");
    assert!(f.queued(1), "the first waiter never queued");
    std::thread::sleep(Duration::from_millis(300));
    first.signal(libc::SIGSTOP);
    let second = spawn("second", "1");
    assert!(f.queued(2), "the second waiter never queued");
    std::thread::sleep(Duration::from_millis(400));
    let third = spawn("third", "0");
    assert!(f.queued(3), "the third waiter never queued");
    std::thread::sleep(Duration::from_millis(400));
    let freed = Instant::now();
    drop(holder);
    let second = second.wait();
    let waited = freed.elapsed();
    assert!(second.status.success(), "{}", second.explain());
    assert!(
        waited < Duration::from_secs(4),
        "the second waiter got the free slot only after {waited:?}\n{}",
        second.explain()
    );
    let third = third.wait();
    assert!(third.status.success(), "{}", third.explain());
    let start_of = |name: &str| -> u128 {
        let text = std::fs::read_to_string(records.join(name)).unwrap();
        text.lines().find_map(|l| l.strip_prefix("start=")).unwrap().parse().unwrap()
    };
    let (second_start, third_start) = (start_of("second"), start_of("third"));
    assert!(second_start < third_start, "running waiters out of order: second {second_start}, third {third_start}");
    assert!(!records.join("first").exists(), "the stopped waiter ran");
    // Continued, the first waiter goes on and gets its slot.
    first.signal(libc::SIGCONT);
    let first = first.wait();
    assert!(first.status.success(), "{}", first.explain());
    assert!(records.join("first").exists());
}

#[test]
fn a_full_file_system_at_the_queue_means_waiting_without_it() {
    if !prerequisite(is_root(), "root", "waiting without a queue on a full file system (a tmpfs mount)") {
        return;
    }
    let f = Fixture::new("full-fs");
    let mnt = f.dir.join("small");
    // Inodes for the root, the lock directory and one lock file, no more.
    let _mounted = test_support::mounts::Mounted::tmpfs(&mnt, "size=64k,nr_inodes=3");
    let locks = mnt.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    write_file(locks.join("gpulock0_0"), "");
    let nospc = std::fs::File::create(locks.join("one-more")).unwrap_err();
    assert_eq!(nospc.raw_os_error(), Some(libc::ENOSPC), "the file system is not full");
    waits_without_the_queue(&f, &locks, "its file system is out of space or inodes", libc::ENOSPC);
}

/// Over a disk quota (a btrfs quota group's limit, which binds root too)
/// the queue file cannot be made either, and the warning says which.
#[test]
fn a_disk_quota_at_the_queue_means_waiting_without_it() {
    use test_support::mounts::{Mounted, system};
    let f = Fixture::new("quota");
    let fs = match Mounted::btrfs_image(&f.dir.join("btrfs.img"), &f.dir.join("mnt")) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite(false, &why, "waiting without a queue over a disk quota (btrfs quota groups)");
            return;
        }
    };
    let sub = fs.path().join("sub");
    system(&["btrfs", "quota", "enable", fs.path().to_str().unwrap()]).assert_success();
    system(&["btrfs", "qgroup", "limit", "1M", sub.to_str().unwrap()]).assert_success();
    let locks = sub.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    write_file(locks.join("gpulock0_0"), "");
    // Data up to the limit.
    let mut fill = std::fs::File::create(sub.join("fill")).unwrap();
    let quota = loop {
        if let Err(e) = std::io::Write::write_all(&mut fill, &[7u8; 65536]) {
            break e;
        }
    };
    assert_eq!(quota.raw_os_error(), Some(libc::EDQUOT), "filling up to the quota: {quota}");
    let dquot = std::fs::File::create(locks.join("one-more")).unwrap_err();
    assert_eq!(dquot.raw_os_error(), Some(libc::EDQUOT), "the quota does not bind a new file");
    waits_without_the_queue(&f, &locks, "a disk quota is reached", libc::EDQUOT);
}

/// A wrapper that finds the one slot in `locks` held, and cannot make its
/// record there (`errno`), warns once with `why` and waits without a place
/// in the queue; it gets the slot when it frees. (The error's text is the
/// C library's: musl's differs from glibc's.)
fn waits_without_the_queue(f: &Fixture, locks: &Path, why: &str, errno: i32) {
    let lock = locks.join("gpulock0_0");
    let holder = hold_lock(&lock);
    let mut c = f.cmd();
    c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", locks)
        .env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1")
        .arg("./pkg/gpu_test");
    let waiter = c.spawn();
    // Its wait begun (a record tried, the warning said), else it would
    // take the slot freed without a word.
    assert!(test_support::begins_to_wait(waiter.pid()), "it never began to wait\n{}", c.describe());
    drop(holder);
    let out = waiter.wait();
    let r = Record::of(&out);
    assert!(out.status.success(), "{}", out.explain());
    assert_eq!(r.locks(), ["gpulock0_0"]);
    let start =
        format!("parallel_gpu_execute: warning: cannot make a record in {} ({why}: ", locks.join("gpuqueue").display());
    let end =
        format!(" (os error {errno})): waiting without a place in the queue, so later tests may be served first;");
    let warnings = out.stderr.lines().filter(|l| l.starts_with(&start) && l.contains(&end)).count();
    assert_eq!(warnings, 1, "{}", out.explain());
}

#[test]
fn a_lock_file_this_user_may_not_open_is_skipped_with_a_warning() {
    if !prerequisite(is_root(), "root", "a lock file another user may not open") {
        return;
    }
    let f = Fixture::new("umask077");
    f.make_lock_dir_shared();
    // Left by a job run as root under umask 077.
    let private = f.lock("0", 0);
    write_file(&private, "");
    set_mode(&private, 0o600);
    let as_nobody = |gpus: &str, wait: &str| {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", gpus)
            .env("TF_TESTS_PER_GPU", "1")
            .as_user(NOBODY, NOBODY)
            .arg(wait)
            .arg("./pkg/gpu_test");
        c.run()
    };
    let warning = format!(
        "parallel_gpu_execute: warning: cannot open lock file {p} (Permission denied (os error 13)): skipping that slot; to repair, its owner or root runs: chmod a+rw {p} (or removes it while no test runs)",
        p = private.display()
    );
    // Another slot is free: the test takes it.
    let out = as_nobody("2", "--wait=0");
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock1_0"], "{}", out.explain());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES").or(r.var("CUDA_VISIBLE_DEVICES")), Some("1"), "{}", out.explain());
    assert_eq!(out.stderr.lines().filter(|l| *l == warning).count(), 1, "{}", out.explain());
    // The other slot held: no slot now (1), not an error (2).
    let other = hold_lock(f.lock("1", 0));
    let out = as_nobody("2", "--wait=0");
    assert_eq!(out.status.code(), Some(1), "{}", out.explain());
    // Waiting, the line counts one slot busy: the file passed over is not
    // proven busy.
    let out = as_nobody("2", "--wait=0.2");
    assert_eq!(out.status.code(), Some(1), "{}", out.explain());
    assert!(out.stderr.contains(": 1 of 2 slots busy, first in the queue\n"), "{}", out.explain());
    drop(other);
    // No slot usable at all: an error naming the file.
    let out = as_nobody("1", "--wait=0");
    assert_eq!(out.status.code(), Some(2), "{}", out.explain());
    assert!(out.stderr.contains(&format!("cannot open lock file {}", private.display())), "{}", out.explain());
    let out = as_nobody("1", "--wait=5");
    assert_eq!(out.status.code(), Some(2), "a wait for a slot no one holds\n{}", out.explain());
}

#[test]
fn lock_files_are_opened_for_writing_where_possible_and_never_truncated() {
    let mut f = Fixture::new("rdwr");
    f.runfiles.add("ws/pkg/fd_test", FD_FLAGS_TEST, true);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let lock = f.lock("0", 0);
    write_file(&lock, "kept");
    let access_modes = |out: &test_support::Output| -> Vec<u32> {
        out.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("lock "))
            .map(|l| u32::from_str_radix(l.split_whitespace().nth(1).unwrap(), 8).unwrap() & 3)
            .collect()
    };
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg("./pkg/fd_test").run();
    out.assert_success();
    assert_eq!(access_modes(&out), [2], "one lock, O_RDWR\n{}", out.explain());
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "kept", "the lock file was truncated");
    if is_root() {
        // Another user's read-only file still serves, opened read-only.
        set_mode(&f.lock_dir, 0o777);
        set_mode(&lock, 0o644);
        let out = f.cmd().env("TF_GPU_COUNT", "1").as_user(NOBODY, NOBODY).arg("./pkg/fd_test").run();
        out.assert_success();
        assert_eq!(access_modes(&out), [0], "one lock, O_RDONLY\n{}", out.explain());
        assert_eq!(std::fs::read_to_string(&lock).unwrap(), "kept");
    }
}

/// A lock directory made on an ordinary host (a new host's
/// `/tmp/jax_accelerator_locks_$USER`, a CI job's nested one) is made
/// without a word (`lock_dir_privacy.rs` has the cases that are private).
#[test]
fn a_fresh_local_host_creates_its_lock_directory_as_before() {
    let f = Fixture::new("fresh-host");
    // Only the lock directory itself is missing, as /tmp/jax_accelerator_locks_$USER on a new host.
    assert!(!f.lock_dir.exists());
    let out = f.cmd().env("TF_GPU_COUNT", "2").arg("./pkg/gpu_test").run();
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    assert!(f.lock_dir.is_dir());
    // Nested in directories that do not exist yet either.
    let nested = f.dir.join("ci/job/locks");
    let out =
        f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &nested).env("TF_GPU_COUNT", "2").arg("./pkg/gpu_test").run();
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
}

/// The queue's directory a waiter makes is 1777 whatever its umask, so that
/// any user's waiter can add its record there (and only its owner remove
/// it); each record is 0644, so that every user's waiters can read it.
#[test]
fn the_queue_a_waiter_makes_is_open_to_every_user() {
    let f = Fixture::new("queue-mode");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let queue = f.lock_dir.join("gpuqueue");
    let held = hold_lock(f.lock("0", 0));
    let mut c = test_support::Cmd::new("/bin/sh");
    f.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
        .env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1")
        .args(["-c", "umask 077; exec \"$0\" ./pkg/gpu_test", common::bin()]);
    let waiter = c.spawn();
    assert!(f.queued(1), "the waiter made no record\n{}", c.describe());
    let dir_mode = std::fs::metadata(&queue).unwrap().permissions().mode() & 0o7777;
    let record = std::fs::read_dir(&queue).unwrap().flatten().next().expect("a record").path();
    let record_mode = std::fs::metadata(&record).unwrap().permissions().mode() & 0o7777;
    drop(held);
    let out = waiter.wait();
    Record::of(out.assert_success());
    assert_eq!(dir_mode, 0o1777, "gpuqueue mode {dir_mode:o} under umask 077\n{}", out.explain());
    assert_eq!(record_mode, 0o644, "record mode {record_mode:o} under umask 077\n{}", out.explain());
    assert!(!queue.exists(), "the last waiter to leave left gpuqueue/ behind\n{}", out.explain());
}

/// A lock file removed and made again while a wrapper waits on it (a
/// cleaner, or a `rm -rf` of the directory's files): the descriptor the
/// waiter kept open is the old file, whose lock no later wrapper sees. The
/// waiter starts over on the new file, so a second wrapper finds GPU 0
/// busy; granted the old file, both would run on GPU 0.
#[test]
fn a_waiter_whose_lock_file_was_replaced_takes_the_new_one() {
    // Removed, or moved away (still linked elsewhere), then made anew.
    for moved in [false, true] {
        let f = Fixture::new("replaced-lock");
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        let lock = f.lock("0", 0);
        let held = hold_lock(&lock);
        let record = f.dir.join("record");
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").env("RECORD_FILE", &record).env("SLEEP", "3");
        c.arg("./pkg/gpu_test");
        let waiter = c.spawn();
        assert!(f.queued(1), "it never waited\n{}", c.describe());
        std::thread::sleep(Duration::from_millis(300));
        if moved {
            std::fs::rename(&lock, f.dir.join("moved-away")).unwrap();
        } else {
            std::fs::remove_file(&lock).unwrap();
        }
        write_file(&lock, "");
        drop(held);
        // The waiter runs its test (3 s) holding the file now at the path.
        let took_new = wait_until(Duration::from_secs(5), || !lock_is_free(&lock));
        let second = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("--wait=0");
            },
            &[],
        );
        let first = waiter.wait();
        first.assert_success();
        assert!(took_new, "moved {moved}: the waiter never locked the new lock file\n{}", first.explain());
        second.assert_code(1);
        assert!(record.exists(), "moved {moved}: the waiter's test never ran\n{}", first.explain());
    }
}

/// A 2-GPU waiter that took GPU 0 at slot 1 and gave it back (GPU 1 was
/// busy there) keeps each lock file's descriptor under its own slot: when
/// another test then takes that file and GPU 0 frees at slot 0, the waiter
/// takes slot 0, and it waits without starting over meanwhile (a
/// descriptor kept under the wrong slot made it take slot 1's file for
/// slot 0's, fail the check, and start over without end).
#[test]
fn a_waiter_that_gave_back_a_lock_at_one_slot_sees_another_slot_free() {
    let f = Fixture::new("give-back-slots");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let gpu0 = hold_lock(f.lock("0", 0));
    let _gpu1_slot1 = hold_lock(f.lock("1", 1));
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "2").args(["./pkg/gpu_test", "--num_processes=2"]);
    c.timeout(Duration::from_secs(15));
    let waiter = c.spawn();
    assert!(f.queued(1), "it never waited\n{}", c.describe());
    // Waiting, not starting over and over (a descriptor under the wrong
    // slot made its grants fail their check, and the wrapper start over):
    // it wakes at its beats, 4 a second.
    let sleeps = || test_support::voluntary_switches(waiter.pid());
    let before = sleeps();
    std::thread::sleep(Duration::from_millis(1000));
    let woke = sleeps() - before;
    assert!(woke <= 12, "the waiter woke {woke} times in one second\n{}", c.describe());
    let _gpu0_slot1 = hold_lock(f.lock("0", 1));
    drop(gpu0);
    let out = waiter.wait();
    out.assert_success();
    assert_eq!(Record::of(&out).locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
}
