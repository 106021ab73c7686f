//! Contract points 3, 4, 5 and 8: finding the test, how many GPUs it needs,
//! the pool of ids, and the environment and log line it gets.

mod common;

use common::{Fixture, Record};
use test_support::{Cmd, RECORDING_TEST, write_executable};

#[test]
fn relative_test_is_found_in_the_runfiles_workspace() {
    let f = Fixture::new("resolve-tree");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "1");
        },
        &["x"],
    );
    out.assert_success();
    let expected = format!("Running test {} x on GPU(s) 0\n", f.test_path().display());
    assert_eq!(out.stderr, expected, "{}", out.explain());
}

#[test]
fn test_is_found_through_the_manifest_when_the_tree_lacks_it() {
    let mut f = Fixture::new("resolve-manifest");
    let real = f.dir.join("execroot-only/manifest_test");
    write_executable(&real, RECORDING_TEST);
    f.runfiles.add_manifest_only("ws/pkg/manifest_test", &real);
    f.runfiles.write_manifest();
    // $TEST_SRCDIR/MANIFEST is used when RUNFILES_MANIFEST_FILE is unset.
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg("./pkg/manifest_test").run();
    out.assert_success().assert_stderr_contains(&format!("Running test {} on GPU(s) 0", real.display()));
    // And RUNFILES_MANIFEST_FILE wins when set.
    let other = f.dir.join("other-manifest");
    let real2 = f.dir.join("second/manifest_test");
    write_executable(&real2, RECORDING_TEST);
    std::fs::write(&other, format!("ws/pkg/manifest_test {}\n", real2.display())).unwrap();
    let out = f.cmd().env("TF_GPU_COUNT", "1").env("RUNFILES_MANIFEST_FILE", &other).arg("pkg/manifest_test").run();
    out.assert_success().assert_stderr_contains(&format!("Running test {} on GPU(s) 0", real2.display()));
    // On a host without a GPU too: the test runs unchanged, from where the
    // manifest puts it.
    let out = f.cmd().env("TF_GPU_COUNT", "0").arg("./pkg/manifest_test").run();
    out.assert_success().assert_stderr_contains("Execute with no GPU support\n");
    let r = Record::of(&out);
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), None, "{}", out.explain());
    let out = f.cmd().env("TF_GPU_COUNT", "1").env("ROCR_VISIBLE_DEVICES", "").arg("pkg/manifest_test").run();
    Record::of(out.assert_success());
}

#[test]
fn absolute_and_path_commands() {
    let f = Fixture::new("resolve-abs");
    let abs = f.dir.join("abs_test");
    write_executable(&abs, RECORDING_TEST);
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg(&abs).run();
    out.assert_success().assert_stderr_contains(&format!("Running test {} on GPU(s)", abs.display()));
    // No slash, not in the runfiles: searched in PATH.
    let out = f.cmd().env("TF_GPU_COUNT", "1").args(["true"]).run();
    out.assert_success();
    assert!(out.stderr.starts_with("Running test /") && out.stderr.contains("/true on GPU(s) 0"), "{}", out.explain());
}

#[test]
fn argv0_is_the_resolved_test_and_arguments_pass_unchanged() {
    let f = Fixture::new("args");
    let args = ["--gtest_filter=A.*", "", "two words", "--num_processes", "1", "--wait=3", "--", "-x"];
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2");
        },
        &args,
    );
    out.assert_success();
    assert_eq!(Record::of(&out).args(), args, "{}", out.explain());
}

#[test]
fn gpus_needed_from_the_test_arguments() {
    let f = Fixture::new("needed");
    let cases: &[(&[&str], &str)] = &[
        (&["--num_processes=2", "--gpus_per_process=2"], "0,1,2,3"),
        (&["--num_processes", "3"], "0,1,2"),
        (&["--gpus_per_process", "2", "--num_processes=1"], "0,1"),
        (&["--num_processes=zero", "--gpus_per_process=-2"], "0"),
        (&["--num_processes=0"], "0"),
        (&[], "0"),
    ];
    for (args, ids) in cases {
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "8").env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm");
            },
            args,
        );
        out.assert_success();
        let r = Record::of(&out);
        // rocm mode, no preset pool: XLA main's pair, a list for a block.
        assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some(*ids), "args {args:?}\n{}", out.explain());
        assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(*ids), "args {args:?}\n{}", out.explain());
        assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "args {args:?}\n{}", out.explain());
        let n = ids.split(',').count();
        assert_eq!(r.locks().len(), n, "one lock per GPU\n{}", out.explain());
        out.assert_stderr_contains(&format!("on GPU(s) {ids}\n"));
    }
}

