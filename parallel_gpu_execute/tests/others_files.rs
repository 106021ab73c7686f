//! What another user can do with files of their own in a shared lock
//! directory, short of holding a slot: a lease (`F_SETLEASE`) on a file
//! named like an early record, or on a lock file, and opening and closing
//! a lock file as fast as it can. None of it may hold a test up, fail it,
//! or make a waiter spin; what hides the queue (`gpuqueue/` swapped for a
//! link) is said.

mod common;

use common::{Fixture, on, root, shared_fixture};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use test_support::{Cmd, Output, Running, compile_c, hold_lock, wait_until, write_file};

/// Holds a lease (`r`: a read lease, `w`: a write lease) on each file named
/// after the first argument (made, owned by its user, where missing),
/// taking it again each 100 ms, for a minute at most: while a write lease is held or breaking,
/// every other process's `O_NONBLOCK` open of the file fails with EAGAIN;
/// a read lease fails opens for writing alone.
const LEASE_HOLDER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int fd[16], n = argc - 2, type = argv[1][0] == 'r' ? F_RDLCK : F_WRLCK;
  signal(SIGIO, SIG_IGN);
  for (int i = 0; i < n && i < 16; i++) {
    fd[i] = open(argv[i + 2], type == F_RDLCK ? O_RDONLY | O_CREAT : O_RDWR | O_CREAT, 0644);
    if (fd[i] < 0 || fcntl(fd[i], F_SETLEASE, type)) { perror(argv[i + 2]); return 1; }
  }
  printf("leased\n");
  fflush(stdout);
  for (int round = 0; round < 600; round++) {
    usleep(100000);
    for (int i = 0; i < n && i < 16; i++) {
      fcntl(fd[i], F_SETLEASE, F_UNLCK);
      fcntl(fd[i], F_SETLEASE, type);
    }
  }
  return 0;
}
"#;

/// Opens and closes a file read-only, as fast as it can, for a second
/// argument's seconds.
const OPENER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  time_t end = time(0) + atoi(argv[2]);
  while (time(0) < end) {
    int fd = open(argv[1], O_RDONLY);
    if (fd >= 0) close(fd);
  }
  return 0;
}
"#;

/// Takes a lease on `argv[2]` (`argv[1]`: `r` read, `w` write), made
/// where missing, then starts its break itself with an open for writing,
/// as any writer's open does (a wrapper's too), and never lets it go.
const BREAKER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int w = argv[1][0] == 'w';
  signal(SIGIO, SIG_IGN);
  int fd = open(argv[2], (w ? O_RDWR : O_RDONLY) | O_CREAT, 0644);
  if (fd < 0 || fcntl(fd, F_SETLEASE, w ? F_WRLCK : F_RDLCK)) { perror(argv[2]); return 1; }
  if (open(argv[2], O_RDWR | O_NONBLOCK) >= 0) { fprintf(stderr, "no break\n"); return 1; }
  sleep(60);
  return 0;
}
"#;

/// Makes and removes the file `argv[1]` as fast as it can for `argv[2]`
/// seconds, as programs do with their own files in `/var/lock`.
const CHURNER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  time_t end = time(0) + atoi(argv[2]);
  while (time(0) < end) {
    int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
    unlink(argv[1]);
  }
  return 0;
}
"#;

/// A C helper built into the fixture, executable by every user.
fn helper(f: &Fixture, name: &str, source: &str) -> PathBuf {
    let (c, out) = (f.dir.join(format!("{name}.c")), f.dir.join(name));
    write_file(&c, source);
    compile_c(&["-O1"], &c, &out);
    out
}

/// Runs `program ARGS` as the user nobody, its stdout piped.
fn as_nobody(program: &Path, args: &[&Path]) -> Helper {
    let mut c = Cmd::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(program).args(args);
    Helper(Some(c.timeout(Duration::from_secs(60)).spawn()))
}

/// A helper process, killed when dropped (a failed assertion included).
struct Helper(Option<Running>);

impl Helper {
    fn pid(&self) -> i32 {
        self.0.as_ref().map_or(0, Running::pid)
    }

    fn has_exited(&mut self) -> bool {
        self.0.as_mut().is_none_or(Running::has_exited)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            stop(r);
        }
    }
}

