//! What a wrapper costs per test: whole processes, timed side by side with a
//! direct exec of the test, the glibc floor and the classic bash wrapper.
//!
//! ```text
//! cargo bench --bench wrapper_cost                          # about two minutes
//! WRAPPER_BENCH_QUICK=1 cargo bench --bench wrapper_cost    # proves it works, well under a minute
//! ```
//!
//! It builds what it measures first: the static release binaries
//! (`$CARGO build --release`) and the C programs of `benches/floor` and
//! `benches/support` (`cc -static -O2`). Then it lays out what Bazel and a GPU
//! host would give a test: runfiles trees (a small one, and one of 50,000
//! files spread over a thousand directories, symlinks into an execroot, with
//! a sorted `MANIFEST`), a fake KFD sysroot with 8 GPUs, a fake `rocminfo`
//! that lists 8 gfx agents, a Bazel-like test environment, private lock
//! directories.
//!
//! Each case is one whole process, timed from `posix_spawn` to `wait4`, with
//! stdio on /dev/null. The cases of a group run interleaved (A B C A B C ...,
//! in a new order each round, from a fixed seed, so that no case always
//! follows the same one), so that a noisy, shared 2-core machine slows every
//! case alike. The table gives medians and p90s, the CPU time `wait4` reports
//! (children that a process waited for included), and ratios to the floor and
//! to a direct exec, each within its own group. Every case is first run once
//! with the test replaced by a script that prints its environment, and that
//! output is checked (the wrapper really set the variables, really passed
//! through; and where it says it ran the test on a GPU, the test holds the
//! descriptor of that slot's lock file and the file is locked: the probe's
//! own `flock -n` on it fails), so that no number measures a failure path. Peak RSS comes from a separate pass through
//! `benches/support/maxrss.c` (which says why).
//!
//! Counted, not timed (`trace`): the page faults of each case's timed runs
//! (median), and, for each case of the small tree that is one process up to
//! its exec, the instructions, CPUID instructions and system calls of one
//! run single-stepped by `benches/support/steps.c` up to the exec of the
//! test. They say where a path's time goes on the machine at hand.
//!
//! Contention (`contention`): the stress test's load (200 wrappers at once
//! over 8 GPUs x 2 slots, asking for 1, 2 and 4 GPUs, each test holding
//! its GPUs 150 ms) by ours, by a baseline build, and by the classic
//! fail-fast wrapper: makespan against the ideal, tests lost, CPU before
//! the test; and 200 waiters at rest behind held slots: their wake-ups and
//! CPU per second.
//!
//! The benchmark prints numbers; it asserts no timing (the machines are
//! shared). Each target of the project is shown as PASS or MISS beside its
//! number.
//!
//! Settings (environment; `--quick` and `--markdown` also work as arguments,
//! after `--`):
//!
//! - `WRAPPER_BENCH_QUICK=1`: few rounds, for CI (the numbers are rough);
//! - `WRAPPER_BENCH_ITERS=N`: rounds of the small-tree group (default 1500, quick 30);
//! - `WRAPPER_BENCH_LARGE_ITERS=N`: rounds of the large-tree group (default 40, quick 3);
//! - `WRAPPER_BENCH_CONTENTION=N`: contention rounds (default 3, quick 1);
//! - `WRAPPER_BENCH_CONTENTION_WRAPPERS=N`: wrappers per contention round,
//!   and waiters at rest (default 200, quick 48);
//! - `WRAPPER_BENCH_BASELINE=FILE`: another build of parallel_gpu_execute
//!   run beside ours in the contention rows (`WRAPPER_BENCH_BASELINE_LABEL`
//!   names it; docs/benchmarks.md says how 7efff60's is built);
//! - `WRAPPER_BENCH_FILES=N`: files in the large tree (default 50000);
//! - `WRAPPER_BENCH_MARKDOWN=1`: the results as Markdown tables too;
//! - `WRAPPER_BENCH_MUSL_BINS=DIR`: the release files of `tools/release.sh`
//!   (`<binary>-<version>-x86_64-unknown-linux-musl`, or the three under
//!   their plain names): the pass-through, `TF_GPU_COUNT` and KFD cases are
//!   run by that parallel_gpu_execute too, with the glibc test and with a
//!   static musl test (set against the musl floor), and the sizes table
//!   lists the three.
//!
//! Run as a test (`cargo test --benches`, which passes no `--bench`), it runs
//! the quick mode.

