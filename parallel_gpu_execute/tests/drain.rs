//! `--drain=GPU --reason=TEXT` and `--undrain=GPU`: drained GPUs are passed
//! over, a test with nothing left fails at once (also while it waits),
//! the state is shared by users of one lock directory, written atomically
//! and readable by all; bad input is one line and exit 2.

mod common;

use common::{Fixture, NOBODY, Record, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use test_support::{Cmd, Output, hold_lock, is_root};

/// The wrapper on `gpus` GPUs (TF_GPU_COUNT) with one slot each.
fn on(f: &Fixture, gpus: u32) -> Cmd {
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", gpus.to_string()).env("TF_TESTS_PER_GPU", "1");
    c
}

fn drain(f: &Fixture, gpus: u32, gpu: &str, reason: &str) -> Output {
    let out = on(f, gpus).arg(format!("--drain={gpu}")).arg(format!("--reason={reason}")).run();
    out.assert_success();
    out
}

/// The GPUs the test was given (`HIP_VISIBLE_DEVICES`).
#[track_caller]
fn given(out: &Output) -> String {
    out.assert_success();
    Record::of(out).var("HIP_VISIBLE_DEVICES").unwrap_or("").to_string()
}

#[test]
fn drained_gpus_are_passed_over_and_a_test_with_none_left_fails_at_once() {
    let f = Fixture::new("drain-basic");
    let out = drain(&f, 2, "0", "fan failing, RMA 1234");
    out.assert_stdout_contains("drained GPU 0 in").assert_stdout_contains("fan failing, RMA 1234");
    // The state: mode 1777 directory (sticky: a record is its owner's),
    // 0644 record, nothing left behind.
    let dir = f.lock_dir.join("gpudrain");
    let mode = |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&dir), 0o1777, "{}", dir.display());
    assert_eq!(mode(&dir.join("0")), 0o644);
    let record = std::fs::read_to_string(dir.join("0")).unwrap();
    assert!(record.starts_with("reason fan failing, RMA 1234\ntime "), "{record}");
    // The wrapper made the lock directory: its owner is this user.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&f.lock_dir).unwrap());
    assert!(record.contains(&format!("uid {uid}\n")), "{record}");
    let names: Vec<String> =
        std::fs::read_dir(&f.lock_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, ["gpudrain"], "no temporary file left behind");

    assert_eq!(given(&on(&f, 2).arg("./pkg/gpu_test").run()), "1", "GPU 0 is drained");

    drain(&f, 2, "1", "ECC errors");
    let started = Instant::now();
    let out = on(&f, 2).arg("./pkg/gpu_test").run();
    out.assert_code(1).assert_one_error_line("every GPU this test could use is out of service");
    out.assert_stderr_contains("GPU 0 (fan failing, RMA 1234), GPU 1 (ECC errors)");
    assert!(started.elapsed() < Duration::from_secs(5), "it waited: {:?}\n{}", started.elapsed(), out.explain());

    let out = on(&f, 2).arg("--undrain=0").run();
    out.assert_success().assert_stdout_contains("GPU 0 is back in service");
    assert_eq!(given(&on(&f, 2).arg("./pkg/gpu_test").run()), "0");
    on(&f, 2).arg("--undrain=1").run().assert_success();
    assert!(!dir.exists(), "the directory goes with the last drained GPU: the slot search is back to one openat");
    let out = on(&f, 2).arg("--undrain=1").run();
    out.assert_success().assert_stdout_contains("was not drained");
}

#[test]
fn a_block_of_several_gpus_never_holds_a_drained_one() {
    let f = Fixture::new("drain-block");
    drain(&f, 4, "1", "flaky");
    let out = on(&f, 4).arg("./pkg/gpu_test").args(["--num_processes=2"]).run();
    assert_eq!(given(&out), "2,3");
    drain(&f, 4, "2", "flaky too");
    let out = on(&f, 4).arg("./pkg/gpu_test").args(["--num_processes=2"]).run();
    out.assert_code(1).assert_one_error_line("GPU 1 (flaky), GPU 2 (flaky too)");
    // One GPU still can.
    assert_eq!(given(&on(&f, 4).arg("./pkg/gpu_test").run()), "0");

    // The last block of the pool counts: GPUs 4 and 5 of six, the others
    // drained; and a block that would run past the pool's end is none.
    let g = Fixture::new("drain-last-block");
    for gpu in ["0", "1", "2", "3"] {
        drain(&g, 6, gpu, "gone");
    }
    assert_eq!(given(&on(&g, 6).arg("./pkg/gpu_test").args(["--num_processes=2"]).run()), "4,5");
    let h = Fixture::new("drain-two");
    drain(&h, 2, "0", "gone");
    let out = on(&h, 2).arg("./pkg/gpu_test").args(["--num_processes=2"]).run();
    out.assert_code(1).assert_one_error_line("GPU 0 (gone)");
}

