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
    find_program(program).is_some()
}

/// Where `program` is: itself when it names a path (has a `/`), else the
/// first executable of that name on this test process's `PATH`. A
/// [`Cmd`](crate::Cmd) made with a bare name runs what this finds, so a
/// test runs the program it checked, whatever `PATH` the command itself
/// is given.
pub fn find_program(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let p = std::path::PathBuf::from(program);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| runnable(p))
}

/// The interpreter behind `python` (a path, or a name looked up as
/// [`find_program`] does) as an absolute path, when it can import every
/// module of `modules`: its `sys.executable`. A `python3` on `PATH` may be
/// a pyenv shim or a virtual environment's; asked here with this process's
/// environment, as a user runs it, the answer runs the same interpreter
/// under a [`Cmd`](crate::Cmd)'s scrubbed environment.
pub fn python_with(python: &str, modules: &[&str]) -> Option<std::path::PathBuf> {
    let program = find_program(python)?;
    let imports: String = modules.iter().map(|m| format!("import {m}\n")).collect();
    let out = std::process::Command::new(&program)
        .args(["-c", &format!("{imports}import sys\nprint(sys.executable)")])
        .output()
        .ok()?;
    let printed = String::from_utf8(out.stdout).ok()?;
    let executable = std::path::PathBuf::from(printed.trim_end());
    (out.status.success() && executable.is_absolute()).then_some(executable)
}
