//! What the sanitizer_wrapper integration tests share: the binary, a runfiles
//! tree holding a recording test, and assertions on what the test saw.

// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use test_support::{Cmd, Output, RECORDING_TEST, Runfiles, TempDir, parse_record, record_value};

/// The binary under test: this build's, or the one in
/// `GPU_CI_WRAPPERS_TEST_BINS` (`test_support::bin_under_test`).
pub fn bin() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| test_support::bin_under_test("sanitizer_wrapper", env!("CARGO_BIN_EXE_sanitizer_wrapper")))
}

pub const WS: &str = "ws";

/// The test command, relative to the test's working directory, as Bazel
/// passes it.
pub const TEST: &str = "./pkg/foo_test";

/// A chained wrapper that says how it was run, then runs its arguments.
pub const CHAINED_WRAPPER: &str = r#"#!/bin/sh
echo "chain_argv0=$0"
echo "chain_args=$*"
echo "chain_asan=${ASAN_OPTIONS-(unset)}"
exec "$@"
"#;

/// A temporary runfiles tree for workspace `ws` with the recording test at
/// `ws/pkg/foo_test`.
pub struct Tree {
    pub dir: TempDir,
    pub rf: Runfiles,
}

impl Tree {
    pub fn new(label: &str) -> Tree {
        let dir = TempDir::new(label);
        let mut rf = Runfiles::new(&dir, WS);
        rf.add("ws/pkg/foo_test", RECORDING_TEST, true);
        Tree { dir, rf }
    }

    /// Adds a runfile (tree symlink and manifest entry); returns the path of
    /// the symlink in the tree, which is what the wrapper hands on.
    pub fn add(&mut self, rlocation: &str, contents: &str) -> PathBuf {
        self.rf.add(rlocation, contents, false);
        self.rf.srcdir.join(rlocation)
    }

    pub fn add_executable(&mut self, rlocation: &str, contents: &str) -> PathBuf {
        self.rf.add(rlocation, contents, true);
        self.rf.srcdir.join(rlocation)
    }

    /// The wrapper, run as Bazel runs a `--run_under` wrapper in this tree.
    pub fn cmd(&self) -> Cmd {
        let mut cmd = Cmd::new(bin());
        self.rf.apply(&mut cmd);
        cmd
    }

    /// The wrapper binary linked into the tree as `rlocation` (as the Bazel
    /// macro's `<name>` symlink); returns its path.
    pub fn link_wrapper(&self, rlocation: &str) -> PathBuf {
        link_binary(&self.rf.srcdir.join(rlocation))
    }

    pub fn conf_beside(&self, rlocation: &str, contents: &str) -> PathBuf {
        let path = self.rf.srcdir.join(format!("{rlocation}.sanitizer_wrapper.conf"));
        test_support::write_file(&path, contents);
        path
    }
}

/// A symlink to the wrapper binary at `path`.
pub fn link_binary(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(bin(), path).expect("symlink the wrapper");
    path.to_path_buf()
}

/// A manifest-only layout: the real files live in `<tmp>/execroot`, only the
/// manifest names them, and no runfiles tree exists.
pub struct ManifestOnly {
    pub dir: TempDir,
    pub manifest: PathBuf,
    entries: Vec<(String, PathBuf)>,
    /// The test's working directory (`<tmp>/work/ws`), which is not a
    /// runfiles tree.
    pub cwd: PathBuf,
}

impl ManifestOnly {
    pub fn new(label: &str) -> ManifestOnly {
        let dir = TempDir::new(label);
        let manifest = dir.join("test.runfiles_manifest");
        let cwd = dir.join("work").join(WS);
        std::fs::create_dir_all(&cwd).unwrap();
        let mut m = ManifestOnly { dir, manifest, entries: Vec::new(), cwd };
        m.add_executable("ws/pkg/foo_test", RECORDING_TEST);
        m
    }

    fn real_path(&self, rlocation: &str) -> PathBuf {
        self.dir.join("execroot").join(rlocation)
    }

