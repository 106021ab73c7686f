//! Contract points 6, 7 and 9: slot search, the test holding its own lock,
//! waiting for a slot, fairness, and interruption.

mod common;

use common::{Fixture, Record};
use std::time::{Duration, Instant};
use test_support::{
    Cmd, Output, can_flock, check_gpus_match_locks, cpu_time, hold_lock, lock_is_free, parse_record, read_to_string,
    record_value, wait_until,
};

/// A fixture with `gpus` GPUs from TF_GPU_COUNT, `slots` tests per GPU and
/// rocm-mode variables.
fn fixture(label: &str) -> Fixture {
    let f = Fixture::new(label);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    f
}

/// Whether the lock at `path` is free within a second. Not instantly: a
/// process that another test thread has just forked, and not yet exec'd,
/// briefly shares this process's descriptors (a probe's, or a lock just
/// dropped), and with them their flocks.
fn eventually_free(path: impl AsRef<std::path::Path>) -> bool {
    wait_until(Duration::from_secs(1), || lock_is_free(path.as_ref()))
}

/// Whether someone takes the lock at `path` within ten seconds.
fn eventually_taken(path: impl AsRef<std::path::Path>) -> bool {
    wait_until(Duration::from_secs(10), || !lock_is_free(path.as_ref()))
}

fn gpus(c: &mut Cmd, gpus: u32, slots: u32) -> &mut Cmd {
    c.env("TF_GPU_COUNT", gpus.to_string())
        .env("TF_TESTS_PER_GPU", slots.to_string())
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
}

#[test]
fn slot_zero_on_every_gpu_comes_before_slot_one() {
    let f = fixture("order");
    let _held = hold_lock(f.lock("0", 0));
    let r = Record::of(
        f.run_test(
            |c| {
                gpus(c, 2, 2);
            },
            &[],
        )
        .assert_success(),
    );
    assert_eq!(r.locks(), ["gpulock1_0"]);
    let _held2 = hold_lock(f.lock("1", 0));
    let out = f.run_test(
        |c| {
            gpus(c, 2, 2);
        },
        &[],
    );
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_1"]);
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"));
    out.assert_stderr_contains("on GPU(s) 0\n");
}

#[test]
fn a_multi_gpu_request_gets_a_contiguous_block() {
    let f = fixture("block");
    {
        let _held = hold_lock(f.lock("1", 0));
        let r = Record::of(
            f.run_test(
                |c| {
                    gpus(c, 4, 1);
                },
                &["--num_processes=2"],
            )
            .assert_success(),
        );
        assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("2,3"), "blocks [0,1] and [1,2] contain the busy GPU 1");
        assert_eq!(r.locks(), ["gpulock2_0", "gpulock3_0"]);
    }
    let _held = hold_lock(f.lock("2", 0));
    let r = Record::of(
        f.run_test(
            |c| {
                gpus(c, 4, 1);
            },
            &["--num_processes=2"],
        )
        .assert_success(),
    );
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1"));
    // With GPU 2 busy at slot 0, a 3-GPU block only exists at slot 1.
    let r = Record::of(
        f.run_test(
            |c| {
                gpus(c, 4, 2);
            },
            &["--num_processes=3"],
        )
        .assert_success(),
    );
    assert_eq!(r.locks(), ["gpulock0_1", "gpulock1_1", "gpulock2_1"]);
}

#[test]
fn the_lock_directory_is_created_when_missing() {
    let f = Fixture::new("mkdir");
    let nested = f.dir.join("outer/inner/locks");
    let before = test_support::snapshot_tree(f.dir.path(), &[]);
    let out =
        f.cmd().env("TF_GPU_COUNT", "1").arg(format!("--lock-dir={}", nested.display())).arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert!(nested.join("gpulock0_0").is_file(), "{}", out.explain());
    // The lock file it created, held open for reading and writing, as the
    // classic `exec {fd}>file` opens it (NFS needs a writable descriptor).
    assert_eq!((r.get("locks"), r.get("lockmodes")), (Some("gpulock0_0"), Some("2")), "{}", out.explain());
    // Exactly the missing components, `mkdir -p` style, and nothing beside them.
    let after = test_support::snapshot_tree(f.dir.path(), &[]);
    let created: Vec<String> =
        after.keys().filter(|p| !before.contains_key(*p)).map(|p| p.display().to_string()).collect();
    let want = ["outer", "outer/inner", "outer/inner/locks", "outer/inner/locks/gpulock0_0"];
    assert_eq!(created, want, "{}", out.explain());
}