#[test]
fn more_gpus_than_the_pool_is_one_line_and_exit_1() {
    let f = Fixture::new("toosmall");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2");
        },
        &["--num_processes=3"],
    );
    out.assert_code(1).assert_one_error_line("the test needs 3 GPU(s) but the pool holds only 2");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "8").env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm").env("ROCR_VISIBLE_DEVICES", "4,5");
        },
        &["--num_processes=2", "--gpus_per_process=2"],
    );
    out.assert_code(1).assert_one_error_line("needs 4 GPU(s) but the pool holds only 2 (from ROCR_VISIBLE_DEVICES)");
    // A count past u64::MAX (a typo) asks for more than any pool: it fails as
    // in the classic script, never runs on one GPU.
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "8");
        },
        &["--num_processes=99999999999999999999"],
    );
    out.assert_code(1).assert_one_error_line("the test needs 18446744073709551615 GPU(s) but the pool holds only 8");
}

#[test]
fn rocm_pool_comes_from_rocr_visible_devices() {
    let f = Fixture::new("pool-rocr");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "8")
                .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
                .env("ROCR_VISIBLE_DEVICES", "6,3,5")
                .env("CUDA_VISIBLE_DEVICES", "0");
        },
        &["--num_processes=2"],
    );
    // The default (--visible=hip): the preset pool stays as it is, and HIP
    // and CUDA get the block's positions in it, which is what HIP indexes;
    // the lock files are named by the pool's ids.
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("6,3,5"), "the pool is left as it is\n{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1"), "{}", out.explain());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0,1"), "{}", out.explain());
    assert_eq!(r.locks(), ["gpulock3_0", "gpulock6_0"]);
    assert!(f.lock("6", 0).exists() && f.lock("3", 0).exists());

    // --visible=rocr: ROCR names the block, HIP counts it from 0, no CUDA.
    for how in ["flag", "variable"] {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "8")
            .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
            .env("ROCR_VISIBLE_DEVICES", "6,3,5")
            .env("CUDA_VISIBLE_DEVICES", "0");
        if how == "flag" {
            c.env("PARALLEL_GPU_EXECUTE_VISIBLE", "hip").arg("--visible=rocr");
        } else {
            c.env("PARALLEL_GPU_EXECUTE_VISIBLE", "rocr");
        }
        let out = c.args(["./pkg/gpu_test", "--num_processes=2"]).run();
        let r = Record::of(out.assert_success());
        assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("6,3"), "{how}\n{}", out.explain());
        assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1"), "{how}\n{}", out.explain());
        assert_eq!(
            r.var("CUDA_VISIBLE_DEVICES"),
            None,
            "--visible=rocr removes CUDA_VISIBLE_DEVICES\n{}",
            out.explain()
        );
        assert_eq!(r.locks(), ["gpulock3_0", "gpulock6_0"]);
    }
}

#[test]
fn cuda_pool_comes_from_cuda_visible_devices_and_accepts_uuids() {
    let f = Fixture::new("pool-cuda");
    let uuid = "GPU-8f3a1c2e-1b2c-4d5e-8f90-123456789abc";
    // The GPUs the UUIDs name, whose places give the lock names.
    let gpu =
        |minor: u64| test_support::hardware::NvidiaGpu::new(&format!("0000:{:02x}:00.0", 0x18 + minor), "H100", minor);
    f.sysroot.add_nvidia_proc_entry(&gpu(0).uuid(uuid));
    f.sysroot.add_nvidia_proc_entry(&gpu(1));
    f.sysroot.add_nvidia_dev_nodes(&[0, 1]);
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2")
                .env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda")
                .env("CUDA_VISIBLE_DEVICES", format!("{uuid},GPU-0000"));
        },
        &[],
    );
    out.assert_success();
    let r = Record::of(&out);
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(uuid));
    assert_eq!(r.locks(), ["gpulock0_0"], "the lock of the GPU's index\n{}", out.explain());
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("4096"));
}