    /// Adds a file named in the manifest only; returns its real path.
    pub fn add(&mut self, rlocation: &str, contents: &str) -> PathBuf {
        let real = self.real_path(rlocation);
        test_support::write_file(&real, contents);
        self.entries.push((rlocation.to_string(), real.clone()));
        self.write();
        real
    }

    pub fn add_executable(&mut self, rlocation: &str, contents: &str) -> PathBuf {
        let real = self.real_path(rlocation);
        test_support::write_executable(&real, contents);
        self.entries.push((rlocation.to_string(), real.clone()));
        self.write();
        real
    }

    /// A manifest entry naming a file that does not exist.
    pub fn add_dangling(&mut self, rlocation: &str) -> PathBuf {
        let real = self.real_path(rlocation);
        self.entries.push((rlocation.to_string(), real.clone()));
        self.write();
        real
    }

    fn write(&self) {
        let text: String = self.entries.iter().map(|(r, p)| format!("{r} {}\n", p.display())).collect();
        test_support::write_file(&self.manifest, text);
    }

    /// The test itself, by absolute path (there is no tree to find it in).
    pub fn test(&self) -> PathBuf {
        self.real_path("ws/pkg/foo_test")
    }

    /// `program` run from the working directory with only the manifest
    /// variables set (no RUNFILES_DIR, no TEST_SRCDIR).
    pub fn cmd_for(&self, program: impl AsRef<Path>) -> Cmd {
        let mut cmd = Cmd::new(program);
        cmd.env("RUNFILES_MANIFEST_FILE", &self.manifest).env("TEST_WORKSPACE", WS).current_dir(&self.cwd);
        cmd
    }

    pub fn cmd(&self) -> Cmd {
        self.cmd_for(bin())
    }
}

/// What the recording test saw, from its stdout.
pub struct Seen<'a> {
    out: &'a Output,
    record: Vec<(String, String)>,
}

impl<'a> Seen<'a> {
    /// Parses the record after checking that the run succeeded and that the
    /// test really ran: its whole record is there, from `argc` to the last
    /// variable (which it writes set or `unset`). A wrapper that exits 0
    /// without exec'ing the test fails here, so `expect(key, None)` means
    /// the test ran with `key` unset, never that nothing was recorded.
    #[track_caller]
    pub fn from(out: &'a Output) -> Seen<'a> {
        out.assert_success();
        let record = parse_record(&out.stdout);
        let ran = record_value(&record, "argc").is_some()
            && record_value(&record, "pid").is_some()
            && out.stdout.lines().any(|l| l.starts_with("TSAN_OPTIONS=") || l == "TSAN_OPTIONS unset");
        assert!(ran, "the test did not run (no whole record on stdout)\n{}", out.explain());
        Seen { out, record }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        record_value(&self.record, key)
    }

    /// Asserts `key` has `want` (`None`: unset, or absent from the record).
    #[track_caller]
    pub fn expect(&self, key: &str, want: Option<&str>) -> &Self {
        assert_eq!(self.get(key), want, "{key}\n{}", self.out.explain());
        self
    }

    /// Asserts the test's arguments (after argv[0]) were exactly `args`.
    #[track_caller]
    pub fn expect_args(&self, args: &[&str]) -> &Self {
        let argc = args.len().to_string();
        self.expect("argc", Some(&argc));
        for (i, a) in args.iter().enumerate() {
            self.expect(&format!("arg{i}"), Some(a));
        }
        self
    }
}

/// `suppressions=<path>` as the wrapper writes it.
pub fn suppressions(path: &Path) -> String {
    format!("suppressions={}", path.display())
}

/// `external_symbolizer_path=<path>` as the wrapper writes it.
pub fn symbolizer(path: &Path) -> String {
    format!("external_symbolizer_path={}", path.display())
}

/// Asserts that the test did not run: nothing on stdout, where the recording
/// test writes.
#[track_caller]
pub fn assert_test_not_run(out: &Output) {
    assert!(out.stdout.is_empty(), "the test ran\n{}", out.explain());
}
