//! One lock directory shared by everything that can share it: another
//! user's locks on the directory and the queue mean nothing; requests that
//! cannot compete (another profile's lock files, a disjoint pool) never
//! wait on each other, and a pool that overlaps waits only for what it
//! shares, and one that gives up says who came first; the wait limit
//! holds on a host with many descriptors; and a hundred waiters each wake
//! a few times a second (issue 46's points 3, 4, 5, 7 and 8).

mod common;

use common::{Fixture, NOBODY, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use test_support::{Cmd, Running, hold_lock, wait_until};

fn on(c: &mut Cmd, gpus: u32) -> &mut Cmd {
    c.env("TF_GPU_COUNT", gpus.to_string()).env("TF_TESTS_PER_GPU", "1").env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
}

/// Starts `c` and returns once it has a record in the queue.
fn queued(f: &Fixture, c: &mut Cmd) -> Running {
    f.spawn_queued(c.timeout(Duration::from_secs(60)))
}

#[track_caller]
fn served_within(r: Running, limit: Duration, since: Instant) -> test_support::Output {
    let out = r.wait();
    let took = since.elapsed();
    assert!(out.status.success(), "{}", out.explain());
    assert!(took < limit, "served only after {took:?} (limit {limit:?})\n{}", out.explain());
    out
}

/// Issue 46, point 3: another user's shared lock of the lock directory and
/// of the queue, and a maintenance script's lock on a file in the
/// directory: the waiters are served in order as the slot frees, at once,
/// and wake only at their beats meanwhile.
#[test]
fn another_users_locks_of_the_directory_and_the_queue_change_nothing() {
    if !test_support::prerequisite(test_support::is_root(), "root", "another user's locks of the lock directory") {
        return;
    }
    let f = shared_fixture("share-other-user");
    std::fs::create_dir_all(f.lock_dir.join("gpuqueue")).unwrap();
    for d in [&f.lock_dir, &f.lock_dir.join("gpuqueue")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    }
    let held = hold_lock(f.lock("0", 0));
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut others = Vec::new();
    for (how, what) in [("-s", f.lock_dir.clone()), ("-s", f.lock_dir.join("gpuqueue")), ("-x", f.lock_dir.join("gpu"))]
    {
        let mut c = Cmd::new("flock");
        c.arg(how).arg(&what).args(["sleep", "60"]).as_user(NOBODY, NOBODY).own_process_group();
        others.push(c.spawn());
    }
    let mut first = f.cmd();
    on(&mut first, 1).env("SLEEP", "0.3").arg("./pkg/gpu_test");
    let first = queued(&f, &mut first);
    let mut second = f.cmd();
    on(&mut second, 1).arg("./pkg/gpu_test");
    let second = queued(&f, &mut second);
    std::thread::sleep(Duration::from_millis(500));
    let before = test_support::voluntary_switches(second.pid());
    std::thread::sleep(Duration::from_millis(1000));
    let woke = test_support::voluntary_switches(second.pid()) - before;
    assert!(woke <= 12, "the second waiter woke {woke} times in a second");
    let freed = Instant::now();
    drop(held);
    served_within(first, Duration::from_secs(2), freed);
    served_within(second, Duration::from_secs(3), freed);
    for o in others {
        o.signal_group(libc::SIGKILL);
        o.wait();
    }
}

/// Locks every temporary record that shows in `gpuqueue/` (argv[1]) with
/// a shared `flock`, as soon as it shows, for argv[2] seconds; prints how
/// many it locked.
const SNIPER: &str = r#"
import fcntl, os, sys, time
queue, end, held = sys.argv[1], time.time() + float(sys.argv[2]), []
while time.time() < end:
    try:
        names = os.listdir(queue)
    except OSError:
        names = []
    for n in names:
        if n.startswith('.') and n.endswith('.new'):
            try:
                fd = os.open(os.path.join(queue, n), os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                held.append(fd)
            except OSError:
                os.close(fd)
    time.sleep(0.002)
print(len(held))
"#;

/// Another user who sees a waiter's temporary record in `gpuqueue/` (its
/// name shows there) cannot lock it before its waiter does: the waiter made
/// it 0644 and locked it after, and such a user, taking a shared lock in
/// between at each of its eight tries, left it waiting without a place
/// (strace holds each `flock` 0.2 s, as a loaded host would).
#[test]
fn another_user_cannot_lock_a_record_before_its_waiter() {
    // Not the first on PATH, which may be root's own (a venv, pyenv).
    let python = "/usr/bin/python3";
    let runs = test_support::is_root()
        && std::path::Path::new(python).exists()
        && std::process::Command::new("strace")
            .args(["-qq", "-o", "/dev/null", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !test_support::prerequisite(
        runs,
        "root, strace and /usr/bin/python3",
        "another user locking a record as it is made",
    ) {
        return;
    }
    let f = shared_fixture("share-sniped");
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir_all(&queue).unwrap();
    for d in [&f.lock_dir, &queue] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    }
    let held = hold_lock(f.lock("0", 0));
    let script = f.dir.join("sniper.py");
    test_support::write_file(&script, SNIPER);
    let mut sniper = Cmd::new(python);
    sniper.arg(&script).arg(&queue).arg("4").as_user(NOBODY, NOBODY).timeout(Duration::from_secs(30));
    let sniper = sniper.spawn();
    std::thread::sleep(Duration::from_millis(300));
    let mut waiter = f.cmd_under("strace", ["-f", "-qq", "-o", "/dev/null", "-e", "inject=flock:delay_enter=200000"]);
    on(&mut waiter, 1).args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(60));
    let waiter = waiter.spawn();
    let recorded = || {
        std::fs::read_dir(&queue).is_ok_and(|d| d.flatten().any(|e| !e.file_name().to_string_lossy().starts_with('.')))
    };
    let made = wait_until(Duration::from_secs(8), recorded);
    drop(held);
    let out = waiter.wait();
    let locked = sniper.wait();
    out.assert_success();
    assert!(made, "no record in gpuqueue/ while it waited\n{}\n{}", out.explain(), locked.explain());
    assert!(!out.stderr.contains("cannot make a record"), "{}\n{}", out.explain(), locked.explain());
    assert_eq!(locked.stdout.trim(), "0", "another user locked a temporary record\n{}", locked.explain());
}

/// Issue 46, point 4: XLA's and JAX's wrappers on one lock directory (the
/// advice for the ROCm/jax fork): their lock files differ, so a JAX waiter
/// is served as soon as its own slot frees while an XLA waiter, queued
/// first, still waits; and it counts no XLA waiter ahead of it.
#[test]
fn xla_and_jax_waiters_on_one_lock_directory_never_wait_on_each_other() {
    let f = Fixture::new("share-profiles");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let xla_slot = hold_lock(f.lock("0", 0));
    let jax_slot = hold_lock(f.lock_dir.join("jax_accelerator_lock_0_0"));
    let mut xla = f.cmd();
    on(&mut xla, 1).arg("./pkg/gpu_test");
    let mut xla = queued(&f, &mut xla);
    let mut jax = f.jax_cmd();
    jax.env("JAX_ACCELERATOR_COUNT", "1").env("JAX_TESTS_PER_ACCELERATOR", "1").arg("./pkg/gpu_test");
    let jax = queued(&f, &mut jax);
    std::thread::sleep(Duration::from_millis(300));
    let freed = Instant::now();
    drop(jax_slot);
    let out = served_within(jax, Duration::from_secs(2), freed);
    out.assert_stderr_contains(": 1 of 1 slots busy, first in the queue");
    assert!(!xla.has_exited(), "the XLA waiter ran on a busy slot");
    drop(xla_slot);
    xla.wait().assert_success();
}

/// Issue 46, point 5: runner slices with disjoint pools on one lock
/// directory (`ROCR_VISIBLE_DEVICES=0,1` and `2,3`): job B's test takes its
/// free GPU at once while job A's waits, and B's waiter, when its own GPUs
/// are busy, is first in the queue and served as they free.
#[test]
fn disjoint_pools_on_one_lock_directory_never_wait_on_each_other() {
    let f = Fixture::new("share-pools");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let pool = |c: &mut Cmd, visible: &str| {
        on(c, 4).env("ROCR_VISIBLE_DEVICES", visible);
    };
    let (a0, a1) = (hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0)));
    let mut a = f.cmd();
    pool(&mut a, "0,1");
    a.args(["./pkg/gpu_test", "--num_processes=2"]);
    let mut a = queued(&f, &mut a);
    // B's GPUs are free: no wait at all.
    let started = std::time::SystemTime::now();
    let out = f.run_test(|c| pool(c, "2,3"), &[]);
    out.assert_success().assert_at_most_one_stderr_line();
    let took = common::Record::of(&out).started_after(started);
    assert!(took < Duration::from_secs(1), "took {took:?}\n{}", out.explain());
    // B's GPUs busy: it waits, first in its own line.
    let (b2, b3) = (hold_lock(f.lock("2", 0)), hold_lock(f.lock("3", 0)));
    let mut b = f.cmd();
    pool(&mut b, "2,3");
    b.arg("./pkg/gpu_test");
    let b = queued(&f, &mut b);
    std::thread::sleep(Duration::from_millis(300));
    let freed = Instant::now();
    drop(b3);
    let out = served_within(b, Duration::from_secs(2), freed);
    out.assert_stderr_contains(": 2 of 2 slots busy, first in the queue");
    assert!(!a.has_exited(), "A ran on busy GPUs");
    drop((a0, a1, b2));
    a.wait().assert_success();
}

