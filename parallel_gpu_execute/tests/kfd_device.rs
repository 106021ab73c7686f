//! `/dev/kfd`: the ROCm runtime opens it before any GPU, so without it (or
//! without the right to open it) no KFD GPU counts, whatever its render
//! node says. A container given its render nodes but not `/dev/kfd` gets
//! one warning line; one given no AMD GPU at all (a CPU pod on a GPU node,
//! which still sees the host's topology) stays silent.

mod common;

use common::{Fixture, NOBODY, Record, shared_fixture};
use test_support::hardware::{KfdNode, hosts};

/// An MI210 host (2 CPU nodes, 8 GPUs, render 128-135) whose container was
/// given every render node but not `/dev/kfd`.
fn without_kfd_device(label: &str) -> Fixture {
    let mut f = Fixture::new(label);
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    f.sysroot.remove_dev_entry("kfd");
    f
}

#[test]
fn render_nodes_without_dev_kfd_give_no_gpu_and_one_warning() {
    let f = without_kfd_device("kfd-missing");
    let out = f.run_test(|_| {}, &["--gtest_filter=A.*"]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
    assert_eq!(r.args(), ["--gtest_filter=A.*"], "{}", out.explain());
    let warning = format!(
        "parallel_gpu_execute: warning: {}/dev/kfd does not exist here: the ROCm runtime needs it for every AMD GPU, so none of the 8 GPU(s) whose render node opened is counted (a container needs --device=/dev/kfd as well as its render nodes)\n",
        f.sysroot.root.display()
    );
    assert_eq!(out.stderr, format!("{warning}Execute with no GPU support\n"), "{}", out.explain());
    assert!(!f.lock_dir.join("gpulock0_0").exists(), "no lock is taken\n{}", out.explain());
}

#[test]
fn a_container_given_no_amd_gpu_stays_silent() {
    // The host's topology is visible (sysfs is not namespaced), but neither
    // a render node nor /dev/kfd was given: as before, no GPU and no warning.
    let mut f = Fixture::new("kfd-cpu-pod");
    f.sysroot.add_kfd_node(&KfdNode::cpu(64));
    for minor in 128..136 {
        f.sysroot.add_kfd_node(&KfdNode::gpu(90010, 416, minor));
    }
    let out = f.run_test(|_| {}, &[]);
    out.assert_success();
    assert_eq!(out.stderr, "Execute with no GPU support\n", "{}", out.explain());
}

#[test]
fn with_dev_kfd_the_same_host_counts_all_eight() {
    let mut f = Fixture::new("kfd-present");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    let out = f.run_test(|_| {}, &["--num_processes=8"]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("0,1,2,3,4,5,6,7"), "{}", out.explain());
    assert!(!out.stderr.contains("warning"), "{}", out.explain());
}

#[test]
fn list_says_that_dev_kfd_is_what_is_missing() {
    let f = without_kfd_device("kfd-list");
    let out = f.cmd().arg("--list").run();
    out.assert_success()
        .assert_stdout_contains(
            "/dev/dri/renderD128 opened, but /dev/kfd is missing (not given to this container; the ROCm runtime needs it) -> not usable\n",
        )
        .assert_stdout_contains("source: kfd\ncount: 0\n");
    let out = f.cmd().arg("--list=json").run();
    out.assert_success()
        .assert_stdout_contains(r#""kfd_device": "missing""#)
        .assert_stdout_contains(r#""usable": false"#)
        .assert_stdout_contains(r#""device_node_state": "opened", "reason": "opened, but /dev/kfd is missing"#);
    assert!(!out.stdout.contains(r#""usable": true"#), "{}", out.explain());
    let out = f.cmd().arg("--list=count").run();
    out.assert_success().assert_stdout_eq("0\n");
    // With it, the key says so; without a KFD GPU, it is null.
    let mut f = Fixture::new("kfd-list-ok");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    f.cmd().arg("--list=json").run().assert_success().assert_stdout_contains(r#""kfd_device": "usable""#);
    let f = Fixture::new("kfd-list-none");
    f.cmd().arg("--list=json").run().assert_success().assert_stdout_contains(r#""kfd_device": null"#);
}

#[test]
fn a_mixed_desktop_without_dev_kfd_still_gives_the_nvidia_card() {
    // The desktop's AMD iGPU is not usable without /dev/kfd; NVIDIA wins as
    // always, and nothing is said about the AMD side.
    let mut f = Fixture::new("kfd-mixed");
    hosts::rtx4090_and_ryzen_igpu(&mut f.sysroot, false);
    f.sysroot.remove_dev_entry("kfd");
    let out = f.run_test(|_| {}, &[]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert!(!out.stderr.contains("warning"), "{}", out.explain());
    // --vendor=rocm: the AMD GPU is not usable, and the warning says why.
    let out = f.run_test(
        |c| {
            c.arg("--vendor=rocm");
        },
        &[],
    );
    out.assert_success()
        .assert_stderr_contains("/dev/kfd does not exist here")
        .assert_stderr_contains("none of the 1 GPU(s) whose render node opened is counted");
}

#[test]
fn a_dev_kfd_this_user_may_not_open_names_its_group() {
    if !test_support::is_root() {
        eprintln!("skipped: needs root to run the wrapper as another user");
        return;
    }
    let mut f = shared_fixture("kfd-denied");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    // root:render 0600, while the render nodes are open to all.
    f.sysroot.restrict("kfd");
    std::os::unix::fs::chown(f.sysroot.root.join("dev/kfd"), Some(0), Some(109)).unwrap();
    f.sysroot.add_groups(&[("root", 0), ("video", 44), ("render", 109)]);
    let out = f.cmd().as_user(NOBODY, NOBODY).arg("./pkg/gpu_test").run();
    out.assert_success();
    let warning = format!(
        "parallel_gpu_execute: warning: cannot open {}/dev/kfd: Permission denied (os error 13): this user is not allowed to use it (add the user to group 'render', gid 109, that owns it); the ROCm runtime needs it for every AMD GPU, so none of the 8 GPU(s) whose render node opened is counted\n",
        f.sysroot.root.display()
    );
    assert_eq!(out.stderr, format!("{warning}Execute with no GPU support\n"), "{}", out.explain());
    let out = f.cmd().as_user(NOBODY, NOBODY).arg("--list=json").run();
    out.assert_success().assert_stdout_contains(r#""kfd_device": "denied""#);
    // Root may: all eight.
    let out = f.cmd().arg("--list=count").run();
    out.assert_success().assert_stdout_eq("8\n");
}
