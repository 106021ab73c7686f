//! The `jax` profile against the documented behaviour of JAX's
//! `build/parallel_accelerator_execute.sh` (environment, lock names,
//! messages, exit codes), and TPU chips counted from a fake sysfs.

mod common;

use common::{Fixture, Record};
use test_support::hardware::{KfdNode, TpuNode};
use test_support::{Cmd, hold_lock};

#[test]
fn the_executables_name_picks_the_jax_profile_and_the_flag_overrides_it() {
    let f = Fixture::new("jax-name");
    let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "2").arg("./pkg/gpu_test").arg("--x").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["jax_accelerator_lock_0_0"], "{}", out.explain());
    assert_eq!(out.stderr, format!("Running test {} --x on accelerator 0\n", f.test_path().display()));
    // --profile=xla wins over the name; then JAX_ACCELERATOR_COUNT means nothing.
    let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "2").arg("--profile=xla").arg("./pkg/gpu_test").run();
    out.assert_success().assert_stderr_contains("Execute with no GPU support");
    // And the other way round, by flag and by variable.
    for how in ["flag", "variable"] {
        let mut c = f.cmd();
        c.env("JAX_ACCELERATOR_COUNT", "1");
        if how == "flag" {
            c.arg("--profile=jax");
        } else {
            c.env("PARALLEL_GPU_EXECUTE_PROFILE", "jax");
        }
        let out = c.arg("./pkg/gpu_test").run();
        let r = Record::of(out.assert_success());
        assert_eq!(r.locks(), ["jax_accelerator_lock_0_0"], "{how}\n{}", out.explain());
    }
    f.cmd()
        .args(["--profile=tf", "./pkg/gpu_test"])
        .run()
        .assert_code(2)
        .assert_one_error_line("parallel_gpu_execute: --profile: invalid value 'tf' (expected xla or jax)");
}

#[test]
fn the_environment_is_the_scripts() {
    let f = Fixture::new("jax-env");
    let out = f
        .jax_cmd()
        .env("JAX_ACCELERATOR_COUNT", "4")
        .env("HIP_VISIBLE_DEVICES", "keep")
        .env("CUDA_VISIBLE_DEVICES", "5,6")
        .arg("./pkg/gpu_test")
        .run();
    let r = Record::of(out.assert_success());
    for var in ["TPU_VISIBLE_CHIPS", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ONEAPI_VISIBLE_DEVICES"] {
        assert_eq!(r.var(var), Some("0"), "{var}\n{}", out.explain());
    }
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("keep"), "the script leaves HIP alone");
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("2048"));
    assert_eq!(r.var("TPU_CHIPS_PER_PROCESS_BOUNDS"), None, "no TPU on this host: no bounds");
    let out = f
        .jax_cmd()
        .env("JAX_ACCELERATOR_COUNT", "4")
        .env("TF_PER_DEVICE_MEMORY_LIMIT_MB", "999")
        .arg("./pkg/gpu_test")
        .run();
    assert_eq!(Record::of(out.assert_success()).var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("999"));
    // A variable that would hide every GPU is overwritten too, as the script
    // does: the jax profile reads no pool variable.
    for (var, value) in [("CUDA_VISIBLE_DEVICES", ""), ("ROCR_VISIBLE_DEVICES", "-1")] {
        let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "2").env(var, value).arg("./pkg/gpu_test").run();
        assert_eq!(Record::of(out.assert_success()).var(var), Some("0"), "{var}={value}\n{}", out.explain());
    }
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg("./pkg/gpu_test").run();
    assert_eq!(Record::of(out.assert_success()).var("ONEAPI_VISIBLE_DEVICES"), None, "not in the xla profile");
    // Blocks of several accelerators: every variable lists them.
    let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "4").args(["./pkg/gpu_test", "--num_processes=2"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("TPU_VISIBLE_CHIPS"), Some("0,1"));
    assert_eq!(r.var("ONEAPI_VISIBLE_DEVICES"), Some("0,1"));
    out.assert_stderr_contains(" --num_processes=2 on accelerator 0,1\n");
}

/// The lock directory that `--list=json` reports for the wrapper started
/// as `c`.
fn listed_lock_dir(c: &mut Cmd) -> String {
    let out = c.arg("--list=json").run();
    let text = &out.assert_success().stdout;
    let key = "\"lock_dir\": \"";
    let start = text.find(key).map(|i| i + key.len()).unwrap_or_else(|| panic!("{}", out.explain()));
    let len = text[start..].find('"').unwrap_or_else(|| panic!("{}", out.explain()));
    text[start..start + len].to_string()
}