#[test]
fn the_test_holds_its_own_lock_and_no_wrapper_process_remains() {
    let f = fixture("own");
    let record = f.dir.join("record");
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).env("SLEEP", "1").env("RECORD_FILE", &record).arg("./pkg/gpu_test");
    let running = c.spawn();
    let pid = running.pid();
    assert!(eventually_taken(f.lock("0", 0)), "lock never taken");
    let out = running.wait();
    out.assert_success();
    let r = parse_record(&read_to_string(&record));
    assert_eq!(record_value(&r, "pid"), Some(pid.to_string().as_str()), "the test is the wrapper's process (exec)");
    assert_eq!(record_value(&r, "ppid"), Some(std::process::id().to_string().as_str()));
    assert!(eventually_free(f.lock("0", 0)), "released when the test ended");
}

#[test]
fn only_the_lock_descriptors_are_inherited() {
    let f = fixture("fds");
    let fds = |out: &test_support::Output| Record::of(out).descriptors("fds");
    // Whatever the test harness itself passes down is the baseline.
    let baseline = fds(Cmd::new(f.test_path()).run().assert_success());
    let out = f.run_test(
        |c| {
            gpus(c, 4, 1);
        },
        &["--num_processes=3"],
    );
    let wrapped = fds(out.assert_success());
    let extra: Vec<u32> = wrapped.iter().copied().filter(|fd| !baseline.contains(fd)).collect();
    assert_eq!(
        extra.len(),
        3,
        "three lock descriptors and nothing else: {wrapped:?} vs {baseline:?}\n{}",
        out.explain()
    );
    assert_eq!(Record::of(&out).locks().len(), 3);
}

/// Started with stdin, stdout or stderr closed (a cron job, a daemon), the
/// wrapper's lock must not become one of them: a test that closed or
/// redirected its stdout would drop its slot while still running. The test
/// starts with the same descriptors closed, and the annotation holds only
/// its line, not a message meant for stderr.
#[test]
fn closed_standard_descriptors_stay_closed_and_never_hold_the_lock() {
    let f = fixture("stdclosed");
    let record = f.dir.join("record");
    let annotations = f.dir.join("annotations");
    std::fs::create_dir_all(&annotations).unwrap();
    for closed in [&[0, 1, 2][..], &[0, 1], &[1, 2], &[0], &[1], &[2]] {
        // What the recording shell itself opens with these closed is the
        // baseline: the test run directly, with the same ones closed.
        let mut direct = Cmd::new(f.test_path());
        direct.env("RECORD_FILE", &record).close_standard(closed);
        direct.run().assert_success();
        let baseline = Record::read(&record).descriptors("fds");

        let mut c = f.cmd();
        gpus(&mut c, 1, 1)
            .env("RECORD_FILE", &record)
            .env("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR", &annotations)
            .close_standard(closed)
            .arg("./pkg/gpu_test");
        let out = c.run();
        out.assert_success();
        let r = Record::read(&record);
        let context = format!("closed {closed:?}: record {:?}\n{}", r.0, out.explain());
        assert_eq!(r.locks(), ["gpulock0_0"], "{context}");
        let lockfds = r.descriptors("lockfds");
        assert!(lockfds.iter().all(|&fd| fd > 2), "the lock took a standard descriptor: {lockfds:?}\n{context}");
        let others: Vec<u32> = r.descriptors("fds").into_iter().filter(|fd| !lockfds.contains(fd)).collect();
        assert_eq!(others, baseline, "besides the lock, the descriptors of a direct run\n{context}");
        let part = read_to_string(annotations.join("parallel_gpu_execute.part"));
        assert_eq!(part, "parallel_gpu_execute: GPU(s) 0 slot 0 mode rocm waited 0.0 s\n", "{context}");
        if !closed.contains(&2) {
            out.assert_stderr_contains(&format!("Running test {} on GPU(s) 0\n", f.test_path().display()));
        }
        assert!(eventually_free(f.lock("0", 0)), "released when the test ended\n{context}");
    }
}

