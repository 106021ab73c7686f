//! What a test needs from the machine (root, `unshare`, `strace` that can
//! trace, the published samples, ...), with one policy for when it is
//! missing: under `CI=true` the test fails, naming itself and what is
//! missing, because CI installs every prerequisite (`.ci/run`) and a check
//! that did not run must not pass there; elsewhere it prints one line
//! saying what was not checked, and the test returns.

/// Whether the test runs under CI (`CI=true`, as `.ci/run` and the CI
/// services set it).
pub fn in_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1"))
}

/// `true` when the prerequisite `what` is `available`. Otherwise, under CI
/// it panics (`<test>: <what> is missing under CI=true, so <checks> would go
/// unchecked`); elsewhere it prints `skipped <test>: <checks> not checked
/// (no <what>)` on stderr and returns `false`, and the test returns:
///
/// ```ignore
/// if !prerequisite(is_root(), "root", "running the wrapper as another user") {
///     return;
/// }
/// ```
#[track_caller]
pub fn prerequisite(available: bool, what: &str, checks: &str) -> bool {
    if available {
        return true;
    }
    let line = skip_line(what, checks);
    assert!(!in_ci(), "{line}: a missing prerequisite fails under CI=true (.ci/run makes sure each one is there)");
    // Straight to stderr, past the test harness's capture, so that the line
    // shows in a passing run too.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
    false
}

/// The line a skip prints (and a CI failure starts with).
pub fn skip_line(what: &str, checks: &str) -> String {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    format!("skipped {test}: {checks} not checked (no {what})")
}

/// Whether `program` is an executable on the `PATH` (or is a path to one).
pub fn have_program(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return runnable(std::path::Path::new(program)).unwrap_or(false);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).any(|d| runnable(&d.join(program)).unwrap_or(false))
}
