//! What a waiter's record says, and who can take it away, each found by an
//! adversarial review: a record names only the lock files of blocks its
//! waiter can take whole, and a waiter with many slots names them in runs
//! rather than as every lock file of the profile; a reader that opened a
//! record just before its owner made it again reads the new one; another
//! user cannot push a waiter out of the queue by taking the names it makes
//! its record under; the last waiter killed with SIGKILL leaves no
//! `gpuqueue/` behind; a waiter that took a lock file replaced under its
//! holder keeps its place; a look never removes the record a waiter is
//! making; a lock file made after a waiter began to watch is watched.

mod common;

use common::{Fixture, NOBODY, Record, held_by_strace, on, root, started, strace_runs};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;
use test_support::{Cmd, Running, hold_lock, wait_until};

/// Starts `c`, in a process group of its own, and returns once it has a
/// record in the queue.
fn queued(f: &Fixture, c: &mut Cmd) -> Running {
    f.spawn_queued(c.timeout(Duration::from_secs(60)).own_process_group())
}

/// The records in `gpuqueue/`: (name, content).
fn records(f: &Fixture) -> Vec<(String, String)> {
    let Ok(dir) = std::fs::read_dir(f.lock_dir.join("gpuqueue")) else { return Vec::new() };
    let mut out: Vec<(String, String)> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .map(|name| {
            let content = std::fs::read(f.lock_dir.join("gpuqueue").join(&name)).unwrap_or_default();
            (name, String::from_utf8_lossy(content.get(32..).unwrap_or_default()).into_owned())
        })
        .collect();
    out.sort();
    out
}

/// The `files` line of the one record in the queue.
fn files_line(f: &Fixture) -> String {
    let all = records(f);
    assert_eq!(all.len(), 1, "one record expected: {all:?}");
    all[0].1.lines().find_map(|l| l.strip_prefix("files ")).unwrap_or_default().to_string()
}

