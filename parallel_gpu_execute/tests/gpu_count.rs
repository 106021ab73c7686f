//! Contract points 1 and 2: where the GPU count comes from, and the zero-GPU
//! pass-through.

mod common;

use common::{Fixture, Record};
use test_support::{fake_rocminfo_script, write_executable};

/// The pool size a count produced, observed through the one-line error a
/// request for more GPUs than the pool holds gives.
fn observed_count(f: &Fixture, configure: impl FnOnce(&mut test_support::Cmd)) -> String {
    let out = f.run_test(configure, &["--num_processes=999"]);
    out.assert_code(1);
    let line = out.stderr.lines().last().unwrap_or("").to_string();
    let pool = line.split("holds only ").nth(1).and_then(|r| r.split(' ').next());
    pool.unwrap_or_else(|| panic!("no pool size in stderr\n{}", out.explain())).to_string()
}

#[test]
fn tf_gpu_count_wins_over_hardware() {
    let mut f = Fixture::new("tfcount");
    f.sysroot.add_kfd_gpus(8);
    assert_eq!(
        observed_count(&f, |c| {
            c.env("TF_GPU_COUNT", "3");
        }),
        "3"
    );
    // Classic mode: CUDA_ and HIP_VISIBLE_DEVICES are both set to the ids.
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "3");
        },
        &[],
    );
    out.assert_success();
    let r = Record::of(&out);
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
}

#[test]
fn empty_tf_gpu_count_means_unset() {
    let f = Fixture::new("tfempty");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "");
        },
        &[],
    );
    out.assert_success().assert_stderr_contains("Execute with no GPU support");
}

#[test]
fn kfd_counts_gpu_nodes_not_cpu_nodes() {
    let mut f = Fixture::new("kfd");
    f.sysroot.add_kfd_cpu();
    for minor in 128..132 {
        f.sysroot.add_kfd_gpu(minor);
    }
    assert_eq!(observed_count(&f, |_| {}), "4");
    let out = f.run_test(|_| {}, &[]);
    out.assert_success();
    let r = Record::of(&out);
    // rocm mode, XLA main's variables.
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "rocm mode from KFD\n{}", out.explain());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None, "{}", out.explain());
}

#[test]
fn kfd_skips_gpus_whose_render_node_cannot_be_opened() {
    let mut f = Fixture::new("kfdhidden");
    f.sysroot.add_kfd_cpu();
    f.sysroot.add_kfd_gpu(128);
    f.sysroot.add_kfd_gpu_raw(129, false);
    f.sysroot.add_kfd_gpu(130);
    // A render node that is a directory cannot be opened read-write either.
    f.sysroot.add_kfd_gpu_raw(131, false);
    std::fs::create_dir_all(f.sysroot.root.join("dev/dri/renderD131")).unwrap();
    // A node without drm_render_minor (old kernels) counts unchecked.
    f.sysroot.add_kfd_properties(b"simd_count 120\ngfx_target_version 90010\n");
    assert_eq!(observed_count(&f, |_| {}), "3");
}

#[test]
fn kfd_with_no_usable_gpu_runs_without_gpu_and_never_asks_rocminfo() {
    let mut f = Fixture::new("kfdnone");
    f.sysroot.add_kfd_cpu();
    f.sysroot.add_kfd_gpu_raw(128, false);
    let marker = f.dir.join("rocminfo-ran");
    f.runfiles.add(
        "rocm/bin/rocminfo",
        &format!("#!/bin/sh\ntouch '{}'\necho '  Name: gfx90a'\n", marker.display()),
        true,
    );
    let out = f.run_test(|_| {}, &[]);
    out.assert_success().assert_stderr_contains("Execute with no GPU support");
    assert!(!marker.exists(), "rocminfo must not run when sysfs answers\n{}", out.explain());
}

/// A topology of CPU nodes alone says nothing about GPUs: rocminfo answers.
#[test]
fn kfd_with_cpu_nodes_only_leaves_the_count_to_rocminfo() {
    let mut f = Fixture::new("kfdcpus");
    f.sysroot.add_kfd_cpu();
    f.runfiles.add("rocm/bin/rocminfo", &fake_rocminfo_script(2), true);
    assert_eq!(observed_count(&f, |_| {}), "2");
}

