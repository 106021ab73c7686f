//! Faults that CI machines see, and what parallel_gpu_execute does about
//! them: the lock directory removed (`rm -rf`, a cleanup job, a tmpfs
//! remounted) or moved while tests hold locks and while wrappers wait, and
//! waiters killed with SIGKILL (Bazel's timeout, the OOM killer).
//!
//! Covered elsewhere, not repeated here (parallel_gpu_execute/tests/):
//! the test SIGKILLed mid-run frees its slot at once
//! (`slots.rs`: `sigkill_of_the_test_frees_its_slot_at_once`,
//! `sigkill_of_a_test_process_group_frees_its_slot`); SIGTERM to a waiting
//! wrapper exits 143 at once holding nothing
//! (`slots.rs`: `sigterm_while_waiting_exits_143_and_holds_nothing`); a
//! missing lock directory is created (`slots.rs`:
//! `the_lock_directory_is_created_when_missing`); an unwritable one is one
//! clear error and lock files pre-created by another user with mode 0644
//! still work (`flags_and_bad_input.rs`:
//! `an_unwritable_lock_directory_is_a_clear_error`,
//! `lock_files_precreated_by_another_user_still_work`).

use std::time::{Duration, Instant};
use test_support::{GpuSandbox, hold_lock, lock_is_free, parse_record, read_to_string, record_value, wait_until};

/// Whether `path` exists and someone holds an exclusive flock on it.
fn is_held(path: &std::path::Path) -> bool {
    path.exists() && !lock_is_free(path)
}

/// Whether nobody holds `path` (at the latest in a moment: a process that
/// another test thread has just forked, and that has not exec'd yet, shares
/// this process's own lock descriptors for that moment).
fn released(path: &std::path::Path) -> bool {
    wait_until(Duration::from_secs(2), || !is_held(path))
}

/// How many records of the queue have their lock held: waiters alive.
fn live_records(s: &GpuSandbox) -> usize {
    let records =
        std::fs::read_dir(s.queue()).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_else(|_| Vec::new());
    records.iter().filter(|r| is_held(r)).count()
}

/// Whether someone waits in the queue within ten seconds.
fn queued(s: &GpuSandbox) -> bool {
    wait_until(Duration::from_secs(10), || live_records(s) > 0)
}

/// Whether no waiter is left in the queue within two seconds.
fn queue_released(s: &GpuSandbox) -> bool {
    wait_until(Duration::from_secs(2), || live_records(s) == 0)
}

/// The lock directory removed while a test holds GPU 0's only slot: the
/// running test keeps going (it holds its descriptor), and new wrappers
/// re-create the directory and run instead of failing or waiting forever.
///
/// The running test loses its exclusion with the file: flock locks a file,
/// and a new file at the same path is a different one, so the new wrappers
/// get GPU 0 while it still runs. No lock-file scheme can do better once
/// its files are deleted; the classic script behaves the same.
#[test]
fn removing_the_lock_directory_under_running_tests_does_not_stop_new_wrappers() {
    let s = GpuSandbox::new("fault-rmdir-held");
    let mut running = s.cmd_with_gpus(1, 1);
    running.env("SLEEP", "30").own_process_group().arg("./pkg/gpu_test");
    let running = running.spawn();
    assert!(wait_until(Duration::from_secs(10), || is_held(&s.lock("0", 0))), "the first test never took its slot");

    std::fs::remove_dir_all(&s.lock_dir).unwrap();
    for wait in ["--wait=0", "--wait=600"] {
        let record = s.dir.join(format!("record{wait}"));
        let started = Instant::now();
        let out = s.cmd_with_gpus(1, 1).env("RECORD_FILE", &record).args([wait, "./pkg/gpu_test"]).run();
        out.assert_success().assert_at_most_one_stderr_line();
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        let rec = parse_record(&read_to_string(&record));
        assert_eq!(record_value(&rec, "locks"), Some("gpulock0_0"), "{}", out.explain());
        assert!(s.lock("0", 0).is_file(), "the directory and lock file were re-created");
    }

    running.signal_group(libc::SIGKILL);
    running.wait().assert_code(137);
    assert!(released(&s.lock("0", 0)) && queue_released(&s), "something is still held");
}

