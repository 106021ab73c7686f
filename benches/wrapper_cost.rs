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
//! output is checked (the wrapper really took a slot, really set the
//! variables, really passed through), so that no number measures a failure
//! path. Peak RSS comes from a separate pass through
//! `benches/support/maxrss.c` (which says why).
//!
//! Contention: 64 wrappers started at once over 8 GPUs x 2 slots, each test
//! holding its GPU for 100 ms: the makespan against the ideal 400 ms, the
//! wrappers' CPU time, and how many of the same launches the classic
//! fail-fast wrapper loses.
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
//! - `WRAPPER_BENCH_CONTENTION=N`: contention rounds (default 5, quick 1);
//! - `WRAPPER_BENCH_FILES=N`: files in the large tree (default 50000);
//! - `WRAPPER_BENCH_MARKDOWN=1`: the results as Markdown tables too.
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

const TRIPLE: &str = "x86_64-unknown-linux-gnu";
const WORKSPACE: &str = "ws";
/// How the wrappers are given the test: as Bazel's `--run_under` does.
const TEST_WORD: &str = "./pkg/gpu_test";
/// The same place, holding a script that prints its environment.
const PROBE_WORD: &str = "./pkg/env_probe";
const HOLD_WORD: &str = "./pkg/hold";
const GPUS: u32 = 8;
const SIZE_LIMIT: u64 = 1_200_000;
const RSS_LIMIT_KIB: i64 = 2048;
const CONTENTION_TESTS: usize = 64;
const CONTENTION_SLOTS: u32 = 2;
const HOLD_MS: u64 = 100;

// ---------------------------------------------------------------- settings

struct Settings {
    quick: bool,
    small_rounds: usize,
    large_rounds: usize,
    contention_rounds: usize,
    large_files: usize,
    markdown: bool,
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
        let contention_rounds = env_count("WRAPPER_BENCH_CONTENTION", if quick { 1 } else { 5 }, &mut given);
        let large_files = env_count("WRAPPER_BENCH_FILES", 50_000, &mut given);
        Settings { quick, small_rounds, large_rounds, contention_rounds, large_files, markdown, given }
    }
}

// ------------------------------------------------------------- building

/// `<target>`, from where cargo put this executable:
/// `<target>/<triple>/<profile>/deps/wrapper_cost-<hash>`.
fn target_dir(root: &Path) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    match exe.ancestors().nth(3) {
        Some(triple) if triple.file_name() == Some(OsStr::new(TRIPLE)) => triple.parent().unwrap().to_path_buf(),
        _ => std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target")),
    }
}

struct Bins {
    pge: PathBuf,
    /// `None` when it did not build (its cases are then left out, loudly).
    san: Option<PathBuf>,
    tag: PathBuf,
    floor: PathBuf,
    test: PathBuf,
    /// The musl floor and test (`musl-gcc -static`), when musl-gcc exists.
    musl: Option<(PathBuf, PathBuf)>,
    hold: PathBuf,
    maxrss: PathBuf,
    classic: PathBuf,
}

fn cargo_build(root: &Path, target: &Path, packages: &[&str]) -> bool {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(root).args(["build", "--release", "--target-dir"]).arg(target);
    for p in packages {
        c.args(["-p", p]);
    }
    c.status().expect("run cargo build (set CARGO to the cargo executable)").success()
}

fn compile_c(source: &Path, out: &Path) {
    let status = Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(out)
        .arg(source)
        .status()
        .expect("run cc (gcc and the static glibc, libc6-dev, are needed)");
    assert!(status.success(), "cc -static -O2 {} failed", source.display());
}

/// `musl-gcc -static -O2`: what a static musl build's start-up costs.
fn compile_musl(source: &Path, out: &Path) -> bool {
    Command::new("musl-gcc").args(["-static", "-O2", "-o"]).arg(out).arg(source).status().is_ok_and(|s| s.success())
}

fn build(root: &Path, work: &Path) -> Bins {
    let target = target_dir(root);
    eprintln!("wrapper_cost: cargo build --release (parallel_gpu_execute, sanitizer_wrapper, tag_filters)");
    let all = ["parallel_gpu_execute", "sanitizer_wrapper", "tag_filters"];
    let san_built = cargo_build(root, &target, &all) || {
        eprintln!("wrapper_cost: WARNING: building sanitizer_wrapper failed; its cases are left out");
        assert!(cargo_build(root, &target, &all[..1]) && cargo_build(root, &target, &all[2..]), "cargo build failed");
        false
    };
    let release = target.join(TRIPLE).join("release");
    let bin = |name: &str| {
        let p = release.join(name);
        assert!(p.is_file(), "{} is missing after the build", p.display());
        p
    };
    fs::create_dir_all(work).unwrap();
    let c = |dir: &str, name: &str| {
        let out = work.join(name);
        compile_c(&root.join("benches").join(dir).join(format!("{name}.c")), &out);
        out
    };
    // A copy with mode 0755, as Bazel would ship an sh_binary.
    let classic = work.join("classic_parallel_gpu_execute.sh");
    fs::copy(root.join("benches/classic/parallel_gpu_execute.sh"), &classic).expect("copy the classic script");
    fs::set_permissions(&classic, fs::Permissions::from_mode(0o755)).unwrap();
    Bins {
        pge: bin("parallel_gpu_execute"),
        san: san_built.then(|| bin("sanitizer_wrapper")),
        tag: bin("tag_filters"),
        floor: c("floor", "exec"),
        test: c("floor", "true"),
        musl: {
            let (floor, test) = (work.join("musl_exec"), work.join("musl_true"));
            let ok = compile_musl(&root.join("benches/floor/exec.c"), &floor)
                && compile_musl(&root.join("benches/floor/true.c"), &test);
            if !ok {
                eprintln!(
                    "wrapper_cost: WARNING: musl-gcc is missing or failed (Debian: musl-tools); the musl rows are left out"
                );
            }
            ok.then_some((floor, test))
        },
        hold: c("support", "hold"),
        maxrss: c("support", "maxrss"),
        classic,
    }
}

// ------------------------------------------------------------- fixtures

