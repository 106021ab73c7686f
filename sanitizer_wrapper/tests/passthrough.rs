//! With nothing configured, the wrapper is `exec "$@"`: the test gets its
//! arguments and environment untouched, and its exit status and signals are
//! its own. A test that is not where Bazel names it (the manifest-only
//! layout) is run from where the runfiles manifest puts it.

mod common;

use common::{ManifestOnly, Seen, TEST, Tree, bin};
use std::time::Duration;
use test_support::{Cmd, write_executable};

#[test]
fn arguments_and_sanitizer_variables_are_passed_on_untouched() {
    let tree = Tree::new("sw-pass-args");
    let out = tree
        .cmd()
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .env("TSAN_OPTIONS", "")
        .args([TEST, "a", "b c", "--asan-options=x", "--", ""])
        .run();
    let seen = Seen::from(&out);
    seen.expect_args(&["a", "b c", "--asan-options=x", "--", ""]);
    seen.expect("ASAN_OPTIONS", Some("detect_leaks=1"))
        .expect("LSAN_OPTIONS", None)
        .expect("TSAN_OPTIONS", Some(""))
        .expect("cwd", Some(tree.rf.cwd().to_str().unwrap()));
}

#[test]
fn environment_is_exactly_the_wrappers_own() {
    let tree = Tree::new("sw-pass-env");
    let srcdir = tree.rf.srcdir.to_str().unwrap();
    let out = tree.cmd().env("ASAN_OPTIONS", "x=1").env("ODD", "a=b\tc").env("EMPTY", "").arg("/usr/bin/env").run();
    out.assert_success();
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort();
    let mut want = vec![
        "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
        format!("TEST_SRCDIR={srcdir}"),
        format!("RUNFILES_DIR={srcdir}"),
        "TEST_WORKSPACE=ws".to_string(),
        "ASAN_OPTIONS=x=1".to_string(),
        "ODD=a=b\tc".to_string(),
        "EMPTY=".to_string(),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.explain());
}

#[test]
fn exit_status_is_the_tests() {
    let tree = Tree::new("sw-pass-exit");
    tree.cmd().env("EXIT_CODE", "3").arg(TEST).run().assert_code(3);
    tree.cmd().env("EXIT_CODE", "0").arg(TEST).run().assert_code(0);
}

#[test]
fn death_by_signal_is_the_tests() {
    let mut tree = Tree::new("sw-pass-signal");
    tree.add_executable("ws/pkg/dies", "#!/bin/sh\nkill -TERM $$\nsleep 5\n");
    let out = tree.cmd().arg("./pkg/dies").run();
    out.assert_code(143);
    assert!(out.stderr.is_empty(), "{}", out.explain());
}

#[test]
fn the_wrapper_becomes_the_test() {
    let mut tree = Tree::new("sw-pass-exec");
    tree.add_executable("ws/pkg/pid", "#!/bin/sh\necho \"pid=$$\"\n");
    let running = tree.cmd().arg("./pkg/pid").timeout(Duration::from_secs(30)).spawn();
    let pid = running.pid();
    let out = running.wait();
    out.assert_success().assert_stdout_eq(&format!("pid={pid}\n"));
}

#[test]
fn a_bare_test_name_is_searched_in_path() {
    let tree = Tree::new("sw-pass-path");
    tree.cmd().args(["sh", "-c", "exit 5"]).run().assert_code(5);
}

#[test]
fn double_dash_ends_the_options() {
    let mut tree = Tree::new("sw-pass-dashdash");
    tree.add_executable("ws/--odd", "#!/bin/sh\necho \"args=$*\"\n");
    let out = tree.cmd().args(["--", "./--odd", "--tsan-options=x"]).run();
    out.assert_success().assert_stdout_eq("args=--tsan-options=x\n");
    let out = tree.cmd().args(["--", "--looks-like-an-option"]).run();
    out.assert_code(127).assert_one_error_line("sanitizer_wrapper: not found: --looks-like-an-option");
}

#[test]
fn empty_values_configure_nothing() {
    let tree = Tree::new("sw-pass-empty");
    let out = tree.cmd().args(["--asan-options=", "--tsan-suppressions", "", "--run-under=", TEST]).run();
    Seen::from(&out).expect("ASAN_OPTIONS", None).expect("TSAN_OPTIONS", None);
}

#[test]
fn runs_outside_bazel_too() {
    let dir = test_support::TempDir::new("sw-pass-plain");
    let test = dir.join("t");
    write_executable(&test, test_support::RECORDING_TEST);
    let out = Cmd::new(bin()).arg(&test).arg("x").run();
    Seen::from(&out).expect_args(&["x"]).expect("ASAN_OPTIONS", None);
}

/// Under `--noenable_runfiles` Bazel names the test by its runfiles path
/// (`pkg/foo_test`) from `$TEST_SRCDIR/$TEST_WORKSPACE`, an empty directory:
/// the wrapper finds it in the manifest, as parallel_gpu_execute does, with
/// nothing configured and with options alike.
#[test]
fn a_test_only_the_manifest_names_is_run_from_there() {
    let mut layout = ManifestOnly::new("sw-pass-manifest-test");
    layout.add_executable("other_repo/t/other_test", test_support::RECORDING_TEST);
    let gone = layout.add_dangling("ws/pkg/gone_test");
    let srcdir = layout.cwd.parent().unwrap().to_path_buf();
    let cmd = |args: &[&str]| {
        let mut cmd = layout.cmd();
        cmd.env("TEST_SRCDIR", &srcdir).env("RUNFILES_MANIFEST_ONLY", "1").args(args);
        cmd.run()
    };
    for test in ["pkg/foo_test", "./pkg/foo_test", "../other_repo/t/other_test"] {
        Seen::from(&cmd(&[test, "x"])).expect_args(&["x"]).expect("ASAN_OPTIONS", None);
        Seen::from(&cmd(&["--asan-options=a=1", test, "y"])).expect_args(&["y"]).expect("ASAN_OPTIONS", Some("a=1"));
    }
    // Nowhere in the runfiles: named as given.
    cmd(&["pkg/none"]).assert_code(127).assert_one_error_line("sanitizer_wrapper: not found: pkg/none: ");
    // An entry whose file is gone: named where the manifest points.
    cmd(&["pkg/gone_test"])
        .assert_code(127)
        .assert_one_error_line(&format!("sanitizer_wrapper: not found: {}: ", gone.display()));
}