/// GPU 1 drained: a 2-GPU waiter can only ever take the block {2,3}. Its
/// record names those two lock files, so a later 1-GPU test takes GPU 0,
/// free all along, at once instead of waiting behind it.
#[test]
fn a_waiter_never_waits_for_a_lock_file_of_a_block_the_one_ahead_cannot_take() {
    let f = Fixture::new("records-blocks");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    on(&mut f.cmd(), 4, 1).args(["--drain=1", "--reason=test"]).run().assert_success();
    let held = hold_lock(f.lock("2", 0));
    let mut early = f.cmd();
    on(&mut early, 4, 1).args(["./pkg/gpu_test", "--num_processes=2"]);
    let early = queued(&f, &mut early);
    assert_eq!(files_line(&f), "gpulock2_0 gpulock3_0", "{:?}", records(&f));
    let out = on(&mut f.cmd(), 4, 1).args(["--wait=2", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0"], "GPU 0 was free all along\n{}", out.explain());
    drop(held);
    let out = early.wait();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock2_0", "gpulock3_0"], "{}", out.explain());
}

/// A 2-GPU waiter whose first GPU is busy never tries the second in its
/// scans; that one's lock file is another user's, mode 0600. The waiter
/// opens every lock file of its pool when it makes its record, so its
/// record leaves the block out, and a later 1-GPU test that may open that
/// file takes it at once.
#[test]
fn a_lock_file_behind_a_busy_one_that_the_waiter_may_not_open_holds_nobody_up() {
    if !root("another user's 0600 lock file") {
        return;
    }
    let f = common::shared_fixture("records-behind-busy");
    f.make_lock_dir_shared();
    let held = hold_lock(f.lock("0", 0));
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    test_support::write_file(f.lock("1", 0), "");
    std::fs::set_permissions(f.lock("1", 0), std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut early = f.cmd();
    on(&mut early, 2, 1).as_user(NOBODY, NOBODY).args(["./pkg/gpu_test", "--num_processes=2"]);
    let early = queued(&f, &mut early);
    assert_eq!(files_line(&f), "", "{:?}", records(&f));
    let out = on(&mut f.cmd(), 2, 1).args(["--wait=2", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock1_0"], "{}", out.explain());
    // While GPU 0 is busy, its block is held: the waiter waits (its file
    // may be repaired meanwhile), though its scans pass the block over.
    std::thread::sleep(Duration::from_millis(300));
    let mut early = early;
    assert!(!early.has_exited(), "the waiter gave up while GPU 0 was busy\n{}", early.wait().explain());
    drop(held);
    // Now free, GPU 0's lock file leaves it no block: no wait could end.
    let out = early.wait();
    out.assert_code(2).assert_stderr_contains("warning: cannot open lock file");
}

/// The same block the other way round (the first GPU's lock file is the
/// one this user may not open, the second is busy), and blocks that
/// overlap (three GPUs, 2-GPU tests: GPU 1's file unusable, GPU 2 busy):
/// a block with the unusable file is held, so the test waits for its limit
/// (exit 1) whichever lock file its scan meets first and on either side
/// of that file, rather than fail at once (exit 2) as if no wait could
/// end; with nothing held, it fails.
#[test]
fn a_lock_file_this_user_may_not_open_ahead_of_a_busy_one_in_its_block_is_waited_on() {
    if !root("another user's 0600 lock file") {
        return;
    }
    for (gpus, unusable, busy) in [(2, "0", "1"), (3, "1", "2")] {
        let f = common::shared_fixture("records-unusable-first");
        f.make_lock_dir_shared();
        test_support::write_file(f.lock(unusable, 0), "");
        std::fs::set_permissions(f.lock(unusable, 0), std::fs::Permissions::from_mode(0o600)).unwrap();
        let held = hold_lock(f.lock(busy, 0));
        std::fs::set_permissions(f.lock(busy, 0), std::fs::Permissions::from_mode(0o666)).unwrap();
        let two_gpus = |wait: &str| {
            let mut c = f.cmd();
            on(&mut c, gpus, 1).as_user(NOBODY, NOBODY).args([wait, "./pkg/gpu_test", "--num_processes=2"]).run()
        };
        two_gpus("--wait=1.5").assert_code(1).assert_stderr_contains("warning: cannot open lock file");
        drop(held);
        if gpus == 2 {
            // Nothing held now: no wait could end. One line, the file's
            // error with its repair.
            let out = two_gpus("--wait=5");
            out.assert_code(2).assert_one_error_line(&format!(
                "cannot open lock file {} (Permission denied (os error 13)): no slot this test could take is left; to repair,",
                f.lock(unusable, 0).display()
            ));
        }
    }
}

/// A waiter with 1,024 slots on each of two GPUs names them as two runs
/// (one line of a few dozen bytes, not 2,048 names or every lock file of
/// the profile), so a waiter of a disjoint pool takes its free GPU at once.
#[test]
fn a_waiter_with_many_slots_holds_no_disjoint_pool_up() {
    // 2,048 held lock files here, and as many kept open by the waiter.
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit with a valid struct.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_max >= 8192 && {
            limit.rlim_cur = limit.rlim_cur.max(8192);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0
        }
    };
    if !test_support::prerequisite(raised, "8,192 open files", "2,048 held lock files") {
        return;
    }
    let f = Fixture::new("records-runs");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held: Vec<_> = ["0", "1"].iter().flat_map(|g| (0..1024).map(|s| hold_lock(f.lock(g, s)))).collect();
    let mut early = f.cmd();
    on(&mut early, 3, 1024).env("CUDA_VISIBLE_DEVICES", "0,1").args(["--vendor=cuda", "./pkg/gpu_test"]);
    let early = queued(&f, &mut early);
    assert_eq!(files_line(&f), "gpulock0_0-1023 gpulock1_0-1023");
    let mut later = f.cmd();
    on(&mut later, 3, 1024).env("CUDA_VISIBLE_DEVICES", "2").args(["--vendor=cuda", "--wait=3", "./pkg/gpu_test"]);
    let out = later.run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock2_0"], "{}", out.explain());
    drop(held);
    early.wait().assert_success();
}

/// A reader that opened a waiter's record just before its owner made it
/// again (a drain changed what it can take) finds the old file's lock
/// free. It reads the new record instead of taking its waiter for dead:
/// it neither removes the record nor overtakes the 2-GPU waiter. strace
/// holds each of the reader's `flock` calls for a second, as a preempted or
/// frozen reader would be held.
#[test]
fn a_reader_that_meets_a_record_made_again_reads_the_new_one() {
    if !strace_runs("a reader held inside its look") {
        return;
    }
    let f = Fixture::new("records-remade");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = [hold_lock(f.lock("1", 0)), hold_lock(f.lock("2", 0))];
    let mut early = f.cmd();
    on(&mut early, 3, 1).args(["./pkg/gpu_test", "--num_processes=2"]);
    let early = queued(&f, &mut early);
    let before = records(&f);
    let mut reader = held_by_strace(&f, "flock:delay_enter=1000000", None);
    on(&mut reader, 3, 1).args(["--wait=0", "./pkg/gpu_test"]);
    let reading = reader.spawn();
    std::thread::sleep(Duration::from_millis(300));
    on(&mut f.cmd(), 3, 1).args(["--drain=2", "--reason=test"]).run().assert_success();
    let out = reading.wait();
    out.assert_code(1);
    let after = records(&f);
    assert_eq!(after.len(), 1, "the waiter's record was removed\n{}", out.explain());
    assert_eq!(after[0].0, before[0].0, "{}", out.explain());
    assert!(after[0].1.contains("files gpulock0_0 gpulock1_0\n"), "not made again: {after:?}");
    drop(held);
    let out = early.wait();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
}

/// `gpuqueue/` made by another user (1777, sticky: this one may not remove
/// that user's files there), who also puts a file under the temporary name
/// the waiter's record was made under before, and drains a GPU so that the
/// waiter makes its record again: the waiter keeps its place, and a later
/// test does not overtake it.
#[test]
fn another_user_cannot_push_a_waiter_out_of_the_queue() {
    if !root("other users") {
        return;
    }
    let f = common::shared_fixture("records-squat");
    f.make_lock_dir_shared();
    let held = [hold_lock(f.lock("1", 0)), hold_lock(f.lock("2", 0))];
    test_support::write_file(f.lock("0", 0), "");
    for g in ["0", "1", "2"] {
        std::fs::set_permissions(f.lock(g, 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir(&queue).unwrap();
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::os::unix::fs::chown(&queue, Some(12345), Some(12345)).unwrap();
    let mut early = f.cmd();
    on(&mut early, 3, 1).as_user(NOBODY, NOBODY).args(["./pkg/gpu_test", "--num_processes=2"]);
    let early = queued(&f, &mut early);
    let (name, _) = records(&f).remove(0);
    let squatted: Vec<PathBuf> = [format!(".{name}.new"), format!(".{name}.0.new")]
        .iter()
        .map(|s| {
            let path = queue.join(s);
            test_support::write_file(&path, "");
            std::os::unix::fs::chown(&path, Some(12345), Some(12345)).unwrap();
            path
        })
        .collect();
    on(&mut f.cmd(), 3, 1).args(["--drain=2", "--reason=test"]).run().assert_success();
    // Its next beats make the record again, with GPU 2 left out.
    let remade = wait_until(Duration::from_secs(5), || {
        records(&f).iter().any(|(n, c)| *n == name && c.contains("files gpulock0_0 gpulock1_0\n"))
    });
    let later = on(&mut f.cmd(), 3, 1).as_user(NOBODY, NOBODY).args(["--wait=1", "./pkg/gpu_test"]).run();
    later.assert_code(1);
    assert!(remade, "record not made again: {:?}\n{}", records(&f), later.explain());
    assert!(squatted.iter().all(|p| p.exists()), "another user's files were removed");
    drop(held);
    let out = early.wait();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
    assert!(!out.stderr.contains("without a place"), "{}", out.explain());
}

/// The last waiter killed with SIGKILL cannot remove its record nor
/// `gpuqueue/`: the next look removes both, so later arrivals pay one
/// failed `openat` again instead of a directory read.
#[test]
fn the_last_waiter_killed_leaves_no_queue_directory() {
    let f = Fixture::new("records-killed");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).arg("./pkg/gpu_test");
    let r = queued(&f, &mut c);
    r.signal_group(libc::SIGKILL);
    r.wait();
    let queue = f.lock_dir.join("gpuqueue");
    assert_eq!(records(&f).len(), 1, "the killed waiter's record");
    drop(held);
    let out = on(&mut f.cmd(), 1, 1).arg("./pkg/gpu_test").run();
    Record::of(out.assert_success());
    assert!(!queue.exists(), "gpuqueue/ left: {:?}\n{}", std::fs::read_dir(&queue).map(|d| d.count()), out.explain());
}

/// The lock file a test holds is moved away and made again. When that test
/// ends, the waiter takes the old file, finds that it is no longer the one
/// at its path, lets it go and takes the new one, keeping its place. It
/// used to leave the queue and join again, and a later test took the slot
/// in between: strace holds the waiter's `getrandom` (called only as it
/// makes its record) for 0.4 s, as a preempted waiter would be held.
#[test]
fn a_waiter_that_took_a_replaced_lock_file_keeps_its_place() {
    if !strace_runs("a waiter held as it joins again") {
        return;
    }
    let f = Fixture::new("records-replaced");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut early = held_by_strace(&f, "getrandom:delay_enter=400000", None);
    on(&mut early, 1, 1).env("SLEEP", "0.5").env("RECORD_FILE", ran.join("early")).arg("./pkg/gpu_test");
    let early = early.spawn();
    assert!(f.queued(1), "the waiter never queued");
    std::fs::rename(f.lock("0", 0), f.dir.join("old_lock")).unwrap();
    test_support::write_file(f.lock("0", 0), "");
    let mut later = f.cmd();
    on(&mut later, 1, 1).env("RECORD_FILE", ran.join("later")).arg("./pkg/gpu_test").timeout(Duration::from_secs(60));
    let later = later.spawn();
    assert!(f.queued(2), "the later test never queued");
    drop(held);
    let (early, later) = (early.wait(), later.wait());
    early.assert_success();
    later.assert_success();
    let (e, l) = (started(&ran.join("early")), started(&ran.join("later")));
    assert!(e < l, "the later test ran first ({l} < {e})\n{}\n{}", early.explain(), later.explain());
}

/// A waiter held between making its record's temporary file and locking it
/// (strace holds each of its `flock` calls for 0.4 s) while other tests
/// look at the queue again and again: the looks leave the empty file
/// alone, so the waiter gets its place instead of waiting without one.
#[test]
fn a_look_never_removes_the_record_a_waiter_is_making() {
    if !strace_runs("a waiter held as it makes its record") {
        return;
    }
    let f = Fixture::new("records-making");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut waiter = held_by_strace(&f, "flock:delay_enter=400000", None);
    on(&mut waiter, 1, 1).args(["--wait=30", "./pkg/gpu_test"]);
    let waiter = waiter.spawn();
    let mut looks = 0;
    let queued = wait_until(Duration::from_secs(15), || {
        on(&mut f.cmd(), 1, 1).args(["--wait=0", "./pkg/gpu_test"]).run().assert_code(1);
        looks += 1;
        !f.waiters().is_empty()
    });
    drop(held);
    let out = waiter.wait();
    assert!(queued, "no record after {looks} looks\n{}", out.explain());
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("without a place"), "{}", out.explain());
}

/// The inotify watches of process `pid`: the inode numbers watched.
fn watched_inodes(pid: i32) -> Vec<u64> {
    let mut out = Vec::new();
    for fd in test_support::inotify_fds(pid) {
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().unwrap().to_string_lossy()));
        for word in info.unwrap_or_default().split_whitespace() {
            out.extend(word.strip_prefix("ino:").and_then(|h| u64::from_str_radix(h, 16).ok()));
        }
    }
    out
}

/// A 2-GPU waiter whose first GPU is busy never makes the second GPU's
/// lock file. Made later (by the next test that takes it), the file is
/// watched from then on, so its releases wake the waiter at once rather
/// than at its next beat.
#[test]
fn a_lock_file_made_after_the_watch_began_is_watched() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new("records-made-later");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 2, 1).args(["./pkg/gpu_test", "--num_processes=2"]);
    let waiter = queued(&f, &mut c);
    let first = std::fs::metadata(f.lock("0", 0)).unwrap().ino();
    // The lock directory too (its watch comes after the lock files'): a
    // file made before it would not be seen.
    let dir = std::fs::metadata(&f.lock_dir).unwrap().ino();
    let watching = wait_until(Duration::from_secs(5), || {
        let now = watched_inodes(waiter.pid());
        now.contains(&first) && now.contains(&dir)
    });
    assert!(watching, "the busy lock file or the directory is not watched: {:?}", watched_inodes(waiter.pid()));
    assert!(!f.lock("1", 0).exists(), "the second lock file was made by the waiter");
    let second = hold_lock(f.lock("1", 0));
    let ino = std::fs::metadata(f.lock("1", 0)).unwrap().ino();
    let watched = wait_until(Duration::from_secs(5), || watched_inodes(waiter.pid()).contains(&ino));
    let now = watched_inodes(waiter.pid());
    drop((held, second));
    let out = waiter.wait();
    assert!(watched, "the lock file made later is not watched: {now:?} (it is {ino})\n{}", out.explain());
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
}

/// A fixture whose lock directory is `lock_dir` in a new btrfs (with a
/// subvolume `sub`); `None` (a one-line skip, a failure under CI) where one
/// cannot be mounted here.
fn on_btrfs(label: &str, lock_dir: &str, what: &str) -> Option<(Fixture, test_support::mounts::Mounted)> {
    let mut f = Fixture::new(label);
    match test_support::mounts::Mounted::btrfs_image(&f.dir.join("btrfs.img"), &f.dir.join("mnt")) {
        Ok(fs) => {
            f.lock_dir = fs.path().join(lock_dir);
            std::fs::create_dir_all(&f.lock_dir).unwrap();
            Some((f, fs))
        }
        Err(why) => {
            test_support::prerequisite(false, &why, what);
            None
        }
    }
}

/// Fills the file system `fs` up (kept full while the file is open).
fn fill_up(fs: &test_support::mounts::Mounted) -> std::fs::File {
    fill_with(fs, "fill", 1 << 20)
}

/// Fills `fs` up through the file `name`, `chunk` bytes at a time.
fn fill_with(fs: &test_support::mounts::Mounted, name: &str, chunk: usize) -> std::fs::File {
    let mut fill = std::fs::File::create(fs.path().join(name)).unwrap();
    let full = loop {
        if let Err(e) = std::io::Write::write_all(&mut fill, &vec![7u8; chunk]).and_then(|()| fill.sync_data()) {
            break e;
        }
    };
    assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "filling the file system: {full}");
    fill
}

