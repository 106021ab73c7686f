//! `--run-under`: the wrapper execs a further wrapper (such as
//! parallel_gpu_execute) with the test and its arguments.

mod common;

use common::{CHAINED_WRAPPER, ManifestOnly, Seen, TEST, Tree, assert_test_not_run};
use std::os::unix::fs::PermissionsExt;

#[test]
fn chained_wrapper_runs_the_test_with_its_arguments() {
    let mut tree = Tree::new("sw-chain");
    let chain = tree.add_executable("tools_repo/gpu/parallel_gpu_execute", CHAINED_WRAPPER);
    let out = tree
        .cmd()
        .env("EXIT_CODE", "0")
        .args(["--run-under=tools_repo/gpu/parallel_gpu_execute", "--asan-options=a=1", TEST, "x", "y z"])
        .run();
    let seen = Seen::from(&out);
    seen.expect("chain_argv0", Some(chain.to_str().unwrap()))
        .expect("chain_args", Some("./pkg/foo_test x y z"))
        .expect("chain_asan", Some("a=1"));
    seen.expect_args(&["x", "y z"]).expect("ASAN_OPTIONS", Some("a=1"));
}

#[test]
fn exit_status_comes_back_through_the_chain() {
    let mut tree = Tree::new("sw-chain-exit");
    tree.add_executable("ws/tools/chain", CHAINED_WRAPPER);
    let out = tree.cmd().env("EXIT_CODE", "4").args(["--run-under", "ws/tools/chain", TEST]).run();
    out.assert_code(4).assert_stdout_contains("chain_args=./pkg/foo_test");
}

#[test]
fn chaining_alone_leaves_the_environment_alone() {
    let mut tree = Tree::new("sw-chain-env");
    tree.add_executable("ws/tools/chain", CHAINED_WRAPPER);
    let out = tree.cmd().env("LSAN_OPTIONS", "keep=1").args(["--run-under=ws/tools/chain", TEST]).run();
    Seen::from(&out)
        .expect("chain_asan", Some("(unset)"))
        .expect("ASAN_OPTIONS", None)
        .expect("LSAN_OPTIONS", Some("keep=1"))
        .expect("TSAN_OPTIONS", None);
}

#[test]
fn chained_wrapper_found_in_the_manifest_only() {
    let mut layout = ManifestOnly::new("sw-chain-manifest");
    let chain = layout.add_executable("tools_repo/gpu/pge", CHAINED_WRAPPER);
    let test = layout.test();
    let out = layout.cmd().arg("--run-under=tools_repo/gpu/pge").arg(&test).arg("a").run();
    let seen = Seen::from(&out);
    seen.expect("chain_argv0", Some(chain.to_str().unwrap()))
        .expect("chain_args", Some(&format!("{} a", test.display())));
    seen.expect_args(&["a"]);
}

#[test]
fn chained_wrapper_by_absolute_path() {
    let tree = Tree::new("sw-chain-absolute");
    let chain = tree.dir.join("bin/chain");
    test_support::write_executable(&chain, CHAINED_WRAPPER);
    let out = tree.cmd().arg(format!("--run-under={}", chain.display())).arg(TEST).run();
    Seen::from(&out).expect("chain_argv0", Some(chain.to_str().unwrap()));
}

#[test]
fn chained_wrapper_that_cannot_be_executed() {
    let mut tree = Tree::new("sw-chain-noexec");
    let chain = tree.add("ws/tools/chain", CHAINED_WRAPPER);
    std::fs::set_permissions(&chain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = tree.cmd().args(["--run-under=ws/tools/chain", TEST]).run();
    out.assert_code(126).assert_one_error_line(&format!("sanitizer_wrapper: cannot execute: {}: ", chain.display()));
    assert_test_not_run(&out);
}
