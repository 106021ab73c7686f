//! The lock directory under faults around a wait: removed while a mount
//! still leads to it, removed and made again faster than a waiter can look,
//! made unsearchable, and the temporary directories a killed maker of
//! `gpuqueue/` or `gpudrain/` leaves; and `--list`, which says the error
//! every test would meet in a lock directory, as a test does.

mod common;

use common::{Fixture, NOBODY, on, root, set_mode};
use std::time::{Duration, Instant};
use test_support::{Cmd, Running, hold_lock, wait_until, write_file};

/// Starts `c`, in a process group of its own, and returns once it has a
/// record in the queue.
fn queued(f: &Fixture, c: &mut Cmd) -> Running {
    f.spawn_queued(c.timeout(Duration::from_secs(60)).own_process_group())
}

/// A container's lock directory, a bind mount of the host's, removed on
/// the host (a cleaner's `rm -rf`, then `mkdir`) while a test waits in the
/// container: the mount still leads to the removed directory, where no
/// file can be made. The waiter says so and ends (exit 2) at once, instead
/// of starting over in it without end, at full speed, past its `--wait`.
#[test]
fn a_removed_directory_still_mounted_at_the_lock_path_ends_the_wait() {
    if !root("a bind mount in a mount namespace") {
        return;
    }
    let f = Fixture::new("faults-removed-mount");
    let (host, container) = (f.dir.join("host-locks"), f.dir.join("container-locks"));
    std::fs::create_dir_all(&host).unwrap();
    std::fs::create_dir_all(&container).unwrap();
    let held = hold_lock(host.join("gpulock0_0"));
    let mount = r#"mount --bind "$1" "$2" && shift 2 && exec "$@""#;
    let args = ["-m", "--propagation", "private", "sh", "-c", mount, "sh"];
    let mut c =
        f.cmd_under("unshare", args.iter().copied().chain([host.to_str().unwrap(), container.to_str().unwrap()]));
    on(&mut c, 1, 1).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &container).args(["--wait=20", "./pkg/gpu_test"]);
    let r = c.timeout(Duration::from_secs(15)).spawn();
    let queued =
        wait_until(Duration::from_secs(10), || std::fs::read_dir(host.join("gpuqueue")).is_ok_and(|d| d.count() == 1));
    let removed = Instant::now();
    // The waiter may make its record again while `rm -rf` runs: again.
    assert!(test_support::remove_tree_as_a_cleaner(&host), "the host's lock directory could not be removed");
    std::fs::create_dir(&host).unwrap();
    let out = r.wait();
    let took = removed.elapsed();
    drop(held);
    assert!(queued, "it never queued\n{}", out.explain());
    out.assert_code(2);
    assert!(out.stderr.contains("it was removed, yet its path still leads to it"), "{}", out.explain());
    assert!(took < Duration::from_secs(5), "it ended {took:?} after the removal\n{}", out.explain());
    assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
}

/// A maker killed between making `gpuqueue/` (or `gpudrain/`) under its
/// temporary name and renaming it left that directory behind: the next
/// maker removes it once it is a minute old, and leaves a younger one
/// (another maker's, about to be renamed) and one that is not empty.
#[test]
fn a_killed_makers_temporary_directory_is_removed_by_the_next_maker() {
    let f = Fixture::new("faults-leftover-dirs");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(120);
    let make = |name: &str, age: Option<std::time::SystemTime>, file: bool| {
        let path = f.lock_dir.join(name);
        std::fs::create_dir(&path).unwrap();
        if file {
            write_file(path.join("x"), "");
        }
        if let Some(t) = age {
            std::fs::File::open(&path).unwrap().set_modified(t).unwrap();
        }
        path
    };
    let queue_left = make(".gpuqueue.4242.1234567.new", Some(old), false);
    let drain_left = make(".gpudrain.4243.7654321.new", Some(old), false);
    let young = make(".gpuqueue.4244.2345678.new", None, false);
    let full = make(".gpuqueue.4245.3456789.new", Some(old), true);
    let other = make(".gpuqueuex.4246.1.new", Some(old), false);
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).arg("./pkg/gpu_test");
    let r = queued(&f, &mut c);
    drop(held);
    r.wait().assert_success();
    assert!(!queue_left.exists(), "a killed maker's temporary gpuqueue/ stays");
    assert!(young.exists() && full.exists() && other.exists(), "a young, a full or another name's directory went");
    assert!(drain_left.exists(), "gpudrain/'s leftovers are its makers' to remove");
    on(&mut f.cmd(), 1, 1).args(["--drain=0", "--reason=fan"]).run().assert_success();
    assert!(!drain_left.exists(), "a killed maker's temporary gpudrain/ stays");
    assert!(young.exists() && full.exists());
}