use std::ffi::{CStr, CString, OsStr, OsString, c_char};
use std::fmt::Write as _;
use std::fs;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use test_support::{Runfiles, Sysroot, TempDir, fake_rocminfo_script};

mod build;
mod cases;
mod contention;
mod fixtures;
mod measure;
mod pagecache;
mod report;
mod spawn;
mod trace;

use build::*;
use cases::*;
use contention::Launcher;
use fixtures::*;
use measure::*;
use report::*;
use spawn::*;
use trace::*;

const TRIPLE: &str = "x86_64-unknown-linux-gnu";
const WORKSPACE: &str = "ws";
/// How the wrappers are given the test: as Bazel's `--run_under` does.
const TEST_WORD: &str = "./pkg/gpu_test";
/// The same place, holding a script that prints its environment.
const PROBE_WORD: &str = "./pkg/env_probe";
/// The static musl test (`musl-gcc -static`), in every tree when musl-gcc
/// built it: as the wrappers get it, and its place in the tree.
const MUSL_TEST_WORD: &str = "./pkg/musl_test";
const MUSL_TEST_PATH: &str = "ws/pkg/musl_test";
const GPUS: u32 = 8;
const SIZE_LIMIT: u64 = 1_000_000;
const RSS_LIMIT_KIB: i64 = 2048;

// ---------------------------------------------------------------- settings

struct Settings {
    quick: bool,
    small_rounds: usize,
    large_rounds: usize,
    contention_rounds: usize,
    contention_wrappers: usize,
    /// Another build of parallel_gpu_execute and its label.
    baseline: Option<(PathBuf, String)>,
    large_files: usize,
    markdown: bool,
    musl_bins: Option<PathBuf>,
    /// The settings that differ from the defaults, for the reproduce line.
    given: Vec<String>,
}

fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

fn env_count(name: &str, default: usize, given: &mut Vec<String>) -> usize {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => {
            let n = v.parse().ok().filter(|&n: &usize| n > 0);
            let n = n.unwrap_or_else(|| panic!("{name}={v:?}: expected a positive integer"));
            given.push(format!("{name}={n}"));
            n
        }
        _ => default,
    }
}

impl Settings {
    fn load() -> Settings {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut quick = env_flag("WRAPPER_BENCH_QUICK") || args.iter().any(|a| a == "--quick");
        let markdown = env_flag("WRAPPER_BENCH_MARKDOWN") || args.iter().any(|a| a == "--markdown");
        for a in &args {
            if !matches!(a.as_str(), "--bench" | "--quick" | "--markdown") {
                eprintln!("wrapper_cost: ignoring argument {a:?} (settings are environment variables, see the source)");
            }
        }
        if !args.iter().any(|a| a == "--bench") && !quick {
            eprintln!("wrapper_cost: run without --bench (as a test): quick mode");
            quick = true;
        }
        let mut given = Vec::new();
        if quick {
            given.push("WRAPPER_BENCH_QUICK=1".to_string());
        }
        let small_rounds = env_count("WRAPPER_BENCH_ITERS", if quick { 30 } else { 1500 }, &mut given);
        let large_rounds = env_count("WRAPPER_BENCH_LARGE_ITERS", if quick { 3 } else { 40 }, &mut given);
        let contention_rounds = env_count("WRAPPER_BENCH_CONTENTION", if quick { 1 } else { 3 }, &mut given);
        let contention_wrappers =
            env_count("WRAPPER_BENCH_CONTENTION_WRAPPERS", if quick { 48 } else { 200 }, &mut given);
        let baseline = std::env::var_os("WRAPPER_BENCH_BASELINE").filter(|b| !b.is_empty()).map(|b| {
            let label = std::env::var("WRAPPER_BENCH_BASELINE_LABEL").unwrap_or_else(|_| "baseline".into());
            given.push(format!("WRAPPER_BENCH_BASELINE={}", b.to_string_lossy()));
            (PathBuf::from(b), label)
        });
        let large_files = env_count("WRAPPER_BENCH_FILES", 50_000, &mut given);
        let musl_bins = std::env::var_os("WRAPPER_BENCH_MUSL_BINS").filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(dir) = &musl_bins {
            given.push(format!("WRAPPER_BENCH_MUSL_BINS={}", dir.display()));
        }
        Settings {
            quick,
            small_rounds,
            large_rounds,
            contention_rounds,
            contention_wrappers,
            baseline,
            large_files,
            markdown,
            musl_bins,
            given,
        }
    }
}