/// The lock directory on a btrfs that fills up while a 2-GPU waiter and a
/// later 1-GPU one wait. btrfs copies a file on each write, so a full one
/// refuses even the 24 bytes of a beat: the records went stale within a
/// second, silently, and the 1-GPU test took the first GPU freed ahead of
/// the 2-GPU one. A record is now overwritten in place (btrfs' `NOCOW`),
/// so both keep their places, in order.
#[test]
fn a_full_btrfs_keeps_the_waiters_in_their_places() {
    let Some((f, fs)) = on_btrfs("records-btrfs-full", "locks", "beats on a full btrfs") else { return };
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    let mut early = f.cmd();
    on(&mut early, 2, 1).env("RECORD_FILE", ran.join("early")).args(["./pkg/gpu_test", "--num_processes=2"]);
    let early = queued(&f, &mut early);
    let mut later = f.cmd();
    on(&mut later, 2, 1).env("RECORD_FILE", ran.join("later")).arg("./pkg/gpu_test");
    let later = queued(&f, &mut later);
    let fill = fill_up(&fs);
    // Stale by now, where the beats fail.
    std::thread::sleep(Duration::from_millis(1500));
    let [first, second] = held;
    drop(first);
    std::thread::sleep(Duration::from_millis(1000));
    let overtaken = ran.join("later").exists();
    drop(second);
    let (early, later) = (early.wait(), later.wait());
    drop(fill);
    assert!(!overtaken, "the 1-GPU test took GPU 0 ahead of the 2-GPU one\n{}\n{}", early.explain(), later.explain());
    early.assert_success();
    later.assert_success();
    let (e, l) = (started(&ran.join("early")), started(&ran.join("later")));
    assert!(e < l, "the later test ran first ({l} < {e})\n{}\n{}", early.explain(), later.explain());
    for out in [&early, &later] {
        assert!(!out.stderr.contains("warning"), "{}", out.explain());
    }
}

