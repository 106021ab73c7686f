//! What other users, odd files, odd clocks and odd inits do to the wait
//! queue, each found by an adversarial review: a waiter that cannot take a
//! lock file never holds it up for others; junk and hard links in (and
//! out of)
//! `gpuqueue/` neither stall nor overtake; a waiter in a time namespace
//! keeps its place; other programs' files in the lock directory do not
//! wake waiters; no process is left behind under an init that does not
//! reap; a lock directory path near PATH_MAX works; a drain ends a wait
//! behind another waiter; `gpuqueue/` is made whole and left nowhere; a
//! FIFO at a lock path the waiter passes over does not make it spin; the
//! caller's own alarm still ends a waiting wrapper.

mod common;

use common::{Fixture, NOBODY, Record, on, root, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};
use test_support::{Cmd, Running, hold_lock, wait_until, write_file};

/// Starts `c`, in a process group of its own, and returns once it has a
/// record in the queue.
fn queued(f: &Fixture, c: &mut Cmd) -> Running {
    f.spawn_queued(c.timeout(Duration::from_secs(60)).own_process_group())
}

fn stop(r: Running) {
    r.signal_group(libc::SIGKILL);
    r.wait();
}

/// One GPU with two slots in a 1777 lock directory: slot 0's lock file is
/// root's, mode 0600 (user nobody may not open it), slot 1's is held here.
fn unusable_slot_and_held_slot(name: &str) -> (Fixture, test_support::HeldLock) {
    let f = shared_fixture(name);
    f.make_lock_dir_shared();
    write_file(f.lock("0", 0), "");
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o600)).unwrap();
    let held = hold_lock(f.lock("0", 1));
    std::fs::set_permissions(f.lock("0", 1), std::fs::Permissions::from_mode(0o666)).unwrap();
    (f, held)
}

