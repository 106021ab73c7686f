//! Load: many wrappers started at once (as `bazel test --local_test_jobs=N`
//! starts them) over 8 fake GPUs with 2 slots each, asking for 1, 2 and 4
//! GPUs (`--num_processes`/`--gpus_per_process` among the test's arguments,
//! in every spelling). Each test records the GPUs it got, the lock files it
//! holds, and when it started and ended; the checker then proves that
//!
//! - every request ran and passed, on as many GPUs as it asked for;
//! - every block was contiguous, and its locks were one slot on each of its
//!   GPUs (the ids in `HIP_VISIBLE_DEVICES`, the same in
//!   `CUDA_VISIBLE_DEVICES`, and the lock files agree);
//! - no GPU was ever used by more tests than it has slots, and no slot by
//!   two tests (a sweep over the interval end points, per GPU and per slot);
//! - no multi-GPU request starved: waits are reported against the ideal
//!   (the makespan of a perfect packing of all the work); the 4-GPU
//!   requests wait about as long as the 1-GPU ones on average, and are not
//!   pushed to the end of the run (their mean start rank).
//!
//! The 4-GPU requests' mean wait is bounded by the 1-GPU requests' (and
//! their start rank), which starvation breaks; a test of the measures shows
//! that a starved schedule fails them.
//!
//! A second load stops up to 8 wrappers seen waiting in the queue (the first
//! among them) for 3.5 s, half with SIGSTOP and half with the cgroup
//! freezer (as `docker pause`: `/proc` shows them sleeping), with the other
//! stall cases mixed in (SIGALRM blocked in every seventh wrapper, another
//! user's `flock` of the lock directory and of `gpuqueue/`, a file there
//! that is no record, and `gpuqueue/` removed while they wait): the same
//! checks hold, the stopped ones ran only once continued, and the others
//! were held up (no test running while one of them waited) for at most 2 s.
//!
//! `cargo test` runs a small version (48 wrappers, 0.2 s tests). The full
//! one, 200 wrappers:
//!
//!     cargo test --release --test stress -- --ignored --nocapture
//!
//! `STRESS_WRAPPERS`, `STRESS_SLEEP` (seconds per test) and `STRESS_SEED`
//! change the size, the test length and the mix of either.

use std::{path::PathBuf, time::Duration, time::SystemTime, time::UNIX_EPOCH};
use test_support::{
    Cmd, RECORDING_TEST, Runfiles, Running, Sysroot, TempDir, XorShift64, check_gpus_match_locks, max_overlap,
    parse_record, read_to_string, record_value, workspace_bin,
};

const GPUS: u32 = 8;
const SLOTS: u32 = 2;

