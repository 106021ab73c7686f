//! What the integration test files of tag_filters need: running the
//! binary, checking what it prints and the one-line usage errors.

#![allow(dead_code)]

use test_support::{Cmd, Output};

/// The binary under test: this build's, or the one in
/// `GPU_CI_WRAPPERS_TEST_BINS` (`test_support::bin_under_test`).
pub fn bin() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| test_support::bin_under_test("tag_filters", env!("CARGO_BIN_EXE_tag_filters")))
}

pub fn run(args: &[&str]) -> Output {
    Cmd::new(bin()).args(args).run()
}

/// Exit 2, nothing on stdout, exactly `line` on stderr.
#[track_caller]
pub fn assert_usage_error(args: &[&str], line: &str) {
    let out = run(args);
    out.assert_code(2).assert_stdout_eq("").assert_one_error_line(line);
    assert_eq!(out.stderr, format!("{line}\n"), "{}", out.explain());
}

/// Exit 0, exactly `expected` on stdout, nothing on stderr.
#[track_caller]
pub fn assert_prints(args: &[&str], expected: &str) {
    let out = run(args);
    out.assert_success().assert_stdout_eq(expected);
    assert_eq!(out.stderr, "", "stderr should be empty\n{}", out.explain());
}