/// A lock directory replaced every 50 ms by a new one whose one slot is
/// already taken (swapped in whole with `RENAME_EXCHANGE`, the old one then
/// removed: a cleaner racing a busy host), so that the slot is never free:
/// a waiter that starts over in each new one still ends at its `--wait`.
#[test]
fn a_waiter_starting_over_again_and_again_keeps_its_wait() {
    let f = Fixture::new("faults-restarts");
    let dir = f.lock_dir.clone();
    let next = f.dir.join("next-locks");
    std::fs::create_dir_all(&dir).unwrap();
    let mut held = hold_lock(f.lock("0", 0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                std::fs::create_dir(&next).unwrap();
                let taken = hold_lock(next.join("gpulock0_0"));
                let (a, b) = (c(&next), c(&dir));
                // SAFETY: two NUL-terminated paths; renameat2 reads them only.
                let swapped = unsafe {
                    libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE)
                };
                assert_eq!(swapped, 0, "renameat2: {}", std::io::Error::last_os_error());
                // The old one, now at `next`: the waiter may still add to it.
                assert!(test_support::remove_tree_as_a_cleaner(&next), "the old lock directory could not be removed");
                held = taken;
            }
            drop(held);
        })
    };
    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=1", "./pkg/gpu_test"]).timeout(Duration::from_secs(20));
    let started = Instant::now();
    let out = c.run();
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    out.assert_code(1);
    assert!(took < Duration::from_secs(3), "--wait=1 ended after {took:?}\n{}", out.explain());
    assert!(!out.stdout.contains("argc="), "the test ran on a busy slot\n{}", out.explain());
}

/// Runs `f` with the lock directory immutable (`chattr +i`: root may not
/// make a file in it either), made mutable again after it.
fn immutable<T>(f: &Fixture, run: impl FnOnce() -> T) -> Option<T> {
    let set = |flag: &str| Cmd::new("chattr").arg(flag).arg(&f.lock_dir).run().code() == 0;
    if !test_support::prerequisite(set("+i"), "chattr +i on the lock directory's file system", "root refused") {
        return None;
    }
    let out = run();
    assert!(set("-i"), "chattr -i failed");
    Some(out)
}

/// What root cannot write, no user can: the repair root is told is the
/// lock directory's own (an immutable one, a file system without Unix
/// modes), not a `chmod` root would run in vain, nor advice to run as
/// another user; a read-only file system is named as such. A build without
/// the change told `--drain` to run as a user who may, and a waiter that
/// root runs `mkdir ... && chmod 1777 gpuqueue`.
#[test]
fn what_root_may_not_write_is_said_as_the_directorys_fault() {
    if !root("an immutable lock directory") {
        return;
    }
    let f = Fixture::new("root-refused");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    write_file(f.lock("0", 0), "");
    let held = hold_lock(f.lock("0", 0));
    let Some((drain, waiter)) = immutable(&f, || {
        let mut c = f.cmd();
        let drain = on(&mut c, 1, 1).args(["--drain=0", "--reason=x"]).run();
        let mut c = f.cmd();
        on(&mut c, 1, 1).args(["--wait=1", "./pkg/gpu_test"]);
        (drain, c.run())
    }) else {
        return;
    };
    drop(held);
    let repair =
        "give a lock directory root may write: not immutable (lsattr -d), on a local file system with Unix modes";
    drain.assert_code(2).assert_one_error_line(&format!("(root is refused too: {repair}"));
    let said = format!(
        "(root is refused too: Operation not permitted (os error 1)): waiting without a place in the queue, so later tests may be served first; to repair, {repair}"
    );
    assert!(waiter.code() == 1 && waiter.stderr.contains(&said), "{}", waiter.explain());
    // A read-only file system, by a read-only bind mount of its own.
    let script = "mount --bind -o ro \"$0\" \"$0\" && exec \"$@\"";
    let dir = f.lock_dir.display().to_string();
    let mut c = f.cmd_under("unshare", ["-m", "sh", "-c", script, &dir]);
    let out = on(&mut c, 1, 1).args(["--drain=0", "--reason=x"]).run();
    out.assert_code(2).assert_one_error_line(
        "Read-only file system (os error 30) (its file system is read-only: mount it read-write)",
    );
}