#[test]
fn exit_status_and_signals_are_the_tests_own() {
    let f = fixture("status");
    f.run_test(
        |c| {
            gpus(c, 1, 1).env("EXIT_CODE", "42");
        },
        &[],
    )
    .assert_code(42);
    let script = f.dir.join("segv");
    test_support::write_executable(&script, "#!/bin/sh\nkill -SEGV $$\n");
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).arg(&script);
    let out = c.run();
    assert_eq!(out.status.code(), None, "killed by a signal, not an exit code\n{}", out.explain());
    out.assert_code(128 + 11);
}

#[test]
fn sigkill_of_the_test_frees_its_slot_at_once() {
    let f = fixture("sigkill");
    // A test that is a single process: the kill itself releases the lock.
    let script = f.dir.join("busy");
    test_support::write_executable(&script, "#!/bin/sh\nwhile :; do :; done\n");
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).arg(&script);
    let running = c.spawn();
    assert!(eventually_taken(f.lock("0", 0)), "lock never taken");
    running.signal(libc::SIGKILL);
    running.wait().assert_code(137);
    assert!(eventually_free(f.lock("0", 0)), "the kernel released the flock with the process");
}

#[test]
fn sigkill_of_a_test_process_group_frees_its_slot() {
    let f = fixture("sigkill-group");
    // The recording test's `sleep` child inherits the lock descriptor too;
    // Bazel's timeout kills the whole process group, and then the slot is free.
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).env("SLEEP", "60").own_process_group().arg("./pkg/gpu_test");
    let running = c.spawn();
    assert!(eventually_taken(f.lock("0", 0)), "lock never taken");
    running.signal_group(libc::SIGKILL);
    running.wait().assert_code(137);
    assert!(eventually_free(f.lock("0", 0)), "slot not freed after SIGKILL");
}

#[test]
fn a_wrapper_and_an_external_flock_holder_exclude_each_other() {
    let f = fixture("external");
    {
        let _held = hold_lock(f.lock("0", 0));
        let out =
            f.cmd().args(["--wait=0", "./pkg/gpu_test"]).env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").run();
        out.assert_code(1).assert_one_error_line("cannot find 1 free GPU(s) to run the test ");
        out.assert_stderr_contains("pkg/gpu_test on, and waiting is off");
    }
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).env("SLEEP", "2").arg("./pkg/gpu_test");
    let running = c.spawn();
    assert!(eventually_taken(f.lock("0", 0)), "wrapper never locked");
    assert!(!can_flock(f.lock("0", 0)), "an outside flock is refused while the test runs");
    running.wait().assert_success();
}

#[test]
fn busy_slots_are_waited_for_without_spinning() {
    waits_without_spinning(&fixture("wait"), 1);
}

/// A drained GPU's record lies in a directory of the lock directory, which
/// the waiter reads at each wake: closing it must not wake the waiter
/// again (it did, without end). The waiting line counts the drained GPU,
/// which nobody holds, as not busy.
#[test]
fn a_drained_gpu_does_not_make_the_waiter_spin() {
    let f = fixture("wait-drained");
    f.cmd().env("TF_GPU_COUNT", "2").args(["--drain=1", "--reason=fan"]).run().assert_success();
    let out = waits_without_spinning(&f, 2);
    let line = out.stderr.lines().next().unwrap_or("");
    assert!(line.ends_with(": 1 of 2 slots busy, first in the queue"), "{}", out.explain());
}