#[test]
fn a_waiter_whose_gpus_are_drained_while_it_waits_fails() {
    let f = Fixture::new("drain-waiter");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    let mut c = on(&f, 1);
    c.arg("./pkg/gpu_test");
    let waiter = c.spawn();
    assert!(f.queued(1), "the wrapper did not start waiting");
    std::thread::sleep(Duration::from_millis(200));
    let drained_at = Instant::now();
    drain(&f, 1, "0", "pulled while busy");
    let out = waiter.wait();
    out.assert_code(1).assert_stderr_contains("GPU 0 (pulled while busy)");
    // Woken by the drain (inotify), or at its next beat.
    assert!(drained_at.elapsed() < Duration::from_secs(5), "{:?}\n{}", drained_at.elapsed(), out.explain());
    let record = test_support::parse_record(&out.stdout);
    assert!(test_support::record_value(&record, "argc").is_none(), "the test ran\n{}", out.explain());
}

/// Waiters look at the drains again after each wait: GPU 1, drained and
/// then freed while the head waited and a second waiter was queued, is
/// passed over by both; each takes GPU 0 in turn.
#[test]
fn a_waiter_that_waited_in_the_queue_sees_a_gpu_drained_meanwhile() {
    let f = Fixture::new("drain-queued");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let (gpu0, gpu1) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0)));
    let start = |name: &str| {
        let mut c = on(&f, 2);
        c.env("SLEEP", "0.5").env("RECORD_FILE", f.dir.join(name)).arg("./pkg/gpu_test");
        c.spawn()
    };
    let head = start("head");
    assert!(f.queued(1), "no head");
    let second = start("second");
    assert!(f.queued(2), "the second never queued");
    drain(&f, 2, "1", "pulled");
    drop(gpu1);
    std::thread::sleep(Duration::from_millis(300));
    drop(gpu0);
    for (name, r) in [("head", head), ("second", second)] {
        let out = r.wait();
        out.assert_success();
        let r = Record::read(&f.dir.join(name));
        assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "{name} was given the drained GPU 1\n{}", out.explain());
    }
}

/// A GPU put back in service while a test waits is taken, with the other
/// still held: the waiter reads the drains again at each wake.
#[test]
fn a_waiter_takes_a_gpu_undrained_while_it_waits() {
    let f = Fixture::new("drain-undrained");
    drain(&f, 2, "1", "reseated");
    let _gpu0 = hold_lock(f.lock("0", 0));
    let mut c = on(&f, 2);
    c.arg("./pkg/gpu_test");
    let waiter = c.spawn();
    assert!(f.queued(1), "no head");
    on(&f, 2).arg("--undrain=1").run().assert_success();
    let out = waiter.wait();
    assert_eq!(given(&out), "1", "{}", out.explain());
}

