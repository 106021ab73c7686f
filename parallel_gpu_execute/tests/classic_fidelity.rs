//! Where parallel_gpu_execute is a drop-in for the classic script, it
//! behaves like it: lock files another user's classic script can open, lock
//! directories it cannot write, the GPUs a `--num_processes=0` test needs,
//! the test named in the "no slot" line, the variables against XLA's CUDA
//! copy, and `--visible=rocr` against the closed openxla/xla#46534. The
//! comparisons with upstream main's scripts are in `upstream_main.rs`.

mod common;

use common::{Fixture, NOBODY, Record, bin, shared_fixture};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;
use test_support::{Cmd, HeldLock, hold_lock, is_root, lock_is_free, prerequisite, wait_until, write_file};

/// A root-owned 0755 lock directory with GPU 0's lock file (0644), held by
/// this test: another user's wrapper may lock it but create nothing there.
fn unwritable_lock_dir(f: &Fixture) -> HeldLock {
    unwritable_lock_dir_at(&f.lock_dir)
}

/// [`unwritable_lock_dir`] at `dir`.
fn unwritable_lock_dir_at(dir: &std::path::Path) -> HeldLock {
    std::fs::create_dir_all(dir).unwrap();
    let lock = dir.join("gpulock0_0");
    write_file(&lock, "");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    hold_lock(&lock)
}

/// The wrapper as nobody on one GPU with one slot, recording where nobody
/// may write: the record's path and the command.
fn nobody_waiter(f: &Fixture, args: &[&str]) -> (std::path::PathBuf, Cmd) {
    let records = f.dir.join("records");
    std::fs::create_dir_all(&records).unwrap();
    std::fs::set_permissions(&records, std::fs::Permissions::from_mode(0o777)).unwrap();
    let record = records.join("record");
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").env("RECORD_FILE", &record).as_user(NOBODY, NOBODY);
    c.args(args);
    (record, c)
}

/// A lock file ours creates is 0666 less the umask, as bash's
/// `exec {fd}>file` makes it: under `umask 000` a classic script run later
/// by another user opens it for writing and locks it.
#[test]
fn a_lock_file_we_create_can_be_locked_by_another_users_classic_script() {
    if !prerequisite(is_root(), "root", "the classic script as another user") {
        return;
    }
    let f = shared_fixture("classic-mode");
    // `umask 000` for the wrapper only, through a shell that execs it.
    let mut c = Cmd::new("/bin/sh");
    f.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
        .env("TF_GPU_COUNT", "1")
        .args(["-c", "umask 000; exec \"$0\" ./pkg/gpu_test", bin()]);
    let out = c.run();
    Record::of(out.assert_success());
    let mode = std::fs::metadata(f.lock("0", 0)).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o666, "lock file mode {mode:o}, want 0666 (0666 less umask 000)");
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o777)).unwrap();

    // The classic script's own open and lock, as nobody.
    let classic = Cmd::new("/bin/bash")
        .args(["-c", "exec {fd}>\"$1\" || exit 11; flock -n \"$fd\" || exit 12; echo locked", "classic"])
        .arg(f.lock("0", 0))
        .as_user(NOBODY, NOBODY)
        .run();
    classic.assert_success().assert_stdout_eq("locked\n");

    // And under the default umask 022 the same file is 0644, like bash's.
    let g = Fixture::new("classic-mode-022");
    let mut c = Cmd::new("/bin/sh");
    g.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &g.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &g.lock_dir)
        .env("TF_GPU_COUNT", "1")
        .args(["-c", "umask 022; exec \"$0\" ./pkg/gpu_test", bin()]);
    c.run().assert_success();
    assert_eq!(std::fs::metadata(g.lock("0", 0)).unwrap().mode() & 0o777, 0o644);
}