/// A waiter for one of `gpus` GPUs (GPU 0 held, the others drained) wakes
/// at its beats and at releases, and runs at once when GPU 0 frees.
fn waits_without_spinning(f: &Fixture, gpus_here: u32) -> Output {
    let held = hold_lock(f.lock("0", 0));
    let record = f.dir.join("record");
    let mut c = f.cmd();
    gpus(&mut c, gpus_here, 1).env("RECORD_FILE", &record).arg("./pkg/gpu_test");
    let running = c.spawn();
    let sleeps = || test_support::voluntary_switches(running.pid());
    std::thread::sleep(Duration::from_millis(500));
    let before = sleeps();
    std::thread::sleep(Duration::from_millis(1000));
    // It wakes at its beats (4 a second) and at releases, not to poll
    // (every 50 ms) as it would without inotify.
    let woke = sleeps() - before;
    assert!(woke <= 12, "the waiter woke {woke} times in one second");
    assert!(!record.exists(), "the test ran while its slot was busy");
    let cpu = cpu_time(running.pid());
    assert!(cpu < Duration::from_millis(300), "waiting used {cpu:?} of CPU in 1.5 s");
    let released = std::time::SystemTime::now();
    drop(held);
    let out = running.wait();
    out.assert_success();
    assert!(record.exists());
    // A release is noticed through inotify, well before the 2 s safety rescan.
    let took = common::Record::read(&record).started_after(released);
    assert!(took < Duration::from_millis(1500), "took {took:?} to notice the release\n{}", out.explain());
    out
}

/// A waiter behind another keeps its `--wait` limit: not given up at its
/// first look at the one ahead (every 250 ms), nor when that one dies and
/// it is first (another user's shared lock of the lock directory changes
/// nothing): it fails with the wait limit's line, no sooner than the limit.
#[test]
fn a_waiter_behind_the_head_keeps_its_wait_limit() {
    let f = fixture("wait-behind");
    let _held = hold_lock(f.lock("0", 0));
    let mut head = f.cmd();
    gpus(&mut head, 1, 1).arg("/bin/true");
    let head = head.spawn();
    assert!(f.queued(1), "no waiter ahead");
    let mut earlier = Cmd::new("flock");
    earlier.arg("-s").arg(&f.lock_dir).args(["sleep", "30"]).own_process_group();
    let earlier = earlier.spawn();
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).args(["--wait=3", "./pkg/gpu_test"]);
    let waiter = c.spawn();
    std::thread::sleep(Duration::from_millis(600));
    head.signal(libc::SIGKILL);
    let out = waiter.wait();
    let took = started.elapsed();
    out.assert_code(1).assert_stderr_contains("within the wait limit of 3.000s");
    assert!(took >= Duration::from_secs(3), "gave up after {took:?}\n{}", out.explain());
    earlier.signal_group(libc::SIGKILL);
    let _ = (head.wait(), earlier.wait());
}

/// A waiter without a record (a lock directory it may not write) sees a
/// release through inotify at once, not at its next beat.
#[test]
fn a_waiter_without_the_queue_sees_a_release_at_once() {
    if !test_support::prerequisite(test_support::is_root(), "root", "a waiter without the queue") {
        return;
    }
    let f = common::shared_fixture("wait-queueless");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let lock = f.lock("0", 0);
    test_support::write_file(&lock, "");
    std::fs::set_permissions(&lock, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let held = hold_lock(&lock);
    let mut c = f.cmd();
    gpus(&mut c, 1, 1).as_user(common::NOBODY, common::NOBODY).arg("./pkg/gpu_test");
    let waiter = c.spawn();
    assert!(test_support::begins_to_wait(waiter.pid()), "it never began to wait\n{}", c.describe());
    std::thread::sleep(Duration::from_millis(100));
    let released = std::time::SystemTime::now();
    drop(held);
    let out = waiter.wait();
    out.assert_success().assert_stderr_contains("waiting without a place in the queue");
    let took = common::Record::of(&out).started_after(released);
    assert!(took < Duration::from_millis(1000), "took {took:?} to see the release\n{}", out.explain());
}

#[test]
fn the_wait_limit_gives_up_with_exit_1() {
    let f = fixture("waitlimit");
    let _held = hold_lock(f.lock("0", 0));
    let start = Instant::now();
    let out =
        f.cmd().env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").args(["--wait=0.4", "./pkg/gpu_test"]).run();
    out.assert_code(1);
    // One line when it starts waiting, one when it gives up.
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.explain());
    assert_eq!(
        lines[0],
        format!(
            "parallel_gpu_execute: waiting for 1 GPU(s) for {}: 1 of 1 slots busy, first in the queue",
            f.test_path().display()
        )
    );
    assert!(lines[1].ends_with("within the wait limit of 0.400s"), "{}", out.explain());
    assert!(start.elapsed() >= Duration::from_millis(400), "gave up after {:?}", start.elapsed());
    // The variable works the same way; 0 fails at once.
    let out = f
        .cmd()
        .env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1")
        .env("PARALLEL_GPU_EXECUTE_WAIT", "0")
        .arg("./pkg/gpu_test")
        .run();
    out.assert_code(1).assert_one_error_line("waiting is off (wait=0)");
}