#[test]
fn the_lock_directory_is_the_scripts_jax_lock_dir() {
    let f = Fixture::new("jax-lockdir");
    let jax = |f: &Fixture| {
        let mut c = f.jax_cmd();
        c.env_remove("PARALLEL_GPU_EXECUTE_LOCK_DIR").env_remove("JAX_LOCK_DIR").env("JAX_ACCELERATOR_COUNT", "1");
        c
    };
    // JAX's script: ${JAX_LOCK_DIR:-/tmp/jax_accelerator_locks_${USER:-shared}}.
    assert_eq!(listed_lock_dir(jax(&f).env("USER", "ci-bot")), "/tmp/jax_accelerator_locks_ci-bot");
    assert_eq!(listed_lock_dir(jax(&f).env("USER", "")), "/tmp/jax_accelerator_locks_shared");
    assert_eq!(listed_lock_dir(jax(&f).env_remove("USER")), "/tmp/jax_accelerator_locks_shared");
    assert_eq!(
        listed_lock_dir(jax(&f).env("JAX_LOCK_DIR", "").env("USER", "ci-bot")),
        "/tmp/jax_accelerator_locks_ci-bot",
        "an empty JAX_LOCK_DIR is as good as none"
    );
    // Ours win over JAX's variable, and the xla profile never reads it.
    let jax_dir = f.dir.join("jax_locks");
    let ours = f.dir.join("our_locks");
    assert_eq!(listed_lock_dir(jax(&f).env("JAX_LOCK_DIR", &jax_dir)), jax_dir.to_str().unwrap());
    let dir = listed_lock_dir(jax(&f).env("JAX_LOCK_DIR", &jax_dir).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &ours));
    assert_eq!(dir, ours.to_str().unwrap());
    let flag = format!("--lock-dir={}", ours.display());
    assert_eq!(listed_lock_dir(jax(&f).env("JAX_LOCK_DIR", &jax_dir).arg(&flag)), ours.to_str().unwrap());
    let mut xla = f.cmd();
    xla.env_remove("PARALLEL_GPU_EXECUTE_LOCK_DIR").env("JAX_LOCK_DIR", &jax_dir);
    assert_eq!(listed_lock_dir(&mut xla), "/var/lock");

    // A run locks there, creating the directory as the script's mkdir -p does.
    let out = jax(&f).env("JAX_LOCK_DIR", &jax_dir).arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["jax_accelerator_lock_0_0"], "{}", out.explain());
    assert!(jax_dir.join("jax_accelerator_lock_0_0").is_file(), "{}", out.explain());
    // And in the default, with a user name of its own so that nothing of a
    // real user's is touched; removed afterwards.
    let user = format!("pge-test-{}", std::process::id());
    let default = std::path::PathBuf::from(format!("/tmp/jax_accelerator_locks_{user}"));
    let _ = std::fs::remove_dir_all(&default);
    let out = jax(&f).env("USER", &user).arg("./pkg/gpu_test").run();
    let created = default.join("jax_accelerator_lock_0_0").is_file();
    let _ = std::fs::remove_dir_all(&default);
    out.assert_success();
    assert!(created, "no lock file in {}\n{}", default.display(), out.explain());
}

#[test]
fn slots_lock_names_and_refusal_when_busy() {
    let f = Fixture::new("jax-slots");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    // JAX_TESTS_PER_ACCELERATOR, not TF_TESTS_PER_GPU; TF_GPU_COUNT means nothing here.
    let env = |c: &mut Cmd| {
        c.env("JAX_ACCELERATOR_COUNT", "2")
            .env("JAX_TESTS_PER_ACCELERATOR", "2")
            .env("TF_TESTS_PER_GPU", "7")
            .env("TF_GPU_COUNT", "9");
    };
    let held: Vec<_> =
        ["0_0", "1_0", "0_1"].iter().map(|l| hold_lock(f.lock_dir.join(format!("jax_accelerator_lock_{l}")))).collect();
    let mut c = f.jax_cmd();
    env(&mut c);
    let r = Record::of(c.arg("./pkg/gpu_test").run().assert_success());
    assert_eq!(r.locks(), ["jax_accelerator_lock_1_1"], "the one free slot");
    let _last = hold_lock(f.lock_dir.join("jax_accelerator_lock_1_1"));
    let mut c = f.jax_cmd();
    env(&mut c);
    let out = c.args(["--wait=0", "./pkg/gpu_test", "a b"]).run();
    out.assert_code(1).assert_one_error_line(&format!(
        "parallel_gpu_execute: Cannot find a free accelerator to run the test {} a b on, exiting with failure...",
        f.test_path().display()
    ));
    let mut c = f.jax_cmd();
    env(&mut c);
    let out = c.args(["--wait=0", "./pkg/gpu_test", "--num_processes=2"]).run();
    out.assert_code(1).assert_stderr_contains("Cannot find 2 free accelerators to run the test ");
    // Our own lock names never collide with the xla profile's.
    assert!(!f.lock_dir.join("gpulock0_0").exists());
    drop(held);
}

