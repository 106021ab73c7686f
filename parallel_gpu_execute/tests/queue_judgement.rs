//! A waiter's record names only the lock files it can take, however it came
//! to be unable to take one, and a take is judged against the queue as it
//! stands once its locks are held. Each case was found by a review that
//! compared the code with its model (docs/design.md, "The wait queue"):
//! a waiter beyond its descriptor budget, one whose kept lock file was
//! replaced by a file it may not open, a lock file missing in a directory
//! the waiter may not write, a record that cannot be made again on a full
//! file system, and an arrival whose look at the queue was older than its
//! lock. In each, the user who can take the lock file was held up behind a
//! waiter that never would, or a later test overtook a waiter that ran.

mod common;

use common::{Fixture, NOBODY, Record, held_by_strace, on, root, started, strace_runs};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use test_support::{Cmd, Freezer, hold_lock, wait_until};

/// A user other than root and nobody, who owns a lock file or the lock
/// directory in these cases (no account is needed: `setpriv` takes ids).
const OWNER: u32 = 1000;

/// The `files` lines of the records in `gpuqueue/`.
fn files_lines(f: &Fixture) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(f.lock_dir.join("gpuqueue")) else { return Vec::new() };
    dir.flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .map(|content| String::from_utf8_lossy(content.get(32..).unwrap_or_default()).into_owned())
        .filter_map(|text| text.lines().find_map(|l| l.strip_prefix("files ")).map(str::to_string))
        .collect()
}

/// Waits until the one record in the queue names `files` exactly.
#[track_caller]
fn record_names(f: &Fixture, files: &str) {
    let seen = wait_until(Duration::from_secs(5), || files_lines(f) == [files]);
    assert!(seen, "the record should name '{files}': {:?}", files_lines(f));
}

/// Makes `gpulock<gpu>_0` as `OWNER` under umask 077: mode 0600, a file
/// nobody else may open.
fn make_private(f: &Fixture, gpu: &str) {
    make_private_at(&f.lock(gpu, 0));
}

/// Makes the file `path` as `OWNER` under umask 077.
fn make_private_at(path: &std::path::Path) {
    let made = std::process::Command::new("setpriv")
        .args([&format!("--reuid={OWNER}"), &format!("--regid={OWNER}"), "--clear-groups", "sh", "-c"])
        .arg(format!("umask 077; : > '{}'", path.display()))
        .status()
        .unwrap();
    assert!(made.success(), "could not make {} as uid {OWNER}", path.display());
}

/// A 1-GPU test of `OWNER` (umask 077) on `gpus` GPUs, which takes GPU 2
/// at once.
#[track_caller]
fn owner_takes_gpu_2(f: &Fixture, gpus: u32, what: &str) {
    let mut c = f.cmd_under("sh", ["-c", "umask 077; exec \"$@\"", "sh"]);
    on(&mut c, gpus, 1).as_user(OWNER, OWNER).args(["--wait=3", "./pkg/gpu_test"]);
    let out = c.run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock2_0"], "{what}\n{}", out.explain());
    assert!(out.elapsed < Duration::from_secs(2), "{what}: it waited\n{}", out.explain());
}

/// A 2-GPU waiter of nobody on `gpus` GPUs: started through `sh` with
/// the soft open-files limit `limit`.
fn nobody_waits_for_two(f: &Fixture, gpus: u32, limit: u32) -> test_support::Running {
    let mut c = f.cmd_under("sh", ["-c", &format!("ulimit -S -n {limit}; exec \"$@\""), "sh"]);
    on(&mut c, gpus, 1).as_user(NOBODY, NOBODY).args(["--wait=20", "./pkg/gpu_test", "--num_processes=2"]);
    f.spawn_queued(c.timeout(Duration::from_secs(60)))
}