/// One test's run, as it recorded it.
#[derive(Debug, Clone)]
struct Run {
    /// GPUs it asked for.
    needed: u32,
    /// `HIP_VISIBLE_DEVICES`, parsed (rocm mode: XLA main's variables).
    ids: Vec<u32>,
    /// The lock files it held: (GPU id, slot).
    locks: Vec<(u32, u32)>,
    /// Nanoseconds since the epoch: wrapper started, test started, test ended.
    spawned: u128,
    start: u128,
    end: u128,
    /// Stopped (SIGSTOP) while it waited, and continued (see [`load_with_stops`]).
    stopped: bool,
    /// Its stderr had the `waiting for ...` line.
    said_waiting: bool,
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The arguments asking for `gpus` GPUs, spelled one of several ways.
fn request_args(gpus: u32, variant: u64) -> Vec<String> {
    let words: &[&str] = match (gpus, variant % 3) {
        (1, 0) => &[],
        (1, 1) => &["--gtest_filter=*", "--num_processes=1"],
        (1, _) => &["--num_processes=0"],
        (2, 0) => &["--num_processes=2"],
        (2, 1) => &["--gpus_per_process", "2"],
        (2, _) => &["--num_processes=2", "--gpus_per_process=-1"],
        (4, 0) => &["--num_processes=2", "--gpus_per_process=2"],
        (4, 1) => &["--gpus_per_process=4"],
        (4, _) => &["--num_processes", "4", "--benchmark"],
        _ => unreachable!(),
    };
    words.iter().map(|w| w.to_string()).collect()
}

/// Checks every rule over a set of runs; `Err` names the first broken one.
fn check(runs: &[Run]) -> Result<(), String> {
    for (i, r) in runs.iter().enumerate() {
        if r.ids.len() != r.needed as usize {
            return Err(format!("run {i} asked for {} GPUs and got {:?}", r.needed, r.ids));
        }
        if r.ids.windows(2).any(|w| w[1] != w[0] + 1) || r.ids.iter().any(|&id| id >= GPUS) {
            return Err(format!("run {i}: block {:?} is not contiguous within the pool", r.ids));
        }
        let mut lock_ids: Vec<u32> = r.locks.iter().map(|&(id, _)| id).collect();
        lock_ids.sort();
        if lock_ids != r.ids || r.locks.iter().any(|&(_, s)| s != r.locks[0].1 || s >= SLOTS) {
            return Err(format!("run {i}: locks {:?} do not match GPUs {:?} at one slot", r.locks, r.ids));
        }
        if r.start > r.end || r.spawned > r.start {
            return Err(format!("run {i}: times out of order: {r:?}"));
        }
    }
    for gpu in 0..GPUS {
        let on_gpu = runs.iter().filter(|r| r.ids.contains(&gpu)).map(|r| (r.start, r.end));
        let most = max_overlap(on_gpu);
        if most > SLOTS as usize {
            return Err(format!("GPU {gpu} was used by {most} tests at once ({SLOTS} slots)"));
        }
        for slot in 0..SLOTS {
            let on_slot = runs.iter().filter(|r| r.locks.contains(&(gpu, slot))).map(|r| (r.start, r.end));
            let most = max_overlap(on_slot);
            if most > 1 {
                return Err(format!("slot {slot} of GPU {gpu} was held by {most} tests at once"));
            }
        }
    }
    Ok(())
}

/// Waiting times and how they compare with a perfect schedule.
struct Fairness {
    /// Makespan of a perfect packing: all GPU-seconds over all slots.
    ideal_s: f64,
    /// First wrapper started to last test ended.
    makespan_s: f64,
    /// (GPUs asked for, count, mean wait, longest wait), per class.
    classes: Vec<(u32, usize, f64, f64)>,
    /// Mean position of the 4-GPU requests in start order, 0 (first) to 1
    /// (last): about 0.5 when they are served like everyone else, near 1
    /// when they only get GPUs once the single-GPU requests are done.
    four_gpu_rank: f64,
}

fn fairness(runs: &[Run]) -> Fairness {
    let s = |ns: u128| ns as f64 / 1e9;
    let gpu_seconds: f64 = runs.iter().map(|r| r.needed as f64 * s(r.end - r.start)).sum();
    let first = runs.iter().map(|r| r.spawned).min().unwrap_or(0);
    let last = runs.iter().map(|r| r.end).max().unwrap_or(0);
    let classes = [1, 2, 4]
        .into_iter()
        .map(|g| {
            let waits: Vec<f64> = runs.iter().filter(|r| r.needed == g).map(|r| s(r.start - r.spawned)).collect();
            let mean = waits.iter().sum::<f64>() / waits.len().max(1) as f64;
            let max = waits.iter().copied().fold(0.0, f64::max);
            (g, waits.len(), mean, max)
        })
        .collect();
    let mut order: Vec<&Run> = runs.iter().collect();
    order.sort_by_key(|r| r.start);
    let denominator = (order.len().max(2) - 1) as f64;
    let ranks: Vec<f64> =
        order.iter().enumerate().filter(|(_, r)| r.needed == 4).map(|(i, _)| i as f64 / denominator).collect();
    let four_gpu_rank = ranks.iter().sum::<f64>() / ranks.len().max(1) as f64;
    Fairness { ideal_s: gpu_seconds / f64::from(GPUS * SLOTS), makespan_s: s(last - first), classes, four_gpu_rank }
}

/// Starts `wrappers` wrappers at once; what their tests recorded.
fn load(label: &str, wrappers: usize, sleep: &str, seed: u64) -> Vec<Run> {
    load_with_stops(label, wrappers, sleep, seed, None).0
}

/// When waiters were stopped and continued (ns since the epoch), and
/// whether the first waiter of the queue was among them.
struct Stops {
    stopped_at: u128,
    continued_at: u128,
    first_stopped: bool,
}

/// [`load`]; with `stop` set, once the queue has formed, up to 8 of its
/// waiters (the first one first) are stopped for that long and continued,
/// half of them by a `docker pause` (the cgroup freezer), half by a Ctrl-Z
/// (SIGSTOP), among the other stall cases.
fn load_with_stops(
    label: &str,
    wrappers: usize,
    sleep: &str,
    seed: u64,
    stop: Option<Duration>,
) -> (Vec<Run>, Option<Stops>) {
    let dir = TempDir::new(label);
    let mut runfiles = Runfiles::new(&dir, "ws");
    runfiles.add("ws/pkg/gpu_test", RECORDING_TEST, true);
    let sysroot = Sysroot::new(&dir);
    let lock_dir = dir.join("locks");
    let bin = workspace_bin("parallel_gpu_execute");
    let mut rng = XorShift64::new(seed);

    let mut started: Vec<(u32, PathBuf, u128, Running)> = Vec::with_capacity(wrappers);
    for i in 0..wrappers {
        let needed = match rng.below(100) {
            0..55 => 1,
            55..80 => 2,
            _ => 4,
        };
        let record = dir.join(format!("record-{i}"));
        let mut c = Cmd::new(&bin);
        runfiles.apply(&mut c);
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &sysroot.root)
            .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir)
            .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
            .env("TF_GPU_COUNT", GPUS.to_string())
            .env("TF_TESTS_PER_GPU", SLOTS.to_string())
            .env("RECORD_FILE", &record)
            .env("SLEEP", sleep)
            .timeout(Duration::from_secs(600))
            .arg("./pkg/gpu_test")
            .args(request_args(needed, rng.next_u64()));
        if stop.is_some() && i % 7 == 3 {
            c.block_signals(&[libc::SIGALRM]);
        }
        let spawned = now_ns();
        started.push((needed, record, spawned, c.spawn()));
    }

    let mut stopped = Vec::new();
    let stops = stop.map(|pause| {
        // Made first: the time between reading the waiters and stopping
        // them is one in which some are served.
        let freezer = test_support::Freezer::new("stress");
        // Waiters, from their records, earliest first.
        let ours: Vec<i32> = started.iter().map(|s| s.3.pid()).collect();
        let mut waiting = Vec::new();
        let formed = test_support::wait_until(Duration::from_secs(10), || {
            waiting = test_support::queued_pids(&lock_dir);
            waiting.retain(|p| ours.contains(p));
            waiting.len() >= 5
        });
        assert!(formed, "no queue formed (waiters {waiting:?})");
        let faults = test_support::QueueFaults::start(&lock_dir);
        stopped = waiting.iter().copied().step_by(2).take(8).collect();
        let freezer = match freezer {
            Ok(f) => Some(f),
            Err(why) => {
                test_support::prerequisite(false, &why, "waiters frozen by the cgroup freezer in the load");
                None
            }
        };
        let stopped_at = now_ns();
        for (k, &pid) in stopped.iter().enumerate() {
            match &freezer {
                Some(f) if k % 2 == 0 => f.add(pid),
                // SAFETY: kill(2) on a child of ours (an ended one is a zombie until reaped).
                _ => {
                    unsafe { libc::kill(pid, libc::SIGSTOP) };
                }
            }
        }
        if let Some(f) = &freezer {
            f.freeze();
        }
        // Those served between the look and the stop (their record goes
        // before their test starts) were not stopped as waiters; every one
        // is let go below.
        let signalled = stopped.clone();
        let still = test_support::queued_pids(&lock_dir);
        stopped.retain(|p| still.contains(p));
        std::thread::sleep(pause / 2);
        faults.remove_queue();
        std::thread::sleep(pause / 2);
        let continued_at = now_ns();
        drop(faults);
        if let Some(f) = &freezer {
            f.thaw();
        }
        for &pid in &signalled {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
        Stops { stopped_at, continued_at, first_stopped: !stopped.is_empty() }
    });
    let mut runs = Vec::with_capacity(wrappers);
    for (needed, record, spawned, running) in started {
        let pid = running.pid();
        let out = running.wait();
        out.assert_success();
        assert!(record.exists(), "the test did not run\n{}", out.explain());
        let rec = parse_record(&read_to_string(&record));
        if let Err(e) = check_gpus_match_locks(&rec, "HIP_VISIBLE_DEVICES", str::to_string) {
            panic!("{e}\nrecord: {rec:?}\n{}", out.explain());
        }
        let get = |k: &str| record_value(&rec, k).unwrap_or_else(|| panic!("no {k} in {rec:?}")).to_string();
        let ids: Vec<u32> = get("HIP_VISIBLE_DEVICES").split(',').map(|i| i.parse().unwrap()).collect();
        assert_eq!(get("CUDA_VISIBLE_DEVICES"), get("HIP_VISIBLE_DEVICES"), "{}", out.explain());
        assert!(record_value(&rec, "ROCR_VISIBLE_DEVICES").is_none(), "{}", out.explain());
        let locks = get("locks")
            .split_whitespace()
            .map(|l| {
                let (id, slot) = l.strip_prefix("gpulock").and_then(|l| l.split_once('_')).expect("lock file name");
                (id.parse().unwrap(), slot.parse().unwrap())
            })
            .collect();
        runs.push(Run {
            needed,
            ids,
            locks,
            spawned,
            start: get("start").parse().unwrap(),
            end: get("end").parse().unwrap(),
            stopped: stopped.contains(&pid),
            said_waiting: out.stderr.contains("parallel_gpu_execute: waiting for "),
        });
    }
    (runs, stops)
}

