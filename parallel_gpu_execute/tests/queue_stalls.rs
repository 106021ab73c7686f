//! The wait queue never stalls a waiter behind anything that does not run:
//! a waiter frozen by the cgroup freezer (`docker pause`: `/proc` shows it
//! sleeping) or stopped, first in line or further back, many in a row; the
//! queue's directory removed; records that lie about their beat, that belong
//! to the dead, or that are no records; a queue this user cannot use; and
//! SIGALRM inherited blocked. A multi-GPU waiter keeps its place through a
//! stop. A test served after a wait inherits no SIGCHLD of the wrapper's
//! own children. Each case runs the built wrapper against locks held by this test
//! process (docs/design.md, "The wait queue"; issue 46's points 1, 2 and 6).

mod common;

use common::{Fixture, NOBODY, Record, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use test_support::{Cmd, Freezer, Running, hold_lock, is_root, wait_until, write_file};

/// The longest a waiter may be held up behind one that stopped running:
/// its beat goes stale after 1 s, and the one behind looks at each beat
/// (250 ms); room for a loaded machine.
const STALL_BOUND: Duration = Duration::from_millis(2500);

/// One slot on one GPU (`gpus` GPUs), waited for without a limit.
fn waiter(f: &Fixture, gpus: u32, records: &Path, name: &str, extra: &[&str]) -> Cmd {
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", gpus.to_string()).env("TF_TESTS_PER_GPU", "1").env("RECORD_FILE", records.join(name));
    c.arg("./pkg/gpu_test").arg(name).args(extra);
    c.timeout(Duration::from_secs(60));
    c
}

/// A fixture with its lock directory made, and where its tests record.
fn fixture(name: &str) -> (Fixture, PathBuf) {
    let f = Fixture::new(name);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let records = f.dir.join("records");
    std::fs::create_dir_all(&records).unwrap();
    (f, records)
}

/// Starts a waiter and returns once it has its record in the queue.
fn queued(f: &Fixture, c: &Cmd) -> Running {
    f.spawn_queued(c)
}

/// The start time the recording test wrote.
fn start_of(records: &Path, name: &str) -> u128 {
    let text = std::fs::read_to_string(records.join(name))
        .unwrap_or_else(|e| panic!("no record of {name} in {}: {e}", records.display()));
    text.lines().find_map(|l| l.strip_prefix("start=")).unwrap().parse().unwrap()
}

#[track_caller]
fn served_within(r: Running, limit: Duration, since: Instant) {
    let out = r.wait();
    let took = since.elapsed();
    assert!(out.status.success(), "{}", out.explain());
    assert!(took < limit, "served only after {took:?} (limit {limit:?})\n{}", out.explain());
}

/// A freezer, or, where there is none (not root, no cgroup v2), `None`
/// after the prerequisite policy (a failure under CI).
fn freezer(label: &str, checks: &str) -> Option<Freezer> {
    match Freezer::new(label) {
        Ok(f) => Some(f),
        Err(why) => {
            test_support::prerequisite(false, &why, checks);
            None
        }
    }
}

/// Issue 46, point 1: the first waiter frozen by the cgroup freezer, which
/// `/proc` shows sleeping, holds the free slot from no one for longer than
/// its beat takes to go stale; thawed, it runs when a slot frees again.
#[test]
fn a_first_waiter_frozen_by_the_cgroup_freezer_holds_no_one_up() {
    let Some(cgroup) = freezer("q-frozen-first", "a waiter frozen by the cgroup freezer") else { return };
    let (f, records) = fixture("q-frozen-first");
    let held = hold_lock(f.lock("0", 0));
    let first = queued(&f, &waiter(&f, 1, &records, "first", &[]));
    cgroup.add(first.pid());
    cgroup.freeze();
    let second = queued(&f, &waiter(&f, 1, &records, "second", &[]));
    assert_eq!(test_support::process_state(first.pid()), Some('S'), "a frozen process shows as sleeping");
    let freed = Instant::now();
    drop(held);
    served_within(second, STALL_BOUND, freed);
    assert!(!records.join("first").exists(), "the frozen waiter ran");
    cgroup.thaw();
    let out = first.wait();
    assert!(out.status.success(), "{}", out.explain());
}

/// Issue 46, point 2: a frozen waiter in the middle of the line: the one
/// behind it neither spins (at most 12 wake-ups a second, little CPU) nor
/// waits for it once the slot is free for it.
#[test]
fn a_frozen_waiter_earlier_in_line_makes_no_one_spin() {
    let Some(cgroup) = freezer("q-frozen-middle", "a waiter frozen by the cgroup freezer") else { return };
    let (f, records) = fixture("q-frozen-middle");
    let held = hold_lock(f.lock("0", 0));
    let mut first = waiter(&f, 1, &records, "first", &[]);
    first.env("SLEEP", "0.3");
    let first = queued(&f, &first);
    let middle = queued(&f, &waiter(&f, 1, &records, "middle", &[]));
    cgroup.add(middle.pid());
    cgroup.freeze();
    let last = queued(&f, &waiter(&f, 1, &records, "last", &[]));
    std::thread::sleep(Duration::from_millis(1500));
    let before = test_support::voluntary_switches(last.pid());
    std::thread::sleep(Duration::from_millis(1000));
    let woke = test_support::voluntary_switches(last.pid()) - before;
    assert!(woke <= 12, "the last waiter woke {woke} times in a second behind a frozen one");
    let cpu = test_support::cpu_time(last.pid());
    assert!(cpu < Duration::from_millis(300), "waiting used {cpu:?} of CPU in 2.5 s");
    // The first is served; then the last, while the middle one stays frozen.
    let freed = Instant::now();
    drop(held);
    served_within(first, Duration::from_secs(2), freed);
    served_within(last, Duration::from_secs(2) + STALL_BOUND, freed);
    assert!(!records.join("middle").exists(), "the frozen waiter ran");
    assert!(start_of(&records, "first") < start_of(&records, "last"), "out of order");
    cgroup.thaw();
    assert!(middle.wait().status.success());
}

/// However many waiters in a row stop running (frozen and stopped in
/// turn), the next one that runs gets a free slot within the bound.
#[test]
fn eight_waiters_in_a_row_that_do_not_run_keep_no_one_from_a_free_slot() {
    let cgroup = freezer("q-eight", "waiters frozen by the cgroup freezer");
    let (f, records) = fixture("q-eight");
    let held = hold_lock(f.lock("0", 0));
    let mut stopped = Vec::new();
    for i in 0..8 {
        let r = queued(&f, &waiter(&f, 1, &records, &format!("w{i}"), &[]));
        match &cgroup {
            Some(c) if i % 2 == 0 => c.add(r.pid()),
            _ => r.signal(libc::SIGSTOP),
        }
        stopped.push(r);
    }
    if let Some(c) = &cgroup {
        c.freeze();
    }
    let ninth = queued(&f, &waiter(&f, 1, &records, "w8", &[]));
    let freed = Instant::now();
    drop(held);
    served_within(ninth, STALL_BOUND, freed);
    for (i, r) in stopped.iter().enumerate() {
        assert!(!records.join(format!("w{i}")).exists(), "waiter {i}, not running, ran");
        r.signal(libc::SIGKILL);
    }
    drop(cgroup);
}

/// A 2-GPU waiter stopped for a while, with 1-GPU waiters queued behind it,
/// keeps its place once it runs again: GPU 0 freed while GPU 1 is busy goes
/// to none of them, and it is served first when both are free.
#[test]
fn a_multi_gpu_waiter_keeps_its_place_after_a_stop_episode() {
    let (f, records) = fixture("q-multi-after-stop");
    let (gpu0, gpu1) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0)));
    let multi = queued(&f, &waiter(&f, 2, &records, "multi", &["--num_processes=2"]));
    multi.signal(libc::SIGSTOP);
    let singles: Vec<Running> = (0..4)
        .map(|i| {
            let mut c = waiter(&f, 2, &records, &format!("single{i}"), &[]);
            c.env("SLEEP", "0.2");
            queued(&f, &c)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    multi.signal(libc::SIGCONT);
    // Running again: its beat is fresh (it beats as it resumes).
    let mine = f.lock_dir.join("gpuqueue").read_dir().unwrap().flatten().map(|e| e.path());
    let mine: Vec<PathBuf> = mine.filter(|p| p.to_string_lossy().ends_with(&format!(".{}", multi.pid()))).collect();
    let fresh = || {
        mine.iter().filter_map(|p| std::fs::read(p).ok()).any(|r| {
            r.get(16..24)
                .is_some_and(|b| boot_ns().saturating_sub(u64::from_le_bytes(b.try_into().unwrap())) < 500_000_000)
        })
    };
    assert!(wait_until(Duration::from_secs(5), fresh), "the 2-GPU waiter never beat again");
    std::thread::sleep(Duration::from_millis(300));
    drop(gpu0);
    std::thread::sleep(Duration::from_millis(800));
    for i in 0..4 {
        assert!(!records.join(format!("single{i}")).exists(), "single{i} overtook the 2-GPU waiter on GPU 0");
    }
    drop(gpu1);
    let multi = multi.wait();
    assert!(multi.status.success(), "{}", multi.explain());
    assert_eq!(Record::read(&records.join("multi")).locks(), ["gpulock0_0", "gpulock1_0"], "{}", multi.explain());
    for r in singles {
        assert!(r.wait().status.success());
    }
    let first = start_of(&records, "multi");
    for i in 0..4 {
        let s = start_of(&records, &format!("single{i}"));
        assert!(first < s, "single{i} started at {s}, before the 2-GPU waiter at {first}");
    }
}

/// Issue 46, point 6: the queue's directory removed (the repair a cleaner or
/// an operator runs): every waiter makes its record again, with its place,
/// and a 2-GPU waiter is not overtaken by the 1-GPU tests that arrive after.
#[test]
fn a_removed_queue_keeps_its_order() {
    let (f, records) = fixture("q-removed");
    let (gpu0, gpu1) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0)));
    let multi = queued(&f, &waiter(&f, 2, &records, "multi", &["--num_processes=2"]));
    let early = queued(&f, &waiter(&f, 2, &records, "early", &[]));
    let before = f.waiters();
    // As `rm -rf` can, the removal may meet a record made again between
    // emptying the directory and removing it ("Directory not empty"): the
    // cleaner then runs it again.
    let queue = f.lock_dir.join("gpuqueue");
    assert!(wait_until(Duration::from_secs(2), || std::fs::remove_dir_all(&queue).is_ok()), "gpuqueue/ not removed");
    assert!(wait_until(Duration::from_secs(2), || f.waiters() == before), "the records were not made again in order");
    let late: Vec<Running> = (0..6)
        .map(|i| {
            let mut c = waiter(&f, 2, &records, &format!("late{i}"), &[]);
            c.env("SLEEP", "0.1");
            queued(&f, &c)
        })
        .collect();
    drop(gpu0);
    std::thread::sleep(Duration::from_millis(600));
    assert!(!records.join("late0").exists(), "a later test took GPU 0 from the 2-GPU waiter");
    drop(gpu1);
    for r in [multi, early].into_iter().chain(late) {
        assert!(r.wait().status.success());
    }
    let multi = start_of(&records, "multi");
    assert!(multi < start_of(&records, "early"), "the 2-GPU waiter was overtaken by the one behind it");
    for i in 0..6 {
        assert!(multi < start_of(&records, &format!("late{i}")), "late{i} overtook the 2-GPU waiter");
    }
}