/// Three GPUs; GPUs 0 and 1 held; a shared lock directory.
fn three_gpus_two_held(label: &str) -> (Fixture, [test_support::HeldLock; 2]) {
    let f = common::shared_fixture(label);
    f.make_lock_dir_shared();
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    for gpu in ["0", "1"] {
        std::fs::set_permissions(f.lock(gpu, 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    (f, held)
}

/// Beyond its descriptor budget (a soft limit of 60 open files leaves it
/// none to keep lock files open with), a waiter judges every lock file of
/// its pool all the same: one it may not open, behind its busy GPUs, is
/// not in its record, and the file's owner takes it at once. A build
/// without the change named it, and that test waited out its limit.
#[test]
fn a_waiter_beyond_its_descriptor_budget_names_no_file_it_may_not_open() {
    if !root("lock files of other users") {
        return;
    }
    let (f, held) = three_gpus_two_held("judgement-budget");
    make_private(&f, "2");
    let waiter = nobody_waits_for_two(&f, 3, 60);
    record_names(&f, "gpulock0_0 gpulock1_0");
    owner_takes_gpu_2(&f, 3, "a file the waiter may not open");
    drop(held);
    let out = waiter.wait();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
}

/// A lock file the waiter keeps open (four GPUs, 1 and 3 busy: its scans
/// try 0 and 2, find their blocks busy and keep their descriptors) is
/// removed (a cleaner) and made again by another user under umask 077:
/// the waiter sees the directory change, judges the new file, and leaves
/// it out of its record, so the file's owner takes it at once. A build
/// without the change went by its descriptor of the old file.
#[test]
fn a_kept_lock_file_replaced_by_one_the_waiter_may_not_open_leaves_its_record() {
    if !root("lock files of other users") {
        return;
    }
    let f = common::shared_fixture("judgement-replaced");
    f.make_lock_dir_shared();
    let held = [hold_lock(f.lock("1", 0)), hold_lock(f.lock("3", 0))];
    for gpu in ["0", "1", "2", "3"] {
        test_support::write_file(f.lock(gpu, 0), "");
        std::fs::set_permissions(f.lock(gpu, 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let waiter = nobody_waits_for_two(&f, 4, 1024);
    record_names(&f, "gpulock0_0 gpulock1_0 gpulock2_0 gpulock3_0");
    std::fs::remove_file(f.lock("2", 0)).unwrap();
    make_private(&f, "2");
    record_names(&f, "gpulock0_0 gpulock1_0");
    owner_takes_gpu_2(&f, 4, "a file replaced under the waiter's descriptor");
    drop(held);
    let out = waiter.wait();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
}

/// A lock file missing in a lock directory the waiter may not write (its
/// owner's, mode 0755) is one it can never make: it is left out of its
/// record, and a scan that meets it passes its block over, as it does a
/// file it may not open, instead of failing the test at once (exit 2)
/// while another block would free up.
#[test]
fn a_lock_file_the_waiter_may_not_make_is_passed_over_not_fatal() {
    if !root("a lock directory of another user") {
        return;
    }
    let f = common::shared_fixture("judgement-unmakeable");
    std::fs::create_dir_all(f.lock_dir.join("gpuqueue")).unwrap();
    std::fs::set_permissions(f.lock_dir.join("gpuqueue"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    for gpu in ["0", "1"] {
        test_support::write_file(f.lock(gpu, 0), "");
        std::fs::set_permissions(f.lock(gpu, 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let chown = std::process::Command::new("chown").arg(format!("{OWNER}:{OWNER}")).arg(&f.lock_dir).status();
    assert!(chown.unwrap().success());
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // GPU 0 busy, GPU 1 free: the scan meets the missing gpulock2_0 in the
    // block {1,2}, and waits for {0,1}.
    let busy = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 3, 1).as_user(NOBODY, NOBODY).args(["--wait=20", "./pkg/gpu_test", "--num_processes=2"]);
    let waiter = f.spawn_queued(c.timeout(Duration::from_secs(60)));
    let held = hold_lock(f.lock("1", 0));
    record_names(&f, "gpulock0_0 gpulock1_0");
    owner_takes_gpu_2(&f, 3, "a file the waiter may not make");
    drop((busy, held));
    let out = waiter.wait();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0", "gpulock1_0"], "{}", out.explain());
    let said = format!("warning: cannot create lock file {}: Permission denied", f.lock("2", 0).display());
    assert_eq!(out.stderr.matches(&said).count(), 1, "said once\n{}", out.explain());
}

/// A record that cannot be made again (no inode left) while what its
/// waiter can take shrinks is not kept naming the lock file it can no
/// longer take: it goes, said, and the file's owner takes it at once.
#[test]
fn a_record_that_cannot_shrink_on_a_full_file_system_goes() {
    if !root("a small tmpfs") {
        return;
    }
    let f = Fixture::new("judgement-full");
    let mnt = f.dir.join("small");
    let _mounted = test_support::mounts::Mounted::tmpfs(&mnt, "size=4m,nr_inodes=40,mode=1777");
    let lock_dir = mnt.join("locks");
    std::fs::create_dir_all(&lock_dir).unwrap();
    std::fs::set_permissions(&lock_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let on_tmpfs = |c: &mut Cmd| {
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir);
    };
    let held = [hold_lock(lock_dir.join("gpulock0_0")), hold_lock(lock_dir.join("gpulock1_0"))];
    for gpu in ["0", "1"] {
        let path = lock_dir.join(format!("gpulock{gpu}_0"));
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let mut c = f.cmd();
    on_tmpfs(&mut c);
    on(&mut c, 3, 1).as_user(NOBODY, NOBODY).args(["--wait=20", "./pkg/gpu_test", "--num_processes=2"]);
    let waiter = c.timeout(Duration::from_secs(60)).spawn();
    let in_queue = || std::fs::read_dir(lock_dir.join("gpuqueue")).is_ok_and(|d| d.flatten().count() == 1);
    assert!(wait_until(Duration::from_secs(5), in_queue), "the waiter never queued");
    // Every inode but one taken, which the owner's lock file then takes.
    let fill = mnt.join("fill");
    std::fs::create_dir_all(&fill).unwrap();
    let mut n = 0;
    while std::fs::write(fill.join(n.to_string()), "").is_ok() {
        n += 1;
    }
    std::fs::remove_file(fill.join("0")).unwrap();
    make_private_at(&lock_dir.join("gpulock2_0"));
    std::thread::sleep(Duration::from_millis(600));
    let mut owner = f.cmd();
    on_tmpfs(&mut owner);
    on(&mut owner, 3, 1).as_user(OWNER, OWNER).args(["--wait=3", "./pkg/gpu_test"]);
    let out = owner.run();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock2_0"], "{}", out.explain());
    drop(held);
    let out = waiter.wait();
    out.assert_success().assert_stderr_contains("warning: cannot make a record in");
}

/// The first waiter (2 GPUs) is frozen until its record is stale; a 1-GPU
/// test looks at the queue then, and passes it, as it should a waiter that
/// does not run, but is held before its `flock` (strace stands in for a
/// preempted or frozen process). The first waiter is thawed and beats
/// again, GPU 0 frees up, and the held test's `flock` takes it: it reads
/// the queue again with the lock held, leaves GPU 0 to the waiter ahead,
/// and runs after it. A build without the change ran first.
#[test]
fn a_take_older_than_its_look_leaves_the_block_to_a_waiter_that_runs_again() {
    if !root("the cgroup freezer") {
        return;
    }
    let freezer = match Freezer::new("judgement-thawed") {
        Ok(freezer) => freezer,
        Err(why) => {
            test_support::prerequisite(false, &why, "a waiter frozen and thawed");
            return;
        }
    };
    let f = Fixture::new("judgement-thawed");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    let (gpu0, gpu1) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0)));
    let mut first = f.cmd();
    on(&mut first, 2, 1).env("RECORD_FILE", ran.join("first")).env("SLEEP", "0.3");
    let first = f.spawn_queued(first.args(["--wait=30", "./pkg/gpu_test", "--num_processes=2"]));
    freezer.add(first.pid());
    freezer.freeze();
    std::thread::sleep(Duration::from_millis(1500));
    // Its second `flock` (the first is a look at the first waiter's record)
    // is the one on gpulock0_0: held 2 s.
    let mut later = held_by_strace(&f, "flock:delay_enter=2000000:when=2", None);
    on(&mut later, 2, 1).env("RECORD_FILE", ran.join("later")).args(["--wait=30", "./pkg/gpu_test"]);
    let later = later.spawn();
    std::thread::sleep(Duration::from_millis(300));
    freezer.thaw();
    std::thread::sleep(Duration::from_millis(300));
    drop(gpu0);
    std::thread::sleep(Duration::from_millis(2500));
    drop(gpu1);
    let (first, later) = (first.wait(), later.wait());
    let what = format!("{}\n{}", first.explain(), later.explain());
    first.assert_success();
    later.assert_success();
    let start = |name: &str| started(&ran.join(name));
    assert!(start("first") < start("later"), "the later test ran first\n{what}");
    // Its waiting line counts the block it left as free, not as busy.
    let line = later.stderr.lines().find(|l| l.contains("waiting for 1 GPU(s) for ")).unwrap_or_default();
    assert!(line.ends_with("/pkg/gpu_test: 1 of 2 slots busy, second in the queue"), "{what}");
}

/// An arrival held between its look at the queue and its take (strace
/// holds its `flock` on gpulock1_0 for 2 s, as a frozen or preempted
/// process would be held) while a 2-GPU test joins the queue and waits for
/// GPU 0: its look found no queue, and so no waiter, and GPU 1 is free
/// when the `flock` runs. With the lock held it reads the queue again,
/// leaves GPU 1 to the waiter and runs after it. The model found it once
/// each look and take were steps of their own (wait_model's
/// `a_take_older_than_its_look_read_again_only_after_a_stale_record_overtakes`);
/// a build that read the queue again only after a stale record ran the
/// held test first.
#[test]
fn an_arrival_held_between_its_look_and_its_take_leaves_the_block_to_a_waiter_that_came_meanwhile() {
    if !strace_runs("an arrival held between its look and its take") {
        return;
    }
    let f = Fixture::new("judgement-held");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    held_before_its_take(&f, 2000, 300, 2500, String::new);
}

/// The same on a lock directory whose file system keeps whole seconds
/// (ext4 made with 128-byte inodes, as ext3 and FAT do): the arrival's take
/// is dated by its lock file's change time, there cut to the second. The
/// 2-GPU waiter joins 0.3 s before the take, in the same second: a build
/// that took the stamp for the take counted it as later, kept GPU 1 and
/// ran first (as on a file server whose clock is behind).
#[test]
fn an_arrival_held_before_its_take_where_times_are_whole_seconds_leaves_the_block_to_a_waiter_that_came_meanwhile() {
    let what = "an arrival held before its take on ext4 with whole-second times";
    if !strace_runs(what) || !test_support::prerequisite(test_support::is_root(), "root", what) {
        return;
    }
    let mut f = Fixture::new("judgement-whole-seconds");
    let at = f.dir.join("ext4");
    let _mounted = test_support::mounts::Mounted::ext4_image(&f.dir.join("image"), "8M", &["-I", "128"], &at);
    f.lock_dir = at.join("locks");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    // Started 50 ms into a second, its take comes some 1.6 s later: 0.6 s
    // into the next second, 0.3 s after the waiter joined.
    let into = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_millis();
    std::thread::sleep(Duration::from_millis(u64::from((1050 - into()) % 1000)));
    held_before_its_take(&f, 1500, 1200, 1500, || format!("the waiter joined {} ms into its second", into()));
}

/// An arrival for GPU 1 of two, GPU 0 held, held `hold_ms` in its second
/// `flock` (on the free gpulock1_0; the first is on the busy gpulock0_0)
/// while a 2-GPU test joins the queue `join_ms` after it started; GPU 0
/// is let go `release_ms` after that. The waiter must run first. `note`,
/// called as the waiter has joined, goes with a failure.
fn held_before_its_take(f: &Fixture, hold_ms: u32, join_ms: u64, release_ms: u64, note: impl Fn() -> String) {
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    let gpu0 = hold_lock(f.lock("0", 0));
    let mut held = held_by_strace(f, &format!("flock:delay_enter={}:when=2", hold_ms * 1000), None);
    on(&mut held, 2, 1).env("RECORD_FILE", ran.join("held")).args(["--wait=30", "./pkg/gpu_test"]);
    let held = held.spawn();
    std::thread::sleep(Duration::from_millis(join_ms));
    let mut waiter = f.cmd();
    on(&mut waiter, 2, 1).env("RECORD_FILE", ran.join("waiter")).env("SLEEP", "0.3");
    let waiter = f.spawn_queued(waiter.args(["--wait=30", "./pkg/gpu_test", "--num_processes=2"]));
    let joined = note();
    std::thread::sleep(Duration::from_millis(release_ms));
    drop(gpu0);
    let (waiter, held) = (waiter.wait(), held.wait());
    let what = format!("{joined}\n{}\n{}", waiter.explain(), held.explain());
    waiter.assert_success();
    held.assert_success();
    let start = |name: &str| started(&ran.join(name));
    assert!(start("waiter") < start("held"), "the held test took GPU 1 from the waiter\n{what}");
}

/// An arrival held just after it took GPU 1 (strace holds the return of
/// its check that the lock file is still the one at its path, 0.6 s, as a
/// preempted or frozen process would be held) while a later test, finding both GPUs busy, joins
/// the queue. Its look found no queue, so it reads the queue again with the
/// lock held, but counts only the waiters that began to wait before its
/// take (the change time that `futimens` set): it keeps GPU 1 and runs,
/// `--wait=0` and all. A build that counted every record left GPU 1 to the
/// later test and failed for want of a free GPU.
#[test]
fn an_arrival_held_after_its_take_keeps_the_block_from_a_waiter_that_came_later() {
    if !strace_runs("an arrival held after its take") {
        return;
    }
    let f = Fixture::new("judgement-held-after");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    let gpu0 = hold_lock(f.lock("0", 0));
    let mut held = held_by_strace(&f, "newfstatat:delay_exit=600000:when=1", Some(&f.lock("1", 0)));
    on(&mut held, 2, 1).env("RECORD_FILE", ran.join("held")).args(["--wait=0", "./pkg/gpu_test"]);
    let held = held.spawn();
    // Taken and dated, and held in the check that follows.
    let taken = wait_until(Duration::from_secs(10), || common::traced_child_in(&held, libc::SYS_newfstatat));
    assert!(taken && !test_support::lock_is_free(f.lock("1", 0)), "the held arrival never took GPU 1");
    let mut later = f.cmd();
    on(&mut later, 2, 1).env("RECORD_FILE", ran.join("later")).args(["--wait=30", "./pkg/gpu_test"]);
    let later = later.timeout(Duration::from_secs(60)).spawn();
    let held = held.wait();
    drop(gpu0);
    let later = later.wait();
    let what = format!("{}\n{}", held.explain(), later.explain());
    held.assert_success();
    later.assert_success();
    let start = |name: &str| started(&ran.join(name));
    assert!(start("held") < start("later"), "the later test took GPU 1 from the held one\n{what}");
}

/// An arrival that leaves the block it took to an earlier waiter, then
/// takes once more, counts the waiters that joined while it held the
/// first one. The arrival (GPUs 0 and 1) passes over a stopped waiter for
/// GPU 0 (stale), takes GPU 0, and is held just after its take (strace, 4
/// s, as a freezer would hold it) while that waiter runs again and a
/// 2-GPU waiter of another pool (GPUs 1 and 2; GPU 2 busy) joins and
/// settles. Read again with the lock held, by the waiters that began
/// before its take, the queue leaves GPU 0 to the earlier one; the take
/// once more must read every record again and leave GPU 1 to the 2-GPU
/// waiter, which joined before that take. A build that took once more by
/// the same bounded reading took GPU 1 and ran first (the model found it:
/// `two_pools_with_a_frozen_participant`).
#[test]
fn a_take_once_more_after_a_block_left_counts_the_waiters_that_joined_meanwhile() {
    if !strace_runs("an arrival held after its take, taking once more") {
        return;
    }
    let f = Fixture::new("judgement-once-more");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let ran = f.dir.join("ran");
    std::fs::create_dir_all(&ran).unwrap();
    let pool = |c: &mut Cmd, visible: &str, name: &str| {
        on(c, 3, 1).env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm").env("ROCR_VISIBLE_DEVICES", visible);
        c.env("RECORD_FILE", ran.join(name)).timeout(Duration::from_secs(60));
    };
    let (gpu0, gpu2) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("2", 0)));
    let mut early = f.cmd();
    pool(&mut early, "0", "early");
    let early = f.spawn_queued(early.env("SLEEP", "3").args(["--wait=60", "./pkg/gpu_test"]));
    early.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1500));
    drop(gpu0);
    let mut arrival = held_by_strace(&f, "newfstatat:delay_exit=4000000:when=1", Some(&f.lock("0", 0)));
    pool(&mut arrival, "0,1", "arrival");
    let arrival = arrival.args(["--wait=30", "./pkg/gpu_test"]).spawn();
    // Held in the check that follows its take: GPU 0 locked, its take
    // dated (the times set right after the `flock`).
    let held = wait_until(Duration::from_secs(10), || common::traced_child_in(&arrival, libc::SYS_newfstatat));
    assert!(held && !test_support::lock_is_free(f.lock("0", 0)), "the arrival was never held with GPU 0");
    let mut multi = f.cmd();
    pool(&mut multi, "1,2", "multi");
    let multi = f.spawn_queued(multi.args(["--wait=60", "./pkg/gpu_test", "--num_processes=2"]));
    early.signal(libc::SIGCONT);
    // Served once the arrival leaves GPU 0 (a waiter's record goes as it
    // is served; the test's own record is written as it ends).
    let early_ran = wait_until(Duration::from_secs(10), || !f.waiters().contains(&early.pid()));
    std::thread::sleep(Duration::from_millis(500));
    drop(gpu2);
    let (early, arrival, multi) = (early.wait(), arrival.wait(), multi.wait());
    let what = format!("{}\n{}\n{}", early.explain(), arrival.explain(), multi.explain());
    assert!(early_ran, "the earlier waiter never got GPU 0\n{what}");
    for out in [&early, &arrival, &multi] {
        out.assert_success();
    }
    let start = |name: &str| started(&ran.join(name));
    let ran_as = |name: &str| format!("{name}: start {} on {:?}", start(name), Record::read(&ran.join(name)).locks());
    let what = format!("{what}\n{}\n{}\n{}", ran_as("early"), ran_as("arrival"), ran_as("multi"));
    assert!(start("multi") < start("arrival"), "the arrival took GPU 1 from the 2-GPU waiter\n{what}");
    assert!(start("early") < start("arrival"), "the arrival kept GPU 0 from the earlier waiter\n{what}");
}

/// An arrival with `--wait=0` whose look passed over a stopped waiter
/// (stale) takes GPU 0, the one GPU that waiter can take (GPU 1's lock
/// file is root's, mode 0600), and while it holds the lock (strace holds
/// it in its `flock`) the waiter runs again: read again, the queue leaves
/// GPU 0 to the waiter, and the arrival's next scan, by that reading,
/// takes GPU 1, which nobody else wants. A build that slept (or, with
/// `--wait=0`, failed) after leaving a block did not look at GPU 1.
#[test]
fn a_block_left_to_an_earlier_waiter_leaves_the_others_to_take() {
    if !root("another user's waiter") {
        return;
    }
    let f = common::shared_fixture("judgement-left");
    f.make_lock_dir_shared();
    test_support::write_file(f.lock("1", 0), "");
    std::fs::set_permissions(f.lock("1", 0), std::fs::Permissions::from_mode(0o600)).unwrap();
    let gpu0 = hold_lock(f.lock("0", 0));
    let mut waiter = f.cmd();
    on(&mut waiter, 2, 1).as_user(NOBODY, NOBODY).args(["--wait=30", "./pkg/gpu_test"]);
    let waiter = f.spawn_queued(waiter.timeout(Duration::from_secs(60)));
    waiter.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1600));
    drop(gpu0);
    // Its second `flock` (the first is a look at the waiter's record) is
    // the one on gpulock0_0: returns 1.5 s late, the lock taken.
    let mut arrival = held_by_strace(&f, "flock:delay_exit=1500000:when=2", None);
    on(&mut arrival, 2, 1).args(["--wait=0", "./pkg/gpu_test"]);
    let arrival = arrival.timeout(Duration::from_secs(30)).spawn();
    std::thread::sleep(Duration::from_millis(600));
    waiter.signal(libc::SIGCONT);
    let (arrival, waiter) = (arrival.wait(), waiter.wait());
    let what = format!("{}\n{}", arrival.explain(), waiter.explain());
    assert_eq!(Record::of(arrival.assert_success()).var("HIP_VISIBLE_DEVICES"), Some("1"), "{what}");
    assert_eq!(Record::of(waiter.assert_success()).var("HIP_VISIBLE_DEVICES"), Some("0"), "{what}");
}

/// Lands a process under Landlock (an LSM) where opening `argv[1]` is
/// refused, every other file allowed, then execs the rest; `access(2)` is
/// not mediated by Landlock, so it still allows that file.
const LANDLOCKED: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
deny = os.path.abspath(sys.argv[1])
rw = (1 << 1) | (1 << 2)
attr = struct.pack('Q', rw)
rs = libc.syscall(444, ctypes.c_char_p(attr), len(attr), 0)
if rs < 0:
    sys.exit(99)
def allow(path):
    try:
        fd = os.open(path, os.O_PATH)
    except FileNotFoundError:
        return  # another test's files, removed meanwhile
    assert libc.syscall(445, rs, 1, ctypes.c_char_p(struct.pack('=Qi', rw, fd)), 0) == 0
    os.close(fd)
def allow_but(path):
    parent = os.path.dirname(path)
    for e in os.listdir(parent):
        p = os.path.join(parent, e)
        if p != path and not os.path.islink(p):
            allow(p)
    if parent != '/':
        allow_but(parent)
allow_but(deny)
libc.prctl(38, 1, 0, 0, 0)
assert libc.syscall(446, rs, 0) == 0
os.execvp(sys.argv[2], sys.argv[2:])
"#;

/// Where `access(2)` allows what `open(2)` refuses (an LSM's rule on the
/// open itself, here Landlock's; a real uid that is not the effective one),
/// a lock file the waiter's open found unusable stays so: out of its record,
/// said once, and a later test takes it at once. A build without the change
/// put it back in the record at each wake, said it again each time, and
/// held the later test up until the waiter's limit.
#[test]
fn a_lock_file_an_open_refused_stays_out_of_the_record_whatever_access_says() {
    if !root("an LSM's rule and another effective user") {
        return;
    }
    for how in ["landlock", "euid"] {
        let f = common::shared_fixture(&format!("judgement-{how}"));
        f.make_lock_dir_shared();
        std::fs::create_dir_all(f.lock_dir.join("gpuqueue")).unwrap();
        std::fs::set_permissions(f.lock_dir.join("gpuqueue"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let mode = if how == "euid" { 0o600 } else { 0o666 };
        for gpu in ["0", "1"] {
            test_support::write_file(f.lock(gpu, 0), "");
            std::fs::set_permissions(f.lock(gpu, 0), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::set_permissions(f.lock("1", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
        let held = hold_lock(f.lock("1", 0));
        let mut c = match how {
            "landlock" => {
                let script = f.dir.join("landlocked.py");
                test_support::write_file(&script, LANDLOCKED);
                let path = f.lock("0", 0);
                let (script, path) = (script.to_str().unwrap().to_string(), path.to_str().unwrap().to_string());
                f.cmd_under("python3", [script, path])
            }
            _ => f.cmd_under("setpriv", ["--euid=65534", "--egid=65534", "--clear-groups"]),
        };
        on(&mut c, 2, 1).args(["--wait=20", "./pkg/gpu_test"]);
        let waiter = c.timeout(Duration::from_secs(60)).spawn();
        let in_queue = || files_lines(&f) == ["gpulock1_0"];
        if !wait_until(Duration::from_secs(5), in_queue) {
            let out = { waiter }.wait();
            let skip = out.code() == 99;
            assert!(skip && how == "landlock", "{how}: records {:?}\n{}", files_lines(&f), out.explain());
            test_support::prerequisite(false, "Landlock in this kernel", "an LSM's rule on the open");
            continue;
        }
        // Some wakes later, it stays out.
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(files_lines(&f), ["gpulock1_0"], "{how}");
        let out = on(&mut f.cmd(), 2, 1).args(["--wait=3", "./pkg/gpu_test"]).run();
        let r = Record::of(out.assert_success());
        assert_eq!(r.locks(), ["gpulock0_0"], "{how}\n{}", out.explain());
        assert!(out.elapsed < Duration::from_secs(2), "{how}: held up\n{}", out.explain());
        drop(held);
        let out = waiter.wait();
        out.assert_success();
        assert_eq!(
            out.stderr.matches("warning: cannot open lock file").count(),
            1,
            "{how}: said once\n{}",
            out.explain()
        );
    }
}
