//! The printed filter: every config, orders, de-duplication, a driver's
//! whole Bazel command line, --strict, each format, --help/--version, and
//! the ways the command line can be wrong.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

mod common;

use common::{assert_prints, assert_usage_error, bin, run};
use test_support::{Cmd, Output, TempDir};

/// The base list, written out: the bytes the shell helper printed.
macro_rules! base {
    () => {
        "-no_gpu,-requires-gpu-intel,-requires-gpu-nvidia,-requires-gpu-cuda,-cuda-only,\
         -oneapi-only,-requires-gpu-sm60,-requires-gpu-sm60-only,-requires-gpu-sm70,\
         -requires-gpu-sm70-only,-requires-gpu-sm80,-requires-gpu-sm80-only,-requires-gpu-sm86,\
         -requires-gpu-sm86-only,-requires-gpu-sm89,-requires-gpu-sm89-only,-requires-gpu-sm90,\
         -requires-gpu-sm90-only,-skip_rocprofiler_sdk,-no_oss,-oss_excluded,-oss_serial"
    };
}

const KNOWN: &str = "(known configs: ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan)";

#[test]
fn no_arguments_prints_the_base_list() {
    assert_prints(&[], concat!(base!(), "\n"));
}

#[test]
fn ci_single_gpu() {
    let expected = concat!(base!(), ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu\n");
    assert_prints(&["--config=ci_single_gpu"], expected);
    assert_prints(&["--config", "ci_single_gpu"], expected);
}

#[test]
fn ci_multi_gpu() {
    let expected = concat!(base!(), ",multi_gpu\n");
    assert_prints(&["--config=ci_multi_gpu"], expected);
    assert_prints(&["--config", "ci_multi_gpu"], expected);
}

#[test]
fn ci_rocm_cpu() {
    let expected = concat!(base!(), ",gpu,-requires-gpu-rocm,-requires-gpu-amd\n");
    assert_prints(&["--config=ci_rocm_cpu"], expected);
    assert_prints(&["--config", "ci_rocm_cpu"], expected);
}

#[test]
fn asan() {
    assert_prints(&["--config=asan"], concat!(base!(), ",-noasan\n"));
    assert_prints(&["--config", "asan"], concat!(base!(), ",-noasan\n"));
}

#[test]
fn tsan() {
    assert_prints(&["--config=tsan"], concat!(base!(), ",-notsan\n"));
    assert_prints(&["--config", "tsan"], concat!(base!(), ",-notsan\n"));
}

#[test]
fn configs_append_in_the_order_given() {
    assert_prints(
        &["--config=tsan", "--config=ci_single_gpu", "--config=asan"],
        concat!(base!(), ",-notsan,requires-gpu-rocm,requires-gpu-amd,-multi_gpu,-noasan\n"),
    );
    assert_prints(
        &["--config=asan", "--config", "ci_rocm_cpu", "--config=tsan"],
        concat!(base!(), ",-noasan,gpu,-requires-gpu-rocm,-requires-gpu-amd,-notsan\n"),
    );
}

#[test]
fn a_tag_already_listed_is_not_repeated() {
    assert_prints(&["--config=asan", "--config=asan"], concat!(base!(), ",-noasan\n"));
    assert_prints(
        &["--config=ci_single_gpu", "--config=ci_multi_gpu", "--config=ci_single_gpu"],
        concat!(base!(), ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu,multi_gpu\n"),
    );
    // Exact strings only: `requires-gpu-rocm` and `-requires-gpu-rocm` are
    // different entries, and Bazel lets the exclusion win.
    assert_prints(
        &["--config=ci_single_gpu", "--config=ci_rocm_cpu"],
        concat!(base!(), ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu,gpu,-requires-gpu-rocm,-requires-gpu-amd\n"),
    );
}

#[test]
fn a_drivers_whole_bazel_command_line_is_accepted() {
    assert_prints(
        &[
            "test",
            "-c",
            "opt",
            "--jobs=8",
            "--config=rbe",
            "--config=ci_multi_gpu",
            "--keep_going",
            "--configs=asan",
            "--config",
            "cuda",
            "//xla/...",
            "--config=asan",
            "--",
            "//xla/...",
            "-//xla/tests:flaky",
            "--config=tsan",
            "--format=yaml",
        ],
        concat!(base!(), ",multi_gpu,-noasan\n"),
    );
}

#[test]
fn strict_rejects_an_unknown_config() {
    let line = format!("tag_filters: --config: unknown config 'rbe' under --strict {KNOWN}");
    assert_usage_error(&["--strict", "--config=ci_single_gpu", "--config=rbe"], &line);
    // Wherever --strict is.
    assert_usage_error(&["--config", "rbe", "--strict"], &line);
}

#[test]
fn strict_rejects_other_arguments() {
    assert_usage_error(
        &["--strict", "test", "--config=asan"],
        &format!("tag_filters: --strict: unexpected argument 'test' {KNOWN}"),
    );
    assert_usage_error(
        &["--jobs=8", "--strict"],
        &format!("tag_filters: --strict: unexpected argument '--jobs=8' {KNOWN}"),
    );
}

#[test]
fn strict_accepts_our_options_and_ignores_target_patterns() {
    assert_prints(
        &["--strict", "--config=ci_single_gpu", "--format", "list", "--", "//xla/...", "-c"],
        concat!(base!(), ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu\n"),
    );
}

#[test]
fn format_list_is_the_default() {
    assert_prints(&["--format=list", "--config=asan"], concat!(base!(), ",-noasan\n"));
    assert_prints(&["--format", "list"], concat!(base!(), "\n"));
}

#[test]
fn format_flags() {
    assert_prints(&["--format=flags"], concat!("--build_tag_filters=", base!(), " --test_tag_filters=", base!(), "\n"));
    assert_prints(
        &["--config=ci_single_gpu", "--format", "flags", "--config=asan"],
        concat!(
            "--build_tag_filters=",
            base!(),
            ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu,-noasan",
            " --test_tag_filters=",
            base!(),
            ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu,-noasan\n"
        ),
    );
}

const BAZELRC: &str = concat!(
    "build:ci_single_gpu --build_tag_filters=",
    base!(),
    ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu\n",
    "test:ci_single_gpu --test_tag_filters=",
    base!(),
    ",requires-gpu-rocm,requires-gpu-amd,-multi_gpu\n",
    "build:ci_multi_gpu --build_tag_filters=",
    base!(),
    ",multi_gpu\n",
    "test:ci_multi_gpu --test_tag_filters=",
    base!(),
    ",multi_gpu\n",
    "build:ci_rocm_cpu --build_tag_filters=",
    base!(),
    ",gpu,-requires-gpu-rocm,-requires-gpu-amd\n",
    "test:ci_rocm_cpu --test_tag_filters=",
    base!(),
    ",gpu,-requires-gpu-rocm,-requires-gpu-amd\n",
    "build:asan --build_tag_filters=",
    base!(),
    ",-noasan\n",
    "test:asan --test_tag_filters=",
    base!(),
    ",-noasan\n",
    "build:tsan --build_tag_filters=",
    base!(),
    ",-notsan\n",
    "test:tsan --test_tag_filters=",
    base!(),
    ",-notsan\n",
);

#[test]
fn format_bazelrc_lists_every_known_config() {
    assert_prints(&["--format=bazelrc"], BAZELRC);
}

#[test]
fn format_bazelrc_does_not_depend_on_the_given_configs() {
    assert_prints(&["--config=asan", "--format", "bazelrc", "--config=ci_multi_gpu"], BAZELRC);
    // --strict still checks them.
    assert_usage_error(
        &["--strict", "--format=bazelrc", "--config=cuda"],
        &format!("tag_filters: --config: unknown config 'cuda' under --strict {KNOWN}"),
    );
}

#[test]
fn an_unknown_format_is_an_error() {
    assert_usage_error(
        &["--format=yaml"],
        "tag_filters: --format: unknown value 'yaml' (expected list, flags or bazelrc)",
    );
    assert_usage_error(
        &["--config=asan", "--format", "LIST"],
        "tag_filters: --format: unknown value 'LIST' (expected list, flags or bazelrc)",
    );
    assert_usage_error(&["--format="], "tag_filters: --format: unknown value '' (expected list, flags or bazelrc)");
    // Even among driver arguments: --format is ours.
    assert_usage_error(
        &["test", "--format=json", "//xla/..."],
        "tag_filters: --format: unknown value 'json' (expected list, flags or bazelrc)",
    );
}

#[test]
fn an_option_without_its_value_is_an_error() {
    assert_usage_error(&["--config"], "tag_filters: --config: missing value");
    assert_usage_error(&["--format"], "tag_filters: --format: missing value");
    assert_usage_error(&["--config", "--strict"], "tag_filters: --config: missing value");
    assert_usage_error(&["--format", "--", "flags"], "tag_filters: --format: missing value");
}

#[test]
fn an_error_message_stays_on_one_line() {
    assert_usage_error(
        &["--format=li\nst"],
        "tag_filters: --format: unknown value 'li\\x0ast' (expected list, flags or bazelrc)",
    );
}

#[test]
fn version() {
    assert_prints(&["--version"], concat!("tag_filters ", env!("CARGO_PKG_VERSION"), "\n"));
}

#[test]
fn help_lists_every_config_with_its_tags() {
    for args in [&["--help"][..], &["-h"], &["--config=asan", "--format=yaml", "--help"]] {
        let out = run(args);
        out.assert_success()
            .assert_stdout_contains("Usage: tag_filters [--table=FILE] [--config=NAME]...")
            .assert_stdout_contains("\n  ci_single_gpu  requires-gpu-rocm,requires-gpu-amd,-multi_gpu\n")
            .assert_stdout_contains("\n  ci_multi_gpu   multi_gpu\n")
            .assert_stdout_contains("\n  ci_rocm_cpu    gpu,-requires-gpu-rocm,-requires-gpu-amd\n")
            .assert_stdout_contains("\n  asan           -noasan\n")
            .assert_stdout_contains("\n  tsan           -notsan\n")
            .assert_stdout_contains("\nBase list:\n  -no_gpu,-requires-gpu-intel,")
            .assert_stdout_contains("-no_oss,-oss_excluded,\n  -oss_serial\n");
        for flag in ["--table=FILE", "--config=NAME", "--format=FORMAT", "--explain=TAGS", "--strict", "--version"] {
            out.assert_stdout_contains(&format!("\n  {flag} "));
        }
        assert_eq!(out.stderr, "", "{}", out.explain());
    }
}

#[test]
fn help_after_the_end_of_options_is_a_target_pattern() {
    assert_prints(&["--config=tsan", "--", "--help"], concat!(base!(), ",-notsan\n"));
}

#[test]
fn non_utf8_arguments_do_not_panic_and_are_shown_as_their_bytes() {
    let out = Cmd::new(bin())
        .arg(OsStr::from_bytes(b"\xff\xfe"))
        .arg("--config=asan")
        .arg(OsStr::from_bytes(b"--config=\xff"))
        .run();
    out.assert_success().assert_stdout_eq(concat!(base!(), ",-noasan\n"));

    let out = Cmd::new(bin()).arg("--strict").arg(OsStr::from_bytes(b"--config=as\xffan")).run();
    out.assert_code(2)
        .assert_stdout_eq("")
        .assert_one_error_line(&format!("tag_filters: --config: unknown config 'as\\xffan' under --strict {KNOWN}"));

    let out = Cmd::new(bin()).arg("--strict").arg(OsStr::from_bytes(b"\xff")).run();
    out.assert_code(2).assert_one_error_line(&format!("tag_filters: --strict: unexpected argument '\\xff' {KNOWN}"));

    let out = Cmd::new(bin()).arg(OsStr::from_bytes(b"--format=\xff")).run();
    out.assert_code(2)
        .assert_one_error_line("tag_filters: --format: unknown value '\\xff' (expected list, flags or bazelrc)");
}

/// A value too long for one line is cut after 1 KiB: what is wrong with it
/// still ends the line.
#[test]
fn a_long_value_leaves_room_for_what_is_wrong_with_it() {
    let long = "x".repeat(100_000);
    let out = run(&["--strict", &format!("--config={long}")]);
    out.assert_code(2);
    assert!(out.stderr.trim_end().ends_with(&format!("...' under --strict {KNOWN}")), "{}", out.explain());
    assert!(out.stderr.len() < 2000, "{}", out.explain());
    let table = format!("base = a\nx = {long},{long}\n");
    let dir = TempDir::new("tf-long-tag");
    let file = dir.join("long.conf");
    test_support::write_file(&file, &table);
    let out = run(&[&format!("--table={}", file.display())]);
    out.assert_code(2);
    assert!(out.stderr.trim_end().ends_with("...' is listed twice"), "{}", out.explain());
}

/// Runs `tag_filters ARGS` with its stdout on a pipe whose reader has
/// already gone, so that its write fails with EPIPE; returns what the
/// wrapping shell saw (the binary's stderr, then `rc=<its exit code>`).
fn run_with_closed_pipe(args: &[&str]) -> Output {
    let dir = TempDir::new("tag_filters-epipe");
    // The reader closes its end of the pipe and only then creates the file;
    // the writer waits for the file (and a little more, for the shell to
    // drop its own copy of the read end) before starting tag_filters.
    let script = r#"gone=$1; shift
{ while [ ! -e "$gone" ]; do sleep 0.01; done; sleep 0.1; "$@"; echo "rc=$?" >&2; } \
  | { exec <&-; : > "$gone"; }"#;
    Cmd::new("/bin/sh").args(["-c", script, "sh"]).arg(dir.join("reader-gone")).arg(bin()).args(args).run()
}

#[test]
fn a_closed_stdout_exits_3_without_a_message() {
    for args in [&[][..], &["--format=bazelrc"], &["--help"]] {
        let out = run_with_closed_pipe(args);
        out.assert_success();
        assert_eq!(out.stderr, "rc=3\n", "{}", out.explain());
    }
}

/// std's `Stdout` takes a stdout that is not open for a sink and reports
/// success; tag_filters must not exit 0 having printed nothing.
#[test]
fn a_stdout_that_is_not_open_exits_3_with_one_line() {
    for args in [&[][..], &["--format=bazelrc"], &["--help"]] {
        let out = Cmd::new(bin()).args(args).close_standard(&[1]).run();
        out.assert_code(3)
            .assert_one_error_line("tag_filters: cannot write to stdout: Bad file descriptor (os error 9)");
    }
}
