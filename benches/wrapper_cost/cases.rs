//! The cases: what is run, with which environment, and what its output must show.

use super::*;

/// One word of a command line; the test's word differs between the timed
/// runs and the checking run.
#[derive(Clone)]
pub(crate) enum Arg {
    Lit(OsString),
    Test { timed: OsString, probe: OsString },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Key {
    Direct,
    Floor,
    /// `benches/floor/slot_exec.c` with `TF_GPU_COUNT`: the system calls
    /// of that path, in C.
    CountFloor,
    /// `benches/floor/slot_exec.c` on the KFD host: the system calls of the
    /// KFD path, in C.
    KfdFloor,
    /// `benches/floor/slot_exec.c` built with musl-gcc, running the static
    /// musl test: the `TF_GPU_COUNT` and KFD paths' system calls as a
    /// static musl program makes them.
    MuslCountFloor,
    MuslKfdFloor,
    /// `benches/floor/slot_exec.c` on a host with no GPU: the pass-through's
    /// system calls, in C; and its musl twin with the musl test.
    PassFloor,
    MuslPassFloor,
    /// A static musl `int main(){return 0;}`, exec'd directly.
    MuslDirect,
    /// A static musl C execv of that musl test.
    MuslFloor,
    /// The same musl execv of the glibc test the wrappers run: what the
    /// musl builds' rows compare with to show their own code's cost.
    MuslFloorGlibcTest,
    PgePassThrough,
    PgeTfGpuCount,
    PgeKfd,
    /// The same three, run by the x86_64 musl release file of
    /// parallel_gpu_execute, with the (glibc) test.
    MuslPgePassThrough,
    MuslPgeTfGpuCount,
    MuslPgeKfd,
    /// The same three again with the static musl test: set against the
    /// musl floor (`MuslFloor`) and the musl direct exec, its own cost.
    MuslPgePassThroughMuslTest,
    MuslPgeTfGpuCountMuslTest,
    MuslPgeKfdMuslTest,
    PgeRocminfoManifest,
    PgeRocminfoWalk,
    SanPassThrough,
    SanOptions,
    SanConfig,
    Classic,
}

impl Key {
    /// Whether the case takes a GPU slot and so writes the annotation.
    pub(crate) fn annotates(self) -> bool {
        matches!(
            self,
            Key::CountFloor
                | Key::KfdFloor
                | Key::MuslCountFloor
                | Key::MuslKfdFloor
                | Key::PgeTfGpuCount
                | Key::PgeKfd
                | Key::MuslPgeTfGpuCount
                | Key::MuslPgeKfd
                | Key::MuslPgeTfGpuCountMuslTest
                | Key::MuslPgeKfdMuslTest
                | Key::PgeRocminfoManifest
                | Key::PgeRocminfoWalk
        )
    }

    pub(crate) fn is_wrapper(self) -> bool {
        !matches!(
            self,
            Key::Direct
                | Key::Floor
                | Key::CountFloor
                | Key::KfdFloor
                | Key::MuslCountFloor
                | Key::MuslKfdFloor
                | Key::PassFloor
                | Key::MuslPassFloor
                | Key::MuslDirect
                | Key::MuslFloor
                | Key::MuslFloorGlibcTest
                | Key::Classic
        )
    }

    /// The floor and the direct exec this case's ratios are taken to: the
    /// musl ones for what runs the static musl test, else the glibc ones.
    pub(crate) fn reference(self) -> (Key, Key) {
        match self {
            Key::MuslDirect
            | Key::MuslFloor
            | Key::MuslCountFloor
            | Key::MuslKfdFloor
            | Key::MuslPassFloor
            | Key::MuslPgePassThroughMuslTest
            | Key::MuslPgeTfGpuCountMuslTest
            | Key::MuslPgeKfdMuslTest => (Key::MuslFloor, Key::MuslDirect),
            _ => (Key::Floor, Key::Direct),
        }
    }