/// A wrapper at the head of the queue, waiting for a busy slot, when the
/// lock directory is removed (or renamed away) under it: it notices at once
/// (inotify reports the directory gone), starts over in a new directory at
/// the same path, and runs its test, instead of waiting forever on a lock
/// file that no longer has a name.
#[test]
fn a_waiting_wrapper_starts_over_when_the_lock_directory_goes_away() {
    for how in ["removed", "renamed"] {
        let s = GpuSandbox::new(&format!("fault-rmdir-waiting-{how}"));
        std::fs::create_dir_all(&s.lock_dir).unwrap();
        let held = hold_lock(s.lock("0", 0));
        let record = s.dir.join("record");
        let mut waiter = s.cmd_with_gpus(1, 1);
        waiter.env("RECORD_FILE", &record).arg("./pkg/gpu_test");
        let waiter = waiter.spawn();
        assert!(queued(&s), "{how}: the wrapper never queued");
        // Let it finish its scan and go to sleep on the directory.
        std::thread::sleep(Duration::from_millis(300));
        assert!(!record.exists(), "{how}: the test ran on a busy slot");

        let gone = Instant::now();
        match how {
            // The waiter may make its record again while `rm -rf` runs
            // (its beat): a cleaner runs it again.
            "removed" => assert!(
                test_support::remove_tree_as_a_cleaner(&s.lock_dir),
                "{how}: the lock directory could not be removed"
            ),
            _ => std::fs::rename(&s.lock_dir, s.dir.join("old-locks")).unwrap(),
        }
        let out = waiter.wait();
        out.assert_success().assert_waited_and_at_most_one_other_line();
        let took = gone.elapsed();
        // A rename is reported at once. A removal is seen when the lock
        // files' removal wakes the waiter, or at the latest at its next beat
        // (the kernel reports a directory's own deletion only once nothing
        // holds it open, and the waiter holds files in it).
        assert!(took < Duration::from_secs(5), "{how}: took {took:?} to notice\n{}", out.explain());
        let rec = parse_record(&read_to_string(&record));
        assert_eq!(record_value(&rec, "locks"), Some("gpulock0_0"), "{how}\n{}", out.explain());
        // It started over in a new directory at the same path, where its slot
        // was free: it took it at once, and left no queue there.
        assert!(s.lock("0", 0).is_file(), "{how}: no lock file in the new directory");
        assert!(!s.queue().exists(), "{how}: a free slot needs no queue");
        drop(held);
        assert!(released(&s.lock("0", 0)) && queue_released(&s), "{how}: something is still held");
    }
}

/// Waiters killed with SIGKILL (no handler runs) leave no lock behind: the
/// kernel drops a dead process's flocks, so the queue moves on to the next
/// waiter, which runs its test once the slot frees, and afterwards nothing
/// is held.
#[test]
fn waiters_killed_with_sigkill_leave_no_lock_held() {
    let s = GpuSandbox::new("fault-sigkill-waiting");
    std::fs::create_dir_all(&s.lock_dir).unwrap();
    let held = hold_lock(s.lock("0", 0));
    let spawn_waiter = |record: Option<&std::path::Path>| {
        let mut c = s.cmd_with_gpus(1, 1);
        if let Some(r) = record {
            c.env("RECORD_FILE", r);
        }
        c.arg("./pkg/gpu_test").spawn()
    };
    let head = spawn_waiter(None);
    assert!(queued(&s), "the head never queued");
    let record = s.dir.join("record-survivor");
    let survivor = spawn_waiter(Some(&record));
    let third = spawn_waiter(None);
    // Both sleep behind the first, the third on the second's record.
    std::thread::sleep(Duration::from_millis(300));

    head.signal(libc::SIGKILL);
    head.wait().assert_code(137);
    third.signal(libc::SIGKILL);
    third.wait().assert_code(137);
    // The survivor is first now, and waits for the slot.
    assert!(queued(&s), "nobody took over the queue");
    assert!(!record.exists(), "the test ran on a busy slot");

    drop(held);
    let out = survivor.wait();
    out.assert_success().assert_waited_and_at_most_one_other_line();
    assert_eq!(record_value(&parse_record(&read_to_string(&record)), "locks"), Some("gpulock0_0"));
    assert!(queue_released(&s), "the queue lock is still held");
    assert!(released(&s.lock("0", 0)), "the slot is still held");

    // And when every waiter is killed, nothing at all is left held.
    let held = hold_lock(s.lock("0", 0));
    let waiters: Vec<_> = (0..3).map(|_| spawn_waiter(None)).collect();
    assert!(queued(&s), "nobody queued");
    std::thread::sleep(Duration::from_millis(200));
    for w in waiters {
        w.signal(libc::SIGKILL);
        w.wait().assert_code(137);
    }
    assert!(queue_released(&s), "the queue lock is still held after every waiter died");
    drop(held);
    assert!(released(&s.lock("0", 0)), "the slot is still held after every waiter died");
}