fn main() {
    let settings = Settings::load();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = target_dir(root);
    // Temporary trees go beside the build, on the disk a Bazel output base
    // would be on (test_support's TempDir reads this variable).
    let tmp_base = target.join("wrapper-bench").join("tmp");
    fs::create_dir_all(&tmp_base).unwrap();
    // SAFETY: the benchmark is single-threaded here; nothing reads the
    // environment concurrently.
    unsafe { std::env::set_var("CARGO_TARGET_TMPDIR", &tmp_base) };
    let bins = build(root, &target.join("wrapper-bench").join("bin"), settings.musl_bins.clone());

    eprintln!("wrapper_cost: laying out runfiles trees ({} files in the large one)", settings.large_files);
    let t0 = Instant::now();
    let small_plain = small_tree("bench-small", &bins, false);
    let small_rocm = small_tree("bench-small-rocm", &bins, true);
    let large = large_tree(&bins, settings.large_files);
    let scratch = TempDir::new("bench-scratch");
    let small_view = without_manifest(&small_rocm, &scratch.join("small-without-manifest"));
    let large_view = without_manifest(&large, &scratch.join("large-without-manifest"));
    let tmp = scratch.join("test_tmpdir");
    // Bazel creates the test's output directories before it starts the
    // test; the wrappers write their annotation into one of them.
    for dir in ["test.outputs", "test.outputs_manifest"] {
        fs::create_dir_all(tmp.join(dir)).unwrap();
    }
    let empty_sysroot = scratch.join("empty-sysroot");
    fs::create_dir_all(&empty_sysroot).unwrap();
    let mut kfd = Sysroot::new(&scratch);
    kfd.add_kfd_gpus(GPUS);
    let mut visited = 0;
    let found = walk_position(&large_view, false, &mut visited);
    assert!(found, "rocminfo is not in the large tree");
    eprintln!("wrapper_cost: trees ready in {:.1} s", t0.elapsed().as_secs_f64());
    let ctx = Context { bins: &bins, tmp, locks: scratch.join("locks"), empty_sysroot, kfd_sysroot: kfd.root.clone() };

    let mut small = Group {
        title: format!("small runfiles tree ({} files)", small_rocm.files),
        rounds: settings.small_rounds,
        judged: true,
        cases: vec![
            ctx.direct(&small_plain),
            ctx.floor(&small_plain),
            ctx.pge_pass_through(&small_plain),
            ctx.pge_tf_gpu_count(&small_plain),
            ctx.pge_kfd(&small_plain, "kfd-small"),
        ],
    };
    let floors: Vec<Case> = small
        .cases
        .iter()
        .filter(|c| matches!(c.key, Key::PgePassThrough | Key::PgeTfGpuCount | Key::PgeKfd))
        .map(|c| ctx.slot_floor(c))
        .collect();
    small.cases.extend(floors);
    small.cases.extend(ctx.pge_rocminfo(small_rocm.srcdir(), &small_view, "rocminfo-small"));
    small.cases.extend(ctx.musl(&small_plain));
    let musl_pge = ctx.musl_pge(&small_plain);
    let musl_floors: Vec<Case> = musl_pge
        .iter()
        .filter(|c| {
            matches!(c.key, Key::MuslPgePassThroughMuslTest | Key::MuslPgeTfGpuCountMuslTest | Key::MuslPgeKfdMuslTest)
        })
        .filter(|_| ctx.bins.musl_slot_floor.is_some())
        .map(|c| ctx.slot_floor(c))
        .collect();
    small.cases.extend(musl_pge);
    small.cases.extend(musl_floors);
    small.cases.extend(ctx.sanitizer(&small_plain));
    small.cases.push(ctx.classic("classic bash wrapper, rocminfo in the runfiles", &small_rocm, "classic-small"));

    let large_title = format!("runfiles tree of {} files", thousands(large.files as u64));
    let mut large_group = Group {
        title: large_title,
        rounds: settings.large_rounds,
        judged: false,
        cases: vec![ctx.direct(&large), ctx.floor(&large), ctx.pge_kfd(&large, "kfd-large")],
    };
    large_group.cases.extend(ctx.pge_rocminfo(large.srcdir(), &large_view, "rocminfo-large"));
    large_group.cases.push(ctx.classic("classic bash wrapper, rocminfo in the runfiles", &large, "classic-large"));

    let mut programs = bins.executables();
    for tree in [&small_plain, &small_rocm, &large] {
        programs.extend(tree.programs.iter().cloned());
    }
    let stayed = pagecache::settle(&programs);
    eprintln!(
        "wrapper_cost: page cache: {} of {} executables written back and dropped (each is read back on its first exec)",
        programs.len() - stayed.len(),
        programs.len()
    );
    for file in &stayed {
        eprintln!("wrapper_cost: WARNING: {} stayed in the page cache; its first-run state differs", file.display());
    }
    let devnull = open_devnull();
    let attr = Attr::new();
    run_group(&mut small, &attr, devnull.as_raw_fd(), &bins.maxrss, &programs);
    count_group(&mut small, &bins.steps, settings.quick);
    run_group(&mut large_group, &attr, devnull.as_raw_fd(), &bins.maxrss, &programs);
    let mut launchers = vec![Launcher {
        label: "parallel_gpu_execute".into(),
        argv: vec![bins.pge.clone().into()],
        lock_variable: "PARALLEL_GPU_EXECUTE_LOCK_DIR",
        fails_fast: false,
    }];
    if let Some((file, label)) = &settings.baseline {
        launchers.push(Launcher {
            label: format!("parallel_gpu_execute at {label}"),
            argv: vec![file.clone().into()],
            lock_variable: "PARALLEL_GPU_EXECUTE_LOCK_DIR",
            fails_fast: false,
        });
    }
    launchers.push(Launcher {
        label: "classic bash wrapper (fails fast)".into(),
        argv: vec!["bash".into(), bins.classic.clone().into()],
        lock_variable: "CLASSIC_LOCK_DIR",
        fails_fast: true,
    });
    let cont = contention::contention(
        &launchers,
        &bins.hold,
        &ctx.locks,
        settings.contention_wrappers,
        settings.contention_rounds,
    );

    // ---- the report
    let cases = case_table(&[&small, &large_group]);
    let counted = counts_table(&small);
    let classic = classic_table(&small, &large_group);
    let contended = contention::contention_table(&cont);
    let sizes = size_table(&bins);
    let reproduce = if settings.given.is_empty() {
        "cargo bench --bench wrapper_cost".to_string()
    } else {
        format!("{} cargo bench --bench wrapper_cost", settings.given.join(" "))
    };
    let machine = machine();
    let walk_note = format!(
        "the no-MANIFEST walk of the large tree meets rocminfo after {} of its {} entries (directory order); \
         the classic find always walks them all",
        thousands(visited as u64),
        thousands(large.files as u64)
    );

    println!();
    println!(
        "== wrapper_cost on {}: whole processes (posix_spawn to wait4), interleaved, medians{} ==",
        cpu_model(),
        if settings.quick { " (QUICK MODE: rough numbers)" } else { "" }
    );
    println!("ratios within each group; CPU = user+system of the process and the children it waited for (median);");
    println!(
        "peak RSS = ru_maxrss through benches/support/maxrss.c, largest of 3 runs; the test is a static `int main(){{return 0;}}`\n"
    );
    print!("{}", cases.text());
    let glibc_start = small.median(Key::Floor).unwrap() - small.median(Key::Direct).unwrap();
    let start_note = format!(
        "one more static glibc process costs {} here (floor - direct: an execve and glibc's start-up)",
        ms(glibc_start)
    );
    println!("({start_note})");
    let floor = small.median(Key::Floor).unwrap();
    let slot_floor = |path: &str, key: Key, ours: Key| match (small.median(key), small.median(ours)) {
        (Some(at_least), Some(ours)) => format!(
            "the {path} floor (that path's system calls alone, in C) costs {:.2}x the floor here, \
             parallel_gpu_execute's {path} path {:.2}x the {path} floor",
            at_least / floor,
            ours / at_least
        ),
        _ => format!("the {path} floor did not run"),
    };
    let kfd_note = format!(
        "{}; {}; {}",
        slot_floor("pass-through", Key::PassFloor, Key::PgePassThrough),
        slot_floor("TF_GPU_COUNT", Key::CountFloor, Key::PgeTfGpuCount),
        slot_floor("KFD", Key::KfdFloor, Key::PgeKfd)
    );
    let musl_floor_note = small.median(Key::MuslFloor).map(|musl_floor| {
        let of = |key: Key, ours: Key| match (small.median(key), small.median(ours)) {
            (Some(at_least), Some(ours)) => {
                format!("{:.2}x the musl floor, the musl release's {:.2}x it", at_least / musl_floor, ours / at_least)
            }
            _ => "did not run".to_string(),
        };
        format!(
            "the musl pass-through floor costs {}; the musl TF_GPU_COUNT floor {}; the musl KFD floor {}",
            of(Key::MuslPassFloor, Key::MuslPgePassThroughMuslTest),
            of(Key::MuslCountFloor, Key::MuslPgeTfGpuCountMuslTest),
            of(Key::MuslKfdFloor, Key::MuslPgeKfdMuslTest)
        )
    });
    let kfd_note = match musl_floor_note {
        Some(m) => format!("{kfd_note}; {m}"),
        None => kfd_note,
    };
    println!("({kfd_note})");
    let musl_note = match (small.median(Key::MuslFloor), small.median(Key::MuslDirect)) {
        (Some(floor), Some(direct)) => Some(format!(
            "a static musl execv wrapper costs {:.2}x a direct exec of a static musl test here, where the glibc floor costs {:.2}x a direct exec: \
             what a musl build of the wrappers approaches",
            floor / direct,
            small.median(Key::Floor).unwrap() / small.median(Key::Direct).unwrap()
        )),
        _ => None,
    };
    let musl_own = match (small.median(Key::MuslFloor), small.median(Key::MuslDirect)) {
        (Some(musl_floor), Some(musl_direct)) if small.median(Key::MuslPgePassThroughMuslTest).is_some() => {
            let of = |key, base: f64| small.median(key).map_or("-".to_string(), |t| format!("{:.2}x", t / base));
            let over = |key| small.median(key).map_or("-".to_string(), |t| ms(t - musl_floor));
            let glibc_test = small.median(Key::MuslFloorGlibcTest).unwrap_or(f64::NAN);
            Some(format!(
                "our own cost: the musl release of parallel_gpu_execute running the static musl test costs {} (pass-through), \
                 {} (TF_GPU_COUNT) and {} (KFD) the musl floor that runs it ({}, {} and {} more), and {}, {} and {} a direct exec \
                 of that test; running the glibc test, it costs {}, {} and {} the musl floor that runs that test",
                of(Key::MuslPgePassThroughMuslTest, musl_floor),
                of(Key::MuslPgeTfGpuCountMuslTest, musl_floor),
                of(Key::MuslPgeKfdMuslTest, musl_floor),
                over(Key::MuslPgePassThroughMuslTest),
                over(Key::MuslPgeTfGpuCountMuslTest),
                over(Key::MuslPgeKfdMuslTest),
                of(Key::MuslPgePassThroughMuslTest, musl_direct),
                of(Key::MuslPgeTfGpuCountMuslTest, musl_direct),
                of(Key::MuslPgeKfdMuslTest, musl_direct),
                of(Key::MuslPgePassThrough, glibc_test),
                of(Key::MuslPgeTfGpuCount, glibc_test),
                of(Key::MuslPgeKfd, glibc_test)
            ))
        }
        _ => None,
    };
    let musl_note = match (musl_note, musl_own) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    if let Some(note) = &musl_note {
        println!("({note})");
    }
    println!("\n== {COUNTS_TITLE} ==\n");
    print!("{}", counted.text());
    println!(
        "\n== classic bash wrapper vs parallel_gpu_execute on the same 8-GPU host (classic: rocminfo from the runfiles; ours: sysfs) ==\n"
    );
    print!("{}", classic.text());
    println!("({walk_note})");
    println!(
        "\n== contention: {} wrappers started at once over {GPUS} GPUs x 2 slots, asking for 1, 2 and 4 GPUs, each test holding its GPUs {} ms; {} rounds; then {} waiters at rest ==\n",
        cont.wrappers,
        contention::LOAD_HOLD_MS,
        cont.rounds,
        cont.wrappers
    );
    print!("{}", contended.text());
    println!("\n== binary sizes ==\n");
    print!("{}", sizes.text());
    println!("\nmachine: {machine}");
    println!("reproduce: {reproduce}");
    if settings.markdown {
        println!("\n---- Markdown ----\n");
        print!("{}", cases.markdown());
        // The notes printed above in parentheses, as sentences.
        let sentence = |note: &str| format!("{}{}.\n", note[..1].to_uppercase(), &note[1..]);
        println!("\n{}", sentence(&start_note));
        println!("{}", sentence(&kfd_note));
        if let Some(note) = &musl_note {
            println!("{}", sentence(note));
        }
        println!("{}:\n", sentence(COUNTS_TITLE).trim_end().trim_end_matches('.'));
        print!("{}", counted.markdown());
        println!();
        print!("{}", classic.markdown());
        println!("\n{walk_note}.\n");
        print!("{}", contended.markdown());
        println!();
        print!("{}", sizes.markdown());
        println!("\nMachine: {machine}. Reproduce: `{reproduce}`.");
    }
}