    /// The most this case may cost, as a multiple of its floor
    /// ([`Key::reference`]): the static glibc build against the glibc floor
    /// (1.05x pass-through and `TF_GPU_COUNT`, 1.10x KFD), the musl release
    /// file running the static musl test against the musl floor (1.10x,
    /// 1.20x, 1.40x). The musl file running the glibc test has none: its
    /// floor runs another test.
    pub(crate) fn floor_target(self) -> Option<f64> {
        match self {
            Key::PgePassThrough | Key::PgeTfGpuCount => Some(1.05),
            Key::PgeKfd => Some(1.10),
            Key::MuslPgePassThroughMuslTest => Some(1.10),
            Key::MuslPgeTfGpuCountMuslTest => Some(1.20),
            Key::MuslPgeKfdMuslTest => Some(1.40),
            _ => None,
        }
    }
}

pub(crate) struct Case {
    pub(crate) key: Key,
    pub(crate) label: String,
    pub(crate) cmd: Vec<Arg>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) cwd: PathBuf,
    /// Text the checking run's output must contain / must not contain.
    pub(crate) expect: Vec<String>,
    pub(crate) reject: Vec<String>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) rss_kib: Option<i64>,
    /// What one single-stepped run counted before the exec (`trace`).
    pub(crate) counts: Option<Counts>,
}

#[derive(Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) wall_ns: u64,
    pub(crate) cpu_ns: u64,
    /// Page faults, minor and major, of the whole process: the wrapper's
    /// and, after the exec, the test's.
    pub(crate) faults: u64,
}

impl Case {
    /// The command line of the timed runs, or of the checking run.
    pub(crate) fn argv(&self, probe: bool) -> Vec<&OsStr> {
        self.cmd
            .iter()
            .map(|a| match a {
                Arg::Lit(v) => v.as_os_str(),
                Arg::Test { timed, .. } if !probe => timed.as_os_str(),
                Arg::Test { probe, .. } => probe.as_os_str(),
            })
            .collect()
    }

    pub(crate) fn timed_argv(&self) -> Vec<&OsStr> {
        self.argv(false)
    }
}

pub(crate) fn lit(v: impl AsRef<OsStr>) -> Arg {
    Arg::Lit(v.as_ref().to_owned())
}

/// The test as the wrappers get it (relative to the test's directory).
pub(crate) fn test_rel() -> Arg {
    Arg::Test { timed: TEST_WORD.into(), probe: PROBE_WORD.into() }
}

/// The test by absolute path (a direct exec, the floor).
pub(crate) fn test_abs(tree: &Tree) -> Arg {
    Arg::Test { timed: tree.path("ws/pkg/gpu_test").into(), probe: tree.path("ws/pkg/env_probe").into() }
}

pub(crate) struct Context<'a> {
    pub(crate) bins: &'a Bins,
    pub(crate) tmp: PathBuf,
    pub(crate) locks: PathBuf,
    pub(crate) empty_sysroot: PathBuf,
    pub(crate) kfd_sysroot: PathBuf,
}