/// A read-only lock directory (0755, owned by root) with lock files an
/// administrator pre-created (0644) and no queue: every user gets a
/// slot, as with the classic script, and nothing is created there.
#[test]
fn a_read_only_lock_directory_with_precreated_lock_files_serves_every_user() {
    if !prerequisite(is_root(), "root", "running the wrapper as other users") {
        return;
    }
    let f = shared_fixture("readonly-dir");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    for gpu in 0..2 {
        for slot in 0..2 {
            let p = f.lock(&gpu.to_string(), slot);
            write_file(&p, "");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before: Vec<_> = std::fs::read_dir(&f.lock_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    for (uid, gid) in [(NOBODY, NOBODY), (1000, 1000), (0, 0)] {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "2").arg("./pkg/gpu_test");
        if uid != 0 {
            c.as_user(uid, gid);
        }
        let out = c.run();
        let r = Record::of(out.assert_success());
        assert_eq!(r.locks(), ["gpulock0_0"], "uid {uid}\n{}", out.explain());
        assert_eq!(out.stderr.lines().count(), 1, "only the 'Running test' line\n{}", out.explain());
    }
    let mut after: Vec<_> = std::fs::read_dir(&f.lock_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(after, before, "nothing created in the lock directory (no gpuqueue/)");
}

/// A wrapper that must wait in a lock directory where it cannot make its
/// record waits without a place in the queue, says so in one line, and runs
/// its test when the slot frees, instead of failing.
#[test]
fn without_a_record_a_waiter_waits_and_says_so() {
    if !prerequisite(is_root(), "root", "running the wrapper as another user") {
        return;
    }
    let f = shared_fixture("readonly-wait");
    let held = unwritable_lock_dir(&f);
    let (record, c) = nobody_waiter(&f, &["./pkg/gpu_test"]);
    let waiter = c.spawn();
    assert!(test_support::begins_to_wait(waiter.pid()), "it never began to wait\n{}", c.describe());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!record.exists(), "the test ran on a busy slot");
    drop(held);
    let out = waiter.wait();
    out.assert_success();
    assert!(record.exists(), "the test never ran\n{}", out.explain());
    let queue = f.lock_dir.join("gpuqueue");
    let warning = format!(
        "parallel_gpu_execute: warning: cannot make a record in {q} (this user may not add to it: Permission denied (os error 13)): waiting without a place in the queue, so later tests may be served first; to repair, root runs: mkdir -p {q} && chmod 1777 {q}",
        q = queue.display()
    );
    assert_eq!(out.stderr.lines().filter(|l| *l == warning).count(), 1, "{}", out.explain());
    assert!(!queue.exists());
    assert!(wait_until(Duration::from_secs(2), || lock_is_free(f.lock("0", 0))));
}

/// A waiter without a record whose lock directory is replaced (its slot
/// busy there too) starts over in the new one, which it cannot write
/// either: still one warning.
#[test]
fn a_waiter_without_a_record_warns_once_across_a_new_lock_directory() {
    if !prerequisite(is_root(), "root", "running the wrapper as another user") {
        return;
    }
    let f = shared_fixture("readonly-replaced");
    let _held = unwritable_lock_dir(&f);
    let (_, mut c) = nobody_waiter(&f, &["./pkg/gpu_test"]);
    // Not noticing the new directory, it would wait for the old one's slot.
    c.timeout(Duration::from_secs(10));
    let waiter = c.spawn();
    std::thread::sleep(Duration::from_millis(400));
    // Made whole beside it, then put in its place: a look in between
    // would find a directory without the lock file, which it may not make.
    let staged = f.dir.join("new-locks");
    let held = unwritable_lock_dir_at(&staged);
    std::fs::rename(&f.lock_dir, f.dir.join("old-locks")).unwrap();
    std::fs::rename(&staged, &f.lock_dir).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    drop(held);
    let out = waiter.wait();
    out.assert_success();
    let warnings = out.stderr.lines().filter(|l| l.contains("cannot make a record")).count();
    assert_eq!(warnings, 1, "{}", out.explain());
}

/// A waiter without a record keeps its `--wait` limit: neither a wake by
/// an unrelated file closed in the lock directory nor its beats end the
/// wait early; the slot freed at 2.7 s runs the test. (Guards
/// `SlotWatch::wait`'s deadline check: answering "timed out" at a wake made
/// this waiter exit 1 at 0.5 s.)
#[test]
fn a_waiter_without_a_record_keeps_its_wait_limit_through_wakes() {
    if !prerequisite(is_root(), "root", "running the wrapper as another user") {
        return;
    }
    let f = shared_fixture("readonly-limit");
    let held = unwritable_lock_dir(&f);
    let (record, c) = nobody_waiter(&f, &["--wait=20", "./pkg/gpu_test"]);
    let waiter = c.spawn();
    std::thread::sleep(Duration::from_millis(500));
    write_file(f.lock_dir.join("unrelated"), "closed in the lock directory: a wake");
    std::thread::sleep(Duration::from_millis(2200));
    assert!(!record.exists(), "the test ran on a busy slot");
    drop(held);
    let out = waiter.wait();
    out.assert_success();
    assert!(record.exists(), "the test never ran\n{}", out.explain());
    assert!(out.elapsed >= Duration::from_millis(2600), "it did not wait for the slot\n{}", out.explain());
    let warnings = out.stderr.lines().filter(|l| l.contains("cannot make a record")).count();
    assert_eq!(warnings, 1, "one warning about the record, not one per wake\n{}", out.explain());
    let waits = out.stderr.lines().filter(|l| l.contains("waiting without a place in the queue")).count();
    assert_eq!(waits, 2, "the warning and one waiting line\n{}", out.explain());
}

/// The classic script reads `--num_processes=0` as 0 and raises a zero
/// product to 1: such a test needs one GPU, not two.
#[test]
fn a_zero_process_count_needs_one_gpu() {
    let f = Fixture::new("zero-processes");
    for args in [&["--num_processes=0", "--gpus_per_process=2"][..], &["--gpus_per_process=0"]] {
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1");
            },
            args,
        );
        let r = Record::of(out.assert_success());
        assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None);
        assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "classic mode, one GPU\n{}", out.explain());
        assert_eq!(r.args(), args, "arguments unchanged");
    }
}