#[test]
fn without_a_count_the_hardware_answers() {
    let mut f = Fixture::new("jax-hw");
    let out = f.jax_cmd().arg("./pkg/gpu_test").run();
    out.assert_success().assert_stderr_contains("Execute with no GPU support");
    f.sysroot.add_kfd_node(&KfdNode::cpu(16));
    for minor in [128, 129, 130] {
        f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90402, 304, minor));
    }
    let out = f.jax_cmd().arg("--list=count").run();
    out.assert_success().assert_stdout_eq("3\n");
    let out = f.jax_cmd().args(["./pkg/gpu_test", "--num_processes=3"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("0,1,2"), "not the script's default of 4\n{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1,2"), "{}", out.explain());
}

/// A TPU VM: one chip of each generation JAX lists, plus a Google device
/// that is no TPU (gVNIC), a chip whose device node is missing, and an
/// unrelated PCI device.
fn tpu_host(f: &Fixture) {
    let s = &f.sysroot;
    let chips: [(&str, &str, TpuNode); 6] = [
        ("0000:00:04.0", "0x0027", TpuNode::Accel(0)),
        ("0000:00:05.0", "0x005e", TpuNode::Accel(1)),
        ("0000:00:06.0", "0x0062", TpuNode::Vfio(2)),
        ("0000:00:07.0", "0x0063", TpuNode::Vfio(3)),
        ("0000:00:08.0", "0x006F", TpuNode::Vfio(4)),
        ("0000:00:09.0", "0x0076", TpuNode::Vfio(5)),
    ];
    for (pci, device, node) in chips {
        s.add_tpu_chip(pci, device, node, true);
    }
    s.add_tpu_chip("0000:00:0a.0", "0x0063", TpuNode::Vfio(6), false);
    s.add_pci_device("0000:00:03.0", "0x1ae0", "0x0042");
    s.add_pci_device("0000:00:01.0", "0x8086", "0x7110");
}

#[test]
fn tpu_chips_of_every_generation_are_counted_from_sysfs() {
    let f = Fixture::new("jax-tpu");
    tpu_host(&f);
    f.jax_cmd().arg("--list=count").run().assert_success().assert_stdout_eq("6\n");
    let out = f.jax_cmd().arg("--list").run();
    out.assert_success()
        .assert_stdout_contains("tpu 0000:00:04.0: v2/v3, /dev/accel0 usable -> accelerator 0\n")
        .assert_stdout_contains("tpu 0000:00:07.0: v5e, /dev/vfio/3 usable -> accelerator 3\n")
        .assert_stdout_contains("tpu 0000:00:09.0: 7x, /dev/vfio/5 usable -> accelerator 5\n")
        .assert_stdout_contains(
            "tpu 0000:00:0a.0: v5e, /dev/vfio/6 missing (not given to this container) -> not usable\n",
        )
        .assert_stdout_contains(
            "source: tpu\ncount: 6\nmode: jax (TPU_VISIBLE_CHIPS, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ONEAPI_VISIBLE_DEVICES)\n",
        );
    assert!(!out.stdout.contains("0000:00:03.0") && !out.stdout.contains("0000:00:01.0"), "{}", out.explain());
    // The xla profile does not look at TPUs.
    f.cmd().arg("--list=count").run().assert_success().assert_stdout_eq("0\n");
}