/// A btrfs snapshot taken of a full file system shares the record's blocks,
/// so even an overwrite in place must copy them, and its beats fail. The
/// waiter no longer loses its place unseen: it says so, once, with the
/// cause and the repair, and still gets the slot when it frees.
#[test]
fn a_beat_that_cannot_be_written_is_said() {
    let what = "beats on a full btrfs under a snapshot";
    let Some((f, fs)) = on_btrfs("records-btrfs-snapshot", "sub/locks", what) else { return };
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).arg("./pkg/gpu_test");
    let waiter = queued(&f, &mut c);
    let fill = fill_up(&fs);
    let snapshot = fs.path().join("snap");
    test_support::mounts::system(&[
        "btrfs",
        "subvolume",
        "snapshot",
        fs.path().join("sub").to_str().unwrap(),
        snapshot.to_str().unwrap(),
    ])
    .assert_success();
    // What the snapshot left, a page at a time: no block is left to copy
    // a record's into.
    let top_up = fill_with(&fs, "fill2", 4096);
    std::thread::sleep(Duration::from_millis(1000));
    drop(held);
    let out = waiter.wait();
    drop((fill, top_up));
    Record::of(out.assert_success());
    let queue = f.lock_dir.join("gpuqueue");
    let said =
        format!("warning: cannot renew its record in {} (its file system is out of space or inodes: ", queue.display());
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains(&said)).collect();
    assert_eq!(lines.len(), 1, "{}", out.explain());
    assert!(lines[0].contains("waiting without a place in the queue"), "{}", out.explain());
}

