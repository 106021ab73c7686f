//! Counting on the hosts and containers real, published machine
//! descriptions show (built from their facts by `test_support::hardware`):
//! the count each runtime would enumerate, the vendor variables the test
//! gets, the mixed-host rule, render nodes this user may not open, and
//! rocminfo outputs.

mod common;

use common::{Fixture, NOBODY, Record, shared_fixture};
use test_support::hardware::{KfdNode, NvidiaGpu, hosts};
use test_support::{Cmd, Output};

/// `--list=count` on the fixture's host.
fn listed_count(f: &Fixture, configure: impl FnOnce(&mut Cmd)) -> u32 {
    let mut c = f.cmd();
    configure(&mut c);
    let out = c.arg("--list=count").run();
    out.assert_success();
    out.stdout.trim().parse().unwrap_or_else(|_| panic!("not a count\n{}", out.explain()))
}

/// Runs the recording test needing `gpus` GPUs.
fn run_needing(f: &Fixture, gpus: u32, configure: impl FnOnce(&mut Cmd)) -> Output {
    let mut c = f.cmd();
    configure(&mut c);
    c.arg("./pkg/gpu_test").arg(format!("--num_processes={gpus}"));
    c.run()
}

/// The host gives `count` GPUs of `vendor` ("rocm"/"cuda"): listed, all of
/// them usable at once in a block, and no more.
#[track_caller]
fn assert_host(f: &Fixture, count: u32, vendor: &str) {
    assert_eq!(listed_count(f, |_| {}), count, "--list=count");
    let out = run_needing(f, count, |_| {});
    let r = Record::of(out.assert_success());
    let ids: Vec<String> = (0..count).map(|i| i.to_string()).collect();
    let ids = ids.join(",");
    match vendor {
        "rocm" => {
            // XLA main's variables.
            assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some(ids.as_str()), "{}", out.explain());
            assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(ids.as_str()), "{}", out.explain());
            assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
        }
        "cuda" => {
            assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(ids.as_str()), "{}", out.explain());
            assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
        }
        other => panic!("vendor {other}"),
    }
    let more = run_needing(f, count + 1, |_| {});
    more.assert_code(1)
        .assert_stderr_contains(&format!("the test needs {} GPU(s) but the pool holds only {count}", count + 1));
}

#[test]
fn amd_hosts_count_nodes_with_simds() {
    type Host = fn(&mut test_support::Sysroot) -> u32;
    let cases: [(&str, Host); 6] = [
        ("mi210x8", hosts::mi210x8_two_sockets),
        ("mi300x-cpx", hosts::mi300x_cpx_partitions),
        ("mi308x-gaps", hosts::mi308x_cpx_render_gaps),
        ("vega10-old", hosts::vega10_old_kernel),
        ("raven-fiji", hosts::raven_apu_and_fiji),
        ("mi300a", hosts::mi300a_four_apus),
    ];
    for (label, host) in cases {
        let mut f = Fixture::new(label);
        let count = host(&mut f.sysroot);
        assert_host(&f, count, "rocm");
    }
}

#[test]
fn a_node_with_a_target_version_but_no_simds_is_no_gpu() {
    let mut f = Fixture::new("no-simds");
    f.sysroot.add_kfd_node(&KfdNode::cpu(16));
    f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90402, 0, 128));
    f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90402, 304, 129));
    assert_host(&f, 1, "rocm");
}

#[test]
fn nvidia_containers_count_the_device_nodes_they_hold() {
    type Host = fn(&mut test_support::Sysroot) -> u32;
    let cases: [(&str, Host); 5] = [
        ("h100-cdi", hosts::h100_cdi_pod),
        ("p100-excluded", hosts::p100_one_excluded),
        ("lxd-empty", hosts::lxd_empty_proc),
        ("docker1", hosts::nvidia_docker1),
        ("a100-mig", hosts::a100_mig),
    ];
    for (label, host) in cases {
        let mut f = Fixture::new(label);
        let count = host(&mut f.sysroot);
        assert_host(&f, count, "cuda");
    }
}