/// Kills a helper that still runs (one that has ended, and been reaped by
/// [`Helper::has_exited`], has no pid left to signal) and reads its output.
fn stop(mut r: Running) -> Output {
    if !r.has_exited() {
        r.signal(libc::SIGKILL);
    }
    r.wait()
}

/// Ends a helper and returns what it said.
fn end(mut helper: Helper) -> String {
    stop(helper.0.take().expect("a helper ends once")).explain()
}

/// Starts nobody's lease holder on `files` (`kind`: `r` or `w`) and
/// returns once it holds them.
fn leases(f: &Fixture, kind: &str, files: &[&Path]) -> Helper {
    let args: Vec<&Path> = [Path::new(kind)].into_iter().chain(files.iter().copied()).collect();
    let mut holder = as_nobody(&helper(f, "lease", LEASE_HOLDER), &args);
    // Each file nobody's, with a lease on its inode in /proc/locks.
    let leased = |p: &&Path| {
        let Ok(m) = std::fs::metadata(p) else { return false };
        let inode = format!(":{} ", std::os::unix::fs::MetadataExt::ino(&m));
        let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
        std::os::unix::fs::MetadataExt::uid(&m) == 65534
            && locks.lines().any(|l| l.contains(" LEASE ") && l.contains(&inode))
    };
    let held = wait_until(Duration::from_secs(10), || holder.has_exited() || files.iter().all(leased));
    assert!(
        held && !holder.has_exited(),
        "the leases were never taken
{}",
        end(holder)
    );
    holder
}

/// An empty file named like the earliest possible record, in a
/// `gpuqueue/` another user made, leased by that user: nobody can open it,
/// yet it is no waiter. A free slot is taken at once, by an arrival and by
/// a waiter that queued before the file came; `--status` and the waiter
/// agree that nobody waits.
#[test]
fn a_leased_file_named_like_a_record_holds_nobody_up() {
    if !root("another user's lease") {
        return;
    }
    let f = shared_fixture("others-lease-record");
    f.make_lock_dir_shared();
    let queue = f.lock_dir.join("gpuqueue");
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(30));
    let waiter = f.spawn_queued(&c);
    let fakes = [queue.join("0000000000000000.1"), queue.join("0000000000000001.1")];
    let holder = leases(&f, "w", &[&fakes[0], &fakes[1]]);
    // Reading it now fails with EAGAIN (the open breaks the lease).
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fakes[0])
        .map_err(|e| e.raw_os_error());
    drop(held);
    let released = std::time::SystemTime::now();
    let out = waiter.wait();
    let took = common::Record::of(&out).started_after(released);
    out.assert_success();
    assert_eq!(opened.err(), Some(Some(libc::EAGAIN)), "the lease did not keep the file from being opened");
    assert!(
        took < Duration::from_millis(2500),
        "the waiter took the slot {took:?} after its release\n{}",
        out.explain()
    );

    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=3", "./pkg/gpu_test"]);
    let started = std::time::SystemTime::now();
    let out = c.run();
    end(holder);
    out.assert_success();
    let took = common::Record::of(&out).started_after(started);
    assert!(took < Duration::from_secs(1), "a free slot took {took:?}\n{}", out.explain());
    assert!(!out.stderr.contains("waiting for"), "it waited on a free slot\n{}", out.explain());
}

/// A lock file another user made (as any user of a shared host does by
/// running a test) and holds a lease on: nobody can open it. It is busy, as
/// one whose `flock` that user held would be: a test takes another GPU,
/// or waits, and never fails for it.
#[test]
fn a_leased_lock_file_is_busy_not_an_error() {
    if !root("another user's lease") {
        return;
    }
    let f = shared_fixture("others-lease-lock");
    f.make_lock_dir_shared();
    let leased = f.lock("1", 0);
    let holder = leases(&f, "w", &[&leased]);
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 2, 1).args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(30));
    let waiter = f.spawn_queued(&c);
    // `--status` shows the leased slot held, by the lease's holder (asked
    // again if it came in the microseconds the holder takes it again).
    let holder_shown = format!("\"held\": true, \"holders\": [{{\"pid\": {}, ", holder.pid());
    let mut status = common::status(&f, 2, 1, "json");
    for _ in 0..3 {
        if common::slot_json(&status, &leased).contains(&holder_shown) {
            break;
        }
        status = common::status(&f, 2, 1, "json");
    }
    drop(held);
    let out = waiter.wait();
    end(holder);
    let shown = common::slot_json(&status, &leased).contains(&holder_shown);
    assert!(shown, "the leased slot is not shown held\n{}", status.explain());
    let record = common::Record::of(out.assert_success());
    assert_eq!(record.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert!(out.stderr.contains("waiting for 1 GPU(s)"), "{}", out.explain());
}