/// A caller that ignores SIGCHLD (which has the kernel reap children
/// itself) still gets rocminfo's failure said, and the test its SIGCHLD
/// ignored.
#[test]
fn rocminfo_failing_under_an_ignored_sigchld_is_still_reported() {
    let Some(python) = test_support::find_program("python3") else {
        test_support::prerequisite(false, "python3", "a caller that ignores SIGCHLD");
        return;
    };
    let mut f = Fixture::new("rocminfo-fail-ignored");
    f.runfiles.add("rocm/bin/rocminfo", "#!/bin/sh\necho 'HSA init failed' >&2\nexit 4\n", true);
    let caller =
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])";
    let mut c = f.cmd_under(python.to_str().unwrap(), ["-c", caller]);
    let out = c.args(["grep", "^SigIgn:", "/proc/self/status"]).run();
    out.assert_success().assert_stderr_contains("exited with status 4 and listed no GPU");
    let ignored = out.stdout.trim().rsplit(['\t', ' ']).next().and_then(|m| u64::from_str_radix(m, 16).ok());
    let bit = 1u64 << (libc::SIGCHLD - 1);
    assert!(ignored.is_some_and(|m| m & bit != 0), "SIGCHLD not ignored for the test\n{}", out.explain());
}

/// A caller that blocks SIGCHLD gets a test without the SIGCHLD that the
/// wrapper's run of rocminfo raised (pending signals survive the exec),
/// but keeps the one of a child of its own that exited meanwhile, which
/// the test inherits: that signal does not queue, so the wrapper takes it
/// only where no other child is left.
#[test]
fn rocminfo_leaves_the_test_no_sigchld_of_its_own_and_takes_no_other() {
    let Some(python) = test_support::find_program("python3") else {
        test_support::prerequisite(false, "python3", "a caller that blocks SIGCHLD");
        return;
    };
    // Blocks SIGCHLD, leaves a child that exits in 0.2 s when asked to
    // (`--child`), and execs the wrapper with the rest.
    let caller = "import os, signal, sys, time\n\
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])\n\
args = sys.argv[1:]\n\
if args[0] == '--child':\n    args = args[1:]\n    if os.fork() == 0:\n        time.sleep(0.2)\n        os._exit(0)\n\
os.execv(args[0], args)\n";
    for child in [false, true] {
        let mut f = Fixture::new("rocminfo-sigchld");
        f.sysroot.add_kfd_cpu();
        // Slow enough for the caller's child to exit while it runs.
        let rocminfo = fake_rocminfo_script(2).replacen("#!/bin/sh\n", "#!/bin/sh\nsleep 0.6\n", 1);
        f.runfiles.add("rocm/bin/rocminfo", &rocminfo, true);
        let mut c =
            f.cmd_under(python.to_str().unwrap(), ["-c", caller, "--child"].into_iter().take(2 + usize::from(child)));
        let out = c.args(["grep", "-E", "^(ShdPnd|SigPnd|SigBlk):", "/proc/self/status"]).run();
        out.assert_success();
        let pending = out.stdout.lines().filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:"));
        let pending = pending.fold(0, |m, l| m | u64::from_str_radix(l[7..].trim(), 16).unwrap_or(0));
        let bit = 1u64 << (libc::SIGCHLD - 1);
        assert!(
            out.stdout.contains("SigBlk:\t0000000000010000"),
            "SIGCHLD not blocked for the test\n{}",
            out.explain()
        );
        assert!(out.stderr.contains("on GPU(s) 0"), "rocminfo did not count\n{}", out.explain());
        let what =
            if child { "lost the SIGCHLD of the caller's child" } else { "left its own child's SIGCHLD pending" };
        assert_eq!(pending & bit != 0, child, "the wrapper {what}\n{}", out.explain());
    }
}

#[test]
fn nvidia_proc_entries_give_cuda_mode() {
    let f = Fixture::new("nvproc");
    f.sysroot.add_nvidia_proc_gpus(2);
    assert_eq!(observed_count(&f, |_| {}), "2");
    let out = f.run_test(
        |c| {
            c.env("HIP_VISIBLE_DEVICES", "keep");
        },
        &[],
    );
    out.assert_success();
    let r = Record::of(&out);
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    assert_eq!(r.var("ROCR_VISIBLE_DEVICES"), None);
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("keep"), "cuda mode leaves HIP alone");
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), Some("4096"));
}

#[test]
fn nvidia_device_nodes_are_the_fallback_when_proc_is_hidden() {
    let f = Fixture::new("nvdev");
    // The directory exists but is empty, as when a runtime masks it.
    std::fs::create_dir_all(f.sysroot.root.join("proc/driver/nvidia/gpus")).unwrap();
    f.sysroot.add_nvidia_dev_nodes(&[0, 1, 3]);
    assert_eq!(observed_count(&f, |_| {}), "3");
    let r = Record::of(f.run_test(|_| {}, &[]).assert_success());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("0"));
}