/// What one runfile is.
enum Content {
    Text(String),
    Script(String),
    /// A copy of a built program.
    Copy(PathBuf),
    /// A symlink to a file outside the tree, as Bazel links a tool in.
    Link(PathBuf),
}

/// A runfiles tree with its own temporary directory.
struct Tree {
    runfiles: Runfiles,
    files: usize,
    _dir: TempDir,
}

impl Tree {
    /// Lays the entries out in rlocation order, as Bazel sorts its MANIFEST.
    fn create(label: &str, mut entries: Vec<(String, Content)>) -> Tree {
        let dir = TempDir::new(label);
        let mut runfiles = Runfiles::new(&dir, WORKSPACE);
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (rlocation, content) in &entries {
            match content {
                Content::Text(text) => {
                    runfiles.add(rlocation, text, false);
                }
                Content::Script(text) => {
                    runfiles.add(rlocation, text, true);
                }
                Content::Copy(program) => {
                    let real = runfiles.add(rlocation, "", true);
                    fs::copy(program, &real).expect("copy a program into the execroot");
                }
                Content::Link(target) => {
                    let link = runfiles.srcdir.join(rlocation);
                    fs::create_dir_all(link.parent().unwrap()).unwrap();
                    symlink(target, &link).expect("symlink a tool");
                    runfiles.add_manifest_only(rlocation, target);
                }
            }
        }
        runfiles.write_manifest();
        Tree { runfiles, files: entries.len(), _dir: dir }
    }

    fn srcdir(&self) -> &Path {
        &self.runfiles.srcdir
    }

    fn cwd(&self) -> PathBuf {
        self.runfiles.cwd()
    }

    /// The runfile at `rlocation`, as an absolute path in the tree.
    fn path(&self, rlocation: &str) -> PathBuf {
        self.srcdir().join(rlocation)
    }
}

const ROCMINFO: &str = "local_config_rocm/rocm/bin/rocminfo";
const SANITIZER_LINK: &str = "ws/tools/sanitizer_wrapper";
const SANITIZER_OPTIONS: [&str; 7] = [
    "--asan-options=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1",
    "--lsan-options=report_objects=1",
    "--tsan-options=halt_on_error=1:second_deadlock_stack=1",
    "--asan-suppressions=ws/tools/sanitizers/asan.supp",
    "--lsan-suppressions=ws/tools/sanitizers/lsan.supp",
    "--tsan-suppressions=ws/tools/sanitizers/tsan.supp",
    "--symbolizer=llvm-project/llvm/bin/llvm-symbolizer",
];

/// What every tree holds: the test, the probe, the contention test, the
/// sanitizer files, rocminfo when asked for.
fn common_entries(bins: &Bins, rocminfo: bool) -> Vec<(String, Content)> {
    let mut e = vec![
        ("ws/pkg/gpu_test".to_string(), Content::Copy(bins.test.clone())),
        ("ws/pkg/env_probe".to_string(), Content::Script("#!/bin/sh\nexec env\n".to_string())),
        ("ws/pkg/hold".to_string(), Content::Copy(bins.hold.clone())),
        ("ws/tools/sanitizers/asan.supp".to_string(), Content::Text("interceptor_via_lib:libamdhip64.so\n".into())),
        ("ws/tools/sanitizers/lsan.supp".to_string(), Content::Text("leak:libhsa-runtime64.so\n".into())),
        ("ws/tools/sanitizers/tsan.supp".to_string(), Content::Text("race:libamdhip64.so\n".into())),
        ("llvm-project/llvm/bin/llvm-symbolizer".to_string(), Content::Script("#!/bin/sh\nexit 0\n".to_string())),
    ];
    if let Some(san) = &bins.san {
        e.push((SANITIZER_LINK.to_string(), Content::Link(san.clone())));
        let conf: String = SANITIZER_OPTIONS.iter().map(|o| format!("{o}\n")).collect();
        e.push((format!("{SANITIZER_LINK}.sanitizer_wrapper.conf"), Content::Text(conf)));
    }
    if rocminfo {
        e.push((ROCMINFO.to_string(), Content::Script(fake_rocminfo_script(GPUS as usize))));
    }
    e
}

const REPOS: [&str; 10] = [
    "ws",
    "pypi_numpy",
    "pypi_jax",
    "pypi_scipy",
    "com_google_absl",
    "local_config_rocm",
    "llvm-project",
    "pypi_ml_dtypes",
    "com_google_protobuf",
    "eigen_archive",
];

/// A small tree: the common entries and 30 more files in three repositories.
fn small_tree(label: &str, bins: &Bins, rocminfo: bool) -> Tree {
    let mut e = common_entries(bins, rocminfo);
    for (r, repo) in REPOS[..3].iter().enumerate() {
        for i in 0..10 {
            e.push((format!("{repo}/lib{r}/module_{i}.py"), Content::Text(format!("# {i}\n"))));
        }
    }
    Tree::create(label, e)
}

/// A large tree: `files` files in all, in ten repositories of ten packages
/// of ten subpackages each (1,000 leaf directories).
fn large_tree(bins: &Bins, files: usize) -> Tree {
    let mut e = common_entries(bins, true);
    let filler = files.saturating_sub(e.len());
    for n in 0..filler {
        let repo = REPOS[n % REPOS.len()];
        let k = n / REPOS.len();
        let (a, b, c) = (k % 10, (k / 10) % 10, k / 100);
        e.push((format!("{repo}/pkg_{a}/sub_{b}/file_{c}.py"), Content::Text(format!("# {n}\n"))));
    }
    Tree::create("bench-large", e)
}

/// A runfiles directory showing the same tree but without its MANIFEST:
/// each top-level entry is a symlink into `tree`.
fn without_manifest(tree: &Tree, at: &Path) -> PathBuf {
    fs::create_dir_all(at).unwrap();
    for entry in fs::read_dir(tree.srcdir()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "MANIFEST" {
            symlink(entry.path(), at.join(entry.file_name())).unwrap();
        }
    }
    assert!(!at.join("MANIFEST").exists());
    at.to_path_buf()
}