/// The longest time within `[from, to]` during which no test ran while
/// some wrapper that was not stopped still waited for its GPUs: how long
/// the stopped waiters held the others up.
fn longest_stall(runs: &[Run], from: u128, to: u128) -> u128 {
    let mut instants: Vec<u128> = vec![from, to];
    instants.extend(runs.iter().flat_map(|r| [r.spawned, r.start, r.end]).filter(|t| (from..=to).contains(t)));
    instants.sort();
    instants.dedup();
    let (mut longest, mut since) = (0, None::<u128>);
    for w in instants.windows(2) {
        let mid = w[0] + (w[1] - w[0]) / 2;
        let running = runs.iter().any(|r| r.start <= mid && mid < r.end);
        let held_up = runs.iter().any(|r| !r.stopped && r.spawned <= mid && mid < r.start);
        if !running && held_up {
            let begun = *since.get_or_insert(w[0]);
            longest = longest.max(w[1] - begun);
        } else {
            since = None;
        }
    }
    longest
}

fn load_and_check(label: &str, wrappers: usize, sleep: &str) {
    let _alone = one_load();
    let seed = env_or("STRESS_SEED", 4);
    let started = std::time::Instant::now();
    let runs = load(label, wrappers, sleep, seed);
    let elapsed = started.elapsed();
    if let Err(broken) = check(&runs) {
        panic!("{broken} (seed {seed})\n{runs:#?}");
    }
    let f = fairness(&runs);
    println!(
        "load: {wrappers} wrappers over {GPUS} GPUs x {SLOTS} slots, {sleep} s tests, seed {seed}: all passed in {elapsed:.1?}"
    );
    println!("  ideal makespan (all GPU-seconds / 16 slots): {:.2} s; actual: {:.2} s", f.ideal_s, f.makespan_s);
    for (gpus, n, mean, max) in &f.classes {
        println!(
            "  {gpus}-GPU requests: {n:3}, wait mean {mean:.2} s, longest {max:.2} s ({:.2} x ideal makespan)",
            max / f.ideal_s
        );
    }
    println!("  mean start rank of 4-GPU requests: {:.2} (0 first, 1 last)", f.four_gpu_rank);

    if let Err(starved) = starvation(&f) {
        panic!("{starved} (seed {seed})");
    }
}