#[test]
fn rocminfo_found_by_walking_the_runfiles_tree() {
    let mut f = Fixture::new("rocminfo-walk");
    f.runfiles.add("local_config_rocm/rocm/rocm_dist/bin/rocminfo", &fake_rocminfo_script(4), true);
    // A decoy that is not under bin/ must not be used.
    f.runfiles.add("other/rocminfo", "#!/bin/sh\nexit 99\n", true);
    assert_eq!(observed_count(&f, |_| {}), "4");
    let r = Record::of(f.run_test(|_| {}, &[]).assert_success());
    assert_eq!(
        (r.var("HIP_VISIBLE_DEVICES"), r.var("ROCR_VISIBLE_DEVICES")),
        (Some("0"), None),
        "rocm mode from rocminfo"
    );
}

#[test]
fn rocminfo_walk_survives_symlink_loops() {
    let mut f = Fixture::new("rocminfo-loop");
    std::os::unix::fs::symlink("..", f.runfiles.srcdir.join("ws/pkg/loop")).unwrap();
    f.runfiles.add("zz/bin/rocminfo", &fake_rocminfo_script(2), true);
    assert_eq!(observed_count(&f, |_| {}), "2");
}

#[test]
fn rocminfo_found_through_the_manifest_only() {
    let mut f = Fixture::new("rocminfo-manifest");
    let real = f.dir.join("elsewhere/bin/rocminfo");
    write_executable(&real, fake_rocminfo_script(3));
    f.runfiles.add_manifest_only("local_config_rocm/rocm/bin/rocminfo", &real);
    let manifest = f.runfiles.write_manifest();
    assert_eq!(
        observed_count(&f, |c| {
            c.env("RUNFILES_MANIFEST_FILE", &manifest);
        }),
        "3"
    );
}

#[test]
fn no_source_means_no_gpu_and_an_untouched_pass_through() {
    let f = Fixture::new("nogpu");
    let out = f.run_test(
        |c| {
            c.env("CUDA_VISIBLE_DEVICES", "7").env("EXIT_CODE", "3");
        },
        &["--num_processes=4", "a b"],
    );
    out.assert_code(3);
    assert_eq!(out.stderr, "Execute with no GPU support\n", "{}", out.explain());
    let r = Record::of(&out);
    assert_eq!(r.args(), ["--num_processes=4", "a b"]);
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some("7"), "environment untouched");
    assert_eq!(r.var("TF_PER_DEVICE_MEMORY_LIMIT_MB"), None, "no default set without a GPU");
    assert_eq!(r.get("locks"), Some(""));
    assert!(!f.lock_dir.exists(), "no lock directory without a GPU");
    // Exec'd as given: argv[0] stays the relative path, relative to the cwd.
    assert_eq!(r.get("cwd"), Some(f.runfiles.cwd().to_str().unwrap()));
}

#[test]
fn rocminfo_failing_with_no_gpu_is_reported_then_passes_through() {
    let mut f = Fixture::new("rocminfo-fail");
    f.runfiles.add("rocm/bin/rocminfo", "#!/bin/sh\necho 'HSA init failed' >&2\nexit 4\n", true);
    let out = f.run_test(|_| {}, &[]);
    out.assert_success()
        .assert_stderr_contains("exited with status 4 and listed no GPU")
        .assert_stderr_contains("Execute with no GPU support");
}