/// Pools that share a GPU wait only for what they share: a 1-GPU waiter on
/// GPUs 1-2 behind a 2-GPU waiter on GPUs 0-1 takes GPU 2 when it frees,
/// but not GPU 1, which the earlier waiter wants.
#[test]
fn overlapping_pools_wait_only_for_the_gpus_they_share() {
    let f = Fixture::new("share-overlap");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held: Vec<_> = ["0", "1", "2"].iter().map(|g| hold_lock(f.lock(g, 0))).collect();
    let mut early = f.cmd();
    on(&mut early, 3).env("ROCR_VISIBLE_DEVICES", "0,1").args(["./pkg/gpu_test", "--num_processes=2"]);
    let early = queued(&f, &mut early);
    let record = f.dir.join("late");
    let mut late = f.cmd();
    on(&mut late, 3).env("ROCR_VISIBLE_DEVICES", "1,2").env("RECORD_FILE", &record).arg("./pkg/gpu_test");
    let late = queued(&f, &mut late);
    let mut held = held.into_iter();
    let (g0, g1, g2) = (held.next().unwrap(), held.next().unwrap(), held.next().unwrap());
    drop(g1);
    std::thread::sleep(Duration::from_millis(600));
    assert!(!record.exists(), "the later waiter took GPU 1, which the earlier one wants");
    let freed = Instant::now();
    drop(g2);
    let out = served_within(late, Duration::from_secs(2), freed);
    let r = common::Record::read(&record);
    assert_eq!(r.locks(), ["gpulock2_0"], "{}", out.explain());
    drop(g0);
    early.wait().assert_success();
}