/// The lock directory made unsearchable (`chmod 000`, by its owner or an
/// operator) while another user's test waits: the waiter ends with the one
/// line it would give at the start, naming the directory's mode and the
/// repair, not one line for each file it then fails to reach (`gpuqueue/`,
/// `gpudrain/`, the lock file), each with a repair that does not help.
#[test]
fn a_lock_directory_made_unsearchable_during_a_wait_is_said_as_at_the_start() {
    if !root("another user's wait") {
        return;
    }
    let f = common::shared_fixture("faults-unsearchable");
    f.make_lock_dir_shared();
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=20", "./pkg/gpu_test"]).as_user(NOBODY, NOBODY);
    let r = queued(&f, &mut c);
    set_mode(&f.lock_dir, 0o000);
    let out = r.wait();
    set_mode(&f.lock_dir, 0o1777);
    drop(held);
    let what = out.explain();
    out.assert_code(2);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !l.contains(": waiting for 1 GPU(s) for ")).collect();
    assert_eq!(lines.len(), 1, "one line after the waiting line\n{what}");
    let dir = f.lock_dir.display();
    let said =
        format!("lock directory {dir}: cannot open it: Permission denied (os error 13) ({dir} is uid 0's, mode 0000");
    assert!(lines[0].starts_with(&format!("parallel_gpu_execute: {said}")), "{what}");
    assert!(lines[0].ends_with(&format!("its owner or root runs chmod 1777 {dir})")), "{what}");
}

/// `--list` (the check a CI job prints first) says of a lock directory
/// that every test would fail in what each test would say, in the text and
/// as `lock_dir_state: unusable`: a regular file, a path through a file,
/// and, to another user, a missing one under root's 0555 directory. It
/// once called the first `exists` and the others `missing (the first test
/// creates it)`. Nothing is made.
#[test]
fn list_says_the_error_every_test_would_meet_in_an_unusable_lock_directory() {
    let f = common::shared_fixture("faults-list-unusable");
    let file = f.dir.join("afile");
    write_file(&file, "");
    let readonly = f.dir.join("readonly");
    std::fs::create_dir_all(&readonly).unwrap();
    set_mode(&readonly, 0o555);
    let mut cases = vec![(file.clone(), None), (file.join("locks"), None)];
    if test_support::is_root() {
        cases.push((readonly.join("locks"), Some(NOBODY)));
    }
    for (dir, user) in cases {
        let run = |args: &[&str]| {
            let mut c = f.cmd();
            on(&mut c, 1, 1).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &dir).args(args);
            if let Some(uid) = user {
                c.as_user(uid, uid);
            }
            c.run()
        };
        let (test, text, json) = (run(&["./pkg/gpu_test"]), run(&["--list"]), run(&["--list=json"]));
        let what = format!("{}\n{}\n{}", test.explain(), text.explain(), json.explain());
        test.assert_code(2);
        let said = test.stderr.trim_end().strip_prefix("parallel_gpu_execute: ").unwrap_or_else(|| panic!("{what}"));
        let line = format!("lock dir: {} ({said}: every test exits 2)\n", dir.display());
        assert!(text.status.success() && text.stdout.contains(&line), "{what}");
        assert!(json.stdout.contains("\"lock_dir_state\": \"unusable\""), "{what}");
        assert!(!readonly.join("locks").exists(), "--list made the lock directory\n{what}");
    }
}

/// A lock directory this user may read but not search (root's, mode 0744):
/// a test ends at once, exit 2, whatever its `--wait` (a build that took it
/// for a directory gone and started over looped at full speed without a
/// word), and `--list` says it is unusable, naming its mode.
#[test]
fn a_lock_directory_this_user_may_read_but_not_search_ends_a_test_at_once() {
    if !root("another user's test") {
        return;
    }
    let f = common::shared_fixture("faults-read-only-search");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    write_file(f.lock("0", 0), "");
    set_mode(&f.lock_dir, 0o744);
    for wait in ["--wait=0", "--wait=20"] {
        let mut c = f.cmd();
        on(&mut c, 1, 1).args([wait, "./pkg/gpu_test"]).as_user(NOBODY, NOBODY).timeout(Duration::from_secs(10));
        let started = Instant::now();
        let out = c.run();
        // Exit 2, where the files in it fail (the lines blame them, as
        // the release before did: what this test adds is the end).
        out.assert_code(2).assert_stderr_contains("Permission denied");
        assert!(started.elapsed() < Duration::from_secs(5), "{wait}: {:?}\n{}", started.elapsed(), out.explain());
    }
    let mut c = f.cmd();
    let list = on(&mut c, 1, 1).arg("--list=json").as_user(NOBODY, NOBODY).run();
    assert!(list.stdout.contains("\"lock_dir_state\": \"unusable\""), "{}", list.explain());
    let mut c = f.cmd();
    let text = on(&mut c, 1, 1).arg("--list").as_user(NOBODY, NOBODY).run();
    let said = format!("lock directory {}: cannot open it: Permission denied (os error 13) (", f.lock_dir.display());
    assert!(text.stdout.contains(&said) && text.stdout.contains("mode 0744"), "{}", text.explain());
}