/// Writes a record `name` into the queue whose beat is `beat_ns` (on
/// `CLOCK_BOOTTIME`), asking for the slots of GPU 0 at one slot.
fn plant_record(f: &Fixture, name: &str, beat_ns: u64) -> PathBuf {
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir_all(&queue).unwrap();
    let mut content = b"gpuq\x02\0\0\0".to_vec();
    let check: u64 = 7 ^ beat_ns ^ 0x9e37_79b9_7f4a_7c15;
    for word in [7u64, beat_ns, check] {
        content.extend_from_slice(&word.to_le_bytes());
    }
    content.extend_from_slice(format!("name {name}\nneeded 1\nfiles gpulock0_0\ntest planted\n").as_bytes());
    let path = queue.join(name);
    write_file(&path, content);
    path
}

fn boot_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Records that do not show a waiter that runs hold no one up: one whose
/// beat is an hour ahead (a writer in a time namespace), one locked by
/// another user after its waiter died (its beat stale), one whose lock is
/// free (removed on sight), and files that are no records.
#[test]
fn records_that_show_no_running_waiter_hold_no_one_up() {
    let (f, records) = fixture("q-planted");
    let held = hold_lock(f.lock("0", 0));
    let ahead = plant_record(&f, "0000000000000001.11", boot_ns() + 3_600_000_000_000);
    let stale = plant_record(&f, "0000000000000002.12", boot_ns() - 5_000_000_000);
    let dead = plant_record(&f, "0000000000000003.13", boot_ns());
    let queue = f.lock_dir.join("gpuqueue");
    write_file(queue.join("notes.txt"), "not a record");
    std::os::unix::fs::symlink("/etc/passwd", queue.join("0000000000000004.14")).unwrap();
    let _locks = [hold_lock(&ahead), hold_lock(&stale)];
    let mut c = waiter(&f, 1, &records, "w", &[]);
    c.arg("--wait=5");
    let w = c.spawn();
    std::thread::sleep(Duration::from_millis(500));
    let freed = Instant::now();
    drop(held);
    served_within(w, Duration::from_secs(2), freed);
    assert!(!dead.exists(), "a record whose lock is free was left");
    assert!(ahead.exists() && stale.exists(), "a locked record was removed");
}

