//! Runfiles trees, sysroots and the Bazel test environment the cases run in.

use super::*;

/// What one runfile is.
pub(crate) enum Content {
    Text(String),
    Script(String),
    /// A copy of a built program.
    Copy(PathBuf),
    /// A symlink to a file outside the tree, as Bazel links a tool in.
    Link(PathBuf),
}

/// A runfiles tree with its own temporary directory.
pub(crate) struct Tree {
    pub(crate) runfiles: Runfiles,
    pub(crate) files: usize,
    /// The copies of built programs in it (for `pagecache::settle`).
    pub(crate) programs: Vec<PathBuf>,
    pub(crate) _dir: TempDir,
}

impl Tree {
    /// Lays the entries out in rlocation order, as Bazel sorts its MANIFEST.
    pub(crate) fn create(label: &str, mut entries: Vec<(String, Content)>) -> Tree {
        let dir = TempDir::new(label);
        let mut runfiles = Runfiles::new(&dir, WORKSPACE);
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut programs = Vec::new();
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
                    programs.push(real);
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
        Tree { runfiles, files: entries.len(), programs, _dir: dir }
    }

    pub(crate) fn srcdir(&self) -> &Path {
        &self.runfiles.srcdir
    }

    pub(crate) fn cwd(&self) -> PathBuf {
        self.runfiles.cwd()
    }

    /// The runfile at `rlocation`, as an absolute path in the tree.
    pub(crate) fn path(&self, rlocation: &str) -> PathBuf {
        self.srcdir().join(rlocation)
    }
}

pub(crate) const ROCMINFO: &str = "local_config_rocm/rocm/bin/rocminfo";
pub(crate) const SANITIZER_LINK: &str = "ws/tools/sanitizer_wrapper";
pub(crate) const SANITIZER_OPTIONS: [&str; 7] = [
    "--asan-options=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1",
    "--lsan-options=report_objects=1",
    "--tsan-options=halt_on_error=1:second_deadlock_stack=1",
    "--asan-suppressions=ws/tools/sanitizers/asan.supp",
    "--lsan-suppressions=ws/tools/sanitizers/lsan.supp",
    "--tsan-suppressions=ws/tools/sanitizers/tsan.supp",
    "--symbolizer=llvm-project/llvm/bin/llvm-symbolizer",
];

/// The test of a case's checking run: names each GPU lock file among the
/// descriptors it inherited that is really locked (a fresh `flock -n` on
/// it fails: `probe_holds_locked=<name>`; else `probe_holds_unlocked=`),
/// then prints its environment.
pub(crate) const ENV_PROBE: &str = r#"#!/bin/sh
for f in /proc/$$/fd/*; do
  l=$(readlink "$f") || continue
  case "${l##*/}" in
    gpulock[0-9]*_[0-9]*)
      if flock -n "$l" true; then echo "probe_holds_unlocked=${l##*/}"; else echo "probe_holds_locked=${l##*/}"; fi ;;
  esac
done
exec env
"#;

/// What every tree holds: the test, the probe, the contention test, the
/// sanitizer files, rocminfo when asked for.
pub(crate) fn common_entries(bins: &Bins, rocminfo: bool) -> Vec<(String, Content)> {
    let mut e = vec![
        ("ws/pkg/gpu_test".to_string(), Content::Copy(bins.test.clone())),
        ("ws/pkg/env_probe".to_string(), Content::Script(ENV_PROBE.to_string())),
        ("ws/pkg/hold".to_string(), Content::Copy(bins.hold.clone())),
        ("ws/tools/sanitizers/asan.supp".to_string(), Content::Text("interceptor_via_lib:libamdhip64.so\n".into())),
        ("ws/tools/sanitizers/lsan.supp".to_string(), Content::Text("leak:libhsa-runtime64.so\n".into())),
        ("ws/tools/sanitizers/tsan.supp".to_string(), Content::Text("race:libamdhip64.so\n".into())),
        ("llvm-project/llvm/bin/llvm-symbolizer".to_string(), Content::Script("#!/bin/sh\nexit 0\n".to_string())),
    ];
    if let Some((_, musl_test)) = &bins.musl {
        e.push((MUSL_TEST_PATH.to_string(), Content::Copy(musl_test.clone())));
    }
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

pub(crate) const REPOS: [&str; 10] = [
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
pub(crate) fn small_tree(label: &str, bins: &Bins, rocminfo: bool) -> Tree {
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
pub(crate) fn large_tree(bins: &Bins, files: usize) -> Tree {
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
pub(crate) fn without_manifest(tree: &Tree, at: &Path) -> PathBuf {
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
pub(crate) fn walk_position(dir: &Path, in_bin: bool, visited: &mut usize) -> bool {
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
pub(crate) fn bazel_env(srcdir: &Path, cwd: &Path, tmp: &Path) -> Vec<(OsString, OsString)> {
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

/// The file parallel_gpu_execute (and the slot floor) writes into
/// `TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR`.
pub(crate) const ANNOTATION_FILE: &str = "parallel_gpu_execute.part";

/// Bazel empties each test's annotations directory before every run
/// (bazelbuild/bazel, `src/main/java/com/google/devtools/build/lib/analysis/
/// test/TestRunnerAction.java`, `deleteOutputs`), so a wrapper's annotation
/// is a new file each time. Each case gets a directory of its own, here, and
/// `run_once` removes the annotation from it before each run, outside the
/// timing.
pub(crate) fn own_annotation_dir(case: &mut Case) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Some((_, dir)) = case.env.iter_mut().find(|(k, _)| k == ANNOTATIONS_DIR) else { return };
    dir.push(format!("-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    fs::create_dir_all(&*dir).unwrap();
}

const ANNOTATIONS_DIR: &str = "TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR";

/// Where `case` writes its annotation, if it has an annotations directory.
pub(crate) fn annotation_path(case: &Case) -> Option<PathBuf> {
    let (_, dir) = case.env.iter().find(|(k, _)| k == ANNOTATIONS_DIR)?;
    Some(Path::new(dir).join(ANNOTATION_FILE))
}

/// Removes the annotation a run left, as Bazel empties the directory
/// before the next run; an annotation that is not there is fine.
pub(crate) fn clear_annotation(file: &Path, label: &str) {
    match fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{label}: remove {}: {e}", file.display()),
        _ => {}
    }
}