#[test]
fn the_h100_pod_lists_the_nodes_gpus_but_uses_its_own() {
    let mut f = Fixture::new("h100-list");
    hosts::h100_cdi_pod(&mut f.sysroot);
    let out = f.cmd().arg("--list").run();
    out.assert_success();
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("nvidia ")).collect();
    assert_eq!(lines.len(), 8, "{}", out.explain());
    let used: Vec<&&str> = lines.iter().filter(|l| l.ends_with("-> GPU 0")).collect();
    assert_eq!(used.len(), 1, "{}", out.explain());
    assert!(used[0].contains("minor 6, /dev/nvidia6 opened"), "{}", out.explain());
    assert!(
        lines[0].contains("NVIDIA H100 80GB HBM3") && lines[0].contains("/dev/nvidia0 missing"),
        "{}",
        out.explain()
    );
    out.assert_stdout_contains(
        "\nsource: nvidia\ncount: 1\nmode: cuda (CUDA_VISIBLE_DEVICES)\npool: 0\nslots per GPU: 8\n",
    );
}

#[test]
fn a_device_node_that_proc_does_not_name_still_counts() {
    // /proc names another GPU of the node (minor 5, not given); the pod
    // holds /dev/nvidia6, which no readable entry names: CUDA opens it.
    let f = Fixture::new("proc-names-another");
    f.sysroot.add_nvidia_proc_entry(&NvidiaGpu::new("0000:62:00.0", "NVIDIA H100 80GB HBM3", 5));
    f.sysroot.add_nvidia_dev_nodes(&[6]);
    assert_host(&f, 1, "cuda");
    let out = f.cmd().arg("--list").run();
    out.assert_success()
        .assert_stdout_contains("nvidia 0000:62:00.0: NVIDIA H100 80GB HBM3, GPU-00000005-0000-4000-8000-000000000006, minor 5, /dev/nvidia5 missing (not given to this container) -> not usable
")
        .assert_stdout_contains("nvidia device node, minor 6, /dev/nvidia6 opened -> GPU 0
");
}

#[test]
fn an_excluded_gpu_is_listed_as_such() {
    let mut f = Fixture::new("excluded-list");
    hosts::p100_one_excluded(&mut f.sysroot);
    let out = f.cmd().arg("--list").run();
    out.assert_success().assert_stdout_contains(
        "nvidia 0000:08:00.0: Tesla P100-SXM2-16GB, GPU-00000002-0000-4000-8000-000000000003, minor 2, /dev/nvidia2 excluded by the driver (GPU Excluded: Yes) -> not usable\n",
    );
}

#[test]
fn a_mixed_desktop_gives_a_cuda_test_the_nvidia_card() {
    for container in [false, true] {
        let mut f = Fixture::new(if container { "mixed-container" } else { "mixed-desktop" });
        let count = hosts::rtx4090_and_ryzen_igpu(&mut f.sysroot, container);
        // cuda mode: CUDA_VISIBLE_DEVICES set, not removed.
        assert_host(&f, count, "cuda");
        let out = f.cmd().arg("--list").run();
        out.assert_success().assert_stdout_contains("source: nvidia\n");
        if container {
            out.assert_stdout_contains("kfd node 1: gfx1036 (gfx_target_version 100306), 4 SIMDs, PCI 0000:73:00.0, /dev/dri/renderD128 missing (not given to this container) -> not usable\n");
        } else {
            out.assert_stdout_contains("/dev/dri/renderD128 opened -> usable, but the NVIDIA GPUs are used (mixed host; --vendor=rocm takes these)\n");
        }
    }
}

#[test]
fn vendor_rocm_on_a_mixed_desktop_takes_the_amd_gpu() {
    let mut f = Fixture::new("mixed-rocm");
    hosts::rtx4090_and_ryzen_igpu(&mut f.sysroot, false);
    assert_eq!(
        listed_count(&f, |c| {
            c.arg("--vendor=rocm");
        }),
        1
    );
    let out = run_needing(&f, 1, |c| {
        c.arg("--vendor=rocm");
    });
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "rocm mode sets it to the AMD GPU's index, as XLA main does");
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
    let out = f.cmd().args(["--vendor=rocm", "--list"]).run();
    out.assert_success()
        .assert_stdout_contains("renderD128 opened -> GPU 0\n")
        .assert_stdout_contains("/dev/nvidia0 opened -> usable, but the AMD GPUs are used (--vendor=rocm)\n")
        .assert_stdout_contains("source: kfd\n");
    let out = f.cmd().args(["--vendor=rocm", "--list=gfx-targets"]).run();
    out.assert_success().assert_stdout_eq("gfx1036\n");
}

#[test]
fn a_render_node_this_user_may_not_open_is_warned_about() {
    if !test_support::prerequisite(test_support::is_root(), "root", "running the wrapper as another user") {
        return;
    }
    let mut f = shared_fixture("render-denied");
    f.sysroot.add_kfd_node(&KfdNode::cpu(16));
    for minor in [128, 129] {
        f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90010, 416, minor));
        f.sysroot.restrict(&format!("dri/renderD{minor}"));
    }
    f.sysroot.add_gpu_groups();
    let out = f.cmd().as_user(NOBODY, NOBODY).arg("./pkg/gpu_test").run();
    out.assert_success();
    // Whichever node the directory lists first is named.
    let first = out.stderr.lines().next().unwrap_or("");
    let prefix = format!("parallel_gpu_execute: warning: cannot open {}/dev/dri/renderD12", f.sysroot.root.display());
    let rest = ": Permission denied (os error 13): this user is not allowed to use it (add the user to group 'render', gid 109, that owns it); 1 more GPU(s) likewise; not counting them";
    assert!(first.starts_with(&prefix) && first.ends_with(rest), "{}", out.explain());
    out.assert_stderr_contains("Execute with no GPU support");
    assert_eq!(out.stderr.lines().count(), 2, "{}", out.explain());
    // The same host as root: both usable, no warning.
    let out = f.cmd().arg("./pkg/gpu_test").run();
    out.assert_success().assert_stderr_contains("on GPU(s) 0\n");
    assert!(!out.stderr.contains("warning"), "{}", out.explain());
    // --list says why, per node.
    let out = f.cmd().as_user(NOBODY, NOBODY).arg("--list").run();
    out.assert_success()
        .assert_stdout_contains("/dev/dri/renderD129 denied: Permission denied (os error 13) -> not usable\n");
}

