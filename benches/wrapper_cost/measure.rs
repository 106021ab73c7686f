//! Interleaved timing rounds and statistics.

use super::*;

pub(crate) struct Group {
    pub(crate) title: String,
    pub(crate) rounds: usize,
    /// Whether the per-case targets are judged here (in the group with many
    /// rounds; the other has its own floor and direct rows for its ratios).
    pub(crate) judged: bool,
    pub(crate) cases: Vec<Case>,
}

impl Group {
    pub(crate) fn get(&self, key: Key) -> Option<&Case> {
        self.cases.iter().find(|c| c.key == key)
    }

    pub(crate) fn median(&self, key: Key) -> Option<f64> {
        self.get(key).map(|c| stats(&c.samples).median_ms)
    }
}

/// How many page-cache states each case's samples span: the timed rounds
/// come in this many blocks, and before each block after the first every
/// program's pages are dropped again (`pagecache::settle`; the caller
/// dropped them before the first).
const SETTLINGS: usize = 10;

/// Untimed rounds after each later drop: the first exec of each program
/// reads it back from the disk.
const REWARM_ROUNDS: usize = 2;

pub(crate) fn run_group(group: &mut Group, attr: &Attr, devnull: RawFd, maxrss: &Path, programs: &[PathBuf]) {
    for case in &mut group.cases {
        own_annotation_dir(case);
        check(case);
    }
    let prepared: Vec<Prepared> = group.cases.iter().map(|c| Prepared::new(c, devnull)).collect();
    let n = prepared.len();
    let blocks = group.rounds.clamp(1, SETTLINGS);
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    eprint!("wrapper_cost: {}: {} rounds of {n} cases ", group.title, group.rounds);
    let started = Instant::now();
    for block in 0..blocks {
        let untimed = if block == 0 {
            (group.rounds / 20).clamp(1, 20)
        } else {
            pagecache::settle(programs);
            REWARM_ROUNDS
        };
        let timed = group.rounds * (block + 1) / blocks - group.rounds * block / blocks;
        for round in 0..untimed + timed {
            // A new order each round, so that no case always follows the same
            // one (a case right after a 50,000-file walk starts with cold caches).
            rng.shuffle(&mut order);
            for &i in &order {
                let s = run_once(&prepared[i], attr, &group.cases[i].label);
                if round >= untimed {
                    group.cases[i].samples.push(s);
                }
            }
        }
        eprint!(".");
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    for case in &mut group.cases {
        case.rss_kib = Some(peak_rss(case, maxrss, 3));
    }
}

/// A fixed-seed xorshift generator: the same orders on every run.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Fisher-Yates.
    pub(crate) fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

pub(crate) struct Stats {
    pub(crate) median_ms: f64,
    pub(crate) p90_ms: f64,
    pub(crate) cpu_ms: f64,
}

/// The nearest-rank `p` quantile of a sorted, non-empty slice.
pub(crate) fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// [`nearest_rank`] of nanoseconds, in milliseconds.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> f64 {
    nearest_rank(sorted, p) as f64 / 1e6
}

pub(crate) fn stats(samples: &[Sample]) -> Stats {
    let mut wall: Vec<u64> = samples.iter().map(|s| s.wall_ns).collect();
    let mut cpu: Vec<u64> = samples.iter().map(|s| s.cpu_ns).collect();
    wall.sort_unstable();
    cpu.sort_unstable();
    Stats { median_ms: percentile(&wall, 0.5), p90_ms: percentile(&wall, 0.9), cpu_ms: percentile(&cpu, 0.5) }
}