/// A lock file the earlier waiter may not open (another user's, 0600) is
/// not in its record: a later waiter that can open it takes it at once.
#[test]
fn a_waiter_never_waits_for_a_lock_file_the_one_ahead_cannot_open() {
    if !root("another user's 0600 lock file") {
        return;
    }
    let (f, held) = unusable_slot_and_held_slot("faults-unusable");
    let mut early = f.cmd();
    on(&mut early, 1, 2).as_user(NOBODY, NOBODY).arg("./pkg/gpu_test");
    let early = queued(&f, &mut early);
    let mut later = f.cmd();
    let out = on(&mut later, 1, 2).args(["--wait=5", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0"], "{}", out.explain());
    drop(held);
    early.wait().assert_success();
}

/// A later waiter of the same user, for whom the only block it may open is
/// one an earlier waiter wants, waits behind it: it does not fail on the
/// lock file it may not open.
#[test]
fn a_waiter_behind_one_that_wants_its_only_usable_block_waits() {
    if !root("another user's 0600 lock file") {
        return;
    }
    let (f, held) = unusable_slot_and_held_slot("faults-unusable-behind");
    let mut early = f.cmd();
    on(&mut early, 1, 2).as_user(NOBODY, NOBODY).env("SLEEP", "0.3").arg("./pkg/gpu_test");
    let early = queued(&f, &mut early);
    let mut later = f.cmd();
    on(&mut later, 1, 2).as_user(NOBODY, NOBODY).args(["--wait=20", "./pkg/gpu_test"]);
    let later = queued(&f, &mut later);
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    let (early, later) = (early.wait(), later.wait());
    let (a, b) = (Record::of(early.assert_success()), Record::of(later.assert_success()));
    assert_eq!(
        (a.locks(), b.locks()),
        (vec!["gpulock0_1".to_string()], vec!["gpulock0_1".to_string()]),
        "{}",
        later.explain()
    );
    assert!(a.get("start") < b.get("start"), "the later waiter was served first\n{}", later.explain());
}

/// A GPU the earlier waiter avoids as unhealthy is not in its record.
#[test]
fn a_waiter_never_waits_for_a_gpu_the_one_ahead_avoids() {
    let mut f = Fixture::new("faults-avoid");
    f.sysroot.add_kfd_gpus(2);
    write_file(f.sysroot.root.join("sys/class/drm/renderD128/device/ras/umc_err_count"), "ue: 2\nce: 0\n");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("1", 0));
    let mut early = f.cmd();
    early.env("TF_TESTS_PER_GPU", "1").env("PARALLEL_GPU_EXECUTE_UNHEALTHY", "avoid").arg("./pkg/gpu_test");
    let early = queued(&f, &mut early);
    let out = f.cmd().env("TF_TESTS_PER_GPU", "1").args(["--wait=5", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0"], "GPU 0 was free all along\n{}", out.explain());
    drop(held);
    early.wait().assert_success();
}

/// Files named like records that are none (another user's junk, empty)
/// are passed over, and a hard link to a waiter's record makes it neither
/// wait behind itself nor lose its place.
#[test]
fn junk_and_hard_links_in_the_queue_neither_stall_nor_reorder() {
    let f = Fixture::new("faults-junk");
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir_all(&queue).unwrap();
    for i in 1..=2000u32 {
        write_file(queue.join(format!("{i:016x}.{i}")), "");
    }
    // A free slot: served at once, past the junk.
    let out = on(&mut f.cmd(), 1, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
    Record::of(out.assert_success());
    let held = hold_lock(f.lock("0", 0));
    let mut first = f.cmd();
    on(&mut first, 1, 1).env("SLEEP", "0.3").arg("./pkg/gpu_test");
    let first = queued(&f, &mut first);
    let record = std::fs::read_dir(&queue)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().ends_with(&format!(".{}", first.pid())))
        .unwrap();
    std::fs::hard_link(&record, queue.join("0000000000000000.1")).unwrap();
    let mut second = f.cmd();
    on(&mut second, 1, 1).arg("./pkg/gpu_test");
    let second = queued(&f, &mut second);
    std::thread::sleep(Duration::from_millis(600));
    drop(held);
    let (a, b) = (first.wait(), second.wait());
    let (a, b) = (Record::of(a.assert_success()), Record::of(b.assert_success()));
    assert!(a.get("start") < b.get("start"), "the second was served first");
}

/// Hard links to a 2-GPU waiter's record made outside `gpuqueue/`, again
/// and again (another user can, where `fs.protected_hardlinks` is off):
/// the record still counts, so a later 1-GPU test does not take the GPU
/// freed first. It used to count for nobody while it had a second name,
/// and its waiter, making it again each beat, was linked again at once.
#[test]
fn hard_links_to_a_record_elsewhere_change_nothing() {
    let f = Fixture::new("faults-links-elsewhere");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let queue = f.lock_dir.join("gpuqueue");
    let elsewhere = f.dir.join("links");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    let mut first = f.cmd();
    on(&mut first, 2, 1).env("SLEEP", "0.3").args(["./pkg/gpu_test", "--num_processes=2"]);
    let first = queued(&f, &mut first);
    let stop_linking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let made = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let linker = {
        let (queue, elsewhere, stop, made) = (queue.clone(), elsewhere.clone(), stop_linking.clone(), made.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for e in std::fs::read_dir(&queue).into_iter().flatten().flatten() {
                    n += 1;
                    let _ = std::fs::hard_link(e.path(), elsewhere.join(n.to_string()));
                }
                made.store(n, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
            n
        })
    };
    let ran = f.dir.join("second_ran");
    let mut second = f.cmd();
    on(&mut second, 2, 1).env("RECORD_FILE", &ran).arg("./pkg/gpu_test");
    let second = queued(&f, &mut second);
    let [gpu0, gpu1] = held;
    drop(gpu0);
    std::thread::sleep(Duration::from_millis(1000));
    // Links enough made meanwhile, however slow the linker was scheduled.
    test_support::wait_until(Duration::from_secs(10), || made.load(std::sync::atomic::Ordering::Relaxed) > 100);
    let second_ran = ran.exists();
    drop(gpu1);
    stop_linking.store(true, std::sync::atomic::Ordering::Relaxed);
    let links = linker.join().unwrap();
    let (a, b) = (first.wait(), second.wait());
    assert!(links > 100, "only {links} links made");
    assert!(!second_ran, "the later 1-GPU test took GPU 0 ahead of the 2-GPU waiter\n{}", b.explain());
    let a = Record::of(a.assert_success());
    b.assert_success();
    let b = test_support::parse_record(&std::fs::read_to_string(&ran).unwrap_or_default());
    let b_start = test_support::record_value(&b, "start");
    assert!(a.get("start") < b_start, "the later test was served first");
}

/// A waiter in a time namespace whose boot clock is 100000 s ahead writes
/// and reads the host's clock: it waits behind an earlier waiter, and
/// --status shows its beat fresh.
#[test]
fn a_waiter_in_a_time_namespace_keeps_its_place() {
    if !root("a time namespace (unshare --time)") {
        return;
    }
    let f = Fixture::new("faults-timens");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let probe = Cmd::new("unshare").args(["--time", "--boottime", "100000", "--fork", "true"]).run();
    if !test_support::prerequisite(probe.code() == 0, "time namespaces", "a waiter in a time namespace") {
        return;
    }
    for round in 0..3 {
        let held = hold_lock(f.lock("0", 0));
        let mut early = f.cmd();
        on(&mut early, 1, 1).env("SLEEP", "0.2").arg("./pkg/gpu_test");
        let early = queued(&f, &mut early);
        let mut later = f.cmd_under("unshare", ["--time", "--boottime", "100000", "--fork"]);
        on(&mut later, 1, 1).arg("./pkg/gpu_test");
        later.timeout(Duration::from_secs(60));
        let later = later.spawn();
        assert!(wait_until(Duration::from_secs(10), || f.waiters().len() == 2), "round {round}: never queued");
        let status = on(&mut f.cmd(), 1, 1).arg("--status=json").run();
        assert_eq!(status.stdout.matches("\"beat_age_seconds\": 0.").count(), 2, "{}", status.explain());
        drop(held);
        let (a, b) = (early.wait(), later.wait());
        let (a, b) = (Record::of(a.assert_success()), Record::of(b.assert_success()));
        assert!(a.get("start") < b.get("start"), "round {round}: the later waiter went first");
    }
}

/// A head waiter sleeps through another program rewriting its own file in
/// the lock directory 100 times a second, and a waiter that cannot watch
/// (too few descriptors) looks at most 10 times a second.
#[test]
fn other_programs_files_do_not_wake_waiters_and_polling_is_bounded() {
    let f = Fixture::new("faults-wakeups");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut head = f.cmd();
    on(&mut head, 1, 1).arg("./pkg/gpu_test");
    let head = queued(&f, &mut head);
    let other = f.lock_dir.join("other.lock");
    let mut writer = Cmd::new("sh");
    writer
        .args(["-c", "while :; do echo x > \"$0\"; sleep 0.01; done"])
        .arg(&other)
        .own_process_group()
        .timeout(Duration::from_secs(60));
    let writer = writer.spawn();
    std::thread::sleep(Duration::from_millis(300));
    let before = test_support::voluntary_switches(head.pid());
    std::thread::sleep(Duration::from_secs(2));
    let woke = test_support::voluntary_switches(head.pid()) - before;
    assert!(woke <= 24, "the head woke {woke} times in 2 s beside another program's file");
    stop(writer);
    stop(head);
    // Eight slots and descriptors for fewer: it polls.
    let mut poller = Cmd::new("sh");
    f.runfiles.apply(&mut poller);
    poller.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir);
    on(&mut poller, 1, 8).args(["-c", "ulimit -n 70; exec \"$0\" ./pkg/gpu_test"]).arg(common::bin());
    let holders: Vec<_> = (1..8).map(|s| hold_lock(f.lock("0", s))).collect();
    let poller = queued(&f, &mut poller);
    std::thread::sleep(Duration::from_millis(300));
    let before = test_support::voluntary_switches(poller.pid());
    std::thread::sleep(Duration::from_secs(2));
    let woke = test_support::voluntary_switches(poller.pid()) - before;
    // About 20 at one a tenth of a second; 40 polling every 50 ms.
    assert!(woke <= 30, "a polling waiter woke {woke} times in 2 s");
    drop(holders);
    drop(held);
    poller.wait().assert_success();
}

/// Under a PID 1 that does not reap orphans (a Python CI driver), tests
/// that waited leave no process behind.
#[test]
fn no_process_is_left_behind_under_an_init_that_does_not_reap() {
    if !root("a PID namespace (unshare --pid)") {
        return;
    }
    let Some(python) = test_support::find_program("python3") else {
        test_support::prerequisite(false, "python3", "an init that does not reap");
        return;
    };
    let f = Fixture::new("faults-zombies");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let script = r#"
import os, subprocess, sys, time
wrapper, lock = sys.argv[1], sys.argv[2]
for i in range(3):
    holder = subprocess.Popen(["flock", lock, "sleep", "0.5"])
    time.sleep(0.1)
    subprocess.run([wrapper, "/bin/true"], stderr=subprocess.DEVNULL, check=True)
    holder.wait()
time.sleep(0.3)
zombies = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] == "Z":
            zombies.append(stat)
print("zombies:", len(zombies), zombies)
"#;
    let mut c = Cmd::new("unshare");
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir);
    on(&mut c, 1, 1).args(["--pid", "--fork", "--mount-proc"]).arg(&python).args(["-c", script]);
    c.arg(common::bin()).arg(f.lock("0", 0));
    let out = c.run();
    out.assert_success().assert_stdout_contains("zombies: 0 []");
}

