//! What both integration test files of tag_filters need: running the
//! binary and checking the one-line usage errors.

#![allow(dead_code)]

use test_support::{Cmd, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_tag_filters");

pub fn run(args: &[&str]) -> Output {
    Cmd::new(BIN).args(args).run()
}

/// Exit 2, nothing on stdout, exactly `line` on stderr.
#[track_caller]
pub fn assert_usage_error(args: &[&str], line: &str) {
    let out = run(args);
    out.assert_code(2).assert_stdout_eq("").assert_one_error_line(line);
    assert_eq!(out.stderr, format!("{line}\n"), "{}", out.explain());
}