#[test]
fn rocminfo_counts_gpu_agents_not_marketing_names() {
    let mut f = Fixture::new("rocminfo-marketing");
    // An agent whose Marketing Name starts with gfx: grep counts it twice.
    let script = "#!/bin/sh\ncat <<'EOF'\n*******\nAgent 1\n*******\n  Name:                    AMD Ryzen 5 7600\n  Marketing Name:          AMD Ryzen 5 7600\n  Device Type:             CPU\n*******\nAgent 2\n*******\n  Name:                    gfx1100\n  Marketing Name:          gfx1100 engineering sample\n  Device Type:             GPU\n  ISA Info:\n    ISA 1\n      Name:                    amdgcn-amd-amdhsa--gfx1100\n*******\nAgent 3\n*******\n  Name:                    gfx1036\n  Marketing Name:          AMD Radeon Graphics\n  Device Type:             GPU\nEOF\n";
    f.runfiles.add("rocm/bin/rocminfo", script, true);
    assert_host(&f, 2, "rocm");
    let out = f.cmd().arg("--list=gfx-targets").run();
    out.assert_success().assert_stdout_eq("gfx1100,gfx1036\n");
    let out = f.cmd().arg("--list").run();
    out.assert_success().assert_stdout_contains(
        "rocminfo agent: gfx1100 -> GPU 0\nrocminfo agent: gfx1036 -> GPU 1\nsource: rocminfo\n",
    );
}