/// How many entries a depth-first walk in directory order (the order the
/// wrapper's walk sees) visits before it reaches `*/bin/rocminfo`.
fn walk_position(dir: &Path, in_bin: bool, visited: &mut usize) -> bool {
    let Ok(entries) = fs::read_dir(dir) else { return false };
    for entry in entries.flatten() {
        *visited += 1;
        let path = entry.path();
        let is_dir = path.is_dir();
        if in_bin && entry.file_name() == "rocminfo" && !is_dir {
            return true;
        }
        if is_dir && walk_position(&path, entry.file_name() == "bin", visited) {
            return true;
        }
    }
    false
}

/// The variables Bazel sets for a test (the wrappers scan `environ` for each
/// lookup, so its size is part of their cost).
fn bazel_env(srcdir: &Path, cwd: &Path, tmp: &Path) -> Vec<(OsString, OsString)> {
    let t = |name: &str| tmp.join(name).into_os_string();
    let s = |v: &str| OsString::from(v);
    vec![
        (s("PATH"), s("/usr/local/bin:/usr/bin:/bin")),
        (s("HOME"), tmp.as_os_str().to_owned()),
        (s("USER"), s("bench")),
        (s("TZ"), s("UTC")),
        (s("PWD"), cwd.as_os_str().to_owned()),
        (s("SHLVL"), s("1")),
        (s("TEST_TMPDIR"), tmp.as_os_str().to_owned()),
        (s("GTEST_TMP_DIR"), tmp.as_os_str().to_owned()),
        (s("TEST_SRCDIR"), srcdir.as_os_str().to_owned()),
        (s("RUNFILES_DIR"), srcdir.as_os_str().to_owned()),
        (s("JAVA_RUNFILES"), srcdir.as_os_str().to_owned()),
        (s("PYTHON_RUNFILES"), srcdir.as_os_str().to_owned()),
        (s("TEST_WORKSPACE"), s(WORKSPACE)),
        (s("TEST_BINARY"), s("pkg/gpu_test")),
        (s("TEST_TARGET"), s("//pkg:gpu_test")),
        (s("TEST_SIZE"), s("medium")),
        (s("TEST_TIMEOUT"), s("300")),
        (s("XML_OUTPUT_FILE"), t("test.xml")),
        (s("TEST_WARNINGS_OUTPUT_FILE"), t("test.warnings")),
        (s("TEST_UNDECLARED_OUTPUTS_DIR"), t("test.outputs")),
        (s("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR"), t("test.outputs_manifest")),
        (s("TEST_INFRASTRUCTURE_FAILURE_FILE"), t("test.infrastructure_failure")),
        (s("TEST_LOGSPLITTER_OUTPUT_FILE"), t("test.raw_splitlogs/test.splitlogs")),
        (s("TEST_PREMATURE_EXIT_FILE"), t("test.exited_prematurely")),
        (s("TEST_UNUSED_RUNFILES_LOG_FILE"), t("test.unused_runfiles_log")),
        (s("GTEST_OUTPUT"), OsString::from(format!("xml:{}", tmp.join("test.xml").display()))),
    ]
}

// ---------------------------------------------------------------- cases

/// One word of a command line; the test's word differs between the timed
/// runs and the checking run.
#[derive(Clone)]
enum Arg {
    Lit(OsString),
    Test { timed: OsString, probe: OsString },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    Direct,
    Floor,
    /// A static musl `int main(){return 0;}`, exec'd directly.
    MuslDirect,
    /// A static musl C execv of that musl test.
    MuslFloor,
    PgePassThrough,
    PgeTfGpuCount,
    PgeKfd,
    PgeRocminfoManifest,
    PgeRocminfoWalk,
    SanPassThrough,
    SanOptions,
    SanConfig,
    Classic,
}

impl Key {
    fn is_wrapper(self) -> bool {
        !matches!(self, Key::Direct | Key::Floor | Key::MuslDirect | Key::MuslFloor | Key::Classic)
    }

    /// The most this case may cost, as a multiple of the floor.
    fn floor_target(self) -> Option<f64> {
        match self {
            Key::PgePassThrough => Some(1.10),
            Key::PgeTfGpuCount => Some(1.15),
            Key::PgeKfd => Some(1.20),
            _ => None,
        }
    }
}

struct Case {
    key: Key,
    label: String,
    cmd: Vec<Arg>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    /// Text the checking run's output must contain / must not contain.
    expect: Vec<String>,
    reject: Vec<String>,
    samples: Vec<Sample>,
    rss_kib: Option<i64>,
}

#[derive(Clone, Copy)]
struct Sample {
    wall_ns: u64,
    cpu_ns: u64,
}

impl Case {
    /// The command line of the timed runs, or of the checking run.
    fn argv(&self, probe: bool) -> Vec<&OsStr> {
        self.cmd
            .iter()
            .map(|a| match a {
                Arg::Lit(v) => v.as_os_str(),
                Arg::Test { timed, .. } if !probe => timed.as_os_str(),
                Arg::Test { probe, .. } => probe.as_os_str(),
            })
            .collect()
    }

    fn timed_argv(&self) -> Vec<&OsStr> {
        self.argv(false)
    }
}

fn lit(v: impl AsRef<OsStr>) -> Arg {
    Arg::Lit(v.as_ref().to_owned())
}

/// The test as the wrappers get it (relative to the test's directory).
fn test_rel() -> Arg {
    Arg::Test { timed: TEST_WORD.into(), probe: PROBE_WORD.into() }
}

/// The test by absolute path (a direct exec, the floor).
fn test_abs(tree: &Tree) -> Arg {
    Arg::Test { timed: tree.path("ws/pkg/gpu_test").into(), probe: tree.path("ws/pkg/env_probe").into() }
}

struct Context<'a> {
    bins: &'a Bins,
    tmp: PathBuf,
    locks: PathBuf,
    empty_sysroot: PathBuf,
    kfd_sysroot: PathBuf,
}