#[test]
fn the_wait_limit_also_bounds_the_queue() {
    let f = fixture("waitqueue");
    let _held = hold_lock(f.lock("0", 0));
    let mut head = f.cmd();
    gpus(&mut head, 1, 1).arg("./pkg/gpu_test");
    let head = head.spawn();
    assert!(f.queued(1), "the first waiter never queued");
    // The second waiter sleeps on the first one's record; its limit still holds.
    let start = Instant::now();
    let out =
        f.cmd().env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").args(["--wait=0.5", "./pkg/gpu_test"]).run();
    out.assert_code(1);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.explain());
    assert!(
        lines[0].ends_with(": 1 of 1 slots busy, second in the queue"),
        "its place behind the head\n{}",
        out.explain()
    );
    // It says who comes first: the head, for the one GPU.
    let first = ": 1 waiter(s) in the queue come first for GPUs this test could take (--status shows them)";
    assert!(lines[1].ends_with(&format!("within the wait limit of 0.500s{first}")), "{}", out.explain());
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    head.signal(libc::SIGTERM);
    head.wait().assert_code(143);
}

#[test]
fn sigterm_while_waiting_exits_143_and_holds_nothing() {
    let f = fixture("sigterm");
    let held = hold_lock(f.lock("0", 0));
    let mut head = f.cmd();
    gpus(&mut head, 1, 1).arg("./pkg/gpu_test");
    let head = head.spawn();
    assert!(f.queued(1), "head never queued");
    let mut second = f.cmd();
    gpus(&mut second, 1, 1).arg("./pkg/gpu_test");
    let second = second.spawn();
    assert!(f.queued(2), "second never queued");
    for waiter in [head, second] {
        let sent = Instant::now();
        waiter.signal(libc::SIGTERM);
        let out = waiter.wait();
        out.assert_code(143);
        assert_eq!(out.status.code(), Some(143), "an exit status, not a death by signal\n{}", out.explain());
        assert!(sent.elapsed() < Duration::from_secs(2), "took {:?} to exit", sent.elapsed());
    }
    // Each removed its record on the way out.
    assert_eq!(f.waiters(), Vec::<i32>::new(), "records were left in the queue");
    drop(held);
    assert!(eventually_free(f.lock("0", 0)));
}

#[test]
fn a_multi_gpu_request_is_not_overtaken_by_later_single_gpu_requests() {
    let f = fixture("fair");
    let held = hold_lock(f.lock("0", 0));
    let (rec_a, rec_b) = (f.dir.join("a"), f.dir.join("b"));
    let mut a = f.cmd();
    gpus(&mut a, 2, 1).env("RECORD_FILE", &rec_a).env("SLEEP", "0.5").args(["./pkg/gpu_test", "--num_processes=2"]);
    let a = a.spawn();
    assert!(f.queued(1), "A never queued");
    // GPU 1 is free, but B arrived after A, which waits for GPUs 0 and 1.
    let mut b = f.cmd();
    gpus(&mut b, 2, 1).env("RECORD_FILE", &rec_b);
    b.arg("./pkg/gpu_test");
    let b = b.spawn();
    std::thread::sleep(Duration::from_millis(600));
    assert!(!rec_b.exists(), "B overtook the 2-GPU request waiting ahead of it");
    drop(held);
    a.wait().assert_success();
    b.wait().assert_success();
    let (ra, rb) = (parse_record(&read_to_string(&rec_a)), parse_record(&read_to_string(&rec_b)));
    for r in [&ra, &rb] {
        check_gpus_match_locks(r, "HIP_VISIBLE_DEVICES", str::to_string).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    }
    assert_eq!(record_value(&ra, "HIP_VISIBLE_DEVICES"), Some("0,1"));
    let a_end: u128 = record_value(&ra, "end").unwrap().parse().unwrap();
    let b_start: u128 = record_value(&rb, "start").unwrap().parse().unwrap();
    assert!(b_start >= a_end, "B started before A ended");
}