/// CUDA's documented MIG form, `MIG-GPU-<UUID>/<GI>/<CI>`: its slashes
/// cannot be in a file name, so its lock file has `+` for each; the test
/// gets the id as it was, and `--status` shows it so.
#[test]
fn cuda_pool_accepts_cudas_mig_form() {
    let f = Fixture::new("pool-mig");
    let first = "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0";
    let second = "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/2/0";
    let lock = |id: &str| f.lock(&id.replace('/', "+"), 0);
    let pool = |c: &mut Cmd| {
        c.env("TF_GPU_COUNT", "1")
            .env("TF_TESTS_PER_GPU", "1")
            .env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda")
            .env("CUDA_VISIBLE_DEVICES", format!("{first},{second}"));
    };
    let out = f.run_test(pool, &[]);
    out.assert_success().assert_stderr_contains(&format!("on GPU(s) {first}\n"));
    let r = Record::of(&out);
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(first), "{}", out.explain());
    assert_eq!(r.locks(), [format!("gpulock{}_0", first.replace('/', "+"))]);
    assert!(lock(first).exists(), "{}", out.explain());

    // The first instance busy: the next test gets the second.
    let held = test_support::hold_lock(lock(first));
    let out = f.run_test(pool, &["--wait=0"]);
    assert_eq!(Record::of(out.assert_success()).var("CUDA_VISIBLE_DEVICES"), Some(second), "{}", out.explain());
    let status = f.cmd().arg("--status=json").run();
    status.assert_success().assert_stdout_contains(&format!(r#""gpu": "{first}", "slot": 0, "held": true"#));
    drop(held);

    // Only CUDA reads that form; a malformed one is refused as any bad id.
    for (vendor, var, id) in [
        ("rocm", "ROCR_VISIBLE_DEVICES", first),
        ("cuda", "CUDA_VISIBLE_DEVICES", "MIG-GPU-8932f937/1/0/0"),
        ("cuda", "CUDA_VISIBLE_DEVICES", "MIG-GPU-../1/0"),
    ] {
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("PARALLEL_GPU_EXECUTE_VENDOR", vendor).env(var, id);
            },
            &[],
        );
        out.assert_code(2).assert_one_error_line(&format!("{var}: GPU id '{id}' is not usable in a lock file name"));
    }
}

#[test]
fn classic_mode_ignores_visible_device_pools() {
    let f = Fixture::new("pool-classic");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2").env("ROCR_VISIBLE_DEVICES", "5");
        },
        &[],
    );
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"));
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"));
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("5"), "left as it was");
}

#[test]
fn pool_ids_that_could_escape_the_lock_directory_are_refused() {
    let f = Fixture::new("pool-bad");
    for (list, bad) in
        [("0,../../etc/passwd", "../../etc/passwd"), ("/tmp/x", "/tmp/x"), ("a..b", "a..b"), ("0,,1", ""), ("0 ", "0 ")]
    {
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "2").env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm").env("ROCR_VISIBLE_DEVICES", list);
            },
            &[],
        );
        out.assert_code(2).assert_one_error_line(&format!("ROCR_VISIBLE_DEVICES: GPU id '{bad}' is not usable"));
    }
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2").env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda").env("CUDA_VISIBLE_DEVICES", "1,0,1");
        },
        &[],
    );
    out.assert_code(2).assert_one_error_line("CUDA_VISIBLE_DEVICES: GPU id '1' is listed twice");
    // Nothing was created outside (or inside) the lock directory.
    assert!(!f.lock_dir.exists());
}

#[test]
fn memory_limit_default_respects_an_existing_value() {
    let f = Fixture::new("memlimit");
    let r = Record::of(
        f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1");
            },
            &[],
        )
        .assert_success(),
    );
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("4096"));
    let r = Record::of(
        f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("TF_PER_DEVICE_MEMORY_LIMIT_MB", "512");
            },
            &[],
        )
        .assert_success(),
    );
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("512"));
}

#[test]
fn vendor_flag_and_variable_choose_the_variables() {
    let f = Fixture::new("vendor");
    let r = Record::of(
        f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda");
            },
            &[],
        )
        .assert_success(),
    );
    assert_eq!((r.var("CUDA_VISIBLE_DEVICES"), r.var("HIP_VISIBLE_DEVICES")), (Some("0"), None));
    // The flag wins over the variable.
    let out = f
        .cmd()
        .env("TF_GPU_COUNT", "1")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda")
        .args(["--vendor=rocm", "./pkg/gpu_test"])
        .run();
    let r = Record::of(out.assert_success());
    assert_eq!(
        (r.var("ROCR_VISIBLE_DEVICES"), r.var("HIP_VISIBLE_DEVICES"), r.var("CUDA_VISIBLE_DEVICES")),
        (None, Some("0"), Some("0")),
        "{}",
        out.explain()
    );
}