/// Records count by the lock files the looking waiter can take. Two root
/// waiters ahead, one on GPU 0 and one on GPU 1, whose lock file is root's,
/// mode 0600: a later waiter of another user, on both GPUs, can take GPU 0
/// alone, so only the first holds it up, and it is second in the queue,
/// not third (it used to count, and sleep on, the record of GPU 1 too).
#[test]
fn a_record_that_wants_only_lock_files_a_waiter_cannot_take_does_not_count() {
    if !root("another user's 0600 lock file") {
        return;
    }
    let f = common::shared_fixture("records-cannot-take");
    f.make_lock_dir_shared();
    test_support::write_file(f.lock("0", 0), "");
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    test_support::write_file(f.lock("1", 0), "");
    std::fs::set_permissions(f.lock("1", 0), std::fs::Permissions::from_mode(0o600)).unwrap();
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    let mut zero = f.cmd();
    on(&mut zero, 2, 1)
        .env("ROCR_VISIBLE_DEVICES", "0")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .arg("./pkg/gpu_test");
    let zero = queued(&f, &mut zero);
    let mut one = f.cmd();
    on(&mut one, 2, 1)
        .env("ROCR_VISIBLE_DEVICES", "1")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .arg("./pkg/gpu_test");
    let one = queued(&f, &mut one);
    let out = on(&mut f.cmd(), 2, 1).as_user(NOBODY, NOBODY).args(["--wait=1", "./pkg/gpu_test"]).run();
    out.assert_code(1);
    let line = out.stderr.lines().find(|l| l.contains("waiting for 1 GPU(s)")).unwrap_or_default();
    assert!(line.ends_with("second in the queue"), "{line}\n{}", out.explain());
    drop(held);
    Record::of(zero.wait().assert_success());
    Record::of(one.wait().assert_success());
}