/// Under another user's read lease, which fails opens for writing alone, a
/// lock file is opened read-only and its free slot taken at once.
#[test]
fn a_lock_file_under_a_read_lease_is_taken() {
    if !root("another user's lease") {
        return;
    }
    let f = shared_fixture("others-read-lease");
    f.make_lock_dir_shared();
    let holder = leases(&f, "r", &[&f.lock("0", 0)]);
    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=0", "./pkg/gpu_test"]);
    let out = c.run();
    end(holder);
    let record = common::Record::of(out.assert_success());
    assert_eq!(record.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
}

/// A waiter on GPU 0 (held by this process) while `storm` (another
/// user's process, started with the helper `source` and the lock file
/// or name its closure gives) raises events: past the burst (two seconds
/// in, two seconds measured) it wakes at most 8 times a second beside its
/// 4 beats, and still takes the slot when it is let go.
fn waits_calmly_through(label: &str, source: &str, target: impl Fn(&Fixture) -> PathBuf) {
    let f = shared_fixture(label);
    f.make_lock_dir_shared();
    let busy = f.lock("0", 0);
    let held = hold_lock(&busy);
    std::fs::set_permissions(&busy, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=30", "./pkg/gpu_test"]).timeout(Duration::from_secs(40));
    let waiter = f.spawn_queued(&c);
    assert!(test_support::begins_to_wait(waiter.pid()), "it never watched\n{}", c.describe());
    let program = helper(&f, "storm", source);
    let mut storm = as_nobody(&program, &[&target(&f), Path::new("6")]);
    std::thread::sleep(Duration::from_secs(2));
    let (woke, spent) = (test_support::voluntary_switches(waiter.pid()), test_support::cpu_time(waiter.pid()));
    std::thread::sleep(Duration::from_secs(2));
    let woke = test_support::voluntary_switches(waiter.pid()) - woke;
    let spent = test_support::cpu_time(waiter.pid()) - spent;
    let storming = !storm.has_exited();
    drop(held);
    let released = std::time::SystemTime::now();
    let out = waiter.wait();
    let took = common::Record::of(&out).started_after(released);
    let said = end(storm);
    out.assert_success();
    assert!(storming, "the other user's process ended early\n{said}");
    // 2 s at 8 wakes and 4 beats a second, with room for the scheduler.
    assert!(woke <= 40, "{woke} wake-ups in 2 s of another user's events\n{}", out.explain());
    assert!(spent < Duration::from_millis(300), "{spent:?} of CPU in 2 s\n{}", out.explain());
    assert!(took < Duration::from_secs(1), "the slot was taken {took:?} after its release\n{}", out.explain());
}

/// Another user opens and closes a busy lock file, read-only, as fast as
/// it can: each close raises the event a release does. A waiter that may
/// take that file looks at most [`LOOK_BURST`] times at once, then 8 times a
/// second beside its 4 beats, however many closes come, and still takes
/// the slot when it is let go.
#[test]
fn another_users_opens_and_closes_of_a_lock_file_do_not_make_a_waiter_spin() {
    if root("another user's opens") {
        waits_calmly_through("others-close-storm", OPENER, |f| f.lock("0", 0));
    }
}

/// Another user makes and removes a file of its own in the lock directory
/// as fast as it can (`LCK..ttyS0`, as serial-port programs do in
/// `/var/lock`). A waiter sees the events (the directory is watched for
/// lock files made), but they wake it at most [`LOOK_BURST`] times at
/// once, then 8 times a second beside its 4 beats; it still takes the
/// slot when it is let go.
#[test]
fn another_users_files_made_and_removed_in_the_lock_directory_do_not_make_a_waiter_spin() {
    if root("another user's files") {
        waits_calmly_through("others-churn", CHURNER, |f| f.lock_dir.join("LCK..ttyS0"));
    }
}

/// A `gpuqueue/` of another user's that this user may add to but not list
/// (mode 1733): the waiter waits without a place, and its warning says
/// what it may not do.
#[test]
fn a_queue_directory_this_user_may_not_list_is_named_so() {
    if !root("another user's gpuqueue/") {
        return;
    }
    let f = shared_fixture("others-unlistable");
    f.make_lock_dir_shared();
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir(&queue).unwrap();
    std::fs::set_permissions(&queue, std::os::unix::fs::PermissionsExt::from_mode(0o1733)).unwrap();
    write_file(f.lock("0", 0), "");
    std::fs::set_permissions(f.lock("0", 0), std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    let out = on(&mut c, 1, 1).as_user(common::NOBODY, common::NOBODY).args(["--wait=0.5", "./pkg/gpu_test"]).run();
    out.assert_code(1);
    assert!(out.stderr.contains("(this user may not list it: "), "{}", out.explain());
    assert!(!out.stderr.contains("may not add to it"), "{}", out.explain());
}

/// `gpuqueue/` swapped for a symbolic link to itself (its owner's
/// `renameat2(RENAME_EXCHANGE)`: no moment without it) hides every record
/// from readers, who do not follow a link there. A waiter whose record it
/// hid notices at its next beat, and says so, with the repair, instead
/// of counting itself in place; it is still served. `--status` says what
/// is at `gpuqueue`.
#[test]
fn a_queue_directory_swapped_for_a_link_is_said_by_the_waiters_it_hides() {
    use std::ffi::CString;
    let f = Fixture::new("others-queue-link");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).args(["--wait=10", "./pkg/gpu_test"]).timeout(Duration::from_secs(30));
    let waiter = f.spawn_queued(&c);
    let (queue, moved) = (f.lock_dir.join("gpuqueue"), f.lock_dir.join("gpuqueue.moved"));
    std::os::unix::fs::symlink("gpuqueue.moved", &moved).unwrap();
    let path = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let (a, b) = (path(&queue), path(&moved));
    // SAFETY: renameat2 with two NUL-terminated paths relative to the cwd.
    let swapped =
        unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    assert_eq!(swapped, 0, "renameat2: {}", std::io::Error::last_os_error());
    assert!(std::fs::symlink_metadata(&queue).unwrap().file_type().is_symlink());
    // `--status` says what is there, not the link's mode.
    let d = f.lock_dir.display();
    let text = common::status(&f, 1, 1, "text");
    let note = format!(
        "note: {d}/gpuqueue is a symbolic link, not a directory: every waiter waits without a place in the queue, so later tests may be served first; its owner or root runs: rm -f {d}/gpuqueue\n"
    );
    assert!(text.stdout.contains(&note), "{}", text.explain());
    assert!(!text.stdout.contains("no sticky bit"), "{}", text.explain());
    let json = common::status(&f, 1, 1, "json");
    assert!(json.stdout.contains("\"queue_not_a_directory\": \"symbolic link\""), "{}", json.explain());
    std::thread::sleep(Duration::from_millis(800));
    drop(held);
    let out = waiter.wait();
    out.assert_success();
    let q = queue.display();
    assert!(
        out.stderr.contains(&format!("warning: {q} is not a directory: waiting without a place in the queue, so later tests may be served first; to repair, its owner or root runs: rm -f {q}")),
        "{}",
        out.explain()
    );
}

/// The owner of `gpuqueue/` (any user who made it first) puts a file of
/// its own at a waiter's record name in place of the record, which the
/// waiter may not replace in the sticky directory. The waiter makes its
/// record again under another name with its ticket, and keeps its place:
/// a later test is not served first, and it waits with a place.
#[test]
fn a_file_put_at_a_waiters_record_name_does_not_take_its_place() {
    if !root("another user's gpuqueue/") {
        return;
    }
    let f = shared_fixture("others-record-name");
    f.make_lock_dir_shared();
    let queue = f.lock_dir.join("gpuqueue");
    let mut c = Cmd::new("sh");
    c.args(["-c", "mkdir \"$0\" && chmod 1777 \"$0\""]).arg(&queue).as_user(common::NOBODY, common::NOBODY);
    c.run().assert_success();
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    std::fs::set_permissions(&ran, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let waiter = |uid: u32, name: &str| {
        let mut c = f.cmd();
        on(&mut c, 1, 1).env("RECORD_FILE", ran.join(name)).as_user(uid, uid);
        c.args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(30));
        c
    };
    let early = f.spawn_queued(&waiter(12345, "early"));
    let name = std::fs::read_dir(&queue)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .find(|n| !n.to_string_lossy().starts_with('.'));
    let record = queue.join(name.expect("no record"));
    // One rename, so that the waiter's next beat cannot make its record
    // again at that name between a removal and a create (the create then
    // fails: `fs.protected_regular` keeps the owner of a sticky directory
    // from opening another user's file there with O_CREAT).
    let mut c = Cmd::new("sh");
    c.args(["-c", "p=\"${0%/*}/.planted\" && : > \"$p\" && mv -f \"$p\" \"$0\""])
        .arg(&record)
        .as_user(common::NOBODY, common::NOBODY);
    c.run().assert_success();
    // Its next beats make it again, under another name.
    assert!(
        wait_until(Duration::from_secs(3), || std::fs::read_dir(&queue).unwrap().count() >= 2),
        "the record was not made again"
    );
    let late = f.spawn_queued(&waiter(12346, "late"));
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    let (early, late) = (early.wait(), late.wait());
    early.assert_success();
    late.assert_success();
    let start =
        |name: &str| common::Record::read(&ran.join(name)).get("start").unwrap_or_default().parse::<u64>().unwrap();
    assert!(start("early") < start("late"), "the later test was served first\n{}\n{}", early.explain(), late.explain());
    assert!(!early.stderr.contains("without a place"), "{}", early.explain());
}

/// Another user's FIFO at a lock path beside a busy slot is skipped in one
/// warning line, and the waiter waits for the busy slot without spinning
/// (it does not open the FIFO again: each close would wake it), then takes
/// it. A build that refused it failed at once (exit 2). Another user's
/// hard link to the busy lock file, under a name of its own, is nothing:
/// the waiter waits, unsaid, and takes the slot.
#[test]
fn a_fifo_beside_a_busy_slot_or_a_link_to_it_is_waited_past_calmly() {
    if !root("another user's FIFO and hard link") {
        return;
    }
    for (label, planted, slots, what) in [
        ("others-fifo", "mkfifo \"$0/gpulock0_1\"", 2, Some("a FIFO, not a regular file")),
        ("others-link", "ln \"$0/gpulock0_0\" \"$0/x\"", 1, None),
    ] {
        let f = shared_fixture(label);
        f.make_lock_dir_shared();
        let held = hold_lock(f.lock("0", 0));
        // As the wrapper makes it (0666 less the umask 0000 of a shared host).
        std::fs::set_permissions(f.lock("0", 0), std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        let made = Cmd::new("sh").args(["-c", planted]).arg(&f.lock_dir).as_user(common::NOBODY, common::NOBODY).run();
        made.assert_success();
        let mut c = f.cmd();
        on(&mut c, 1, slots).args(["--wait=30", "./pkg/gpu_test"]).timeout(Duration::from_secs(40));
        let waiter = f.spawn_queued(&c);
        assert!(test_support::begins_to_wait(waiter.pid()), "it never watched\n{}", c.describe());
        std::thread::sleep(Duration::from_millis(500));
        let woke = test_support::voluntary_switches(waiter.pid());
        std::thread::sleep(Duration::from_secs(2));
        let woke = test_support::voluntary_switches(waiter.pid()) - woke;
        drop(held);
        let out = waiter.wait();
        let r = common::Record::of(out.assert_success());
        assert_eq!(r.locks(), ["gpulock0_0"], "{}", out.explain());
        match what {
            Some(what) => {
                let warning = format!("warning: refusing lock path {}: it is {what}", f.lock("0", 1).display());
                assert_eq!(out.stderr.matches(&warning).count(), 1, "{}", out.explain());
            }
            None => assert!(!out.stderr.contains("warning"), "{}", out.explain()),
        }
        // 2 s at 4 beats a second, with room for the scheduler.
        assert!(woke <= 16, "{woke} wake-ups in 2 s ({label})\n{}", out.explain());
    }
}

/// `--status` says what every test skips, never that it is free: another
/// user's FIFO at GPU 0's lock path, and a symbolic link at GPU 1's, in
/// text (`skipped`), JSON (`"skipped"`) and metrics (`state="skipped"`). A
/// build without the change showed both free.
#[test]
fn status_says_a_lock_path_every_test_skips() {
    if !root("another user's FIFO and symbolic link") {
        return;
    }
    let f = shared_fixture("others-status-skipped");
    f.make_lock_dir_shared();
    let plant = "mkfifo \"$0/gpulock0_0\" && ln -s /etc/passwd \"$0/gpulock1_0\"";
    let made = Cmd::new("sh").args(["-c", plant]).arg(&f.lock_dir).as_user(common::NOBODY, common::NOBODY).run();
    made.assert_success();
    let text = common::status(&f, 3, 1, "text");
    text.assert_stdout_contains("3 slot(s), 0 held, 0 waiting");
    for (gpu, kind) in [("0", "FIFO"), ("1", "symbolic link")] {
        let row = text.stdout.lines().find(|l| l.starts_with(&format!("xla      {gpu} "))).unwrap_or_default();
        assert!(row.ends_with(&format!("skipped (a {kind}: no test takes it)")), "{row}\n{}", text.explain());
    }
    let json = common::status(&f, 3, 1, "json");
    json.assert_stdout_contains("\"configured\": true, \"skipped\": \"FIFO\"}");
    json.assert_stdout_contains("\"configured\": true, \"skipped\": \"symbolic link\"}");
    let metrics = common::status(&f, 3, 1, "openmetrics");
    let dir = f.lock_dir.display();
    for (gpu, free, skipped) in [("0", 0, 1), ("1", 0, 1), ("2", 1, 0)] {
        for (state, n) in [("free", free), ("skipped", skipped)] {
            metrics.assert_stdout_contains(&format!(
                "parallel_gpu_execute_slots{{lock_dir=\"{dir}\",profile=\"xla\",gpu=\"{gpu}\",state=\"{state}\"}} {n}\n"
            ));
        }
    }
}

/// A read lease being broken (here by its holder's own open for writing,
/// as a wrapper's open starts it too) lets every open for reading in, a
/// wrapper's as well, which then takes the slot: `--status` shows the slot
/// free. A write lease being broken keeps every open out, and stays the
/// slot's holder. `/proc/locks` lists both as `LEASE BREAKING UNLCK`; a
/// build without the change showed the first held as well.
#[test]
fn a_read_lease_being_broken_holds_no_slot() {
    if !root("another user's lease") {
        return;
    }
    let f = shared_fixture("others-lease-breaking");
    f.make_lock_dir_shared();
    let file = f.lock("0", 0);
    for (kind, held) in [("r", false), ("w", true)] {
        let _ = std::fs::remove_file(&file);
        let mut breaker = as_nobody(&helper(&f, "breaker", BREAKER), &[Path::new(kind), &file]);
        let breaking = wait_until(Duration::from_secs(10), || {
            let Ok(m) = std::fs::metadata(&file) else { return false };
            let inode = format!(":{} ", std::os::unix::fs::MetadataExt::ino(&m));
            let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
            breaker.has_exited() || locks.lines().any(|l| l.contains("LEASE  BREAKING") && l.contains(&inode))
        });
        assert!(breaking && !breaker.has_exited(), "no lease being broken\n{}", end(breaker));
        let status = common::status(&f, 1, 1, "json");
        let slot = common::slot_json(&status, &file).to_string();
        assert_eq!(slot.contains("\"held\": true"), held, "{kind}: {slot}\n{}", status.explain());
        let mut c = f.cmd();
        let out = on(&mut c, 1, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
        assert_eq!(out.code() == 0, !held, "{kind}\n{}", out.explain());
        end(breaker);
    }
}