/// Starvation: the 4-GPU requests' waits grow toward the whole run while
/// the 1-GPU requests' stay short, and they start last; in arrival order
/// every class waits alike (a bound on the longest wait cannot tell).
fn starvation(f: &Fairness) -> Result<(), String> {
    let (_, n1, mean1, _) = f.classes[0];
    let (_, n4, mean4, _) = f.classes[2];
    if n1 == 0 || n4 == 0 {
        return Err("the mix lacks 1-GPU or 4-GPU requests; change STRESS_SEED".to_string());
    }
    let bound = 1.5 * mean1 + 0.3;
    if mean4 > bound {
        return Err(format!(
            "4-GPU requests waited {mean4:.2} s on average, over 1.5 x the 1-GPU requests' {mean1:.2} s + 0.3 s"
        ));
    }
    if f.four_gpu_rank > 0.75 {
        return Err(format!("4-GPU requests were served last (mean start rank {:.2})", f.four_gpu_rank));
    }
    Ok(())
}

/// How long a stopped waiter may hold up the waiters behind it: until its
/// beats are stale and they notice (parallel_gpu_execute's queue:
/// STALE_AFTER 1 s, checked every 0.25 s), with room for a loaded machine;
/// well under [`STOP`], the time the stopped waiters stay stopped.
const STALL_BOUND: Duration = Duration::from_millis(2000);
const STOP: Duration = Duration::from_millis(3500);