/// A lock directory path of nearly PATH_MAX: the test runs (it spun,
/// taking and letting go of its slot).
#[test]
fn a_lock_directory_path_near_path_max_runs_the_test() {
    let f = Fixture::new("faults-long-path");
    let mut dir = f.dir.join("long");
    let part = "d".repeat(200);
    while dir.as_os_str().len() + 201 < 4080 {
        dir.push(&part);
    }
    let rest = 4085 - dir.as_os_str().len() - 1;
    dir.push("e".repeat(rest));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = f.cmd();
    on(&mut c, 1, 1).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &dir).arg("./pkg/gpu_test").timeout(Duration::from_secs(20));
    Record::of(c.run().assert_success());
}

/// A waiter asleep behind another one notices at its next beat that every
/// block it could use was drained.
#[test]
fn a_drain_ends_a_wait_behind_another_waiter_at_the_next_beat() {
    let f = Fixture::new("faults-drain-behind");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    let mut one = f.cmd();
    on(&mut one, 2, 1).arg("./pkg/gpu_test");
    let one = queued(&f, &mut one);
    let mut both = f.cmd();
    on(&mut both, 2, 1).args(["./pkg/gpu_test", "--num_processes=2"]);
    let both = queued(&f, &mut both);
    std::thread::sleep(Duration::from_millis(300));
    let drained = Instant::now();
    on(&mut f.cmd(), 2, 1).args(["--drain=1", "--reason=test"]).run().assert_success();
    let out = both.wait();
    out.assert_code(1).assert_stderr_contains("every GPU this test could use is out of service: GPU 1 (test)");
    let took = drained.elapsed();
    assert!(took < Duration::from_secs(3), "noticed {took:?} after the drain");
    drop(held);
    one.wait().assert_success();
}

