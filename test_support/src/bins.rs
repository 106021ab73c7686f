//! The binaries that tests run: this build's, or those of the directory
//! that `GPU_CI_WRAPPERS_TEST_BINS` names.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Locates a binary of this workspace for tests outside its own crate: cargo
/// puts test executables in `<target>/<profile>/deps/` and binaries one level
/// up. Crate-local tests should prefer `env!("CARGO_BIN_EXE_<name>")`.
///
/// The first call in a test process also runs `cargo build --bins` for the
/// same target directory, target and profile, so that `cargo test --test
/// <name>` (which builds only its own package) neither misses the binaries
/// nor runs stale ones.
pub fn workspace_bin(name: &str) -> PathBuf {
    if let Some(path) = bin_from_env(name) {
        return path;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a directory");
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| build_workspace_bins(deps));
    let path = deps.parent().expect("deps has a parent").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run the tests with `cargo test --workspace`, which builds every binary first",
        path.display()
    );
    path
}

/// The variable that points the integration tests at other binaries than
/// this build's: a directory holding the three as `parallel_gpu_execute`,
/// `sanitizer_wrapper` and `tag_filters`. CI runs the suite a second time
/// with copies of the x86_64 musl release files there.
pub const TEST_BINS_ENV: &str = "GPU_CI_WRAPPERS_TEST_BINS";

/// The binary `name` that tests run: [`bin_from_env`] when the variable is
/// set, else `built` (a crate's `env!("CARGO_BIN_EXE_<name>")`).
pub fn bin_under_test(name: &str, built: &str) -> String {
    match bin_from_env(name) {
        Some(path) => path.to_str().expect("a UTF-8 path in GPU_CI_WRAPPERS_TEST_BINS").to_owned(),
        None => built.to_owned(),
    }
}

/// `name` in the directory [`TEST_BINS_ENV`] names, when it is set; a
/// directory without it fails the test, saying what it looked for.
pub fn bin_from_env(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(TEST_BINS_ENV).filter(|d| !d.is_empty())?);
    let path = dir.join(name);
    assert!(path.is_file(), "{TEST_BINS_ENV}={}: {} is missing", dir.display(), path.display());
    Some(path)
}

/// `cargo build --workspace --bins` into the directories the running test
/// executable came from (`<target dir>/<triple>/<profile>/deps/`).
fn build_workspace_bins(deps: &Path) {
    let Some(profile_dir) = deps.parent() else { return };
    let Some(parent) = profile_dir.parent() else { return };
    let profile = match profile_dir.file_name().and_then(|p| p.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => return,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "--workspace", "--bins", "--profile", profile]);
    build.arg("--manifest-path").arg(&manifest);
    // `<target dir>/<triple>/<profile>` with an explicit target (as this
    // workspace's config has), else `<target dir>/<profile>`.
    match parent.file_name().and_then(|t| t.to_str()).filter(|t| t.contains('-')) {
        Some(triple) => build.args(["--target", triple]).arg("--target-dir").arg(parent.parent().unwrap_or(parent)),
        None => build.arg("--target-dir").arg(parent),
    };
    // Running stale binaries would test the wrong code: a failed build fails.
    let status = build.status();
    assert!(matches!(status, Ok(s) if s.success()), "building the workspace binaries failed: {status:?}");
}