/// A free GPU left to an earlier waiter is not "no free GPU" alone: where
/// the wrapper gives up (`--wait=0`, or its limit) while its scan left lock
/// files to earlier waiters, its one line says how many come first. GPU 1
/// is free here, and a 2-GPU waiter that came first wants it.
#[test]
fn giving_up_says_the_earlier_waiters_that_come_first() {
    let f = Fixture::new("share-no-slot-earlier");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let g0 = hold_lock(f.lock("0", 0));
    let tail = ": 1 waiter(s) in the queue come first for GPUs this test could take (--status shows them)";
    let early = {
        let mut c = f.cmd();
        on(&mut c, 2).args(["./pkg/gpu_test", "--num_processes=2"]);
        queued(&f, &mut c)
    };
    for (wait, said) in [("0", "and waiting is off (wait=0)"), ("0.3", "within the wait limit of 0.300s")] {
        let mut c = f.cmd();
        let out = on(&mut c, 2).arg(format!("--wait={wait}")).arg("./pkg/gpu_test").run();
        out.assert_code(1);
        let last = out.stderr.lines().last().unwrap_or_default();
        assert!(
            last.ends_with(&format!("{said}{tail}")),
            "wait {wait}: the last line does not end with {said}{tail}\n{}",
            out.explain()
        );
        assert!(test_support::lock_is_free(f.lock("1", 0)), "GPU 1 was not free\n{}", out.explain());
    }
    drop(g0);
    early.wait().assert_success();
    // Both GPUs busy and nobody queued: the line says nothing more.
    let _held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    let mut c = f.cmd();
    let out = on(&mut c, 2).args(["--wait=0", "./pkg/gpu_test"]).run();
    out.assert_code(1).assert_one_error_line("free GPU(s) to run the test ");
    assert!(out.stderr.trim_end().ends_with("(wait=0)"), "{}", out.explain());
}