/// `gpuqueue/` is made with its mode whole, a temporary record a killed
/// waiter left is removed, and nothing is left after a wait that ends in
/// a timeout or SIGTERM.
#[test]
fn the_queue_directory_is_made_whole_and_left_nowhere() {
    let f = Fixture::new("faults-queue-dir");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let queue = f.lock_dir.join("gpuqueue");
    let held = hold_lock(f.lock("0", 0));
    // A timeout, and SIGTERM.
    let out = on(&mut f.cmd(), 1, 1).args(["--wait=0.5", "./pkg/gpu_test"]).run();
    out.assert_code(1);
    assert!(!queue.exists(), "gpuqueue/ left after a timeout");
    let mut c = f.cmd();
    on(&mut c, 1, 1).arg("./pkg/gpu_test");
    let r = queued(&f, &mut c);
    let mode = std::fs::metadata(&queue).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o1777, "gpuqueue/ made {mode:o}");
    r.signal(libc::SIGTERM);
    assert_eq!(r.wait().status.code(), Some(143));
    assert!(!queue.exists(), "gpuqueue/ left after SIGTERM");
    // A temporary record written and unlocked: its maker died. The next
    // look removes it. An empty one, just made, may be one whose maker is
    // about to lock it: left alone.
    std::fs::create_dir_all(&queue).unwrap();
    let temporary = queue.join(".0000000000000001.77.new");
    write_file(&temporary, "x".repeat(32));
    let making = queue.join(".0000000000000002.78.new");
    write_file(&making, "");
    let out = on(&mut f.cmd(), 1, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
    out.assert_code(1);
    assert!(!temporary.exists(), "a dead waiter's temporary record stays");
    assert!(making.exists(), "a temporary record just made was removed");
    std::fs::remove_file(&making).unwrap();
    // A gpuqueue/ of this user's with another mode is given 1777.
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = f.cmd();
    on(&mut c, 1, 1).arg("./pkg/gpu_test");
    let r = queued(&f, &mut c);
    let mode = std::fs::metadata(&queue).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o1777, "gpuqueue/ left {mode:o}");
    drop(held);
    r.wait().assert_success();
    assert!(!Path::new(&queue).exists(), "gpuqueue/ left after the last waiter ran");
}