/// An undrain wakes the waiting wrappers, also while another GPU stays
/// drained (its record leaves `gpudrain/`, which the lock directory's
/// watch does not see into): a waiter without a place in the queue takes
/// the GPU at once.
#[test]
fn an_undrain_wakes_a_waiter_without_the_queue() {
    if !test_support::prerequisite(is_root(), "root", "a waiter without the queue woken by an undrain") {
        return;
    }
    let f = shared_fixture("drain-wakes");
    // A lock directory nobody may write: nobody has a place in the queue.
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    for gpu in ["0", "1", "2"] {
        test_support::write_file(f.lock(gpu, 0), "");
        std::fs::set_permissions(f.lock(gpu, 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    drain(&f, 3, "1", "reseated");
    drain(&f, 3, "2", "fan");
    let _gpu0 = hold_lock(f.lock("0", 0));
    let mut c = on(&f, 3);
    c.as_user(NOBODY, NOBODY).arg("./pkg/gpu_test");
    let waiter = c.spawn();
    assert!(test_support::begins_to_wait(waiter.pid()), "it never began to wait\n{}", c.describe());
    std::thread::sleep(Duration::from_millis(100));
    let undrained = std::time::SystemTime::now();
    on(&f, 3).arg("--undrain=1").run().assert_success();
    let out = waiter.wait();
    assert_eq!(given(&out), "1", "{}", out.explain());
    out.assert_stderr_contains("waiting without a place in the queue");
    let took = common::Record::of(&out).started_after(undrained);
    assert!(took < Duration::from_millis(1000), "took {took:?} to see GPU 1 back\n{}", out.explain());
    assert!(f.lock_dir.join("gpudrain/2").exists(), "GPU 2 stays drained");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let f = Fixture::new("drain-bad");
    let cases: &[(&[&str], &str)] = &[
        (&["--drain=7", "--reason=x"], "unknown GPU '7': the GPUs here are 0, 1"),
        (&["--undrain=7"], "unknown GPU '7'"),
        (&["--drain=0"], "--drain needs --reason=TEXT"),
        (&["--drain=0", "--reason="], "--reason is empty"),
        (&["--drain=0", "--reason=  "], "--reason is empty"),
        (&["--drain=0", "--reason=two\nlines"], "one line"),
        (&["--drain=0", "--reason=x", "./pkg/gpu_test"], "runs no test, but './pkg/gpu_test' follows"),
        (&["--drain=0", "--reason=x", "--status"], "cannot be combined with --list or --status"),
        (&["--undrain=0", "--reason=x"], "--reason goes with --drain"),
        (&["--reason=x", "./pkg/gpu_test"], "--reason goes with --drain"),
        (&["--drain"], "--drain needs a value"),
        (&["--drain", "--reason=x"], "--drain needs a value"),
        (&["--drain=0", "--reason", "--undrain=1"], "--reason needs a value"),
    ];
    for (args, needle) in cases {
        let out = on(&f, 2).args(*args).run();
        out.assert_code(2).assert_one_error_line(needle);
    }
    assert!(!f.lock_dir.join("gpudrain").exists());
    // No GPU at all.
    let out = f.cmd().env("TF_GPU_COUNT", "0").args(["--drain=0", "--reason=x"]).run();
    out.assert_code(2).assert_one_error_line("these settings give no GPU on this host");
}

#[test]
fn a_lock_directory_that_cannot_be_written_is_one_line_and_exit_2() {
    let f = shared_fixture("drain-readonly");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut c = on(&f, 2);
    if is_root() {
        // Root writes anywhere: as another user.
        c.as_user(NOBODY, NOBODY);
    }
    let out = c.args(["--drain=0", "--reason=x"]).run();
    out.assert_code(2).assert_one_error_line("cannot create gpudrain/ in the lock directory");
    out.assert_stderr_contains("Permission denied");
}

#[test]
fn users_sharing_a_lock_directory_share_its_drain_state() {
    if !test_support::prerequisite(is_root(), "root", "the drain state shared by two users") {
        return;
    }
    let f = shared_fixture("drain-users");
    test_support::write_file(
        f.sysroot.root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    );
    // Root makes the directory as a host's /var/lock is: everyone writes.
    f.make_lock_dir_shared();
    drain(&f, 2, "0", "root's reason");
    let as_nobody = || {
        let mut c = on(&f, 2);
        c.as_user(NOBODY, NOBODY);
        c
    };
    assert_eq!(given(&as_nobody().arg("./pkg/gpu_test").run()), "1", "nobody's test sees root's drain");
    let out = as_nobody().args(["--drain=1", "--reason=nobody's reason"]).run();
    out.assert_success();
    let out = on(&f, 2).arg("--status=json").run();
    out.assert_success();
    let json = &out.stdout;
    assert!(json.contains(r#""uid": 0, "user": "root""#), "{}", out.explain());
    assert!(json.contains(r#""reason": "nobody's reason", "#), "{}", out.explain());
    assert!(json.contains(r#""uid": 65534, "user": "nobody""#), "{}", out.explain());
    // Nobody may not put root's GPU back, nor replace its record: the
    // drain is its owner's (the directory is sticky).
    as_nobody().arg("--undrain=0").run().assert_code(2).assert_one_error_line(
        "cannot undrain GPU 0: it was drained by uid 0 (Operation not permitted (os error 1)), and only that user or root may undrain it or replace its record",
    );
    as_nobody()
        .args(["--drain=0", "--reason=mine now"])
        .run()
        .assert_code(2)
        .assert_one_error_line("cannot replace the drain of GPU 0: it was drained by uid 0");
    // Its own it may, and root may undrain anyone's.
    as_nobody().arg("--undrain=1").run().assert_success().assert_stdout_contains("back in service");
    on(&f, 2).arg("--undrain=0").run().assert_success().assert_stdout_contains("back in service");
    assert_eq!(given(&as_nobody().arg("./pkg/gpu_test").run()), "0");
}

#[test]
fn status_shows_each_gpu_and_its_drain_in_text_and_json() {
    let f = Fixture::new("drain-status");
    // A reason with an escape sequence is kept in the file and shown
    // escaped.
    drain(&f, 2, "1", "bad \u{1b}[31mcolour");
    let out = on(&f, 2).arg("--status").run();
    out.assert_success();
    let text = &out.stdout;
    assert!(text.contains("gpus:\n"), "{}", out.explain());
    assert!(!text.contains('\u{1b}'), "an escape reached the terminal\n{}", out.explain());
    let line1 = text.lines().find(|l| l.starts_with("1 ")).unwrap_or_else(|| panic!("{}", out.explain()));
    assert!(line1.contains("drained ") && line1.contains("\\x1b[31mcolour"), "{line1}");
    let line0 = text.lines().find(|l| l.starts_with("0 ")).unwrap();
    assert!(line0.contains("in service") && line0.contains(" ok "), "{line0}");
    let out = on(&f, 2).arg("--status=json").run();
    let json = &out.stdout;
    assert!(json.contains(r#""gpus": [{"gpu": "0", "drained": null, "kernel_users": null, "health": "ok", "configured": true}, {"gpu": "1", "drained": {"reason": "bad \u001b[31mcolour""#), "{}", out.explain());
    // The longest reason keeps the record's time and user after it.
    drain(&f, 2, "0", &"r".repeat(1000));
    let out = on(&f, 2).arg("--status=json").run();
    let at = out.stdout.find(&"r".repeat(1000)).unwrap_or_else(|| panic!("{}", out.explain()));
    let record = &out.stdout[at..at + out.stdout[at..].find('}').unwrap()];
    assert!(record.contains(r#"", "time": "20"#), "{}", out.explain());
    assert!(record.contains(&format!(r#""uid": {}, "user": "#, my_uid())), "{}", out.explain());
}

/// This process's user id, from /proc.
fn my_uid() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap().split_whitespace().next().unwrap().to_string()
}

/// Another user puts files under the temporary names a drain would write
/// in a 1777 lock directory (sticky: the drain's user cannot remove them).
/// The drain of a user who is not root, as PID 1 of a PID namespace (so
/// its PID, which its temporary name held, is known), still succeeds: the
/// name carries 64 random bits.
#[test]
fn another_user_cannot_keep_a_gpu_from_being_drained() {
    if !common::root("other users, a PID namespace") {
        return;
    }
    let f = shared_fixture("drain-squat");
    f.make_lock_dir_shared();
    for pid in 1..=3 {
        let squat = f.lock_dir.join(format!("gpudrain.{pid}.tmp"));
        test_support::write_file(&squat, "");
        std::os::unix::fs::chown(&squat, Some(12345), Some(12345)).unwrap();
    }
    let as_nobody = ["--pid", "--fork", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
    let mut c = f.cmd_under("unshare", as_nobody);
    c.args(["--drain=0", "--reason=test"]);
    c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").env("PATH", test_support::mounts::SBIN_PATH);
    let out = c.run();
    out.assert_success().assert_stdout_contains("drained GPU 0 in");
    assert!(f.lock_dir.join("gpudrain").join("0").exists(), "{}", out.explain());
}

/// The `files` line of the record of the waiter `pid` (empty without one).
fn files_of(f: &Fixture, pid: i32) -> String {
    let queue = std::fs::read_dir(f.lock_dir.join("gpuqueue")).into_iter().flatten().flatten();
    let mine = queue.filter(|e| e.file_name().to_string_lossy().ends_with(&format!(".{pid}")));
    let text = mine.filter_map(|e| std::fs::read(e.path()).ok()).next().unwrap_or_default();
    let text = String::from_utf8_lossy(text.get(32..).unwrap_or_default()).into_owned();
    text.lines().find_map(|l| l.strip_prefix("files ")).unwrap_or("").to_string()
}

/// A drain and an undrain wake the waiters at once, also while another GPU
/// stays drained (its file leaves `gpudrain/`, which the lock directory's
/// watch does not see into): a 2-GPU waiter's record says within
/// milliseconds, not at its next beat, that it wants the block a GPU back
/// in service makes, so a later 1-GPU test does not take that GPU first.
#[test]
fn drains_and_undrains_wake_a_waiter_whose_record_follows_them() {
    let f = Fixture::new("drain-record-follows");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    drain(&f, 4, "3", "fan");
    drain(&f, 4, "0", "reseated");
    let (_gpu1, _gpu2) = (hold_lock(f.lock("1", 0)), hold_lock(f.lock("2", 0)));
    let mut c = on(&f, 4);
    c.args(["--wait=30", "./pkg/gpu_test", "--num_processes=2"]).timeout(Duration::from_secs(40));
    let waiter = f.spawn_queued(&c);
    let pid = waiter.pid();
    assert!(test_support::begins_to_wait(pid), "it never began to wait\n{}", c.describe());
    let mut took_ms = Vec::new();
    for round in 0..5 {
        for (action, wants) in [("--undrain=0", true), ("--drain=0", false)] {
            let mut c = on(&f, 4);
            c.arg(action);
            if !wants {
                c.arg("--reason=reseated");
            }
            c.run().assert_success();
            // From the drain written (its run ended), not from its start.
            let started = Instant::now();
            let followed = test_support::wait_until(Duration::from_secs(2), || {
                files_of(&f, pid).split(' ').any(|file| file == "gpulock0_0") == wants
            });
            let took = started.elapsed();
            assert!(followed, "round {round}: {action} never reached the record: {:?}", files_of(&f, pid));
            took_ms.push(took.as_millis());
        }
    }
    on(&f, 4).arg("--undrain=0").run().assert_success();
    let back = test_support::wait_until(Duration::from_secs(2), || files_of(&f, pid).contains("gpulock0_0"));
    let later = on(&f, 4).args(["--wait=0", "./pkg/gpu_test"]).run();
    waiter.signal(libc::SIGKILL);
    waiter.wait();
    assert!(back, "the undrain never reached the record: {:?}", files_of(&f, pid));
    later.assert_code(1);
    // Followed within a beat's fraction, most of the time even on a loaded
    // machine: at its next beat instead (uniform over 250 ms), seven of ten
    // under 60 ms would happen once in some 200-400 runs.
    let quick = took_ms.iter().filter(|&&ms| ms < 60).count();
    assert!(quick >= 7, "records followed drains after {took_ms:?} ms: {quick} of 10 under 60 ms");
}

/// Every kind of id a pool can hold (an index, a UUID, a CUDA MIG path,
/// whose lock name has `+` for `/`) round-trips: `--drain` of it is shown
/// drained by `--status` (text and JSON), a test is not given it, and
/// `--undrain` puts it back.
#[test]
fn every_kind_of_gpu_id_that_can_be_drained_reads_back() {
    let mig = "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2";
    // An NVIDIA host of two GPUs, named by UUID (`--lock-names=physical`).
    let nvidia = Fixture::new("drain-every-id-uuid");
    for minor in 0..2 {
        let gpu = test_support::hardware::NvidiaGpu::new(
            &format!("0000:{:02x}:00.0", 0x18 + 0x10 * minor),
            "NVIDIA H100 80GB HBM3",
            minor,
        );
        nvidia.sysroot.add_nvidia_proc_entry(&gpu);
    }
    nvidia.sysroot.add_nvidia_dev_nodes(&[0, 1]);
    let uuid = test_support::hardware::NvidiaGpu::new("0000:18:00.0", "x", 0).uuid;
    let plain = Fixture::new("drain-every-id");
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(&Fixture, &str, Env); 3] = [
        (&nvidia, &uuid, &[("PARALLEL_GPU_EXECUTE_LOCK_NAMES", "physical")]),
        (
            &plain,
            mig,
            &[
                ("PARALLEL_GPU_EXECUTE_VENDOR", "cuda"),
                ("CUDA_VISIBLE_DEVICES", "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2,1"),
                ("TF_GPU_COUNT", "2"),
            ],
        ),
        (&plain, "1", &[("TF_GPU_COUNT", "2")]),
    ];
    for (f, gpu, env) in cases {
        let wrapper = || {
            let mut c = f.cmd();
            c.env("TF_TESTS_PER_GPU", "1");
            for (k, v) in env {
                c.env(k, v);
            }
            c
        };
        let out = wrapper().arg(format!("--drain={gpu}")).arg("--reason=round trip").run();
        out.assert_success().assert_stdout_contains(&format!("drained GPU {gpu} in"));
        let out = wrapper().arg("--status").run();
        out.assert_success();
        let line = out.stdout.lines().find(|l| l.starts_with(&format!("{gpu} "))).unwrap_or_default().to_string();
        assert!(
            line.contains("drained ") && line.contains("round trip"),
            "{gpu} not shown drained: {line}\n{}",
            out.explain()
        );
        let out = wrapper().arg("--status=json").run();
        let drained = format!(r#"{{"gpu": "{gpu}", "drained": {{"reason": "round trip""#);
        assert!(out.stdout.contains(&drained), "{gpu} not drained in JSON\n{}", out.explain());
        // A test that needs both is refused, naming the GPU as it was drained.
        let out = wrapper().args(["./pkg/gpu_test", "--num_processes=2"]).run();
        assert!(!out.status.success(), "{}", out.explain());
        out.assert_stderr_contains(&format!("GPU {gpu} (round trip)"));
        // The other GPU is free: a test is given it, never this one.
        let out = wrapper().args(["--wait=0", "./pkg/gpu_test"]).run();
        let r = Record::of(&out);
        let given = r.var("CUDA_VISIBLE_DEVICES").or(r.var("HIP_VISIBLE_DEVICES")).unwrap_or("").to_string();
        assert!(!given.is_empty() && given != gpu, "a test was given the drained {gpu}\n{}", out.explain());
        let out = wrapper().arg(format!("--undrain={gpu}")).run();
        out.assert_success().assert_stdout_contains(&format!("GPU {gpu} is back in service"));
        assert!(!f.lock_dir.join("gpudrain").exists(), "{gpu}: gpudrain/ left behind");
    }
}

/// Another user's entry where the drain state goes: a symbolic link or a
/// FIFO named `gpudrain`, a directory named `0` or a symbolic link named
/// `2` in `gpudrain/`. `--drain` names the entry, its owner and the repair;
/// `--undrain` says the GPU was not drained, and leaves the entry alone.
#[test]
fn another_users_entry_in_the_way_is_named_with_its_repair() {
    if !common::root("another user's entries") {
        return;
    }
    let f = shared_fixture("drain-planted");
    f.make_lock_dir_shared();
    let d = f.lock_dir.display().to_string();
    let as_nobody = |script: &str| {
        let mut c = Cmd::new("sh");
        c.args(["-c", script]).arg(&f.lock_dir).as_user(NOBODY, NOBODY);
        c.run().assert_success();
    };
    for (script, kind) in [("ln -s /etc \"$0/gpudrain\"", "symbolic link"), ("mkfifo \"$0/gpudrain\"", "FIFO")] {
        as_nobody(script);
        let out = on(&f, 3).args(["--drain=0", "--reason=x"]).run();
        out.assert_code(2).assert_one_error_line(&format!(
            "cannot drain GPU 0: {d}/gpudrain is a {kind} of uid 65534, not the drain directory; root or uid 65534 removes it (rm {d}/gpudrain), then drain again"
        ));
        std::fs::remove_file(f.lock_dir.join("gpudrain")).unwrap();
    }
    drain(&f, 3, "1", "fan");
    as_nobody("mkdir \"$0/gpudrain/0\" && ln -s /etc/passwd \"$0/gpudrain/2\"");
    let out = on(&f, 3).args(["--drain=0", "--reason=x"]).run();
    out.assert_code(2).assert_one_error_line(&format!(
        "cannot drain GPU 0: {d}/gpudrain/0 is a directory of uid 65534, not a drain record; root or uid 65534 removes it (rm -r {d}/gpudrain/0), then drain again"
    ));
    let out = on(&f, 3).arg("--undrain=2").run();
    out.assert_success().assert_stdout_contains(&format!(
        "GPU 2 was not drained in {d}: {d}/gpudrain/2 is a symbolic link of uid 65534, not a drain record, left as it is"
    ));
    assert!(!out.stdout.contains("back in service"), "{}", out.explain());
    assert!(f.lock_dir.join("gpudrain/2").symlink_metadata().is_ok(), "the entry was removed\n{}", out.explain());
    let out = on(&f, 3).arg("--undrain=0").run();
    out.assert_success().assert_stdout_contains("GPU 0 was not drained in").assert_stdout_contains("is a directory");
}

/// `--drain` or `--undrain` given twice is one usage line, exit 2, and
/// changes nothing (before, the last one won, unsaid).
#[test]
fn a_repeated_drain_or_undrain_is_a_usage_error() {
    let f = Fixture::new("drain-twice");
    let cases: &[(&[&str], &str)] = &[
        (&["--drain=1", "--drain=2", "--reason=x"], "--drain given twice ('1', then '2'): one GPU per run"),
        (&["--undrain=1", "--undrain", "2"], "--undrain given twice ('1', then '2'): one GPU per run"),
        (&["--drain=1", "--reason=x", "--reason=y"], "--reason given twice ('x', then 'y')"),
    ];
    for (args, needle) in cases {
        on(&f, 3).args(*args).run().assert_code(2).assert_one_error_line(needle);
    }
    assert!(!f.lock_dir.join("gpudrain").exists(), "a GPU was drained");
}

/// A reason at the limit (another writer's record may hold more) is cut
/// between characters, never in the middle of one.
#[test]
fn a_long_reason_is_cut_between_characters() {
    let f = Fixture::new("drain-cut");
    drain(&f, 2, "0", "x");
    let reason = format!("{}\u{20ac}", "r".repeat(999));
    std::fs::write(f.lock_dir.join("gpudrain/1"), format!("reason {reason}\n")).unwrap();
    let out = on(&f, 2).arg("--status=json").run();
    let cut = format!(r#""reason": "{}", "time": null"#, "r".repeat(999));
    assert!(out.stdout.contains(&cut), "not cut before the character\n{}", out.explain());
    let out = on(&f, 2).arg("--status").run();
    assert!(!out.stdout.contains("\\x"), "half a character shown\n{}", out.explain());
}

/// `--drain` and `--undrain` make their change, then say it: where stdout
/// cannot take the line (closed, full, a pipe whose reader has gone), it
/// goes to stderr with why, and the exit is 0, for the change stands.
#[test]
fn a_change_made_is_exit_0_where_stdout_cannot_take_its_line() {
    let f = Fixture::new("drain-stdout");
    let cases = [
        ("closed", r#""$0" "$@" >&-; echo "rc=$?" >&2"#),
        ("full", r#""$0" "$@" >/dev/full; echo "rc=$?" >&2"#),
        // The reader has gone before the line is written.
        ("pipe", r#"{ sleep 0.3; "$0" "$@"; echo "rc=$?" >&2; } | true"#),
    ];
    for (how, script) in cases {
        for change in [&["--drain=1", "--reason=fan"][..], &["--undrain=1"]] {
            let mut c = f.cmd_under("sh", ["-c", script]);
            c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1");
            let out = c.args(change).run();
            out.assert_success().assert_stderr_contains("rc=0").assert_stderr_contains("cannot write to stdout");
            let said = if change.len() == 2 { "drained GPU 1 in" } else { "GPU 1 is back in service" };
            out.assert_stderr_contains(said);
            let status = on(&f, 2).arg("--status").run();
            let drained = status.stdout.lines().any(|l| l.starts_with("1 ") && l.contains("drained"));
            assert_eq!(
                drained,
                change.len() == 2,
                "{how}: {change:?} not made\n{}\n{}",
                out.explain(),
                status.explain()
            );
        }
    }
}
