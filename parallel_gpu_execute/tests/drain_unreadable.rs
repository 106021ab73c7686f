//! A drain state that cannot be read is never taken for "nothing
//! drained" where that would be a false answer: `--undrain` and `--status`
//! say so (exit 2), and a test that runs there is warned that it may be
//! given a drained GPU.

mod common;

use common::{Fixture, NOBODY, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use test_support::{Cmd, is_root};

/// The wrapper on `f` with two GPUs, one slot each.
fn two_gpus(f: &Fixture) -> Cmd {
    let mut c = f.cmd();
    common::on(&mut c, 2, 1);
    c
}

/// `--undrain` where the drain state cannot be read (a lock directory this
/// user may not read, or a file in its place) said "was not drained;
/// nothing to do", exit 0, of a GPU that stayed drained: one line, exit 2.
/// Where there is no lock directory, or no `gpudrain/`, nothing is drained.
#[test]
fn an_undrain_that_cannot_read_the_drain_state_is_one_line_and_exit_2() {
    let f = shared_fixture("undrain-unreadable");
    two_gpus(&f).args(["--drain=0", "--reason=bad ECC"]).run().assert_success();
    if is_root() {
        std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut c = two_gpus(&f);
        let out = c.arg("--undrain=0").as_user(NOBODY, NOBODY).run();
        out.assert_code(2).assert_one_error_line("cannot read the drain state in the lock directory");
        out.assert_stderr_contains("Permission denied");
        std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let status = two_gpus(&f).arg("--status=json").run();
        assert!(status.assert_success().stdout.contains("bad ECC"), "the drain went\n{}", status.explain());
        // `gpudrain/` itself unreadable: --status and --undrain say so (exit
        // 2), and a test, which may be given the drained GPU, is warned.
        std::fs::set_permissions(f.lock_dir.join("gpudrain"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let as_nobody = |args: &[&str]| two_gpus(&f).args(args).as_user(NOBODY, NOBODY).run();
        let out = as_nobody(&["--undrain=0"]);
        out.assert_code(2).assert_one_error_line("cannot read gpudrain/ in the lock directory");
        for format in ["text", "json", "openmetrics"] {
            let out = as_nobody(&[&format!("--status={format}")]);
            out.assert_code(2).assert_one_error_line("--status: cannot read the lock directory");
            out.assert_stderr_contains("its gpudrain/: Permission denied");
        }
        let out = as_nobody(&["./pkg/gpu_test"]);
        out.assert_success()
            .assert_stderr_contains("gpudrain/ (Permission denied (os error 13)): a drained GPU may be given");
        std::fs::set_permissions(f.lock_dir.join("gpudrain"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    }
    let file = f.dir.join("a-file");
    test_support::write_file(&file, "");
    let out = two_gpus(&f).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &file).arg("--undrain=0").run();
    out.assert_code(2).assert_one_error_line("cannot read the drain state in the lock directory");
    let none = f.dir.join("none");
    let out = two_gpus(&f).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &none).arg("--undrain=0").run();
    out.assert_success().assert_stdout_contains("was not drained");
}

/// A drain record this user may not read (made 0600 by hand, or by another
/// program): drained all the same, its reason unknown. It read as "not
/// drained": `--status` showed the GPU in service and a test was given it,
/// unsaid.
#[test]
fn a_drain_record_this_user_may_not_read_still_drains() {
    if !is_root() {
        return;
    }
    let f = shared_fixture("drain-record-unreadable");
    two_gpus(&f).args(["--drain=1", "--reason=fan"]).run().assert_success();
    std::fs::set_permissions(f.lock_dir.join("gpudrain/1"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let as_nobody = |args: &[&str]| two_gpus(&f).args(args).as_user(NOBODY, NOBODY).run();
    let json = as_nobody(&["--status=json"]);
    assert!(
        json.assert_success().stdout.contains("its record cannot be read by this user"),
        "GPU 1 shown in service\n{}",
        json.explain()
    );
    // Both GPUs asked for: GPU 1 is out of service, so no block is left.
    let out = as_nobody(&["./pkg/gpu_test", "--num_processes=2"]);
    assert_ne!(out.code(), 0, "given the drained GPU\n{}", out.explain());
    out.assert_stderr_contains("GPU 1");
    // Not this user's to undrain: said so, not "nothing to do".
    let out = as_nobody(&["--undrain=1"]);
    out.assert_code(2);
    assert!(!out.stdout.contains("was not drained"), "{}", out.explain());
}