/// PIDs repeat across the PID namespaces (containers) sharing a lock
/// directory: another user's leftover temporary `gpuqueue/` of a maker with
/// this PID does not keep this one from making the queue.
#[test]
fn a_pid_of_another_namespace_does_not_collide_in_making_the_queue() {
    if !root("another user's directory, a PID namespace") {
        return;
    }
    let f = shared_fixture("faults-pidns");
    f.make_lock_dir_shared();
    // The first process of a new PID namespace is PID 1; so was the maker
    // killed half way in another container, as another user.
    for leftover in [".gpuqueue.1.new", ".gpuqueue.2.new"] {
        let path = f.lock_dir.join(leftover);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&path, Some(12345), Some(12345)).unwrap();
    }
    let held = hold_lock(f.lock("0", 0));
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody = ["--pid", "--fork", "--kill-child", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
    let mut c = f.cmd_under("unshare", as_nobody);
    on(&mut c, 1, 1).args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(60));
    let r = c.spawn();
    let queue = f.lock_dir.join("gpuqueue");
    let recorded = || std::fs::read_dir(&queue).is_ok_and(|d| d.count() == 1);
    let made = wait_until(Duration::from_secs(10), recorded);
    drop(held);
    let out = r.wait();
    Record::of(out.assert_success());
    assert!(made, "no record in gpuqueue/ while it waited\n{}", out.explain());
    assert!(!out.stderr.contains("record"), "{}", out.explain());
}

/// A full file system at the queue: the warning names its cause and a
/// repair that fits it, not a chmod.
#[test]
fn a_full_queue_file_system_is_named_with_its_own_repair() {
    if !root("a full tmpfs") {
        return;
    }
    let f = Fixture::new("faults-full");
    let mnt = f.dir.join("small");
    let _mounted = test_support::mounts::Mounted::tmpfs(&mnt, "size=64k,nr_inodes=3");
    let locks = mnt.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let held = hold_lock(locks.join("gpulock0_0"));
    let mut c = f.cmd();
    on(&mut c, 1, 1).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &locks).args(["--wait=0.5", "./pkg/gpu_test"]);
    let out = c.run();
    out.assert_code(1);
    assert!(out.stderr.contains("(its file system is out of space or inodes: "), "{}", out.explain());
    assert!(out.stderr.contains("to repair, free space or inodes on its file system"), "{}", out.explain());
    assert!(!out.stderr.contains("chmod 1777"), "{}", out.explain());
    drop(held);
}

/// Another user's FIFO at the lock path of a drained GPU (a 1777 lock
/// directory lets anyone make one): the waiter, passing that GPU over,
/// neither opens it at each wake (its close would wake the waiter again,
/// without end: a core spent) nor fails.
#[test]
fn a_fifo_at_a_lock_path_passed_over_does_not_make_a_waiter_spin() {
    let f = Fixture::new("faults-fifo");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    on(&mut f.cmd(), 2, 1).args(["--drain=1", "--reason=test"]).run().assert_success();
    let fifo = f.lock("1", 0);
    let made = std::process::Command::new("mkfifo").arg("-m666").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 2, 1).arg("./pkg/gpu_test");
    let waiter = queued(&f, &mut c);
    let before = test_support::cpu_time(waiter.pid());
    std::thread::sleep(Duration::from_secs(1));
    let spent = test_support::cpu_time(waiter.pid()) - before;
    drop(held);
    let out = waiter.wait();
    Record::of(out.assert_success());
    assert!(spent < Duration::from_millis(200), "{spent:?} of CPU in a second of waiting\n{}", out.explain());
}