/// A 2-GPU waiter whose blocks were each partly busy (GPU 0 and GPU 2 held
/// by others, GPU 1 taken and given back) keeps each lock file's descriptor
/// under its own GPU: once all are free it gets GPUs 0 and 1, holding
/// their files. (Given back under another GPU's place, GPU 1's descriptor
/// stood in for GPU 0, and the waiter never got a block.)
#[test]
fn a_multi_gpu_waiter_that_gave_back_a_partial_block_gets_the_right_files() {
    let f = fixture("give-back");
    let (gpu0, gpu2) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("2", 0)));
    let record = f.dir.join("rec");
    let mut c = f.cmd();
    gpus(&mut c, 3, 1).env("RECORD_FILE", &record).args(["./pkg/gpu_test", "--num_processes=2"]);
    c.timeout(Duration::from_secs(10));
    let waiter = c.spawn();
    assert!(f.queued(1), "it never waited\n{}", c.describe());
    std::thread::sleep(Duration::from_millis(300));
    drop(gpu0);
    std::thread::sleep(Duration::from_millis(300));
    drop(gpu2);
    let out = waiter.wait();
    out.assert_success();
    let r = parse_record(&read_to_string(&record));
    check_gpus_match_locks(&r, "HIP_VISIBLE_DEVICES", str::to_string).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_eq!(record_value(&r, "HIP_VISIBLE_DEVICES"), Some("0,1"), "{}", out.explain());
}

#[test]
fn concurrent_wrappers_never_share_a_slot() {
    let f = fixture("concurrent");
    let mut running = Vec::new();
    for i in 0..12 {
        let record = f.dir.join(format!("rec{i}"));
        let mut c = f.cmd();
        gpus(&mut c, 3, 2).env("RECORD_FILE", &record).env("SLEEP", "0.3").arg("./pkg/gpu_test");
        if i % 3 == 0 {
            c.arg("--num_processes=2");
        }
        running.push((record, i % 3 == 0, c.spawn()));
    }
    let mut spans = Vec::new();
    for (record, double, r) in running {
        let out = r.wait();
        out.assert_success();
        let rec = parse_record(&read_to_string(&record));
        // The GPUs the test was given are the ones whose locks it holds.
        if let Err(e) = check_gpus_match_locks(&rec, "HIP_VISIBLE_DEVICES", str::to_string) {
            panic!("{e}\nrecord: {rec:?}\n{}", out.explain());
        }
        let locks: Vec<String> = record_value(&rec, "locks").unwrap().split_whitespace().map(str::to_string).collect();
        assert_eq!(locks.len(), if double { 2 } else { 1 }, "{rec:?}");
        let ids: Vec<u32> =
            record_value(&rec, "HIP_VISIBLE_DEVICES").unwrap().split(',').map(|i| i.parse().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "block not contiguous: {ids:?}");
        let start: u128 = record_value(&rec, "start").unwrap().parse().unwrap();
        let end: u128 = record_value(&rec, "end").unwrap().parse().unwrap();
        spans.push((start, end, locks));
    }
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            let overlap = a.0 < b.1 && b.0 < a.1;
            if overlap {
                assert!(a.2.iter().all(|l| !b.2.contains(l)), "slot shared by overlapping tests: {a:?} {b:?}");
            }
        }
    }
}