/// rocminfo prints why it failed on stdout, coloured, as the strace in
/// ROCm/legacy-rocm-build#1109 shows: those lines follow the warning, as
/// text, so the test log says why the test ran without a GPU. What it
/// writes to stderr reaches the log as it is.
#[test]
fn a_failing_rocminfo_s_own_words_follow_the_warning() {
    let mut f = Fixture::new("rocminfo-why");
    let fake = "#!/bin/sh\n\
        printf '\\033[37mROCk module is loaded\\n'\n\
        printf '\\033[31mUnable to open /dev/kfd read-write: Permission denied\\n'\n\
        printf '\\033[31mbuilder is not member of \"render\" group, the default DRM access group.\\n'\n\
        printf '\\033[31mhsa api call failure at: /src/rocminfo/rocminfo.cc:1306\\n'\n\
        printf '\\033[31mCall returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.\\n\\033[0m'\n\
        echo 'on stderr' >&2\n\
        exit 8\n";
    f.runfiles.add("rocm/bin/rocminfo", fake, true);
    let out = f.run_test(|_| {}, &[]);
    out.assert_success();
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.first(), Some(&"on stderr"), "{}", out.explain());
    let warning = lines.get(1).copied().unwrap_or_default();
    assert!(
        warning.starts_with("parallel_gpu_execute: warning: ")
            && warning
                .ends_with("/rocm/bin/rocminfo exited with status 8 and listed no GPU; running the test without a GPU"),
        "{}",
        out.explain()
    );
    let want = [
        "parallel_gpu_execute: rocminfo: ROCk module is loaded",
        "parallel_gpu_execute: rocminfo: Unable to open /dev/kfd read-write: Permission denied",
        "parallel_gpu_execute: rocminfo: builder is not member of \"render\" group, the default DRM access group.",
        "parallel_gpu_execute: rocminfo: hsa api call failure at: /src/rocminfo/rocminfo.cc:1306",
        "parallel_gpu_execute: rocminfo: Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.",
        "Execute with no GPU support",
    ];
    assert_eq!(lines.get(2..), Some(&want[..]), "{}", out.explain());
    // A rocminfo that succeeds with no GPU (a CPU-only ROCm host) says nothing.
    let mut g = Fixture::new("rocminfo-cpu-only");
    g.runfiles.add("rocm/bin/rocminfo", "#!/bin/sh\necho 'Device Type: CPU'\n", true);
    let out = g.run_test(|_| {}, &[]);
    assert_eq!(out.assert_success().stderr, "Execute with no GPU support\n", "{}", out.explain());
}

#[test]
fn tf_gpu_count_zero_is_the_no_gpu_path() {
    let f = Fixture::new("tfzero");
    f.sysroot.add_nvidia_proc_gpus(4);
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "0");
        },
        &[],
    );
    out.assert_success().assert_stderr_contains("Execute with no GPU support");
    assert_eq!(Record::of(&out).var("CUDA_VISIBLE_DEVICES"), None);
}

/// A path of over 300 bytes below `dir` that is a symlink to `target`.
fn long_alias(dir: &test_support::TempDir, target: &std::path::Path) -> std::path::PathBuf {
    let mut long = dir.join("");
    for i in 0..4 {
        long = long.join(format!("{i}{}", "d".repeat(90)));
    }
    std::fs::create_dir_all(long.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, &long).unwrap();
    assert!(long.as_os_str().len() > 300, "{}", long.display());
    long
}

#[test]
fn a_sysroot_longer_than_the_short_path_buffer_counts_the_same() {
    // Host paths are built in a 256-byte buffer, and only a longer one in a
    // full PATH_MAX buffer (`with_joined`): a long prefix must see the same
    // KFD and NVIDIA hardware as a short one.
    let mut f = Fixture::new("longroot");
    f.sysroot.add_kfd_cpu();
    for minor in 128..131 {
        f.sysroot.add_kfd_gpu(minor);
    }
    let long = long_alias(&f.dir, &f.sysroot.root);
    let with_long = |c: &mut test_support::Cmd| {
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &long);
    };
    assert_eq!(observed_count(&f, with_long), "3");
    let out = f.run_test(with_long, &["--num_processes=2"]);
    out.assert_success();
    assert_eq!(Record::of(&out).var("HIP_VISIBLE_DEVICES"), Some("0,1"), "{}", out.explain());

    let nvidia = Fixture::new("longroot-nvidia");
    nvidia.sysroot.add_nvidia_proc_gpus(2);
    let long = long_alias(&nvidia.dir, &nvidia.sysroot.root);
    assert_eq!(
        observed_count(&nvidia, |c| {
            c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &long);
        }),
        "2"
    );
}

/// A runfiles manifest that is a device (`RUNFILES_MANIFEST_FILE=/dev/zero`)
/// is no manifest: on a host without a GPU, the look for `rocminfo` in it
/// ends at once and the test runs. A build without the change read
/// `/dev/zero` without end.
#[test]
fn a_manifest_that_is_a_device_is_none() {
    let f = Fixture::new("manifest-device");
    let out = test_support::Cmd::new(common::bin())
        .env("RUNFILES_MANIFEST_FILE", "/dev/zero")
        .env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
        .args(["/bin/sh", "-c", "echo ran"])
        .timeout(std::time::Duration::from_secs(10))
        .run();
    out.assert_success().assert_stdout_contains("ran");
}