/// A caller that times its command with its own alarm (`alarm`,
/// `setitimer`: the timer survives `execve`, as in `perl -e 'alarm 1; exec
/// ...'`) has it end a wrapper that waits, as it would end the classic
/// script, with the record removed first; the wait used to take the timer
/// for its own and the alarm never came.
#[test]
fn the_callers_alarm_ends_a_waiting_wrapper() {
    if !test_support::prerequisite(test_support::have_program("perl"), "perl", "an alarm set before exec") {
        return;
    }
    let f = Fixture::new("faults-alarm");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd_under("perl", ["-e", "alarm 1; exec @ARGV or die"]);
    on(&mut c, 1, 1).arg("./pkg/gpu_test").timeout(Duration::from_secs(20));
    let started = Instant::now();
    let out = c.run();
    let took = started.elapsed();
    drop(held);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGALRM), "{}", out.explain());
    assert!(took < Duration::from_secs(5), "the alarm came after {took:?}\n{}", out.explain());
    let left = std::fs::read_dir(f.lock_dir.join("gpuqueue")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "a record left behind\n{}", out.explain());
}

/// A pipe nobody reads, already full (a log reader that stalled), whose
/// write end is closed when it is dropped.
struct FullPipe([i32; 2]);

impl FullPipe {
    fn new() -> FullPipe {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) }, 0);
        let chunk = [b'x'; 4096];
        // SAFETY: writes from a live buffer to the pipe this test made.
        while unsafe { libc::write(fds[1], chunk.as_ptr().cast(), chunk.len()) } > 0 {}
        FullPipe(fds)
    }

    /// `f`'s wrapper with this pipe, opened again blocking, as its stderr.
    fn stderr_of(&self, f: &Fixture) -> Cmd {
        let script = format!("exec 2>/proc/{}/fd/{}; exec \"$@\"", std::process::id(), self.0[1]);
        f.cmd_under("sh", ["-c", &script, "sh"])
    }
}

impl Drop for FullPipe {
    fn drop(&mut self) {
        // SAFETY: closing the two descriptors this pipe made, once.
        unsafe {
            libc::close(self.0[0]);
            libc::close(self.0[1]);
        }
    }
}

/// Stderr a pipe nobody reads, already full (a log reader that stalled):
/// the waiting line cannot be written, and `--wait=1` still ends at its
/// limit, exit 1, instead of when the pipe drains (then with the test run).
#[test]
fn a_full_stderr_nobody_reads_does_not_outlast_the_wait_limit() {
    let f = Fixture::new("faults-full-stderr");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let pipe = FullPipe::new();
    let mut c = pipe.stderr_of(&f);
    on(&mut c, 1, 1).args(["--wait=1", "./pkg/gpu_test"]).timeout(Duration::from_secs(20));
    let started = Instant::now();
    let out = c.run();
    let took = started.elapsed();
    drop((pipe, held));
    out.assert_code(1);
    assert!(took < Duration::from_secs(3), "--wait=1 ended after {took:?}\n{}", out.explain());
    assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
}

/// A waiter whose stderr is a full pipe nobody reads, with and without a
/// limit, neither stops on its lines nor loses its place: it beats, a
/// later waiter does not pass it, and it takes the slot when it frees up
/// and runs its test (its lines dropped).
#[test]
fn a_full_stderr_nobody_reads_neither_stalls_a_waiter_nor_costs_it_its_place() {
    for limit in [&["--wait=20"][..], &[]] {
        let f = Fixture::new("faults-full-stderr-place");
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        let ran = f.dir.join("ran");
        std::fs::create_dir_all(&ran).unwrap();
        let held = hold_lock(f.lock("0", 0));
        let pipe = FullPipe::new();
        let mut first = pipe.stderr_of(&f);
        on(&mut first, 1, 1).env("RECORD_FILE", ran.join("first")).args(limit).arg("./pkg/gpu_test");
        let first = f.spawn_queued(first.timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(300));
        let mut later = f.cmd();
        on(&mut later, 1, 1).env("RECORD_FILE", ran.join("later")).args(limit).arg("./pkg/gpu_test");
        let later = f.spawn_queued(later.timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(700));
        drop(held);
        let (first, later) = (first.wait(), later.wait());
        drop(pipe);
        let what = format!("{limit:?}\n{}\n{}", first.explain(), later.explain());
        first.assert_success();
        later.assert_success();
        let start = |name: &str| Record::read(&ran.join(name)).get("start").unwrap_or_default().parse::<u64>().unwrap();
        assert!(start("first") < start("later"), "the later waiter was served first: {what}");
    }
}