/// The "no slot" line names the test and its arguments, as upstream's
/// "Cannot find N free GPU(s) to run the test ... on" does; still one line.
#[test]
fn the_no_slot_line_names_the_test_and_its_arguments() {
    let f = Fixture::new("noslot-line");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    let test = f.test_path();
    for (wait, tail) in [("0", ", and waiting is off (wait=0)"), ("0.2", " within the wait limit of 0.200s")] {
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").env("PARALLEL_GPU_EXECUTE_WAIT", wait);
            },
            &["--gtest_filter=Foo.*", "two words"],
        );
        let line = format!(
            "parallel_gpu_execute: cannot find 1 free GPU(s) to run the test {} --gtest_filter=Foo.* two words on{tail}",
            test.display()
        );
        out.assert_code(1);
        let lines: Vec<&str> = out.stderr.lines().collect();
        // With a wait limit, the wrapper first says that it waits.
        let want = if wait == "0" { 1 } else { 2 };
        assert_eq!(lines.len(), want, "{}", out.explain());
        assert_eq!(lines.last(), Some(&line.as_str()), "{}", out.explain());
        if want == 2 {
            assert!(lines[0].starts_with("parallel_gpu_execute: waiting for 1 GPU(s) for "), "{}", out.explain());
        }
    }
}