impl Context<'_> {
    pub(crate) fn case(&self, key: Key, label: &str, tree_dir: &Path, cwd: &Path, cmd: Vec<Arg>) -> Case {
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
            counts: None,
        }
    }

    pub(crate) fn direct(&self, tree: &Tree) -> Case {
        self.case(Key::Direct, "direct exec of the test", tree.srcdir(), &tree.cwd(), vec![test_abs(tree)])
    }

    pub(crate) fn floor(&self, tree: &Tree) -> Case {
        let label = "floor: static C execv, then the test";
        self.case(Key::Floor, label, tree.srcdir(), &tree.cwd(), vec![lit(&self.bins.floor), test_abs(tree)])
    }

    /// The pass-through, `TF_GPU_COUNT` and KFD cases again, run by the x86_64
    /// musl release file of parallel_gpu_execute (`WRAPPER_BENCH_MUSL_BINS`),
    /// when given: once with the (glibc) test, once with the static musl
    /// test when musl-gcc built it.
    pub(crate) fn musl_pge(&self, tree: &Tree) -> Vec<Case> {
        let Some(wrappers) = &self.bins.musl_wrappers else { return Vec::new() };
        let musl = lit(&wrappers.pge);
        let mut cases = vec![
            (Key::MuslPgePassThrough, self.pge_pass_through(tree), false),
            (Key::MuslPgeTfGpuCount, self.pge_tf_gpu_count(tree), false),
            (Key::MuslPgeKfd, self.pge_kfd(tree, "kfd-small-musl"), false),
        ];
        if self.bins.musl.is_some() {
            cases.extend([
                (Key::MuslPgePassThroughMuslTest, self.pge_pass_through(tree), true),
                (Key::MuslPgeTfGpuCountMuslTest, self.pge_tf_gpu_count(tree), true),
                (Key::MuslPgeKfdMuslTest, self.pge_kfd(tree, "kfd-small-musl-test"), true),
            ]);
        }
        cases
            .into_iter()
            .map(|(key, mut c, musl_test)| {
                c.key = key;
                c.label = c.label.replacen("parallel_gpu_execute", "parallel_gpu_execute (musl release)", 1);
                c.cmd[0] = musl.clone();
                if musl_test {
                    c.label.push_str(", static musl test (x musl floor)");
                    c.cmd[1] = Arg::Test { timed: MUSL_TEST_WORD.into(), probe: PROBE_WORD.into() };
                }
                c
            })
            .collect()
    }

    /// The slot floors (`benches/floor/slot_exec.c`): the system calls the
    /// pass-through, the `TF_GPU_COUNT` path, and the KFD path on the KFD
    /// host, must make under the project's contract, in C, in the environment of the wrapper's own
    /// case (`like`), with a lock directory of its own beside that case's:
    /// the same name with `-floor`.
    pub(crate) fn slot_floor(&self, like: &Case) -> Case {
        let musl_floor = || self.bins.musl_slot_floor.as_ref().expect("the musl slot floor");
        let (key, label, floor) = match like.key {
            Key::PgePassThrough => (
                Key::PassFloor,
                "pass-through floor: static C, that path's system calls, then the test",
                &self.bins.slot_floor,
            ),
            Key::MuslPgePassThroughMuslTest => (
                Key::MuslPassFloor,
                "musl pass-through floor: static musl C, that path's system calls, then the musl test (x musl floor)",
                musl_floor(),
            ),
            Key::PgeTfGpuCount => (
                Key::CountFloor,
                "TF_GPU_COUNT floor: static C, that path's system calls, then the test",
                &self.bins.slot_floor,
            ),
            Key::MuslPgeTfGpuCountMuslTest => (
                Key::MuslCountFloor,
                "musl TF_GPU_COUNT floor: static musl C, that path's system calls, then the musl test (x musl floor)",
                musl_floor(),
            ),
            Key::MuslPgeKfdMuslTest => (
                Key::MuslKfdFloor,
                "musl KFD floor: static musl C, the KFD path's system calls, then the musl test (x musl floor)",
                musl_floor(),
            ),
            _ => (
                Key::KfdFloor,
                "KFD floor: static C, the KFD path's system calls, then the test",
                &self.bins.slot_floor,
            ),
        };
        let mut env = like.env.clone();
        let (_, lock_dir) = env
            .iter_mut()
            .find(|(k, _)| k == "PARALLEL_GPU_EXECUTE_LOCK_DIR")
            .unwrap_or_else(|| panic!("{}: the case has no lock directory", like.label));
        lock_dir.push("-floor");
        Case {
            key,
            label: label.to_string(),
            cmd: vec![lit(floor), like.cmd[1].clone()],
            env,
            cwd: like.cwd.clone(),
            expect: like.expect.clone(),
            reject: like.reject.clone(),
            samples: Vec::new(),
            rss_kib: None,
            counts: None,
        }
    }

    /// The musl direct exec and the musl floor, when musl-gcc built them.
    pub(crate) fn musl(&self, tree: &Tree) -> Vec<Case> {
        let Some((floor, _)) = &self.bins.musl else { return Vec::new() };
        let test = Arg::Test { timed: tree.path(MUSL_TEST_PATH).into(), probe: tree.path("ws/pkg/env_probe").into() };
        vec![
            self.case(
                Key::MuslDirect,
                "musl direct exec of a static musl test (x musl floor)",
                tree.srcdir(),
                &tree.cwd(),
                vec![test.clone()],
            ),
            self.case(
                Key::MuslFloor,
                "musl floor: static musl C execv, then that test (x musl floor)",
                tree.srcdir(),
                &tree.cwd(),
                vec![lit(floor), test],
            ),
            self.case(
                Key::MuslFloorGlibcTest,
                "musl floor, then the (glibc) test the wrappers run",
                tree.srcdir(),
                &tree.cwd(),
                vec![lit(floor), test_abs(tree)],
            ),
        ]
    }

    /// parallel_gpu_execute on `srcdir` (the tree itself, or a view of it),
    /// with a lock directory of its own.
    pub(crate) fn pge(
        &self,
        key: Key,
        label: &str,
        srcdir: &Path,
        cwd: &Path,
        sysroot: &Path,
        lock_name: &str,
    ) -> Case {
        let mut c = self.case(key, label, srcdir, cwd, vec![lit(&self.bins.pge), test_rel()]);
        c.env.push(("PARALLEL_GPU_EXECUTE_SYSROOT".into(), sysroot.into()));
        c.env.push(("PARALLEL_GPU_EXECUTE_LOCK_DIR".into(), self.locks.join(lock_name).into()));
        c
    }

    pub(crate) fn pge_pass_through(&self, tree: &Tree) -> Case {
        let label = "parallel_gpu_execute, zero GPUs (pass-through)";
        let mut c =
            self.pge(Key::PgePassThrough, label, tree.srcdir(), &tree.cwd(), &self.empty_sysroot, "pass-through");
        c.expect.push("Execute with no GPU support".into());
        c.reject.push("VISIBLE_DEVICES=".into());
        c
    }

    pub(crate) fn pge_tf_gpu_count(&self, tree: &Tree) -> Case {
        let label = "parallel_gpu_execute, TF_GPU_COUNT=8, slot free";
        let mut c = self.pge(Key::PgeTfGpuCount, label, tree.srcdir(), &tree.cwd(), &self.empty_sysroot, "tf");
        c.env.push(("TF_GPU_COUNT".into(), GPUS.to_string().into()));
        c.expect.extend(["on GPU(s) 0".to_string(), "CUDA_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    pub(crate) fn pge_kfd(&self, tree: &Tree, lock_name: &str) -> Case {
        let label = "parallel_gpu_execute, KFD sysfs with 8 GPUs";
        let mut c = self.pge(Key::PgeKfd, label, tree.srcdir(), &tree.cwd(), &self.kfd_sysroot, lock_name);
        c.expect.extend(["on GPU(s) 0".to_string(), "HIP_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    /// parallel_gpu_execute finding rocminfo in the runfiles: through the
    /// MANIFEST of `with_manifest`, and by walking `walk` (a view of a tree
    /// without one). Lock directories `<lock_prefix>-manifest` and `-walk`.
    pub(crate) fn pge_rocminfo(&self, with_manifest: &Path, walk: &Path, lock_prefix: &str) -> [Case; 2] {
        [
            (Key::PgeRocminfoManifest, "with MANIFEST", with_manifest, "manifest"),
            (Key::PgeRocminfoWalk, "no MANIFEST (walk)", walk, "walk"),
        ]
        .map(|(key, how, srcdir, lock)| {
            let label = format!("parallel_gpu_execute, rocminfo in the runfiles, {how}");
            let lock_name = format!("{lock_prefix}-{lock}");
            let mut c = self.pge(key, &label, srcdir, &srcdir.join(WORKSPACE), &self.empty_sysroot, &lock_name);
            c.expect.extend(["on GPU(s) 0".to_string(), "HIP_VISIBLE_DEVICES=0\n".to_string()]);
            c
        })
    }

    pub(crate) fn classic(&self, label: &str, tree: &Tree, lock_name: &str) -> Case {
        let cwd = tree.cwd();
        let mut c = self.case(Key::Classic, label, tree.srcdir(), &cwd, vec![lit(&self.bins.classic), test_rel()]);
        c.env.push(("CLASSIC_LOCK_DIR".into(), self.locks.join(lock_name).into()));
        c.expect.extend(["on GPU 0".to_string(), "HIP_VISIBLE_DEVICES=0\n".to_string()]);
        c
    }

    pub(crate) fn sanitizer(&self, tree: &Tree) -> Vec<Case> {
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
