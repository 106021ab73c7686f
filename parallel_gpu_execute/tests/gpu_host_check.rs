//! `tools/gpu_host_check.sh`, the acceptance check for a real GPU host, run
//! here against a fake KFD host whose "runtime" is a shell query that counts
//! the ids the test was given: it passes where the wrapper gives each test
//! one GPU of its own, and fails, naming the check, where the count or the
//! isolation is wrong.

use std::path::Path;
use std::time::Duration;
use test_support::{Cmd, Output, Sysroot, TempDir, write_executable};

fn bin() -> String {
    test_support::bin_under_test("parallel_gpu_execute", env!("CARGO_BIN_EXE_parallel_gpu_execute"))
}

/// What HIP on a host of `host` GPUs would count: the entries of
/// `HIP_VISIBLE_DEVICES` when it is set, else of `CUDA_VISIBLE_DEVICES`
/// (both index what ROCr shows), else of `ROCR_VISIBLE_DEVICES`, else every
/// GPU.
fn fake_query(host: u32) -> String {
    let mut query = String::new();
    for var in ["HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"] {
        query.push_str(&format!(
            "if [ -n \"${{{var}+x}}\" ]; then echo \"${var}\" | tr , '\\n' | grep -c .; exit; fi; "
        ));
    }
    query.push_str(&format!("echo {host}"));
    query
}

fn check(sysroot: &Sysroot, query: &str, tests: Option<&str>) -> Output {
    check_binary(Path::new(&bin()), sysroot, query, tests)
}

fn check_binary(bin: &Path, sysroot: &Sysroot, query: &str, tests: Option<&str>) -> Output {
    check_with(bin, sysroot, query, tests, None)
}

/// `visible`: `PARALLEL_GPU_EXECUTE_VISIBLE` for every wrapper the check starts.
fn check_with(bin: &Path, sysroot: &Sysroot, query: &str, tests: Option<&str>, visible: Option<&str>) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/gpu_host_check.sh");
    let mut c = Cmd::new("/bin/bash");
    c.arg(script).arg(bin).env("PARALLEL_GPU_EXECUTE_SYSROOT", &sysroot.root).env("GPU_CHECK_QUERY", query);
    if let Some(n) = tests {
        c.env("GPU_CHECK_TESTS", n);
    }
    if let Some(v) = visible {
        c.env("PARALLEL_GPU_EXECUTE_VISIBLE", v);
    }
    c.timeout(Duration::from_secs(120));
    c.run()
}

#[test]
fn passes_where_each_test_gets_one_gpu_of_its_own() {
    let dir = TempDir::new("host-check");
    let mut sysroot = Sysroot::new(&dir);
    sysroot.add_kfd_gpus(3);
    let out = check(&sysroot, &fake_query(3), None);
    out.assert_success()
        .assert_stdout_contains("gpu_host_check: counted: 3\n")
        .assert_stdout_contains("one more test while all 3 GPU(s) are held: refused (exit 1)")
        .assert_stdout_contains("gpu_host_check: all checks passed: 3 GPU(s) counted");
    for id in 0..3 {
        // rocm mode: XLA main's variables.
        out.assert_stdout_contains(&format!(
            "ROCR_VISIBLE_DEVICES=unset HIP_VISIBLE_DEVICES={id} CUDA_VISIBLE_DEVICES={id}, its runtime sees 1\n"
        ));
    }
    // --visible=rocr: ROCR names the GPU, HIP counts from 0.
    let out = check_with(Path::new(&bin()), &sysroot, &fake_query(3), None, Some("rocr"));
    out.assert_success();
    for id in 0..3 {
        out.assert_stdout_contains(&format!(
            "ROCR_VISIBLE_DEVICES={id} HIP_VISIBLE_DEVICES=0 CUDA_VISIBLE_DEVICES=unset, its runtime sees 1\n"
        ));
    }
    // Fewer tests than GPUs: no extra test, the rest the same.
    let out = check(&sysroot, &fake_query(3), Some("2"));
    out.assert_success().assert_stdout_contains("2 tests at once, one GPU each");
    assert!(!out.stdout.contains("one more test"), "{}", out.explain());
}

#[test]
fn fails_naming_the_check_that_failed() {
    let dir = TempDir::new("host-check-fail");
    let mut sysroot = Sysroot::new(&dir);
    sysroot.add_kfd_gpus(2);
    // The runtime enumerates a GPU the wrapper did not count.
    let out = check(&sysroot, &fake_query(3), None);
    out.assert_code(1)
        .assert_stdout_contains("FAIL: the runtime enumerates 3 GPU(s), the wrapper counted 2")
        .assert_stdout_contains("1 check(s) failed");
    // A test whose runtime sees every GPU, whatever it was given.
    let out = check(&sysroot, "echo 2", None);
    out.assert_code(1).assert_stdout_contains("sees '2' GPU(s), not 1");
    // A query that cannot run.
    let out = check(&sysroot, "exit 3", None);
    out.assert_code(1).assert_stdout_contains("FAIL: the device query failed (exit 3");
    // No GPU at all.
    let none = TempDir::new("host-check-none");
    let empty = Sysroot::new(&none);
    let out = check(&empty, &fake_query(0), None);
    out.assert_code(1).assert_stdout_contains("FAIL: the wrapper counts no GPU here ('0')");
    // Bad usage.
    let out = check(&sysroot, &fake_query(2), Some("5"));
    out.assert_code(2).assert_stderr_contains("GPU_CHECK_TESTS=5 is more than the 2 GPU(s) counted");
}

/// A wrapper that counts right but gives every test GPU 0, and never
/// refuses one: the check must catch both.
#[test]
fn catches_a_wrapper_that_does_not_isolate() {
    let dir = TempDir::new("host-check-shared");
    let sysroot = Sysroot::new(&dir);
    let fake = dir.join("fake_wrapper");
    write_executable(
        &fake,
        "#!/bin/sh\ncase \"$1\" in --version) echo fake; exit 0;; --list=count) echo 2; exit 0;; --list*) exit 0;; esac\n\
         while [ $# -gt 0 ]; do case \"$1\" in --*) shift;; *) break;; esac; done\n\
         ROCR_VISIBLE_DEVICES=0 exec \"$@\"\n",
    );
    let out = check_binary(&fake, &sysroot, &fake_query(2), None);
    out.assert_code(1)
        .assert_stdout_contains("FAIL: one more test while all 2 GPU(s) are held exited 0, not 1")
        .assert_stdout_contains(
            "FAIL: two tests were given the same GPU: ROCR_VISIBLE_DEVICES=0 HIP_VISIBLE_DEVICES=unset CUDA_VISIBLE_DEVICES=unset",
        )
        .assert_stdout_contains("2 check(s) failed");
}