/// A waiter whose process inherited SIGALRM blocked still keeps its
/// `--wait` limit behind another waiter, and its test gets the mask back.
#[test]
fn sigalrm_inherited_blocked_neither_stalls_a_waiter_nor_stays_unblocked_for_the_test() {
    let (f, records) = fixture("q-sigalrm-blocked");
    let held = hold_lock(f.lock("0", 0));
    let first = queued(&f, &waiter(&f, 1, &records, "first", &[]));
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("--wait=2").arg("./pkg/gpu_test");
    c.timeout(Duration::from_secs(20));
    c.block_signals(&[libc::SIGALRM]);
    let started = Instant::now();
    let out = c.run();
    out.assert_code(1);
    assert!(started.elapsed() < Duration::from_secs(6), "--wait=2 took {:?}\n{}", started.elapsed(), out.explain());
    // Served after a wait, the test finds SIGALRM blocked as it was given.
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
    // grep itself, not a shell: dash empties the mask it is given.
    c.args(["grep", "^SigBlk:", "/proc/self/status"]);
    c.block_signals(&[libc::SIGALRM]);
    let blocked = c.spawn();
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    first.wait().assert_success();
    let out = blocked.wait();
    out.assert_success();
    let mask = out.stdout.trim().rsplit(['\t', ' ']).next().unwrap_or("");
    let mask = u64::from_str_radix(mask, 16).unwrap_or_else(|_| panic!("no SigBlk line\n{}", out.explain()));
    assert_ne!(mask & (1 << (libc::SIGALRM - 1)), 0, "SIGALRM was not blocked again for the test\n{}", out.explain());
}