/// A pool variable that shows the runtime no GPU (set and empty, or a
/// negative index first) makes the test run as on a host without one: the
/// classic line with the reason, the command exec'd unchanged, no lock.
#[test]
fn a_pool_variable_that_hides_every_gpu_runs_the_test_without_one() {
    let mut f = Fixture::new("pool-hidden");
    f.sysroot.add_kfd_gpus(2);
    // The variables set, the pool variable, and its value.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: [Case; 5] = [
        (&[("ROCR_VISIBLE_DEVICES", "")], "ROCR_VISIBLE_DEVICES", ""),
        (&[("ROCR_VISIBLE_DEVICES", "-1")], "ROCR_VISIBLE_DEVICES", "-1"),
        (&[("ROCR_VISIBLE_DEVICES", "-1,0")], "ROCR_VISIBLE_DEVICES", "-1,0"),
        (
            &[("TF_GPU_COUNT", "2"), ("PARALLEL_GPU_EXECUTE_VENDOR", "cuda"), ("CUDA_VISIBLE_DEVICES", "")],
            "CUDA_VISIBLE_DEVICES",
            "",
        ),
        (
            &[("TF_GPU_COUNT", "2"), ("PARALLEL_GPU_EXECUTE_VENDOR", "cuda"), ("CUDA_VISIBLE_DEVICES", "-1")],
            "CUDA_VISIBLE_DEVICES",
            "-1",
        ),
    ];
    for (env, var, value) in cases {
        let set = |c: &mut Cmd| {
            for (k, v) in env {
                c.env(k, v);
            }
        };
        let out = f.run_test(set, &["--num_processes=2"]);
        out.assert_success();
        assert_eq!(out.stderr, format!("Execute with no GPU support ({var} hides every GPU)\n"), "{}", out.explain());
        let r = Record::of(&out);
        assert_eq!(r.var(var), Some(value), "left as it was\n{}", out.explain());
        assert_eq!(r.var("HIP_VISIBLE_DEVICES"), None, "{}", out.explain());
        assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), None, "{}", out.explain());
        assert!(r.locks().is_empty(), "{}", out.explain());
        assert!(!f.lock_dir.exists(), "no lock directory\n{}", out.explain());
        // --list says the same, in both formats.
        let mut c = f.cmd();
        set(&mut c);
        let out = c.arg("--list").run();
        out.assert_success().assert_stdout_contains(&format!(
            "\nmode: none ({var} hides every GPU; the test runs without one: 'Execute with no GPU support')\n"
        ));
        let mut c = f.cmd();
        set(&mut c);
        let out = c.arg("--list=json").run();
        out.assert_success()
            .assert_stdout_contains(&format!("\"mode\": null, \"pool\": [], \"pool_variable\": \"{var}\""));
    }
}

/// Past a negative index the runtime sees nothing, so the pool ends there.
#[test]
fn the_pool_ends_where_the_runtime_stops_reading() {
    let mut f = Fixture::new("pool-cut");
    f.sysroot.add_kfd_gpus(4);
    let out = f.run_test(
        |c| {
            c.env("ROCR_VISIBLE_DEVICES", "3,1,-1,0");
        },
        &["--num_processes=2"],
    );
    let r = Record::of(out.assert_success());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1"), "{}", out.explain());
    assert_eq!(r.locks(), ["gpulock1_0", "gpulock3_0"], "{}", out.explain());
    let out = f.run_test(
        |c| {
            c.env("ROCR_VISIBLE_DEVICES", "3,1,-1,0");
        },
        &["--num_processes=3"],
    );
    out.assert_code(1).assert_one_error_line("needs 3 GPU(s) but the pool holds only 2 (from ROCR_VISIBLE_DEVICES)");
    let out = f.cmd().env("ROCR_VISIBLE_DEVICES", "3,1,-1,0").arg("--list").run();
    out.assert_success().assert_stdout_contains(
        "\npool: 3,1 (from ROCR_VISIBLE_DEVICES, up to its first negative index, where the runtime stops reading it)\n",
    );
    let out = f.cmd().env("ROCR_VISIBLE_DEVICES", "3,1").arg("--list").run();
    out.assert_success().assert_stdout_contains("\npool: 3,1 (from ROCR_VISIBLE_DEVICES)\n");
    // The classic mode reads it too: an empty one shows the test no GPU.
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2").env("ROCR_VISIBLE_DEVICES", "");
        },
        &[],
    );
    out.assert_success().assert_stderr_contains("Execute with no GPU support (ROCR_VISIBLE_DEVICES hides every GPU)\n");
    assert_eq!(Record::of(&out).locks(), [""; 0], "{}", out.explain());
}

