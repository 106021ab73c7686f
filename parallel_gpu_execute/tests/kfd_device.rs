//! What a container's AMD devices let it use, beyond its render nodes.
//!
//! - `/dev/kfd`: the ROCm runtime opens it before any GPU, so without it (or
//!   without the right to open it) no KFD GPU counts, whatever its render
//!   node says. A container given its render nodes but not `/dev/kfd` gets
//!   one warning line; one given no AMD GPU at all (a CPU pod on a GPU
//!   node, which still sees the host's topology) stays silent.
//! - The device cgroup: the kernel refuses (`EPERM`) the `properties` read
//!   of a GPU node the container was not given. Such nodes are seen but not
//!   usable, silently, and the topology still answers (no `rocminfo` run).
//!   The refusal is made here by strace's error injection on those files.

mod common;

use common::{Fixture, NOBODY, Record, shared_fixture};
use std::path::PathBuf;
use test_support::hardware::{KfdNode, hosts};
use test_support::{Cmd, fake_rocminfo_script};

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
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1,2,3,4,5,6,7"), "{}", out.explain());
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

/// The warning counts the GPUs whose render node opened: a node with no
/// render node to check (the Fiji's minor 0) is not one of them.
#[test]
fn without_dev_kfd_the_warning_counts_only_opened_render_nodes() {
    let mut f = Fixture::new("kfd-unchecked");
    hosts::raven_apu_and_fiji(&mut f.sysroot);
    f.sysroot.remove_dev_entry("kfd");
    let out = f.run_test(|_| {}, &[]);
    out.assert_success()
        .assert_stderr_contains("/dev/kfd does not exist here")
        .assert_stderr_contains("none of the 1 GPU(s) whose render node opened is counted");
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
    if !test_support::prerequisite(test_support::is_root(), "root", "running the wrapper as another user") {
        return;
    }
    let mut f = shared_fixture("kfd-denied");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    // root:render 0600, while the render nodes are open to all.
    f.sysroot.restrict("kfd");
    f.sysroot.add_gpu_groups();
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

/// The wrapper as `Fixture::cmd` runs it, under strace, which makes every
/// `read` of the `withheld` files fail with `EPERM`, as the kernel does for
/// the `properties` of a GPU node the container's device cgroup does not
/// allow. `None` where strace cannot run (see [`test_support::prerequisite`]:
/// a failure under CI, a one-line skip elsewhere).
fn under_device_cgroup(f: &Fixture, withheld: &[PathBuf]) -> Option<Cmd> {
    let probe = std::process::Command::new("strace").args(["-qq", "-o", "/dev/null", "true"]).status();
    let traces = matches!(probe, Ok(status) if status.success());
    if !test_support::prerequisite(traces, "strace(1) able to trace here", "EPERM from a withheld KFD node") {
        return None;
    }
    let mut args: Vec<std::ffi::OsString> = ["-f", "-qq", "-o", "/dev/null"].map(Into::into).to_vec();
    for path in withheld {
        args.extend(["-P".into(), std::ffi::OsString::from(path)]);
    }
    args.extend(["-e", "inject=read:error=EPERM"].map(Into::into));
    Some(f.cmd_under("strace", args))
}

/// `<sysroot>/sys/class/kfd/kfd/topology/nodes/<node>/properties`.
fn properties(f: &Fixture, node: u32) -> PathBuf {
    f.sysroot.root.join(format!("sys/class/kfd/kfd/topology/nodes/{node}/properties"))
}

#[test]
fn gpu_nodes_the_device_cgroup_withholds_are_seen_not_used() {
    // docker run --device=/dev/kfd --device=/dev/dri/renderD130 on the MI210
    // host: nodes 2-9 are its GPUs; the container holds node 4's only.
    let mut f = Fixture::new("kfd-withheld");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    for minor in (128..136).filter(|&m| m != 130) {
        f.sysroot.remove_dev_entry(&format!("dri/renderD{minor}"));
    }
    let withheld: Vec<PathBuf> = (2..10).filter(|&n| n != 4).map(|n| properties(&f, n)).collect();
    let Some(mut c) = under_device_cgroup(&f, &withheld) else { return };
    let out = c.arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    let running = format!("Running test {} on GPU(s) 0\n", f.test_path().display());
    assert_eq!(out.stderr, running, "no warning\n{}", out.explain());
    let Some(mut c) = under_device_cgroup(&f, &withheld) else { return };
    let out = c.arg("--list").run();
    out.assert_success();
    let withheld_line = "withheld: the device cgroup does not give this container that GPU (its properties read Operation not permitted) -> not usable\n";
    for node in [2, 3, 5, 6, 7, 8, 9] {
        out.assert_stdout_contains(&format!("kfd node {node}: {withheld_line}"));
    }
    out.assert_stdout_contains("kfd node 4: gfx90a (gfx_target_version 90010), 416 SIMDs")
        .assert_stdout_contains("/dev/dri/renderD130 opened -> GPU 0\n")
        .assert_stdout_contains("source: kfd\ncount: 1\n");
    let Some(mut c) = under_device_cgroup(&f, &withheld) else { return };
    let out = c.arg("--list=json").run();
    out.assert_success().assert_stdout_contains(
        r#"{"source": "kfd", "index": null, "usable": false, "node": 2, "gfx_target": null, "gfx_target_version": null, "simd_count": null, "pci": null, "unique_id": null, "device_node": null, "device_node_state": "withheld", "reason": "withheld: "#,
    );
}

#[test]
fn a_container_given_no_amd_gpu_by_its_device_cgroup_does_not_run_rocminfo() {
    // Every GPU node withheld, no render node, no /dev/kfd; a rocminfo in
    // the runfiles that, if it were run, would claim two GPUs.
    let mut f = Fixture::new("kfd-all-withheld");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    for minor in 128..136 {
        f.sysroot.remove_dev_entry(&format!("dri/renderD{minor}"));
    }
    f.sysroot.remove_dev_entry("kfd");
    f.runfiles.add("rocm/bin/rocminfo", &fake_rocminfo_script(2), true);
    let withheld: Vec<PathBuf> = (2..10).map(|n| properties(&f, n)).collect();
    let Some(mut c) = under_device_cgroup(&f, &withheld) else { return };
    let out = c.arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
    assert_eq!(out.stderr, "Execute with no GPU support\n", "{}", out.explain());
    let Some(mut c) = under_device_cgroup(&f, &withheld) else { return };
    let out = c.arg("--list=count").run();
    out.assert_success().assert_stdout_eq("0\n");
    // /dev/kfd is not looked at when no GPU node could be read.
    let Some(mut c) = under_device_cgroup(&f, &withheld) else { return };
    let out = c.arg("--list=json").run();
    out.assert_success()
        .assert_stdout_contains(r#""source": "kfd", "count": 0,"#)
        .assert_stdout_contains(r#""kfd_device": null"#);
    // Without the refusal (the same files readable), rocminfo is not run
    // either, and the 8 GPUs are seen as not given (no render node).
    let out = f.cmd().arg("--list").run();
    out.assert_success().assert_stdout_contains("source: kfd\ncount: 0\n");
}