impl Context<'_> {
    fn case(&self, key: Key, label: &str, tree_dir: &Path, cwd: &Path, cmd: Vec<Arg>) -> Case {
        Case {
            key,
            label: label.to_string(),
            cmd,
            env: bazel_env(tree_dir, cwd, &self.tmp),
            cwd: cwd.to_path_buf(),
            expect: Vec::new(),
            reject: Vec::new(),
            samples: Vec::new(),
            rss_kib: None,
        }
    }

    fn direct(&self, tree: &Tree) -> Case {
        self.case(Key::Direct, "direct exec of the test", tree.srcdir(), &tree.cwd(), vec![test_abs(tree)])
    }

    fn floor(&self, tree: &Tree) -> Case {
        let label = "floor: static C execv, then the test";
        self.case(Key::Floor, label, tree.srcdir(), &tree.cwd(), vec![lit(&self.bins.floor), test_abs(tree)])
    }

    /// The musl direct exec and the musl floor, when musl-gcc built them.
    fn musl(&self, tree: &Tree) -> Vec<Case> {
        let Some((floor, test)) = &self.bins.musl else { return Vec::new() };
        let test = Arg::Test { timed: test.into(), probe: tree.path("ws/pkg/env_probe").into() };
        vec![
            self.case(
                Key::MuslDirect,
                "musl direct exec of a static musl test",
                tree.srcdir(),
                &tree.cwd(),
                vec![test.clone()],
            ),
            self.case(
                Key::MuslFloor,
                "musl floor: static musl C execv, then that test",
                tree.srcdir(),
                &tree.cwd(),
                vec![lit(floor), test],
            ),
        ]
    }

    /// parallel_gpu_execute on `srcdir` (the tree itself, or a view of it),
    /// with a lock directory of its own.
    fn pge(&self, key: Key, label: &str, srcdir: &Path, cwd: &Path, sysroot: &Path, lock_name: &str) -> Case {
        let mut c = self.case(key, label, srcdir, cwd, vec![lit(&self.bins.pge), test_rel()]);
        c.env.push(("PARALLEL_GPU_EXECUTE_SYSROOT".into(), sysroot.into()));
        c.env.push(("PARALLEL_GPU_EXECUTE_LOCK_DIR".into(), self.locks.join(lock_name).into()));
        c
    }

    fn pge_pass_through(&self, tree: &Tree) -> Case {
        let label = "parallel_gpu_execute, zero GPUs (pass-through)";
        let mut c =
            self.pge(Key::PgePassThrough, label, tree.srcdir(), &tree.cwd(), &self.empty_sysroot, "pass-through");
        c.expect.push("Execute with no GPU support".into());
        c.reject.push("VISIBLE_DEVICES=".into());
        c
    }

    fn pge_tf_gpu_count(&self, tree: &Tree) -> Case {
        let label = "parallel_gpu_execute, TF_GPU_COUNT=8, slot free";
        let mut c = self.pge(Key::PgeTfGpuCount, label, tree.srcdir(), &tree.cwd(), &self.empty_sysroot, "tf");
        c.env.push(("TF_GPU_COUNT".into(), GPUS.to_string().into()));
        c.expect.extend(["on GPU(s) 0".to_string(), "CUDA_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    fn pge_kfd(&self, tree: &Tree, lock_name: &str) -> Case {
        let label = "parallel_gpu_execute, KFD sysfs with 8 GPUs";
        let mut c = self.pge(Key::PgeKfd, label, tree.srcdir(), &tree.cwd(), &self.kfd_sysroot, lock_name);
        c.expect.extend(["on GPU(s) 0".to_string(), "ROCR_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    fn pge_rocminfo(&self, key: Key, label: &str, srcdir: &Path, lock_name: &str) -> Case {
        let mut c = self.pge(key, label, srcdir, &srcdir.join(WORKSPACE), &self.empty_sysroot, lock_name);
        c.expect.extend(["on GPU(s) 0".to_string(), "ROCR_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    fn classic(&self, label: &str, tree: &Tree, lock_name: &str) -> Case {
        let cwd = tree.cwd();
        let mut c = self.case(Key::Classic, label, tree.srcdir(), &cwd, vec![lit(&self.bins.classic), test_rel()]);
        c.env.push(("CLASSIC_LOCK_DIR".into(), self.locks.join(lock_name).into()));
        c.expect.extend(["on GPU 0".to_string(), "HIP_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    fn sanitizer(&self, tree: &Tree) -> Vec<Case> {
        let Some(san) = &self.bins.san else { return Vec::new() };
        let cwd = tree.cwd();
        let mut pass = self.case(
            Key::SanPassThrough,
            "sanitizer_wrapper, no options (pass-through)",
            tree.srcdir(),
            &cwd,
            vec![lit(san), test_rel()],
        );
        pass.reject.extend(["ASAN_OPTIONS".to_string(), "LSAN_OPTIONS".to_string(), "TSAN_OPTIONS".to_string()]);

        let mut cmd = vec![lit(san)];
        cmd.extend(SANITIZER_OPTIONS.iter().map(lit));
        cmd.push(test_rel());
        let mut options = self.case(
            Key::SanOptions,
            "sanitizer_wrapper, every option, on the command line",
            tree.srcdir(),
            &cwd,
            cmd,
        );
        // Started as Bazel starts a --run_under target: through its symlink
        // in the runfiles, beside which the configuration file lies.
        let mut config = self.case(
            Key::SanConfig,
            "sanitizer_wrapper, every option, from its .conf file",
            tree.srcdir(),
            &cwd,
            vec![lit(tree.path(SANITIZER_LINK)), test_rel()],
        );
        for c in [&mut options, &mut config] {
            let supp =
                |name: &str| format!("suppressions={}", tree.path(&format!("ws/tools/sanitizers/{name}")).display());
            c.expect.extend([
                "ASAN_OPTIONS=detect_leaks=1".to_string(),
                supp("asan.supp"),
                supp("lsan.supp"),
                supp("tsan.supp"),
                "external_symbolizer_path=".to_string(),
            ]);
        }
        vec![pass, options, config]
    }
}

// ------------------------------------------------------------- spawning

fn cstring(bytes: &[u8]) -> CString {
    CString::new(bytes).expect("no NUL in arguments or environment")
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A case ready for `posix_spawn`: C strings built once, outside the timing.
struct Prepared {
    _argv: Vec<CString>,
    argv_ptrs: Vec<*mut c_char>,
    _envp: Vec<CString>,
    envp_ptrs: Vec<*mut c_char>,
    actions: Box<libc::posix_spawn_file_actions_t>,
}

impl Prepared {
    fn new(case: &Case, devnull: RawFd) -> Prepared {
        let argv: Vec<CString> = case.timed_argv().iter().map(|a| cstring(a.as_bytes())).collect();
        let envp: Vec<CString> =
            case.env.iter().map(|(k, v)| cstring(&[k.as_bytes(), b"=", v.as_bytes()].concat())).collect();
        let ptrs = |v: &[CString]| {
            let mut p: Vec<*mut c_char> = v.iter().map(|s| s.as_ptr().cast_mut()).collect();
            p.push(std::ptr::null_mut());
            p
        };
        let (argv_ptrs, envp_ptrs) = (ptrs(&argv), ptrs(&envp));
        let cwd = cstring(case.cwd.as_os_str().as_bytes());
        // SAFETY: an all-zero posix_spawn_file_actions_t is a valid argument
        // for posix_spawn_file_actions_init, which initialises it.
        let mut actions: Box<libc::posix_spawn_file_actions_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `actions` is initialised first; the fds and the path are
        // valid (glibc copies the path).
        unsafe {
            libc::posix_spawn_file_actions_init(&mut *actions);
            for fd in 0..3 {
                libc::posix_spawn_file_actions_adddup2(&mut *actions, devnull, fd);
            }
            libc::posix_spawn_file_actions_addchdir_np(&mut *actions, cwd.as_ptr());
        }
        Prepared { _argv: argv, argv_ptrs, _envp: envp, envp_ptrs, actions }
    }

    fn spawn(&self, attr: &Attr) -> libc::pid_t {
        let mut pid = 0;
        // SAFETY: argv/envp are NULL-terminated arrays of C strings owned by
        // `self`; the file actions and attributes are initialised.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                self.argv_ptrs[0],
                &*self.actions,
                &attr.0,
                self.argv_ptrs.as_ptr(),
                self.envp_ptrs.as_ptr(),
            )
        };
        if rc != 0 {
            panic!("posix_spawn {:?}: {}", self._argv[0], std::io::Error::from_raw_os_error(rc));
        }
        pid
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut *self.actions) };
    }
}

/// Spawn attributes: SIGPIPE back to its default (the Rust runtime of this
/// benchmark ignores it; Bazel's test runner does not) and no signal blocked.
struct Attr(libc::posix_spawnattr_t);

impl Attr {
    fn new() -> Box<Attr> {
        // SAFETY: zeroed storage initialised by posix_spawnattr_init; the
        // signal sets are initialised by sigemptyset before use.
        unsafe {
            let mut attr: Box<Attr> = Box::new(Attr(std::mem::zeroed()));
            libc::posix_spawnattr_init(&mut attr.0);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::posix_spawnattr_setsigmask(&mut attr.0, &set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            libc::posix_spawnattr_setsigdefault(&mut attr.0, &set);
            let flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
            libc::posix_spawnattr_setflags(&mut attr.0, flags as libc::c_short);
            attr
        }
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

/// `wait4`: the pid, its wait status and resource usage.
fn wait_any(pid: libc::pid_t) -> (libc::pid_t, i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid out-pointers; `pid` is our child (or -1: any).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r > 0 {
            return (r, status, usage);
        }
        let errno = last_errno();
        assert_eq!(errno, libc::EINTR, "wait4: {}", std::io::Error::from_raw_os_error(errno));
    }
}

fn cpu_ns(u: &libc::rusage) -> u64 {
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) }
}

fn run_once(p: &Prepared, attr: &Attr, label: &str) -> Sample {
    let start = Instant::now();
    let pid = p.spawn(attr);
    let (_, status, usage) = wait_any(pid);
    let wall = start.elapsed();
    assert_eq!(exit_code(status), 0, "{label}: exit status {status:#x} in a timed run");
    Sample { wall_ns: wall.as_nanos() as u64, cpu_ns: cpu_ns(&usage) }
}

fn open_devnull() -> fs::File {
    fs::OpenOptions::new().read(true).write(true).open("/dev/null").expect("open /dev/null")
}

/// Runs the case once with the probe as its test, output captured, and
/// checks what the wrapper did.
fn check(case: &Case) {
    let argv = case.argv(true);
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(case.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&case.cwd)
        .output()
        .unwrap_or_else(|e| panic!("{}: cannot run {:?}: {e}", case.label, argv[0]));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let explain = || {
        format!(
            "{}\ncommand: {argv:?}\ncwd: {}\nstatus: {}\noutput:\n{text}",
            case.label,
            case.cwd.display(),
            out.status
        )
    };
    assert!(out.status.success(), "the checking run failed: {}", explain());
    for e in &case.expect {
        assert!(text.contains(e.as_str()), "the checking run's output lacks {e:?}: {}", explain());
    }
    for r in &case.reject {
        assert!(!text.contains(r.as_str()), "the checking run's output has {r:?}: {}", explain());
    }
}

/// Peak RSS of the case's process (and the children it waited for), in KiB,
/// measured through the small launcher; the largest of `runs`.
fn peak_rss(case: &Case, maxrss: &Path, runs: usize) -> i64 {
    let mut peak = 0;
    for _ in 0..runs {
        let out = Command::new(maxrss)
            .args(case.timed_argv())
            .env_clear()
            .envs(case.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&case.cwd)
            .output()
            .expect("run the maxrss launcher");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text.split_whitespace().map(|f| f.parse::<i64>().unwrap_or(-1));
        let (kib, status) = (fields.next().unwrap_or(-1), fields.next().unwrap_or(-1));
        assert!(out.status.success() && status == 0 && kib > 0, "{}: maxrss launcher said {text:?}", case.label);
        peak = peak.max(kib);
    }
    peak
}

// ------------------------------------------------------------ measuring

struct Group {
    title: String,
    rounds: usize,
    /// Whether the per-case targets are judged here (in the group with many
    /// rounds; the other has its own floor and direct rows for its ratios).
    judged: bool,
    cases: Vec<Case>,
}

impl Group {
    fn get(&self, key: Key) -> Option<&Case> {
        self.cases.iter().find(|c| c.key == key)
    }

    fn median(&self, key: Key) -> Option<f64> {
        self.get(key).map(|c| stats(&c.samples).median_ms)
    }
}

fn run_group(group: &mut Group, attr: &Attr, devnull: RawFd, maxrss: &Path) {
    for case in &group.cases {
        check(case);
    }
    let prepared: Vec<Prepared> = group.cases.iter().map(|c| Prepared::new(c, devnull)).collect();
    let n = prepared.len();
    let warmup = (group.rounds / 20).clamp(1, 20);
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    eprint!("wrapper_cost: {}: {} rounds of {n} cases ", group.title, group.rounds);
    let started = Instant::now();
    for round in 0..warmup + group.rounds {
        // A new order each round, so that no case always follows the same
        // one (a case right after a 50,000-file walk starts with cold caches).
        rng.shuffle(&mut order);
        for &i in &order {
            let s = run_once(&prepared[i], attr, &group.cases[i].label);
            if round >= warmup {
                group.cases[i].samples.push(s);
            }
        }
        if round >= warmup && (round - warmup + 1) % (group.rounds / 10).max(1) == 0 {
            eprint!(".");
        }
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    for case in &mut group.cases {
        case.rss_kib = Some(peak_rss(case, maxrss, 3));
    }
}

/// A fixed-seed xorshift generator: the same orders on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Fisher-Yates.
    fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

struct Stats {
    median_ms: f64,
    p90_ms: f64,
    cpu_ms: f64,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1e6
}

fn stats(samples: &[Sample]) -> Stats {
    let mut wall: Vec<u64> = samples.iter().map(|s| s.wall_ns).collect();
    let mut cpu: Vec<u64> = samples.iter().map(|s| s.cpu_ns).collect();
    wall.sort_unstable();
    cpu.sort_unstable();
    Stats { median_ms: percentile(&wall, 0.5), p90_ms: percentile(&wall, 0.9), cpu_ms: percentile(&cpu, 0.5) }
}

// ----------------------------------------------------------- contention

struct Burst {
    makespan_ms: f64,
    lost: usize,
    cpu_ms: Vec<f64>,
}

/// Starts `CONTENTION_TESTS` copies of `case` at once and waits for all.
fn burst(case: &Case, attr: &Attr, devnull: RawFd) -> Burst {
    let p = Prepared::new(case, devnull);
    let start = Instant::now();
    let pids: Vec<libc::pid_t> = (0..CONTENTION_TESTS).map(|_| p.spawn(attr)).collect();
    let mut b = Burst { makespan_ms: 0.0, lost: 0, cpu_ms: Vec::new() };
    for _ in &pids {
        let (pid, status, usage) = wait_any(-1);
        assert!(pids.contains(&pid));
        b.makespan_ms = start.elapsed().as_secs_f64() * 1e3;
        match exit_code(status) {
            0 => {}
            1 if case.key == Key::Classic => b.lost += 1,
            code => panic!("{}: exit status {code} under contention", case.label),
        }
        b.cpu_ms.push(cpu_ns(&usage) as f64 / 1e6);
    }
    b
}

struct Contention {
    rounds: usize,
    rows: Vec<(String, Vec<Burst>)>,
}

fn contention(ctx: &Context<'_>, tree: &Tree, rounds: usize, attr: &Attr, devnull: RawFd) -> Contention {
    let cwd = tree.cwd();
    let hold = |word: &str| vec![Arg::Test { timed: word.into(), probe: word.into() }, lit(HOLD_MS.to_string())];
    let shared = [("TF_GPU_COUNT", GPUS.to_string()), ("TF_TESTS_PER_GPU", CONTENTION_SLOTS.to_string())];

    let mut ours = ctx.case(Key::PgeTfGpuCount, "parallel_gpu_execute (waits)", tree.srcdir(), &cwd, {
        let mut c = vec![lit(&ctx.bins.pge)];
        c.extend(hold(HOLD_WORD));
        c
    });
    ours.env.push(("PARALLEL_GPU_EXECUTE_SYSROOT".into(), ctx.empty_sysroot.clone().into()));
    ours.env.push(("PARALLEL_GPU_EXECUTE_LOCK_DIR".into(), ctx.locks.join("contention-ours").into()));
    let mut classic = ctx.case(Key::Classic, "classic bash wrapper (fails fast)", tree.srcdir(), &cwd, {
        let mut c = vec![lit(&ctx.bins.classic)];
        c.extend(hold(HOLD_WORD));
        c
    });
    classic.env.push(("CLASSIC_LOCK_DIR".into(), ctx.locks.join("contention-classic").into()));
    for c in [&mut ours, &mut classic] {
        c.env.extend(shared.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
    }
    let alone = ctx.case(Key::Direct, "the test alone (no wrapper, no slots)", tree.srcdir(), &cwd, {
        hold(tree.path("ws/pkg/hold").to_str().unwrap())
    });

    eprint!("wrapper_cost: contention: {rounds} rounds of {CONTENTION_TESTS} tests at once ");
    let started = Instant::now();
    let mut rows: Vec<(String, Vec<Burst>)> =
        [&ours, &classic, &alone].iter().map(|c| (c.label.clone(), Vec::new())).collect();
    for _ in 0..rounds {
        for (i, case) in [&ours, &classic, &alone].into_iter().enumerate() {
            rows[i].1.push(burst(case, attr, devnull));
            eprint!(".");
        }
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    Contention { rounds, rows }
}

// ------------------------------------------------------------ reporting

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn mib(kib: i64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// One table row, as cells; a heading row has one cell, spanning the table.
struct Row {
    cells: Vec<String>,
    heading: bool,
}

struct Table {
    header: Vec<String>,
    rows: Vec<Row>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    fn push(&mut self, cells: Vec<String>) {
        self.rows.push(Row { cells, heading: false });
    }

    fn heading(&mut self, title: String) {
        self.rows.push(Row { cells: vec![title], heading: true });
    }

    fn text(&self) -> String {
        let n = self.header.len();
        let mut width = vec![0; n];
        let rows = || std::iter::once((&self.header, false)).chain(self.rows.iter().map(|r| (&r.cells, r.heading)));
        for (cells, _) in rows().filter(|r| !r.1) {
            for (i, c) in cells.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (cells, heading) in rows() {
            if heading {
                let _ = writeln!(out, "{}:", cells[0]);
                continue;
            }
            let mut line = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = width[i] - c.chars().count();
                if i == 0 {
                    let _ = write!(line, "  {c}{}", " ".repeat(pad));
                } else {
                    let _ = write!(line, "  {}{c}", " ".repeat(pad));
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            if r.heading {
                let _ = writeln!(out, "| **{}** |{}", r.cells[0], " |".repeat(self.header.len() - 1));
            } else {
                let _ = writeln!(out, "| {} |", r.cells.join(" | "));
            }
        }
        out
    }
}

fn case_table(groups: &[&Group]) -> Table {
    let mut t = Table::new(&["case", "x floor", "x direct", "median", "p90", "CPU", "peak RSS", "target"]);
    for g in groups {
        t.heading(g.title.clone());
        let floor = g.median(Key::Floor).unwrap();
        let direct = g.median(Key::Direct).unwrap();
        for c in &g.cases {
            let s = stats(&c.samples);
            let (xf, xd) = (s.median_ms / floor, s.median_ms / direct);
            let mut target = Vec::new();
            if let Some(limit) = c.key.floor_target().filter(|_| g.judged) {
                target.push(format!("<= {limit:.2}x floor {}", verdict(xf <= limit)));
            }
            let rss = c.rss_kib.unwrap_or(0);
            if c.key.is_wrapper() {
                target.push(format!("RSS <= 2 MiB {}", verdict(rss <= RSS_LIMIT_KIB)));
            }
            t.push(vec![
                c.label.clone(),
                format!("{xf:.2}"),
                format!("{xd:.2}"),
                ms(s.median_ms),
                ms(s.p90_ms),
                ms(s.cpu_ms),
                mib(rss),
                target.join(", "),
            ]);
        }
    }
    t
}

fn classic_table(small: &Group, large: &Group) -> Table {
    let mut t = Table::new(&[
        "runfiles tree",
        "classic / ours (sysfs)",
        "classic",
        "ours (sysfs)",
        "classic / ours (rocminfo in the runfiles)",
        "target",
    ]);
    let row = |g: &Group, limit: f64, t: &mut Table| {
        let classic = g.median(Key::Classic).unwrap();
        let ours = g.median(Key::PgeKfd).unwrap();
        let mut rocminfo = Vec::new();
        for key in [Key::PgeRocminfoManifest, Key::PgeRocminfoWalk] {
            if let Some(m) = g.median(key) {
                let how = match key {
                    Key::PgeRocminfoWalk => "walk, no MANIFEST",
                    _ => "MANIFEST",
                };
                rocminfo.push(format!("{:.1}x ({how}, {})", classic / m, ms(m)));
            }
        }
        let ratio = classic / ours;
        t.push(vec![
            g.title.clone(),
            format!("{ratio:.1}x"),
            ms(classic),
            ms(ours),
            rocminfo.join("; "),
            format!(">= {limit:.0}x {}", verdict(ratio >= limit)),
        ]);
    };
    row(small, 10.0, &mut t);
    row(large, 30.0, &mut t);
    t
}

fn contention_table(c: &Contention) -> Table {
    let ideal = (CONTENTION_TESTS as f64 / (GPUS * CONTENTION_SLOTS) as f64) * HOLD_MS as f64;
    let mut t = Table::new(&[
        "launcher",
        "makespan (median)",
        "x ideal",
        "lost tests",
        "CPU per process (mean / max)",
        "target",
    ]);
    let alone_cpu = {
        let all: Vec<f64> = c.rows[2].1.iter().flat_map(|b| b.cpu_ms.iter().copied()).collect();
        all.iter().sum::<f64>() / all.len() as f64
    };
    for (i, (label, bursts)) in c.rows.iter().enumerate() {
        let mut spans: Vec<f64> = bursts.iter().map(|b| b.makespan_ms).collect();
        spans.sort_by(|a, b| a.total_cmp(b));
        let span = spans[(spans.len() - 1) / 2];
        let lost: usize = bursts.iter().map(|b| b.lost).sum();
        let cpu: Vec<f64> = bursts.iter().flat_map(|b| b.cpu_ms.iter().copied()).collect();
        let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
        let max = cpu.iter().copied().fold(0.0, f64::max);
        let launched = c.rounds * CONTENTION_TESTS;
        let target = match i {
            0 => {
                let x = span / ideal;
                format!("<= 1.5x ideal, 0 lost {}", verdict(x <= 1.5 && lost == 0))
            }
            _ => String::new(),
        };
        let cpu_text = if i == 2 {
            format!("{} / {}", ms(mean), ms(max))
        } else {
            format!("{} / {} ({} over the test alone)", ms(mean), ms(max), ms(mean - alone_cpu))
        };
        t.push(vec![
            label.clone(),
            ms(span),
            if i == 2 { "-".to_string() } else { format!("{:.2}", span / ideal) },
            format!("{lost} of {launched}"),
            cpu_text,
            target,
        ]);
    }
    t
}

fn size_table(bins: &Bins) -> Table {
    let mut t = Table::new(&["static binary (release)", "bytes", "target"]);
    let rows = [
        ("parallel_gpu_execute", Some(&bins.pge), true),
        ("sanitizer_wrapper", bins.san.as_ref(), true),
        ("tag_filters", Some(&bins.tag), true),
        ("floor (C, gcc -static)", Some(&bins.floor), false),
    ];
    for (name, path, target) in rows {
        let Some(path) = path else {
            t.push(vec![name.to_string(), "not built".to_string(), "MISS".to_string()]);
            continue;
        };
        let len = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let v = if target { format!("<= 1.2 MB {}", verdict(len <= SIZE_LIMIT)) } else { "(for scale)".to_string() };
        t.push(vec![name.to_string(), thousands(len), v]);
    }
    t
}

fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// The CPU model, from `/proc/cpuinfo`.
fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".to_string())
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let model = cpu_model();
    // SAFETY: all-zero utsname is a valid out-buffer for uname.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; the fields are NUL-terminated on success.
    let kernel = if unsafe { libc::uname(&mut u) } == 0 {
        // SAFETY: as above.
        unsafe {
            format!(
                "{} {}",
                CStr::from_ptr(u.sysname.as_ptr()).to_string_lossy(),
                CStr::from_ptr(u.release.as_ptr()).to_string_lossy()
            )
        }
    } else {
        "?".to_string()
    };
    // SAFETY: returns a static NUL-terminated string.
    let glibc = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy().into_owned();
    format!(
        "{cpus} CPUs ({model}), {kernel}, glibc {glibc}, {}, {}",
        first_line("rustc", &["--version"]),
        first_line("cc", &["--version"])
    )
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
    let bins = build(root, &target.join("wrapper-bench").join("bin"));

    eprintln!("wrapper_cost: laying out runfiles trees ({} files in the large one)", settings.large_files);
    let t0 = Instant::now();
    let small_plain = small_tree("bench-small", &bins, false);
    let small_rocm = small_tree("bench-small-rocm", &bins, true);
    let large = large_tree(&bins, settings.large_files);
    let scratch = TempDir::new("bench-scratch");
    let small_view = without_manifest(&small_rocm, &scratch.join("small-without-manifest"));
    let large_view = without_manifest(&large, &scratch.join("large-without-manifest"));
    let tmp = scratch.join("test_tmpdir");
    fs::create_dir_all(&tmp).unwrap();
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
            ctx.pge_rocminfo(
                Key::PgeRocminfoManifest,
                "parallel_gpu_execute, rocminfo in the runfiles, with MANIFEST",
                small_rocm.srcdir(),
                "rocminfo-small",
            ),
            ctx.pge_rocminfo(
                Key::PgeRocminfoWalk,
                "parallel_gpu_execute, rocminfo in the runfiles, no MANIFEST (walk)",
                &small_view,
                "rocminfo-small-walk",
            ),
        ],
    };
    small.cases.extend(ctx.musl(&small_plain));
    small.cases.extend(ctx.sanitizer(&small_plain));
    small.cases.push(ctx.classic("classic bash wrapper, rocminfo in the runfiles", &small_rocm, "classic-small"));

    let large_title = format!("runfiles tree of {} files", thousands(large.files as u64));
    let mut large_group = Group {
        title: large_title,
        rounds: settings.large_rounds,
        judged: false,
        cases: vec![
            ctx.direct(&large),
            ctx.floor(&large),
            ctx.pge_kfd(&large, "kfd-large"),
            ctx.pge_rocminfo(
                Key::PgeRocminfoManifest,
                "parallel_gpu_execute, rocminfo in the runfiles, with MANIFEST",
                large.srcdir(),
                "rocminfo-large-manifest",
            ),
            ctx.pge_rocminfo(
                Key::PgeRocminfoWalk,
                "parallel_gpu_execute, rocminfo in the runfiles, no MANIFEST (walk)",
                &large_view,
                "rocminfo-large-walk",
            ),
            ctx.classic("classic bash wrapper, rocminfo in the runfiles", &large, "classic-large"),
        ],
    };

    let devnull = open_devnull();
    let attr = Attr::new();
    run_group(&mut small, &attr, devnull.as_raw_fd(), &bins.maxrss);
    run_group(&mut large_group, &attr, devnull.as_raw_fd(), &bins.maxrss);
    let cont = contention(&ctx, &small_plain, settings.contention_rounds, &attr, devnull.as_raw_fd());

    // ---- the report
    let cases = case_table(&[&small, &large_group]);
    let classic = classic_table(&small, &large_group);
    let contended = contention_table(&cont);
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
    let musl_note = match (small.median(Key::MuslFloor), small.median(Key::MuslDirect)) {
        (Some(floor), Some(direct)) => Some(format!(
            "a static musl execv wrapper costs {:.2}x a direct exec of a static musl test here, where the glibc floor costs {:.2}x a direct exec: \
             what a musl build of the wrappers would approach",
            floor / direct,
            small.median(Key::Floor).unwrap() / small.median(Key::Direct).unwrap()
        )),
        _ => None,
    };
    if let Some(note) = &musl_note {
        println!("({note})");
    }
    println!(
        "\n== classic bash wrapper vs parallel_gpu_execute on the same 8-GPU host (classic: rocminfo from the runfiles; ours: sysfs) ==\n"
    );
    print!("{}", classic.text());
    println!("({walk_note})");
    println!(
        "\n== contention: {CONTENTION_TESTS} tests started at once, {GPUS} GPUs x {CONTENTION_SLOTS} slots, each holding its GPU {HOLD_MS} ms; ideal makespan {} ms; {} rounds ==\n",
        CONTENTION_TESTS as u64 / u64::from(GPUS * CONTENTION_SLOTS) * HOLD_MS,
        cont.rounds
    );
    print!("{}", contended.text());
    println!("\n== binary sizes ==\n");
    print!("{}", sizes.text());
    println!("\nmachine: {machine}");
    println!("reproduce: {reproduce}");
    if settings.markdown {
        println!("\n---- Markdown ----\n");
        print!("{}", cases.markdown());
        println!("\n{}{}.\n", start_note[..1].to_uppercase(), &start_note[1..]);
        if let Some(note) = &musl_note {
            println!("{}{}.\n", note[..1].to_uppercase(), &note[1..]);
        }
        print!("{}", classic.markdown());
        println!("\n{walk_note}.\n");
        print!("{}", contended.markdown());
        println!();
        print!("{}", sizes.markdown());
        println!("\nMachine: {machine}. Reproduce: `{reproduce}`.");
    }
}