#[test]
fn list_formats_on_an_mi210_host() {
    let mut f = Fixture::new("list-formats");
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    let out = f.cmd().arg("--list").run();
    out.assert_success();
    let first = out.stdout.lines().next().unwrap_or("");
    assert_eq!(
        first,
        "kfd node 2: gfx90a (gfx_target_version 90010), 416 SIMDs, PCI 0000:10:00.0, /dev/dri/renderD128 opened -> GPU 0",
        "{}",
        out.explain()
    );
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("kfd node")).count(), 8);
    out.assert_stdout_contains("\nsource: kfd\ncount: 8\nmode: rocm (HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES)\npool: 0,1,2,3,4,5,6,7\nslots per GPU: 8\n");
    // The variables each --visible setting and profile gives.
    for (args, mode) in [
        (&["--visible=rocr"][..], "mode: rocm (ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)"),
        (
            &["--profile=jax"],
            "mode: jax (TPU_VISIBLE_CHIPS, ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, ONEAPI_VISIBLE_DEVICES)",
        ),
        (
            &["--profile=jax", "--visible=hip"],
            "mode: jax (TPU_VISIBLE_CHIPS, CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)",
        ),
    ] {
        let out = f.cmd().args(args).arg("--list").run();
        out.assert_success().assert_stdout_contains(&format!("\n{mode}\n"));
    }
    f.cmd().arg("--list=count").run().assert_success().assert_stdout_eq("8\n");
    f.cmd().arg("--list=gfx-targets").run().assert_success().assert_stdout_eq("gfx90a\n");
    let json = f.cmd().arg("--list=json").env("TF_TESTS_PER_GPU", "2").run();
    json.assert_success()
        .assert_stdout_contains("{\"source\": \"kfd\", \"count\": 8, \"profile\": \"xla\", \"mode\": \"rocm\", \"pool\": [\"0\", \"1\", \"2\", \"3\", \"4\", \"5\", \"6\", \"7\"], \"pool_variable\": null, \"slots_per_gpu\": 2, ")
        .assert_stdout_contains("\"gfx_targets\": [\"gfx90a\"], \"devices\": [{\"source\": \"kfd\", \"index\": 0, \"usable\": true, \"node\": 2, \"gfx_target\": \"gfx90a\", \"gfx_target_version\": 90010, \"simd_count\": 416, \"pci\": \"0000:10:00.0\", \"unique_id\": \"4096\", \"device_node\": \"/dev/dri/renderD128\", \"device_node_state\": \"opened\", \"reason\": \"opened\"}, ");
    // A preset pool shows where it came from; a bad one is exit 2.
    let out = f.cmd().arg("--list").env("ROCR_VISIBLE_DEVICES", "4,5").run();
    out.assert_success().assert_stdout_contains("\npool: 4,5 (from ROCR_VISIBLE_DEVICES)\n");
    let out = f.cmd().arg("--list").env("ROCR_VISIBLE_DEVICES", "4,../x").run();
    out.assert_code(2).assert_one_error_line("ROCR_VISIBLE_DEVICES: GPU id '../x' is not usable");
    let out = f.cmd().arg("--list").env("TF_TESTS_PER_GPU", "0").run();
    out.assert_code(2).assert_one_error_line("TF_TESTS_PER_GPU: invalid value '0'");
    // Nothing was locked or created.
    assert!(!f.lock_dir.exists(), "--list takes no lock");
}

#[test]
fn list_with_tf_gpu_count_and_with_no_gpu() {
    let f = Fixture::new("list-tf");
    let out = f.cmd().arg("--list").env("TF_GPU_COUNT", "3").run();
    out.assert_success().assert_stdout_eq(&format!(
        "source: TF_GPU_COUNT\ncount: 3\nmode: classic (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)\npool: 0,1,2\nslots per GPU: 8\nlock dir: {} (missing: the first test creates it)\n",
        f.lock_dir.display()
    ));
    let out = f.cmd().arg("--list").run();
    out.assert_success().assert_stdout_eq(
        "source: none\ncount: 0\nmode: none (the test runs without a GPU: 'Execute with no GPU support')\n",
    );
    f.cmd().arg("--list=json").run().assert_success().assert_stdout_eq(&format!(
        "{{\"source\": null, \"count\": 0, \"profile\": \"xla\", \"mode\": null, \"pool\": [], \"pool_variable\": null, \"slots_per_gpu\": 8, \"lock_dir\": \"{}\", \"lock_dir_state\": \"missing\", \"kfd_device\": null, \"gfx_targets\": [], \"devices\": []}}\n",
        f.lock_dir.display()
    ));
}