/// A SIGALRM that another process sends to a waiting wrapper (`kill`,
/// `timeout -s ALRM`) does what it would do to the wrapper without the
/// wait: it ends it (142, its record removed), is ignored where the caller
/// ignores SIGALRM, and is left pending for the test where the caller
/// blocks it. The wait's own timer uses SIGALRM too, and took every one
/// for its own.
#[test]
fn another_process_sigalrm_does_to_a_waiter_what_it_does_without_the_wait() {
    let (f, records) = fixture("q-sigalrm-sent");
    let held = hold_lock(f.lock("0", 0));
    let alarm = |r: &Running| {
        // SAFETY: kill with a live child's pid.
        assert_eq!(unsafe { libc::kill(r.pid(), libc::SIGALRM) }, 0);
        std::thread::sleep(Duration::from_millis(500));
    };
    let alive = |r: &Running| test_support::process_state(r.pid()).is_some_and(|s| s != 'Z');
    let r = queued(&f, &waiter(&f, 1, &records, "ended", &[]));
    alarm(&r);
    let out = r.wait();
    assert_eq!(out.status.code(), Some(142), "{}", out.explain());
    let left = std::fs::read_dir(f.lock_dir.join("gpuqueue")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "a record left behind\n{}", out.explain());
    // Ignored by the caller: the wait goes on, and is served.
    if !test_support::prerequisite(test_support::have_program("perl"), "perl", "SIGALRM ignored before exec") {
        return;
    }
    let mut c = f.cmd_under("perl", ["-e", "$SIG{ALRM} = 'IGNORE'; exec @ARGV or die"]);
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("./pkg/gpu_test").timeout(Duration::from_secs(60));
    let ignored = queued(&f, &c);
    alarm(&ignored);
    assert!(alive(&ignored), "an ignored SIGALRM ended the wait");
    // Blocked by the caller: the test finds it pending.
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
    c.args(["grep", "^SigPnd:", "/proc/self/status"]).timeout(Duration::from_secs(60));
    c.block_signals(&[libc::SIGALRM]);
    let blocked = queued(&f, &c);
    alarm(&blocked);
    assert!(alive(&blocked), "a blocked SIGALRM ended the wait");
    // One pending under the caller's mask before the exec: the same.
    let mut c = f.cmd_under(
        "perl",
        ["-MPOSIX", "-e", "sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGALRM)); kill ALRM => $$; exec @ARGV or die"],
    );
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
    c.args(["grep", "^SigPnd:", "/proc/self/status"]).timeout(Duration::from_secs(60));
    let inherited = queued(&f, &c);
    assert!(alive(&inherited), "a SIGALRM pending before the exec ended the wait");
    drop(held);
    Record::of(ignored.wait().assert_success());
    for r in [blocked, inherited] {
        let out = r.wait();
        out.assert_success();
        let mask = out.stdout.trim().rsplit(['\t', ' ']).next().unwrap_or("");
        let mask = u64::from_str_radix(mask, 16).unwrap_or_else(|_| panic!("no SigPnd line\n{}", out.explain()));
        assert_ne!(mask & (1 << (libc::SIGALRM - 1)), 0, "the SIGALRM was not pending for the test\n{}", out.explain());
    }
}

