//! Contention, for each launcher (ours; a baseline build given by
//! `WRAPPER_BENCH_BASELINE`, such as 7efff60's; the classic bash wrapper):
//!
//! - **the load** of `tests/stress.rs`: wrappers started at once over
//!   8 GPUs x 2 slots, asking for 1, 2 and 4 GPUs (55, 25 and 20 in a
//!   hundred, from a fixed seed), each test holding its block 150 ms. The
//!   makespan (first spawn to last exit) against the ideal (every test's
//!   own time on its GPUs, over the 16 slots), the tests lost (the classic
//!   wrapper fails a test whose slot is busy), and the CPU each wrapper
//!   used before its test (its test reads its process's CPU clock at its
//!   start);
//! - **a queue at rest**: as many waiters behind 16 held slots, their
//!   wake-ups (voluntary context switches) and CPU over 2 s, per waiter.
//!
//! The test is `benches/support/hold.c`, which records its own start and
//! end (`HOLD_RECORD`).

use super::*;

pub(crate) const LOAD_HOLD_MS: u64 = 150;
const SLOTS: u32 = 2;

/// One way to run a test under a GPU wrapper.
pub(crate) struct Launcher {
    pub(crate) label: String,
    /// The wrapper (and, for the classic one, bash before it).
    pub(crate) argv: Vec<OsString>,
    /// The variable that names its lock directory.
    pub(crate) lock_variable: &'static str,
    /// Fails a test at once where every slot is busy.
    pub(crate) fails_fast: bool,
}

pub(crate) struct LoadRun {
    pub(crate) makespan_s: f64,
    pub(crate) ideal_s: f64,
    pub(crate) lost: usize,
    /// Per test that ran: its wrapper's CPU before the test, in ms.
    pub(crate) cpu_ms: Vec<f64>,
}

pub(crate) struct AtRest {
    pub(crate) wakeups_per_s: Vec<f64>,
    pub(crate) cpu_ms_per_s: Vec<f64>,
}

pub(crate) struct Contention {
    pub(crate) wrappers: usize,
    pub(crate) rounds: usize,
    pub(crate) rows: Vec<(String, Vec<LoadRun>, Option<AtRest>)>,
}

/// The GPUs each wrapper asks for, in launch order.
fn requests(n: usize) -> Vec<u32> {
    let mut rng = XorShift(4);
    (0..n)
        .map(|_| match rng.next() % 100 {
            0..55 => 1,
            55..80 => 2,
            _ => 4,
        })
        .collect()
}