/// One load at a time: the harness runs tests two at once, and a second
/// load on the same cores would be measured as the first one's stalls.
static ONE_LOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_load() -> std::sync::MutexGuard<'static, ()> {
    ONE_LOAD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn stopped_and_continued_waiters_neither_stall_the_others_nor_share_a_slot() {
    let _alone = one_load();
    let seed = env_or("STRESS_SEED", 4);
    let started = std::time::Instant::now();
    let (runs, stops) = load_with_stops("stress-stopped", 40, "0.2", seed, Some(STOP));
    let stops = stops.expect("stops");
    if let Err(broken) = check(&runs) {
        panic!("{broken} (seed {seed})\n{runs:#?}");
    }
    let elapsed = started.elapsed();
    // The stopped wrappers were waiting: seen in the queue just before the
    // SIGSTOP, they said so, and their tests started only once continued.
    let stopped: Vec<&Run> = runs.iter().filter(|r| r.stopped).collect();
    assert!(
        stopped.len() >= 3 && stops.first_stopped,
        "{} stopped, the first waiter among them: {}",
        stopped.len(),
        stops.first_stopped
    );
    for r in &stopped {
        assert!(r.said_waiting, "a stopped wrapper never said it waited: {r:?}");
        assert!(r.start >= stops.continued_at, "a stopped wrapper's test ran while it was stopped: {r:?}");
    }
    // The others were not held up for the whole stop.
    let stall = longest_stall(&runs, stops.stopped_at, stops.continued_at);
    let stall = Duration::from_nanos(stall as u64);
    println!(
        "load with {} of 40 wrappers (the first waiter among them) stopped or frozen for {STOP:?}: all passed in {elapsed:.1?}; \
         the others were held up for {stall:.2?} at most (bound {STALL_BOUND:?})",
        stopped.len()
    );
    assert!(stall <= STALL_BOUND, "the stopped waiters held the others up for {stall:?} (bound {STALL_BOUND:?})");
}

#[test]
fn load_many_wrappers_at_once_share_8_gpus_fairly() {
    let wrappers = env_or("STRESS_WRAPPERS", 48);
    let sleep = std::env::var("STRESS_SLEEP").unwrap_or_else(|_| "0.2".into());
    load_and_check("stress", wrappers, &sleep);
}

/// The full size: 200 wrappers at once, as `--local_test_jobs=200`.
#[test]
#[ignore = "about 20 s on 2 cores; run with --ignored (see the file's docs)"]
fn load_200_wrappers_at_once() {
    let wrappers = env_or("STRESS_WRAPPERS", 200);
    let sleep = std::env::var("STRESS_SLEEP").unwrap_or_else(|_| "0.5".into());
    load_and_check("stress200", wrappers, &sleep);
}