/// On a host that shows no AMD GPU (NVIDIA's), `ROCR_VISIBLE_DEVICES`
/// chooses nothing: the classic mode does not read it, and CUDA's GPU 0
/// keeps its one lock file.
#[test]
fn the_classic_mode_reads_rocr_visible_devices_only_where_rocr_chooses() {
    let f = Fixture::new("classic-rocr-nvidia");
    f.sysroot.add_nvidia_proc_gpus(2);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = test_support::hold_lock(f.lock("0", 0));
    let classic = |rocr: &str| {
        f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").env("ROCR_VISIBLE_DEVICES", rocr);
                c.arg("--wait=0");
            },
            &[],
        )
    };
    let out = classic("1");
    assert_eq!(out.status.code(), Some(1), "CUDA's GPU 0 was given twice\n{}", out.explain());
    let out = classic("-1");
    assert_eq!(out.status.code(), Some(1), "a test ran on every GPU, unlocked\n{}", out.explain());
}

/// The classic mode (`TF_GPU_COUNT` set) leaves `ROCR_VISIBLE_DEVICES` to
/// the test, as its scripts did, and the runtime numbers the GPUs it
/// shows from 0: the lock files are named by the pool's ids, so that a
/// job in a slice and a job in rocm mode never share a GPU.
#[test]
fn the_classic_mode_under_a_preset_rocr_pool_locks_the_gpus_it_gives() {
    let mut f = Fixture::new("classic-rocr");
    f.sysroot.add_kfd_gpus(4);
    // GPU 2 is held by a test in rocm mode, which names it by its index.
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = test_support::hold_lock(f.lock("2", 0));
    let classic = |extra: &[&str]| {
        f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "4").env("TF_TESTS_PER_GPU", "1").env("ROCR_VISIBLE_DEVICES", "2,3");
                c.arg("--wait=0");
            },
            extra,
        )
    };
    let out = classic(&[]);
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock3_0"], "GPU 2 is held\n{}", out.explain());
    // GPU 3 is the second the runtime shows under 2,3.
    for var in ["HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"] {
        assert_eq!(r.var(var), Some("1"), "{var}\n{}", out.explain());
    }
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), Some("2,3"), "{}", out.explain());
    out.assert_stderr_contains(" on GPU(s) 3\n");
    classic(&["--num_processes=2"]).assert_code(1);
    let out = f.cmd().env("TF_GPU_COUNT", "4").env("ROCR_VISIBLE_DEVICES", "2,3").arg("--list").run();
    out.assert_success().assert_stdout_contains("\npool: 2,3 (from ROCR_VISIBLE_DEVICES)\n");
    // Named physically, by the hardware the container sees (in a lock
    // directory of their own: index names are refused beside them).
    let out = f
        .cmd()
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", f.dir.join("physical-locks"))
        .env("TF_GPU_COUNT", "4")
        .env("ROCR_VISIBLE_DEVICES", "2,3")
        .args(["--lock-names=physical", "--wait=0", "./pkg/gpu_test"])
        .run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks().len(), 1, "{}", out.explain());
    assert!(!r.locks()[0].starts_with("gpulock2_") && !r.locks()[0].starts_with("gpulock3_"), "{}", out.explain());
    // The jax profile's own variables set ROCR_VISIBLE_DEVICES to the
    // accelerator's id, as JAX's script does: nothing to read there.
    let out =
        f.jax_cmd().env("JAX_ACCELERATOR_COUNT", "4").env("ROCR_VISIBLE_DEVICES", "2,3").arg("./pkg/gpu_test").run();
    assert_eq!(Record::of(out.assert_success()).var("ROCR_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
}