/// A TPU chip's device opens once (a VFIO group): counted on the bus or by hand, a
/// chip takes one test unless JAX_TESTS_PER_ACCELERATOR says otherwise, and
/// `--list=bazelrc` sizes the jobs so.
#[test]
fn a_tpu_chip_serves_one_test_unless_told_otherwise() {
    let f = Fixture::new("jax-tpu-slots");
    tpu_host(&f);
    f.jax_cmd().arg("--list").run().assert_success().assert_stdout_contains("\nslots per GPU: 1\n");
    let out = f.jax_cmd().arg("--list=bazelrc").run();
    out.assert_success().assert_stdout_contains("test --test_env=JAX_TESTS_PER_ACCELERATOR=1\n");
    assert!(out.stdout.contains("a TPU chip serves one test"), "{}", out.explain());
    let out = f.jax_cmd().env("JAX_TESTS_PER_ACCELERATOR", "auto").arg("--list=bazelrc").run();
    out.assert_success().assert_stdout_contains("test --test_env=JAX_TESTS_PER_ACCELERATOR=1\n");
    // Counted by hand on this host, as JAX's TPU CI counts them: the same.
    let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "6").arg("--list").run();
    out.assert_success().assert_stdout_contains("\nslots per GPU: 1\n");
    let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "6").env("JAX_TESTS_PER_ACCELERATOR", "3").arg("--list").run();
    out.assert_success().assert_stdout_contains("\nslots per GPU: 3\n");
    // Counted by hand on a host without them: the script's 8.
    let bare = Fixture::new("jax-no-tpu-slots");
    let out = bare.jax_cmd().env("JAX_ACCELERATOR_COUNT", "6").arg("--list").run();
    out.assert_success().assert_stdout_contains("\nslots per GPU: 8\n");
    // Six tests take the six chips; a seventh waits.
    let lock_dir = &f.lock_dir;
    let holders: Vec<_> = (0..6)
        .map(|_| {
            let mut c = f.jax_cmd();
            c.env("SLEEP", "30").arg("./pkg/gpu_test").own_process_group();
            c.spawn()
        })
        .collect();
    let all_held = || (0..6).all(|i| !test_support::lock_is_free(lock_dir.join(format!("jax_accelerator_lock_{i}_0"))));
    assert!(test_support::wait_until(std::time::Duration::from_secs(10), all_held), "the six chips were not taken");
    let out = f.jax_cmd().args(["--wait=0", "./pkg/gpu_test"]).run();
    assert_eq!(out.status.code(), Some(1), "a chip was given twice\n{}", out.explain());
    let out = f.jax_cmd().env("JAX_TESTS_PER_ACCELERATOR", "2").args(["--wait=0", "./pkg/gpu_test"]).run();
    assert_eq!(Record::of(out.assert_success()).locks(), ["jax_accelerator_lock_0_1"], "{}", out.explain());
    for h in holders {
        h.signal_group(libc::SIGKILL);
        h.wait();
    }
}

#[test]
fn tpu8_chips_are_found_through_an_accel_node_or_a_vfio_group() {
    // JAX lists TPU8i (0x0083) and TPU8t (0x007c) since jax-ml/jax a92b670a;
    // no public source says which device node they use, so both count.
    let f = Fixture::new("jax-tpu8");
    let s = &f.sysroot;
    s.add_tpu_chip("0000:00:04.0", "0x0083", TpuNode::Accel(0), true);
    s.add_tpu_chip("0000:00:05.0", "0x007c", TpuNode::Vfio(1), true);
    s.add_tpu_chip("0000:00:06.0", "0x007C", TpuNode::Vfio(2), false);
    f.jax_cmd().arg("--list=count").run().assert_success().assert_stdout_eq("2\n");
    f.jax_cmd()
        .arg("--list")
        .run()
        .assert_success()
        .assert_stdout_contains("tpu 0000:00:04.0: 8i, /dev/accel0 usable -> accelerator 0\n")
        .assert_stdout_contains("tpu 0000:00:05.0: 8t, /dev/vfio/1 usable -> accelerator 1\n")
        .assert_stdout_contains(
            "tpu 0000:00:06.0: 8t, /dev/vfio/2 missing (not given to this container) -> not usable\n",
        );
    let out = f.jax_cmd().args(["./pkg/gpu_test", "--num_processes=2"]).run();
    assert_eq!(Record::of(out.assert_success()).var("TPU_VISIBLE_CHIPS"), Some("0,1"), "{}", out.explain());
}

