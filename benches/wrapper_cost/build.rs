//! Building what is measured: the release binaries and the C floors.

use super::*;

/// `<target>`, from where cargo put this executable:
/// `<target>/<triple>/<profile>/deps/wrapper_cost-<hash>`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    match exe.ancestors().nth(3) {
        Some(triple) if triple.file_name() == Some(OsStr::new(TRIPLE)) => triple.parent().unwrap().to_path_buf(),
        _ => std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target")),
    }
}

pub(crate) struct Bins {
    pub(crate) pge: PathBuf,
    /// `None` when it did not build (its cases are then left out, loudly).
    pub(crate) san: Option<PathBuf>,
    pub(crate) tag: PathBuf,
    pub(crate) floor: PathBuf,
    /// `benches/floor/slot_exec.c`: the TF_GPU_COUNT and KFD floors.
    pub(crate) slot_floor: PathBuf,
    /// The same built with musl-gcc, when it exists.
    pub(crate) musl_slot_floor: Option<PathBuf>,
    pub(crate) test: PathBuf,
    /// The x86_64 musl release files (`WRAPPER_BENCH_MUSL_BINS`), when given.
    pub(crate) musl_wrappers: Option<MuslWrappers>,
    /// The musl floor and test (`musl-gcc -static`), when musl-gcc exists.
    pub(crate) musl: Option<(PathBuf, PathBuf)>,
    pub(crate) hold: PathBuf,
    pub(crate) maxrss: PathBuf,
    /// `benches/support/steps.c`: counts instructions, CPUID and system
    /// calls up to a case's exec of its test.
    pub(crate) steps: PathBuf,
    pub(crate) classic: PathBuf,
}

impl Bins {
    /// Every executable a case runs (the classic script's bash aside, which
    /// is the system's).
    pub(crate) fn executables(&self) -> Vec<PathBuf> {
        let mut all =
            vec![self.pge.clone(), self.floor.clone(), self.slot_floor.clone(), self.test.clone(), self.hold.clone()];
        all.extend(self.san.clone());
        if let Some((floor, test)) = &self.musl {
            all.extend([floor.clone(), test.clone()]);
        }
        if let Some(musl) = &self.musl_wrappers {
            all.extend([musl.pge.clone(), musl.san.clone()]);
        }
        all
    }
}

/// The three x86_64 musl release files of `WRAPPER_BENCH_MUSL_BINS`.
pub(crate) struct MuslWrappers {
    pub(crate) pge: PathBuf,
    pub(crate) san: PathBuf,
    pub(crate) tag: PathBuf,
}

impl MuslWrappers {
    /// Each binary in `dir` as `<name>`, or as the one release file
    /// `<name>-<version>-x86_64-unknown-linux-musl`.
    pub(crate) fn find(dir: &Path) -> MuslWrappers {
        let find = |name: &str| {
            let plain = dir.join(name);
            if plain.is_file() {
                return plain;
            }
            let release = dir.join(format!("{name}-{}-x86_64-unknown-linux-musl", env!("CARGO_PKG_VERSION")));
            assert!(
                release.is_file(),
                "WRAPPER_BENCH_MUSL_BINS={}: neither {name} nor {} is in it (tools/release.sh writes the latter)",
                dir.display(),
                release.file_name().unwrap().to_string_lossy()
            );
            release
        };
        MuslWrappers { pge: find("parallel_gpu_execute"), san: find("sanitizer_wrapper"), tag: find("tag_filters") }
    }

    pub(crate) fn all(&self) -> [(&'static str, &PathBuf); 3] {
        [("parallel_gpu_execute", &self.pge), ("sanitizer_wrapper", &self.san), ("tag_filters", &self.tag)]
    }
}

pub(crate) fn cargo_build(root: &Path, target: &Path, packages: &[&str]) -> bool {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(root).args(["build", "--release", "--target-dir"]).arg(target);
    for p in packages {
        c.args(["-p", p]);
    }
    c.status().expect("run cargo build (set CARGO to the cargo executable)").success()
}

pub(crate) fn compile_c(source: &Path, out: &Path) {
    let status = Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(out)
        .arg(source)
        .status()
        .expect("run cc (gcc and the static glibc, libc6-dev, are needed)");
    assert!(status.success(), "cc -static -O2 {} failed", source.display());
}

/// `musl-gcc -static -O2`: what a static musl build's start-up costs.
pub(crate) fn compile_musl(source: &Path, out: &Path) -> bool {
    Command::new("musl-gcc").args(["-static", "-O2", "-o"]).arg(out).arg(source).status().is_ok_and(|s| s.success())
}

pub(crate) fn build(root: &Path, work: &Path, musl_wrappers: Option<PathBuf>) -> Bins {
    let musl_wrappers = musl_wrappers.as_deref().map(MuslWrappers::find);
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
        musl_wrappers,
        floor: c("floor", "exec"),
        slot_floor: c("floor", "slot_exec"),
        test: c("floor", "true"),
        musl_slot_floor: {
            let out = work.join("musl_slot_exec");
            compile_musl(&root.join("benches/floor/slot_exec.c"), &out).then_some(out)
        },
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
        steps: c("support", "steps"),
        classic,
    }
}