/// Served after a wait where the wrapper closes its inotify instance in a
/// short-lived grandchild (PID 1 reaps orphans: here a shell in a PID
/// namespace of its own), a test whose caller blocks SIGCHLD starts with
/// no SIGCHLD pending, as it does after a free slot: the one the reaped
/// child raised is taken, since pending signals survive the exec.
#[test]
fn a_test_served_after_a_wait_inherits_no_sigchld_pending() {
    if !test_support::prerequisite(is_root(), "root", "a PID namespace (unshare --pid) with a shell as PID 1") {
        return;
    }
    let (f, _) = fixture("q-sigchld");
    let held = hold_lock(f.lock("0", 0));
    let Some(python) = test_support::find_program("python3") else {
        test_support::prerequisite(false, "python3", "a caller that blocks SIGCHLD under a shell as PID 1");
        return;
    };
    // bash, PID 1, empties the mask of what it runs: python blocks SIGCHLD
    // and execs the wrapper.
    let block = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD]); os.execv(sys.argv[1], sys.argv[1:])";
    let shell = ["--pid", "--fork", "--mount-proc", "bash", "-c", "\"$@\"; true", "bash"];
    let mut c = f.cmd_under("unshare", shell.into_iter().chain([python.to_str().unwrap(), "-c", block]));
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
    // grep itself is the test: it reads its own status before it forks anything.
    c.args(["grep", "-E", "^(ShdPnd|SigPnd|SigBlk):", "/proc/self/status"]).timeout(Duration::from_secs(30));
    let w = c.spawn();
    let queue = f.lock_dir.join("gpuqueue");
    wait_until(Duration::from_secs(10), || std::fs::read_dir(&queue).is_ok_and(|mut d| d.next().is_some()));
    std::thread::sleep(Duration::from_millis(200));
    drop(held);
    let out = w.wait();
    out.assert_success();
    let field = |name: &str| {
        let line = out.stdout.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{}", out.explain()));
        u64::from_str_radix(line[name.len()..].trim(), 16).unwrap_or_else(|_| panic!("{}", out.explain()))
    };
    let bit = 1 << (libc::SIGCHLD - 1);
    assert_ne!(field("SigBlk:") & bit, 0, "SIGCHLD did not reach the test blocked\n{}", out.explain());
    assert_eq!(field("ShdPnd:") & bit, 0, "the test started with SIGCHLD pending\n{}", out.explain());
    assert_eq!(field("SigPnd:") & bit, 0, "the test started with SIGCHLD pending\n{}", out.explain());
}