fn command(l: &Launcher, hold: &Path, locks: &Path, gpus: u32) -> Command {
    let mut c = Command::new(&l.argv[0]);
    c.args(&l.argv[1..]).arg(hold).arg(LOAD_HOLD_MS.to_string());
    if gpus > 1 {
        c.arg(format!("--num_processes={gpus}"));
    }
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TF_GPU_COUNT", GPUS.to_string())
        .env("TF_TESTS_PER_GPU", SLOTS.to_string())
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .env(l.lock_variable, locks)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

fn load(l: &Launcher, hold: &Path, dir: &Path, round: usize, n: usize) -> LoadRun {
    let locks = dir.join(format!("load-{round}-{}", l.label.len()));
    let records = dir.join(format!("records-{round}-{}", l.label.len()));
    let _ = fs::remove_dir_all(&locks);
    let _ = fs::remove_dir_all(&records);
    fs::create_dir_all(&records).unwrap();
    let asks = requests(n);
    let started = Instant::now();
    let mut children: Vec<_> = asks
        .iter()
        .enumerate()
        .map(|(i, &gpus)| {
            let mut c = command(l, hold, &locks, gpus);
            c.env("HOLD_RECORD", records.join(i.to_string()));
            c.spawn().unwrap_or_else(|e| panic!("{}: {e}", l.label))
        })
        .collect();
    let mut lost = 0;
    for child in &mut children {
        match child.wait().unwrap().code() {
            Some(0) => {}
            Some(1) if l.fails_fast => lost += 1,
            other => panic!("{}: a test under contention ended with {other:?}", l.label),
        }
    }
    let makespan_s = started.elapsed().as_secs_f64();
    let (mut gpu_seconds, mut cpu_ms) = (0.0, Vec::new());
    for (i, &gpus) in asks.iter().enumerate() {
        let Ok(line) = fs::read_to_string(records.join(i.to_string())) else { continue };
        let w: Vec<f64> = line.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if let [start, end, cpu_ns] = w[..] {
            // The classic wrapper takes one GPU whatever the test asks, and
            // runs it in a subshell: the test's CPU clock is not its own.
            let held = if l.fails_fast { 1.0 } else { f64::from(gpus) };
            gpu_seconds += held * (end - start) / 1e9;
            if !l.fails_fast {
                cpu_ms.push(cpu_ns / 1e6);
            }
        }
    }
    let _ = fs::remove_dir_all(&locks);
    LoadRun { makespan_s, ideal_s: gpu_seconds / f64::from(GPUS * SLOTS), lost, cpu_ms }
}

/// (voluntary context switches, nanoseconds on a CPU) of `pid`, from
/// `/proc/<pid>/status` and `/proc/<pid>/schedstat`.
fn sample(pid: u32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let switches = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?.trim().parse().ok()?;
    let schedstat = fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    Some((switches, schedstat.split_whitespace().next()?.parse().ok()?))
}

fn at_rest(l: &Launcher, hold: &Path, dir: &Path, n: usize) -> AtRest {
    let locks = dir.join(format!("rest-{}", l.label.len()));
    let _ = fs::remove_dir_all(&locks);
    fs::create_dir_all(&locks).unwrap();
    let held: Vec<fs::File> = (0..GPUS)
        .flat_map(|g| (0..SLOTS).map(move |s| (g, s)))
        .map(|(g, s)| {
            let f = fs::File::create(locks.join(format!("gpulock{g}_{s}"))).unwrap();
            // SAFETY: flock on a descriptor this process owns.
            assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
            f
        })
        .collect();
    let mut waiters: Vec<_> = (0..n).map(|_| command(l, hold, &locks, 1).spawn().unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let before: Vec<_> = waiters.iter().map(|w| sample(w.id())).collect();
    let t = Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let after: Vec<_> = waiters.iter().map(|w| sample(w.id())).collect();
    let secs = t.elapsed().as_secs_f64();
    let mut rest = AtRest { wakeups_per_s: Vec::new(), cpu_ms_per_s: Vec::new() };
    for (b, a) in before.into_iter().zip(after) {
        if let (Some(b), Some(a)) = (b, a) {
            rest.wakeups_per_s.push((a.0 - b.0) as f64 / secs);
            rest.cpu_ms_per_s.push((a.1 - b.1) as f64 / 1e6 / secs);
        }
    }
    for w in &mut waiters {
        let _ = w.kill();
        let _ = w.wait();
    }
    drop(held);
    let _ = fs::remove_dir_all(&locks);
    rest
}

pub(crate) fn contention(
    launchers: &[Launcher],
    hold: &Path,
    dir: &Path,
    wrappers: usize,
    rounds: usize,
) -> Contention {
    eprint!(
        "wrapper_cost: contention: {rounds} rounds of {wrappers} wrappers, then {wrappers} waiters at rest, per launcher "
    );
    let started = Instant::now();
    let mut rows: Vec<(String, Vec<LoadRun>, Option<AtRest>)> =
        launchers.iter().map(|l| (l.label.clone(), Vec::new(), None)).collect();
    for round in 0..rounds {
        for (l, row) in launchers.iter().zip(&mut rows) {
            row.1.push(load(l, hold, dir, round, wrappers));
            eprint!(".");
        }
    }
    for (l, row) in launchers.iter().zip(&mut rows) {
        if !l.fails_fast {
            row.2 = Some(at_rest(l, hold, dir, wrappers));
            eprint!(".");
        }
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    Contention { wrappers, rounds, rows }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

pub(crate) fn contention_table(c: &Contention) -> Table {
    let mut t = Table::new(&[
        "launcher",
        "makespan (median)",
        "ideal",
        "x ideal",
        "lost tests",
        "CPU per wrapper before its test (mean)",
        "at rest: wake-ups per waiter per s (median / max)",
        "at rest: CPU per waiter per s (mean)",
        "target",
    ]);
    for (i, (label, runs, rest)) in c.rows.iter().enumerate() {
        let span = median(runs.iter().map(|r| r.makespan_s).collect());
        let ideal = median(runs.iter().map(|r| r.ideal_s).collect());
        let x = median(runs.iter().map(|r| r.makespan_s / r.ideal_s.max(1e-9)).collect());
        let lost: usize = runs.iter().map(|r| r.lost).sum();
        let cpu: Vec<f64> = runs.iter().flat_map(|r| r.cpu_ms.iter().copied()).collect();
        let cpu_mean = match cpu.len() {
            0 => "- (its test is a subshell's)".to_string(),
            n => ms(cpu.iter().sum::<f64>() / n as f64),
        };
        let (wake, rest_cpu) = match rest {
            Some(r) => {
                let most = r.wakeups_per_s.iter().copied().fold(0.0, f64::max);
                let cpu = r.cpu_ms_per_s.iter().sum::<f64>() / r.cpu_ms_per_s.len().max(1) as f64;
                (format!("{:.1} / {:.1}", median(r.wakeups_per_s.clone()), most), format!("{cpu:.3} ms"))
            }
            None => ("- (fails at once)".to_string(), "-".to_string()),
        };
        let target = match (i, rest) {
            (0, Some(r)) => {
                let most = r.wakeups_per_s.iter().copied().fold(0.0, f64::max);
                format!("<= 1.2x ideal, <= 12 wake-ups/s {}", verdict(x <= 1.2 && most <= 12.0 && lost == 0))
            }
            _ => String::new(),
        };
        t.push(vec![
            label.clone(),
            format!("{span:.2} s"),
            format!("{ideal:.2} s"),
            format!("{x:.2}"),
            format!("{lost} of {}", c.rounds * c.wrappers),
            cpu_mean,
            wake,
            rest_cpu,
            target,
        ]);
    }
    t
}