/// The checker itself must fail on a bad schedule, or the load test above
/// proves nothing.
#[test]
fn the_checker_catches_shared_slots_split_blocks_and_overbooking() {
    let run = |ids: &[u32], slot: u32, start: u128, end: u128| Run {
        needed: ids.len() as u32,
        ids: ids.to_vec(),
        locks: ids.iter().map(|&id| (id, slot)).collect(),
        spawned: 0,
        start,
        end,
        stopped: false,
        said_waiting: false,
    };
    let fine = [run(&[0, 1], 0, 10, 20), run(&[1], 1, 15, 25), run(&[0, 1, 2, 3], 0, 20, 30)];
    assert_eq!(check(&fine), Ok(()));
    let shared = [run(&[0], 0, 10, 20), run(&[0], 0, 19, 30)];
    assert!(check(&shared).unwrap_err().contains("slot 0 of GPU 0 was held by 2"));
    let overbooked = [run(&[2], 0, 0, 10), run(&[2], 1, 0, 10), {
        let mut third = run(&[2], 1, 5, 6);
        third.locks = vec![(2, 0)];
        third
    }];
    assert!(check(&overbooked).is_err());
    let split = [run(&[3, 5], 0, 0, 1)];
    assert!(check(&split).unwrap_err().contains("not contiguous"));
    let mut mismatched = run(&[4, 5], 0, 0, 1);
    mismatched.locks = vec![(4, 0), (5, 1)];
    assert!(check(&[mismatched]).unwrap_err().contains("do not match"));
    let mut short = run(&[6], 0, 0, 1);
    short.needed = 2;
    assert!(check(&[short]).unwrap_err().contains("asked for 2"));
    assert_eq!(max_overlap([(0, 10), (10, 20)]), 1, "a slot handed over at one instant is not shared");
}

/// The fairness and stall measures must fail on the schedules they are
/// there to catch: 4-GPU requests served only once the rest are done, and
/// a stopped head that keeps everyone waiting until it is continued.
#[test]
fn the_fairness_and_stall_measures_catch_starvation_and_a_stalled_queue() {
    const S: u128 = 1_000_000_000;
    let run = |needed: u32, spawned: u128, start: u128| Run {
        needed,
        ids: (0..needed).collect(),
        locks: (0..needed).map(|id| (id, 0)).collect(),
        spawned,
        start,
        end: start + S / 5,
        stopped: false,
        said_waiting: false,
    };
    // 32 requests arriving together; served in arrival order, or with the
    // 4-GPU ones (every fourth) left until the others are done.
    let classes = |i: u128| {
        if i % 4 == 3 {
            4
        } else if i % 4 == 1 {
            2
        } else {
            1
        }
    };
    let in_order: Vec<Run> = (0..32u128).map(|i| run(classes(i), 0, i * S / 16)).collect();
    assert_eq!(starvation(&fairness(&in_order)), Ok(()));
    let others = (0..32u128).filter(|i| classes(*i) != 4);
    let mut starved: Vec<Run> = others.enumerate().map(|(k, i)| run(classes(i), 0, k as u128 * S / 16)).collect();
    let after = starved.iter().map(|r| r.end).max().unwrap();
    starved.extend((0..8u128).map(|k| run(4, 0, after + k * S / 16)));
    assert!(starvation(&fairness(&starved)).unwrap_err().contains("4-GPU requests waited"));

    // A stop from 1 s to 4.5 s: the others resume 1.2 s in, or only at 4.5 s.
    let (from, to) = (S, 9 * S / 2);
    let mut stalled = vec![run(1, 0, 0), run(1, 0, 4 * S / 5), run(1, 0, to), run(1, 0, to)];
    stalled.push(Run { stopped: true, ..run(1, 0, to + S) });
    assert_eq!(longest_stall(&stalled, from, to), to - from);
    let mut resumed = stalled.clone();
    resumed[2].start = from + 6 * S / 5;
    resumed[2].end = resumed[2].start + 3 * S;
    resumed[3].start = resumed[2].end;
    resumed[3].end = to + S;
    assert_eq!(longest_stall(&resumed, from, to), 6 * S / 5);
}