/// A 2-GPU waiter of another user cannot take GPUs 0 and 1 together (GPU
/// 1's lock file is root's, mode 0600). Once it knows that, its scans pass
/// the block over whole: they never try GPU 0's lock file again, not even
/// in passing (a scan tries a block's lock files in turn and would hold
/// the first ones a moment, which a test looking then takes for busy).
/// With an earlier waiter on GPU 0 it never tries it at all: its first
/// scan leaves it to that one. strace lists every `flock` it makes.
#[test]
fn a_waiter_never_tries_a_lock_file_of_a_block_it_cannot_take() {
    if !root("another user's 0600 lock file") || !strace_runs("the flocks a waiter makes") {
        return;
    }
    let f = common::shared_fixture("records-never-tries");
    f.make_lock_dir_shared();
    for g in ["0", "1", "2", "3"] {
        test_support::write_file(f.lock(g, 0), "");
        let mode = if g == "1" { 0o600 } else { 0o666 };
        std::fs::set_permissions(f.lock(g, 0), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let trace = f.dir.join("flocks");
    // The 2-GPU waiter's `flock`s of GPU 0's lock file, in 1.5 s of waiting.
    let tries_of_gpu_0 = || {
        test_support::write_file(&trace, "");
        std::fs::set_permissions(&trace, std::fs::Permissions::from_mode(0o666)).unwrap();
        let trace_to = trace.to_str().unwrap();
        let mut c = f.cmd_under("strace", ["-f", "-qq", "-y", "-e", "trace=flock", "-o", trace_to]);
        on(&mut c, 4, 1).as_user(NOBODY, NOBODY).args(["--wait=1.5", "./pkg/gpu_test", "--num_processes=2"]);
        let out = c.timeout(Duration::from_secs(60)).run();
        out.assert_code(1);
        let flocks = std::fs::read_to_string(&trace).unwrap_or_default();
        let scans = flocks.lines().filter(|l| l.contains("gpulock2_0>")).count();
        assert!(scans > 2, "the trace shows {scans} scans:\n{flocks}\n{}", out.explain());
        let tried: Vec<String> = flocks.lines().filter(|l| l.contains("gpulock0_0>")).map(str::to_string).collect();
        (tried, out)
    };
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("2", 0)), hold_lock(f.lock("3", 0))];
    // Alone: its first scan finds GPU 0 busy, and learns of GPU 1's file.
    let (tried, out) = tries_of_gpu_0();
    assert_eq!(tried.len(), 1, "GPU 0's lock file tried again:\n{}\n{}", tried.join("\n"), out.explain());
    let mut early = f.cmd();
    on(&mut early, 4, 1)
        .env("ROCR_VISIBLE_DEVICES", "0")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .arg("./pkg/gpu_test");
    let early = queued(&f, &mut early);
    let (tried, out) = tries_of_gpu_0();
    assert!(tried.is_empty(), "it tried GPU 0's lock file:\n{}\n{}", tried.join("\n"), out.explain());
    drop(held);
    Record::of(early.wait().assert_success());
}