#[test]
fn a_single_chip_gets_libtpus_one_process_bounds_unless_the_user_set_them() {
    let f = Fixture::new("jax-tpu-env");
    tpu_host(&f);
    let out = f.jax_cmd().arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("TPU_VISIBLE_CHIPS"), Some("0"));
    assert_eq!(r.var("TPU_CHIPS_PER_PROCESS_BOUNDS"), Some("1,1,1"));
    assert_eq!(r.var("TPU_PROCESS_BOUNDS"), Some("1,1,1"));
    out.assert_stderr_contains(" on accelerator 0\n");
    let out = f.jax_cmd().env("TPU_PROCESS_BOUNDS", "2,2,1").arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("TPU_PROCESS_BOUNDS"), Some("2,2,1"), "never overridden");
    assert_eq!(r.var("TPU_CHIPS_PER_PROCESS_BOUNDS"), Some("1,1,1"));
    // A block of several chips: no bounds.
    let out = f.jax_cmd().args(["./pkg/gpu_test", "--num_processes=2"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("TPU_VISIBLE_CHIPS"), Some("0,1"));
    assert_eq!((r.var("TPU_CHIPS_PER_PROCESS_BOUNDS"), r.var("TPU_PROCESS_BOUNDS")), (None, None));
    // A hand-given count on a TPU host still gets them.
    let out = f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "4").arg("./pkg/gpu_test").run();
    assert_eq!(Record::of(out.assert_success()).var("TPU_CHIPS_PER_PROCESS_BOUNDS"), Some("1,1,1"));
}

#[test]
fn a_tpu_host_whose_chips_this_container_lacks_runs_without_accelerators() {
    let f = Fixture::new("jax-tpu-none");
    f.sysroot.add_tpu_chip("0000:00:04.0", "0x0063", TpuNode::Vfio(0), false);
    let out = f.jax_cmd().arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success().assert_stderr_contains("Execute with no GPU support"));
    assert_eq!(r.var("TPU_VISIBLE_CHIPS"), None);
}

#[test]
fn status_reports_jax_lock_files() {
    let f = Fixture::new("jax-status");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock_dir.join("jax_accelerator_lock_3_1"));
    let out = f.jax_cmd().arg("--status=json").run();
    out.assert_success().assert_stdout_contains("\"profile\": \"jax\", \"gpu\": \"3\", \"slot\": 1, \"held\": true");
}

/// A ROCm CI runner gives each job a slice of a shared host in
/// `ROCR_VISIBLE_DEVICES` (physical ids, maybe not contiguous): the jax
/// profile draws from it, unlike JAX's script, and HIP's stale runner list
/// is reset to the test's own devices.
#[test]
fn a_runner_slice_is_the_pool_and_a_stale_hip_list_is_reset() {
    let mut f = Fixture::new("jax-slice");
    f.sysroot.add_kfd_cpu();
    for i in 0..6u64 {
        f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90402, 304, 128 + i));
    }
    let slice = |f: &Fixture| {
        let mut c = f.jax_cmd();
        c.env("ROCR_VISIBLE_DEVICES", "0,3,4,5")
            .env("HIP_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
            .env("JAX_TESTS_PER_ACCELERATOR", "1");
        c
    };
    let held = hold_lock({
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        f.lock_dir.join("jax_accelerator_lock_0_0")
    });
    let out = slice(&f).arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["jax_accelerator_lock_3_0"], "the slice's next GPU, by its physical id\n{}", out.explain());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("3"), "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "HIP indexes what ROCR shows\n{}", out.explain());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "HIP's alias, the same indices\n{}", out.explain());
    let out = slice(&f).args(["./pkg/gpu_test", "--num_processes=3"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("3,4,5"), "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1,2"), "{}", out.explain());
    drop(held);
    // Without a runner HIP list HIP is still told the test's one GPU: left
    // unset, HIP would read CUDA_VISIBLE_DEVICES=4 as an index among the one
    // GPU ROCR shows, and find none.
    let out = f.jax_cmd().env("ROCR_VISIBLE_DEVICES", "4").arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("4"), "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    // A slice that hides every GPU: the test runs without one.
    let out = f.jax_cmd().env("ROCR_VISIBLE_DEVICES", "-1").arg("./pkg/gpu_test").run();
    out.assert_success();
    assert!(
        out.stderr.contains("Execute with no GPU support (ROCR_VISIBLE_DEVICES hides every GPU)"),
        "{}",
        out.explain()
    );
}
