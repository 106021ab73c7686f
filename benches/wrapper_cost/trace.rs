//! Where the time goes, counted instead of timed: each case that is one
//! process up to its exec is run once more under `benches/support/steps.c`,
//! which single-steps it and counts its instructions, its CPUID instructions
//! (each one traps to the hypervisor on a virtual machine) and its system
//! calls up to the exec of the test; its page faults come from the timed
//! runs (`wait4`'s resource usage). Counts move by a few dozen
//! instructions between runs where timings move by percents, so they show
//! what a change did on the machine at hand, whatever its CPU kind.

use super::*;

/// The heading of [`counts_table`].
pub(crate) const COUNTS_TITLE: &str = "where the time goes, counted: page faults of the timed runs; \
     instructions, CPUID and system calls of one single-stepped run (benches/support/steps.c) up to the exec of the test";

/// What one single-stepped run counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Instructions executed (single steps).
    pub(crate) steps: u64,
    pub(crate) cpuid: u64,
    /// System calls, the exec of the test included.
    pub(crate) syscalls: u64,
    /// Whether the counts end at an exec (a wrapper, a floor) rather than
    /// at the exit (a direct exec of the test).
    pub(crate) exec: bool,
}

impl Counts {
    /// The tracer's line: `<steps> <cpuid> <syscalls> <exec|exit> <status>`;
    /// the status must be 0.
    pub(crate) fn parse(line: &str) -> Result<Counts, String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        match (number(0), number(1), number(2), f.get(3), f.get(4), f.len()) {
            (Some(steps), Some(cpuid), Some(syscalls), Some(&end @ ("exec" | "exit")), Some(&"0"), 5) => {
                Ok(Counts { steps, cpuid, syscalls, exec: end == "exec" })
            }
            _ => Err(format!("unexpected output {line:?} (a status other than 0 means the run failed)")),
        }
    }
}

impl Key {
    /// Whether the case is a single process up to the exec of its test, so
    /// that single-stepping it counts the whole of its own work. The
    /// classic script and the rocminfo cases start other processes.
    pub(crate) fn traced(self) -> bool {
        !matches!(self, Key::Classic | Key::PgeRocminfoManifest | Key::PgeRocminfoWalk)
    }
}

/// Runs `case`'s timed command line under the tracer, in its environment.
pub(crate) fn count(case: &Case, steps: &Path) -> Result<Counts, String> {
    if let Some(file) = annotation_path(case) {
        clear_annotation(&file, &case.label);
    }
    let out = launched(steps, case).output().map_err(|e| format!("cannot run {}: {e}", steps.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Counts::parse(String::from_utf8_lossy(&out.stdout).trim())
}

/// The cases the quick mode counts: single-stepping costs about 70 µs an
/// instruction on these virtual machines, and every case, about a minute.
const QUICK: [Key; 4] = [Key::Floor, Key::PgePassThrough, Key::PgeTfGpuCount, Key::PgeKfd];

/// Counts every traced case of `group` (`quick`: only the floor and
/// parallel_gpu_execute's three paths). A tracer that cannot work here (no
/// ptrace in this container) costs the table its counts, with one warning
/// line, not the run.
pub(crate) fn count_group(group: &mut Group, steps: &Path, quick: bool) {
    let chosen = |c: &Case| c.key.traced() && (!quick || QUICK.contains(&c.key));
    let traced = group.cases.iter().filter(|c| chosen(c)).count();
    eprint!("wrapper_cost: {}: {traced} cases single-stepped up to their exec ", group.title);
    let started = Instant::now();
    for case in group.cases.iter_mut().filter(|c| chosen(c)) {
        match count(case, steps) {
            Ok(counts) => case.counts = Some(counts),
            Err(why) => {
                eprintln!("\nwrapper_cost: WARNING: {}: no counts: {why}", case.label);
                return;
            }
        }
        eprint!(".");
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
}

/// The median of the page faults of the case's timed runs.
pub(crate) fn median_faults(case: &Case) -> Option<u64> {
    let mut faults: Vec<u64> = case.samples.iter().map(|s| s.faults).collect();
    faults.sort_unstable();
    (!faults.is_empty()).then(|| nearest_rank(&faults, 0.5))
}

/// One row per traced case: page faults, and what it did before the exec.
pub(crate) fn counts_table(group: &Group) -> Table {
    let mut t = Table::new(&[
        "case",
        "page faults (median, the test's own included)",
        "instructions before the exec",
        "of them CPUID",
        "system calls before the exec (the exec included)",
    ]);
    for c in group.cases.iter().filter(|c| c.key.traced()) {
        let faults = median_faults(c).map_or("-".to_string(), |f| f.to_string());
        let (steps, cpuid, syscalls) = match c.counts {
            Some(n) => {
                let until = if n.exec { "" } else { " (to its exit)" };
                (format!("{}{until}", thousands(n.steps)), n.cpuid.to_string(), n.syscalls.to_string())
            }
            None => ("-".to_string(), "-".to_string(), "-".to_string()),
        };
        t.push(vec![c.label.clone(), faults, steps, cpuid, syscalls]);
    }
    t
}