/// A queue this user cannot use (a file, a FIFO or a link in its place, or
/// another user's directory it may not add to) is passed by: a free slot
/// is taken without a word; a waiter says once why it has no place, and
/// the repair, and waits without spinning.
#[test]
fn a_queue_this_user_cannot_use_is_passed_by_with_the_repair() {
    if !test_support::prerequisite(is_root(), "root", "a queue another user made unusable") {
        return;
    }
    type Make<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Make, &str); 4] = [
        ("a file", &|q| write_file(q, ""), "is not a directory"),
        ("a link", &|q| std::os::unix::fs::symlink("/etc", q).unwrap(), "is not a directory"),
        (
            "a FIFO",
            &|q| {
                let st = std::process::Command::new("mkfifo").arg("-m").arg("0644").arg(q).status();
                assert!(st.is_ok_and(|s| s.success()), "mkfifo {}", q.display());
            },
            "is not a directory",
        ),
        (
            "another user's 0755 directory",
            &|q| {
                std::fs::create_dir(q).unwrap();
                std::fs::set_permissions(q, std::fs::Permissions::from_mode(0o755)).unwrap();
            },
            "this user may not add to it",
        ),
    ];
    for (what, make, why) in cases {
        let f = shared_fixture("q-unusable-queue");
        f.make_lock_dir_shared();
        let queue = f.lock_dir.join("gpuqueue");
        make(&queue);
        let as_nobody = |c: &mut Cmd| {
            c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").as_user(NOBODY, NOBODY);
        };
        let out = f.run_test(as_nobody, &[]);
        out.assert_success();
        assert!(!out.stderr.contains("gpuqueue"), "{what}: a word about the queue for a free slot\n{}", out.explain());
        let held = hold_lock(f.lock("0", 0));
        std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
        let mut c = f.cmd();
        as_nobody(&mut c);
        c.arg("./pkg/gpu_test");
        let r = c.spawn();
        std::thread::sleep(Duration::from_millis(1500));
        let cpu = test_support::cpu_time(r.pid());
        drop(held);
        let out = r.wait();
        out.assert_success();
        assert!(cpu < Duration::from_millis(300), "{what}: waiting used {cpu:?} of CPU in 1.5 s\n{}", out.explain());
        let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("warning:")).collect();
        let q = queue.display().to_string();
        assert!(
            warnings.len() == 1 && warnings[0].contains(&q) && warnings[0].contains(why),
            "{what}: not one warning naming {q} and why ({why})\n{}",
            out.explain()
        );
        out.assert_stderr_contains("waiting without a place in the queue");
    }
}

/// A uid that is neither root nor `nobody`.
const OTHER: u32 = 4242;

/// A waiter that could not make its record at first (another user's 0755
/// `gpuqueue/`) counts every record it sees, a later waiter's included, and
/// sleeps on it. Once it can make its record, it looks again with its own
/// place: it is served first, and neither waits on the other for ever (a
/// look kept from before its record was made would have each wait behind
/// the other).
#[test]
fn a_waiter_that_gets_its_place_late_is_served_in_its_order() {
    if !test_support::prerequisite(is_root(), "root", "a waiter without a place, then with one") {
        return;
    }
    let f = shared_fixture("q-late-place");
    f.make_lock_dir_shared();
    let records = f.dir.join("records");
    std::fs::create_dir_all(&records).unwrap();
    std::fs::set_permissions(&records, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let held = hold_lock(f.lock("0", 0));
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    let queue = f.lock_dir.join("gpuqueue");
    // A third user's, so that root (the second waiter) adds to it but does
    // not give it its mode back.
    std::fs::create_dir(&queue).unwrap();
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&queue, Some(OTHER), Some(OTHER)).unwrap();
    let mut first = waiter(&f, 1, &records, "first", &[]);
    first.as_user(NOBODY, NOBODY);
    let first = first.spawn();
    // Its wait (and its ticket) begun before the second arrives.
    assert!(test_support::begins_to_wait(first.pid()), "the first never began to wait");
    let second = queued(&f, &waiter(&f, 1, &records, "second", &[]));
    // The first one now sleeps on the second one's record, which covers it.
    std::thread::sleep(Duration::from_millis(800));
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let pid = first.pid();
    assert!(
        wait_until(Duration::from_secs(3), || f.waiters().first() == Some(&pid)),
        "the first waiter's record was not made, first in line, once it could be: {:?}",
        f.waiters()
    );
    // Time for the second to see the first one's record and sleep on it.
    std::thread::sleep(Duration::from_millis(800));
    let released = Instant::now();
    drop(held);
    served_within(first, STALL_BOUND, released);
    served_within(second, STALL_BOUND + Duration::from_secs(1), released);
    assert!(start_of(&records, "first") < start_of(&records, "second"), "the later waiter was served first");
}