/// Issue 46, point 7: on a host with hundreds of thousands of open
/// descriptors (20 processes of 15,000, within this machine's hard limit of
/// 20,000 each), a waiter's line counts the busy slots without reading them
/// all, so `--wait=1` ends in about a second, at little CPU. (It waits
/// behind a 2-GPU waiter, with GPU 1's lock file free: one that
/// `/proc/locks` does not show held, which a count that read every
/// process's descriptors looked for there.)
#[test]
fn the_wait_limit_holds_on_a_host_with_many_descriptors() {
    let Some(python) = test_support::python_with("python3", &["resource"]) else {
        test_support::prerequisite(false, "python3", "processes holding 300,000 descriptors");
        return;
    };
    let f = Fixture::new("share-many-fds");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    test_support::write_file(f.lock("1", 0), "");
    let mut first = f.cmd();
    on(&mut first, 2).args(["./pkg/gpu_test", "--num_processes=2"]);
    let first = queued(&f, &mut first);
    let script = "import os, resource, sys, time\n\
                  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n\
                  resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n\
                  fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(min(15000, hard - 64))]\n\
                  open(sys.argv[1], 'w').close()\n\
                  time.sleep(60)";
    let hogs: Vec<(Running, std::path::PathBuf)> = (0..20)
        .map(|i| {
            let ready = f.dir.join(format!("ready{i}"));
            let mut hog = Cmd::new(&python);
            hog.args(["-c", script]).arg(&ready).own_process_group();
            (hog.spawn(), ready)
        })
        .collect();
    let all_open = wait_until(Duration::from_secs(60), || hogs.iter().all(|(_, r)| r.exists()));
    assert!(all_open, "the descriptors were never opened");
    let mut c = f.cmd();
    on(&mut c, 2).args(["--wait=1", "./pkg/gpu_test"]);
    let started = Instant::now();
    let mut w = c.spawn();
    let pid = w.pid();
    let mut cpu = Duration::ZERO;
    while !w.has_exited() {
        cpu = cpu.max(test_support::cpu_time(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = w.wait();
    let took = started.elapsed();
    out.assert_code(1).assert_stderr_contains("within the wait limit of 1.000s");
    // Its start and end on a loaded machine included; a wait that read
    // every descriptor took 2.3-3 s.
    assert!(took < Duration::from_millis(2200), "--wait=1 took {took:?}\n{}", out.explain());
    assert!(cpu < Duration::from_millis(300), "it used {cpu:?} of CPU\n{}", out.explain());
    for (hog, _) in hogs {
        hog.signal_group(libc::SIGKILL);
        hog.wait();
    }
    first.signal(libc::SIGTERM);
    first.wait().assert_code(143);
}

/// Issue 46, point 8: a hundred waiters queued behind a held slot each
/// wake a few times a second (their beats), not more as the line grows.
#[test]
fn a_hundred_waiters_each_wake_a_few_times_a_second() {
    let f = Fixture::new("share-hundred");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let waiters: Vec<Running> = (0..100)
        .map(|_| {
            let mut c = f.cmd();
            on(&mut c, 1).arg("/bin/true").timeout(Duration::from_secs(120));
            c.spawn()
        })
        .collect();
    assert!(wait_until(Duration::from_secs(30), || f.waiters().len() == 100), "not all queued");
    std::thread::sleep(Duration::from_millis(500));
    let before: Vec<u64> = waiters.iter().map(|w| test_support::voluntary_switches(w.pid())).collect();
    std::thread::sleep(Duration::from_millis(1000));
    let woke: Vec<u64> =
        waiters.iter().zip(&before).map(|(w, b)| test_support::voluntary_switches(w.pid()) - b).collect();
    let most = woke.iter().copied().max().unwrap_or(0);
    assert!(most <= 12, "a waiter woke {most} times in a second with 100 queued: {woke:?}");
    let freed = Instant::now();
    drop(held);
    for w in waiters {
        w.wait().assert_success();
    }
    assert!(freed.elapsed() < Duration::from_secs(20), "100 waiters took {:?} to drain", freed.elapsed());
}