/// XLA's CUDA copy, `build_tools/ci/parallel_gpu_execute.sh` on openxla/xla
/// main (last changed in de271824, 2025-04-29, PR #25771, which raised the
/// limit from 2048 to 4096), sets `CUDA_VISIBLE_DEVICES` and
/// `HIP_VISIBLE_DEVICES` to the index and a 4096 MB limit. On a counted
/// NVIDIA host ours uses cuda mode (that limit, no `HIP_VISIBLE_DEVICES`);
/// `--vendor=classic` gives that copy's pair; a limit the user set is kept
/// in both.
#[test]
fn against_xla_main_cuda_copy_de271824_cuda_mode_and_the_classic_pair() {
    let f = Fixture::new("ci-copy");
    f.sysroot.add_nvidia_proc_gpus(2);
    let out = f.run_test(|_| {}, &[]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), None);
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("4096"), "{}", out.explain());
    let out = f.run_test(
        |c| {
            c.env("PARALLEL_GPU_EXECUTE_VENDOR", "classic");
        },
        &[],
    );
    let r = Record::of(out.assert_success());
    assert_eq!(
        (r.var("CUDA_VISIBLE_DEVICES"), r.var("HIP_VISIBLE_DEVICES")),
        (Some("0"), Some("0")),
        "{}",
        out.explain()
    );
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("4096"));
    let out = f.run_test(
        |c| {
            c.env("PARALLEL_GPU_EXECUTE_VENDOR", "classic").env("TF_PER_DEVICE_MEMORY_LIMIT_MB", "4200");
        },
        &[],
    );
    assert_eq!(Record::of(out.assert_success()).var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("4200"));
}

/// The ROCm script that openxla/xla#46534 proposed (2026-07-31, its head
/// 11098f82; closed without being merged, so never on main) takes its pool
/// from a preset `ROCR_VISIBLE_DEVICES`, searches slot 0 of every
/// contiguous block of it first, locks `gpulock<id>_<slot>`, and sets
/// `ROCR_VISIBLE_DEVICES` to the block, `HIP_VISIBLE_DEVICES` to 0..n-1
/// and removes `CUDA_VISIBLE_DEVICES`. That is `--visible=rocr`: on a KFD
/// host with a preset pool, ours then takes the same files in the same
/// order and sets the same variables, so a slot that script holds (an
/// external `flock`, as its `exec {fd}>`/`flock -n` takes it) is skipped.
#[test]
fn against_xla_pr46534_visible_rocr_locks_the_same_files_in_the_same_order() {
    let mut f = Fixture::new("pr46534-rocr-pool");
    f.sysroot.add_kfd_gpus(8);
    let pod = |c: &mut Cmd| {
        c.env("ROCR_VISIBLE_DEVICES", "4,5")
            .env("CUDA_VISIBLE_DEVICES", "4")
            .env("TF_TESTS_PER_GPU", "2")
            .env("PARALLEL_GPU_EXECUTE_VISIBLE", "rocr");
    };
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("4", 0));

    let out = f.run_test(pod, &[]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock5_0"], "GPU 4's slot 0 is the script's\n{}", out.explain());
    assert_eq!(
        (r.var("ROCR_VISIBLE_DEVICES"), r.var("HIP_VISIBLE_DEVICES"), r.var("CUDA_VISIBLE_DEVICES")),
        (Some("5"), Some("0"), None),
        "{}",
        out.explain()
    );

    // A two-GPU test: the block 4,5 at slot 0 is not free, so slot 1 of it.
    let out = f.run_test(pod, &["--num_processes=2"]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock4_1", "gpulock5_1"], "{}", out.explain());
    assert_eq!((r.var("ROCR_VISIBLE_DEVICES"), r.var("HIP_VISIBLE_DEVICES")), (Some("4,5"), Some("0,1")));
    let line = format!("Running test {} --num_processes=2 on GPU(s) 4,5", f.test_path().display());
    assert!(out.stderr.lines().any(|l| l == line), "want the line {line:?}\n{}", out.explain());
    // Nothing outside the pool was locked.
    for gpu in ["0", "1", "2", "3", "6", "7"] {
        assert!(!f.lock(gpu, 0).exists(), "GPU {gpu} is not in the pool\n{}", out.explain());
    }
    drop(held);
}
