//! Hostile and absurd input to every binary: huge and negative numbers in
//! every numeric variable and flag, 10,000 pool ids, random bytes (from a
//! seeded, reproducible PRNG) as KFD `properties` files, as `rocminfo`
//! output, as a runfiles MANIFEST and as a sanitizer configuration file,
//! and over-long arguments, paths and environment values.
//!
//! Every case checks the same three things: the exit code is the documented
//! one; stderr holds at most one line from the wrapper and never a panic or
//! backtrace; and no file was created, removed or written anywhere under the
//! sandbox root (runfiles tree, fake sysroot, the run's working directory,
//! everything) except in the lock directory.
//!
//! Covered elsewhere, not repeated here: a symlink (dangling or not), a
//! directory or a FIFO at a lock path is refused and its target left alone
//! (parallel_gpu_execute/tests/flags_and_bad_input.rs:
//! `a_symlink_at_a_lock_path_is_refused_and_its_target_untouched`,
//! `a_directory_or_fifo_at_a_lock_path_is_refused`); pool ids that try to
//! leave the lock directory (`../`, `/`, empty, non-ASCII) are refused
//! (test_and_environment.rs:
//! `pool_ids_that_could_escape_the_lock_directory_are_refused`); the common
//! bad values of each variable are named in one line (flags_and_bad_input.rs:
//! `bad_numbers_are_named_with_their_value`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use test_support::{
    Cmd, GpuSandbox, Output, RECORDING_TEST, XorShift64, hold_lock, snapshot_diff, snapshot_tree, workspace_bin,
    write_executable, write_file,
};

/// Random rounds per kind of random input. More with `HOSTILE_ROUNDS`.
fn rounds() -> u64 {
    std::env::var("HOSTILE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

/// Runs `cmd` and checks the three rules (see the file's docs); `what`
/// names the case (and its seed) in a failure.
#[track_caller]
fn run_checked(root: &Path, lock_dir: &Path, cmd: &Cmd, codes: &[i32], what: &str) -> Output {
    let before = snapshot_tree(root, &[lock_dir]);
    let out = cmd.run();
    assert!(codes.contains(&out.code()), "{what}: exit code not one of {codes:?}\n{}", out.explain());
    // parallel_gpu_execute's "Execute with no GPU support" (the classic
    // script's line) comes before the exec; if the exec then fails, its
    // one error line follows. A wrapper that waited says so first (one
    // line). Every other case is one line at most.
    let errors = out.stderr.strip_prefix("Execute with no GPU support\n").unwrap_or(&out.stderr);
    let errors = errors.lines().filter(|l| !l.starts_with("parallel_gpu_execute: waiting for ")).count();
    assert!(errors <= 1, "{what}: more than one error line\n{}", out.explain());
    for bad in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
        assert!(!out.stderr.contains(bad), "{what}: panic output\n{}", out.explain());
    }
    let after = snapshot_tree(root, &[lock_dir]);
    let diff = snapshot_diff(&before, &after);
    assert!(diff.is_empty(), "{what}: files changed outside the lock directory:\n{diff}\n{}", out.explain());
    out
}

/// [`run_checked`] for a parallel_gpu_execute sandbox.
#[track_caller]
fn pge_checked(s: &GpuSandbox, cmd: &Cmd, codes: &[i32], what: &str) -> Output {
    run_checked(s.dir.path(), &s.lock_dir, cmd, codes, what)
}

/// The KFD `properties` file of node `n` in the sandbox's fake sysroot.
fn kfd_properties(s: &GpuSandbox, n: usize) -> PathBuf {
    s.sysroot.root.join(format!("sys/class/kfd/kfd/topology/nodes/{n}/properties"))
}

#[test]
fn huge_and_negative_numbers_in_every_variable_and_flag() {
    let s = GpuSandbox::new("hostile-numbers");
    let test = "./pkg/gpu_test";
    let run = |env: &[(&str, &str)], args: &[&str], code: i32, needle: &str| {
        let mut c = s.cmd();
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(args);
        let out = pge_checked(&s, &c, &[code], &format!("{env:?} {args:?}"));
        out.assert_stderr_contains(needle);
        out
    };

    for v in [
        "18446744073709551616",
        "18446744073709551615",
        "99999999999999999999999999999999999999",
        "4097",
        "4294967296",
        "-1",
        "-0",
        "+1",
        "1.0",
        " 1",
        "1\n",
        "\u{661}",
    ] {
        run(&[("TF_GPU_COUNT", v)], &[test], 2, "TF_GPU_COUNT: invalid value");
    }
    run(&[("TF_GPU_COUNT", "4096")], &[test], 0, "on GPU(s) 0\n");
    run(&[("TF_GPU_COUNT", "0000000000000000000000000000000000002")], &[test], 0, "on GPU(s) 0\n");

    for v in ["0", "1025", "-1", "4294967297", "18446744073709551616", "99999999999999999999999"] {
        run(&[("TF_GPU_COUNT", "1"), ("TF_TESTS_PER_GPU", v)], &[test], 2, "TF_TESTS_PER_GPU: invalid value");
    }
    run(&[("TF_GPU_COUNT", "1"), ("TF_TESTS_PER_GPU", "1024")], &[test], 0, "on GPU(s) 0\n");

    // 18446744073709551.999 s is past u64::MAX ms: it used to wrap to a
    // fraction of a second (and to panic in a debug build).
    for v in [
        "-1",
        "18446744073709551615",
        "18446744073709551.999",
        "18446744073709551.616",
        "2592000.001",
        "1e999",
        "nan",
        "inf",
        "0x10",
        "-0",
        "1..5",
    ] {
        run(&[("TF_GPU_COUNT", "1"), ("PARALLEL_GPU_EXECUTE_WAIT", v)], &[test], 2, "PARALLEL_GPU_EXECUTE_WAIT");
        run(&[("TF_GPU_COUNT", "1")], &[&format!("--wait={v}"), test], 2, "--wait: invalid value");
    }
    for v in ["2592000", "0.0000000001", "0000000000000000000000000000000005", "2591999.9999999999"] {
        run(&[("TF_GPU_COUNT", "1")], &["--wait", v, test], 0, "on GPU(s) 0\n");
    }

    // GPUs needed, from the test's own arguments: not a positive integer
    // counts as 1; a number or a product past u64 saturates and cannot be
    // served.
    let two = [("TF_GPU_COUNT", "2")];
    for args in [
        &["--num_processes=18446744073709551615", "--gpus_per_process=2"][..],
        &["--num_processes=4294967296", "--gpus_per_process=4294967296"],
        &["--gpus_per_process", "18446744073709551615"],
        &["--num_processes=99999999999999999999999"],
        &["--gpus_per_process=18446744073709551616"],
        &["--num_processes=3"],
    ] {
        let mut full = vec![test];
        full.extend_from_slice(args);
        run(&two, &full, 1, "but the pool holds only 2");
    }
    for args in [
        &["--num_processes=-4"][..],
        &["--num_processes=99999999999999999999999x"],
        &["--gpus_per_process", "-1"],
        &["--num_processes=0", "--gpus_per_process=+2"],
        &["--num_processes"],
    ] {
        let mut full = vec![test];
        full.extend_from_slice(args);
        run(&two, &full, 0, "on GPU(s) 0\n");
    }

    // TF_PER_DEVICE_MEMORY_LIMIT_MB is the test's business: passed on as is.
    let long = "9".repeat(10_000);
    for v in ["-1", "18446744073709551616", "abc", "0x10", long.as_str()] {
        let out = run(&[("TF_GPU_COUNT", "1"), ("TF_PER_DEVICE_MEMORY_LIMIT_MB", v)], &[test], 0, "on GPU(s) 0\n");
        assert!(out.stdout.contains(&format!("\nTF_PER_DEVICE_MEMORY_LIMIT_MB={v}\n")), "{}", out.explain());
    }
}

#[test]
fn huge_and_negative_numbers_in_kfd_properties() {
    let s = GpuSandbox::new("hostile-kfd-numbers");
    // The runtime's device, without which no KFD GPU counts.
    s.sysroot.add_dev_entry("kfd");
    let cases: &[(&str, &str)] = &[
        // A GPU whatever its SIMD count, as long as it is a number above 0;
        // gfx_target_version, garbled or not, does not decide.
        ("simd_count 18446744073709551615\n", "on GPU(s) 0\n"),
        ("simd_count 00000000000000000000000000000000000304\n", "on GPU(s) 0\n"),
        ("simd_count 304\ngfx_target_version -90402\n", "on GPU(s) 0\n"),
        ("simd_count 18446744073709551616\n", "Execute with no GPU support"),
        ("simd_count -304\n", "Execute with no GPU support"),
        ("simd_count 99999999999999999999999999999\n", "Execute with no GPU support"),
        ("simd_count 0\ngfx_target_version 90402\n", "Execute with no GPU support"),
        // A render minor that is no number or names no device: not usable.
        ("simd_count 304\ndrm_render_minor -5\n", "Execute with no GPU support"),
        ("simd_count 304\ndrm_render_minor 18446744073709551615\n", "Execute with no GPU support"),
        ("simd_count 304\ndrm_render_minor 18446744073709551616\n", "Execute with no GPU support"),
        ("simd_count 304\ndrm_render_minor 4294967424\n", "Execute with no GPU support"),
    ];
    for (properties, needle) in cases {
        write_file(kfd_properties(&s, 0), properties);
        let mut c = s.cmd();
        c.arg("./pkg/gpu_test");
        pge_checked(&s, &c, &[0], properties).assert_stderr_contains(needle);
    }
}

#[test]
fn ten_thousand_pool_ids_with_busy_slots() {
    let mut s = GpuSandbox::new("hostile-pool");
    s.runfiles.add("ws/pkg/quiet_test", "#!/bin/sh\nexit 0\n", true);
    std::fs::create_dir_all(&s.lock_dir).unwrap();
    let ids: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
    let pool = ids.join(",");
    let _busy: Vec<_> =
        ["0_0", "1_0", "2_0", "3_0", "0_1"].iter().map(|l| hold_lock(s.lock_dir.join(format!("gpulock{l}")))).collect();
    let run = |pool: &str, args: &[&str], codes: &[i32]| {
        let mut c = s.cmd_with_gpus(8, 2);
        c.env("ROCR_VISIBLE_DEVICES", pool).args(args);
        let started = Instant::now();
        let out = pge_checked(&s, &c, codes, &format!("{args:?}"));
        assert!(started.elapsed() < Duration::from_secs(20), "took {:?}\n{}", started.elapsed(), out.explain());
        out
    };

    run(&pool, &["./pkg/gpu_test"], &[0]).assert_stderr_contains("on GPU(s) 4\n");
    run(&pool, &["./pkg/gpu_test", "--num_processes=4"], &[0]).assert_stderr_contains("on GPU(s) 4,5,6,7\n");
    // Slot 0 is busy on GPUs 0-3 and slot 1 on GPU 0: no block of all of them.
    run(&pool, &["--wait=0", "./pkg/quiet_test", "--num_processes=10000"], &[1])
        .assert_stderr_contains("cannot find 10000 free GPU(s)");
    run(&pool, &["--wait=0.3", "./pkg/quiet_test", "--num_processes=10000"], &[1])
        .assert_stderr_contains("within the wait limit of 0.300s");
    run(&pool, &["./pkg/quiet_test", "--num_processes=10001"], &[1])
        .assert_stderr_contains("needs 10001 GPU(s) but the pool holds only 10000 (from ROCR_VISIBLE_DEVICES)");
    // 9,996 locks held at once for one test: it works, or (with a low
    // descriptor limit) fails with one line that says why.
    let out = run(&pool, &["--wait=0", "./pkg/quiet_test", "--num_processes=9996"], &[0, 2]);
    if out.code() == 2 {
        out.assert_stderr_contains("Too many open files");
    } else {
        out.assert_stderr_contains("on GPU(s) 4,5,6,");
    }
    // One bad or repeated id among 10,000 is found and named.
    run(&format!("{pool},../../etc"), &["./pkg/gpu_test"], &[2]).assert_stderr_contains("GPU id '../../etc'");
    run(&format!("{pool},9999"), &["./pkg/gpu_test"], &[2]).assert_stderr_contains("GPU id '9999' is listed twice");
    run(&format!("{pool},{}", "7".repeat(129)), &["./pkg/gpu_test"], &[2]).assert_stderr_contains("is not usable");
}

#[test]
fn random_bytes_as_kfd_properties_files() {
    for seed in 0..rounds() {
        let mut rng = XorShift64::new(seed);
        let mut s = GpuSandbox::new(&format!("hostile-kfd-{seed}"));
        if rng.below(4) != 0 {
            s.sysroot.add_dev_entry("kfd");
        }
        for node in 0..6 {
            let mut bytes = match rng.below(3) {
                0 => {
                    let n = rng.below(3000) as usize;
                    rng.bytes(n)
                }
                _ => {
                    let n = rng.below(3000) as usize;
                    rng.texty_bytes(n)
                }
            };
            if rng.below(3) == 0 {
                // A real-looking node with garbage around it.
                let minor = 128 + node;
                bytes.extend_from_slice(format!("\ngfx_target_version 90402\ndrm_render_minor {minor}\n").as_bytes());
                bytes.extend(rng.texty_bytes(200));
                if rng.below(2) == 0 {
                    write_file(s.sysroot.root.join(format!("dev/dri/renderD{minor}")), "");
                }
            }
            s.sysroot.add_kfd_properties(&bytes);
        }
        let mut c = s.cmd();
        c.arg("./pkg/gpu_test");
        let out = pge_checked(&s, &c, &[0], &format!("seed {seed}"));
        assert!(out.stdout.contains("argc=0"), "seed {seed}: the test did not run\n{}", out.explain());
    }
}

#[test]
fn random_bytes_as_rocminfo_output() {
    for seed in 0..rounds() {
        let mut rng = XorShift64::new(1000 + seed);
        let mut s = GpuSandbox::new(&format!("hostile-rocminfo-{seed}"));
        let output = s.dir.join("rocminfo-output");
        let mut bytes = match rng.below(3) {
            0 => {
                let n = rng.below(200_000) as usize;
                rng.bytes(n)
            }
            _ => {
                let n = rng.below(200_000) as usize;
                rng.texty_bytes(n)
            }
        };
        for _ in 0..rng.below(4) {
            let at = rng.below(bytes.len() as u64 + 1) as usize;
            bytes.splice(at..at, b"\n  Name:                    gfx942\n".iter().copied());
        }
        write_file(&output, &bytes);
        s.runfiles.add("rocm/bin/rocminfo", &format!("#!/bin/sh\ncat '{}'\n", output.display()), true);
        if seed % 2 == 1 {
            s.runfiles.write_manifest();
        }
        let mut c = s.cmd();
        c.arg("./pkg/gpu_test");
        let out = pge_checked(&s, &c, &[0], &format!("seed {seed}"));
        assert!(out.stdout.contains("argc=0"), "seed {seed}: the test did not run\n{}", out.explain());
    }
    // An output listing far more GPUs than any host has is capped, not
    // trusted with an absurd pool.
    let mut s = GpuSandbox::new("hostile-rocminfo-huge");
    let output = s.dir.join("rocminfo-output");
    write_file(&output, "  Name:   gfx90a\n".repeat(100_000));
    s.runfiles.add("rocm/bin/rocminfo", &format!("#!/bin/sh\ncat '{}'\n", output.display()), true);
    let mut c = s.cmd();
    c.arg("./pkg/gpu_test");
    pge_checked(&s, &c, &[0], "100,000 GPU lines").assert_stderr_contains("on GPU(s) 0\n");
}

/// A runfiles tree for sanitizer_wrapper: the binary linked in as
/// `ws/tools/asan_wrapper`, the recording test at `ws/pkg/gpu_test`.
fn sanitizer_sandbox(label: &str) -> GpuSandbox {
    let mut s = GpuSandbox::new(label);
    // A test that needs no PATH (the recording test runs `date`).
    s.runfiles.add("ws/pkg/quiet_test", "#!/bin/sh\nexit 0\n", true);
    let link = s.runfiles.cwd().join("tools/asan_wrapper");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(workspace_bin("sanitizer_wrapper"), &link).unwrap();
    s
}

/// sanitizer_wrapper started as `./tools/asan_wrapper` from the test's
/// working directory, as Bazel runs a `--run_under` wrapper.
fn sanitizer_cmd(s: &GpuSandbox) -> Cmd {
    let mut c = Cmd::new("./tools/asan_wrapper");
    s.runfiles.apply(&mut c);
    c
}

#[test]
fn random_bytes_as_runfiles_manifests() {
    for seed in 0..rounds() {
        let mut rng = XorShift64::new(2000 + seed);
        let s = sanitizer_sandbox(&format!("hostile-manifest-{seed}"));
        let manifest = s.runfiles.srcdir.join("MANIFEST");
        let mut bytes = match rng.below(3) {
            0 => {
                let n = rng.below(100_000) as usize;
                rng.bytes(n)
            }
            _ => {
                let n = rng.below(100_000) as usize;
                rng.texty_bytes(n)
            }
        };
        write_file(&manifest, &bytes);
        let what = |case: &str| format!("seed {seed}: {case}");

        // parallel_gpu_execute: rocminfo is looked for in the manifest (no
        // hardware answers), and a test missing from the tree is looked up in it.
        let mut c = s.cmd();
        c.arg("./pkg/gpu_test");
        pge_checked(&s, &c, &[0], &what("rocminfo lookup")).assert_stderr_contains("Execute with no GPU support");
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", "1").arg("./pkg/not_in_the_tree");
        pge_checked(&s, &c, &[127], &what("test lookup")).assert_stderr_contains("not found: ");

        // sanitizer_wrapper: a suppression list the tree lacks is looked up
        // in the manifest.
        let mut c = sanitizer_cmd(&s);
        c.args(["--asan-suppressions=ws/supp/missing.txt", "./pkg/gpu_test"]);
        pge_checked(&s, &c, &[2], &what("suppressions lookup")).assert_stderr_contains("cannot find runfile");

        // With a real entry among the garbage, both find what it names.
        let real_test = s.dir.join("elsewhere/manifest_test");
        write_executable(&real_test, RECORDING_TEST);
        let supp = s.dir.join("elsewhere/asan_supp.txt");
        write_file(&supp, "leak:foo\n");
        bytes.extend_from_slice(
            format!("\nws/pkg/manifest_test {}\nws/supp/asan.txt {}\n", real_test.display(), supp.display()).as_bytes(),
        );
        bytes.extend(rng.texty_bytes(500));
        write_file(&manifest, &bytes);
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", "1").arg("./pkg/manifest_test");
        let out = pge_checked(&s, &c, &[0], &what("test found in manifest"));
        assert!(out.stdout.contains("argc=0"), "{}", out.explain());
        let mut c = sanitizer_cmd(&s);
        c.args(["--asan-suppressions=ws/supp/asan.txt", "./pkg/gpu_test"]);
        let out = pge_checked(&s, &c, &[0], &what("suppressions found in manifest"));
        assert!(out.stdout.contains(&format!("ASAN_OPTIONS=suppressions={}", supp.display())), "{}", out.explain());
    }
}

#[test]
fn random_bytes_as_the_manifest_of_a_manifest_only_sanitizer_wrapper() {
    for seed in 0..rounds() {
        let mut rng = XorShift64::new(3000 + seed);
        let s = sanitizer_sandbox(&format!("hostile-sw-manifest-{seed}"));
        let manifest = s.dir.join("wrapper.runfiles_manifest");
        let mut bytes = {
            let n = rng.below(60_000) as usize;
            rng.texty_bytes(n)
        };
        write_file(&manifest, &bytes);
        let nowhere = s.dir.join("no-runfiles-dir");
        let cmd = |s: &GpuSandbox| {
            let mut c = sanitizer_cmd(s);
            c.env("RUNFILES_DIR", &nowhere).env("RUNFILES_MANIFEST_FILE", &manifest).arg("./pkg/gpu_test");
            c
        };
        // The configuration file is looked up in the manifest: not there,
        // so nothing is configured and the test runs untouched.
        let out = pge_checked(&s, &cmd(&s), &[0], &format!("seed {seed}: config lookup"));
        assert!(out.stdout.contains("ASAN_OPTIONS unset"), "{}", out.explain());
        // There, but full of random bytes: one line naming the file, or
        // (if the bytes happen to be blank lines and comments) a clean run.
        let conf = s.dir.join("elsewhere/random.conf");
        write_file(&conf, {
            let n = rng.below(5000) as usize;
            rng.texty_bytes(n)
        });
        bytes.extend_from_slice(
            format!("\nws/tools/asan_wrapper.sanitizer_wrapper.conf {}\n", conf.display()).as_bytes(),
        );
        write_file(&manifest, &bytes);
        let out = pge_checked(&s, &cmd(&s), &[0, 2], &format!("seed {seed}: random config"));
        if out.code() == 2 {
            out.assert_stderr_contains(&format!("sanitizer_wrapper: {}:", conf.display()));
        }
    }
}

#[test]
fn random_bytes_as_a_sanitizer_configuration_file() {
    for seed in 0..rounds() * 2 {
        let mut rng = XorShift64::new(4000 + seed);
        let s = sanitizer_sandbox(&format!("hostile-sw-conf-{seed}"));
        let conf = s.runfiles.cwd().join("tools/asan_wrapper.sanitizer_wrapper.conf");
        let bytes = match seed % 3 {
            0 => {
                let n = rng.below(20_000) as usize;
                rng.bytes(n)
            }
            1 => {
                let n = rng.below(20_000) as usize;
                rng.texty_bytes(n)
            }
            // Valid option names with random values, then garbage.
            _ => {
                let mut b = Vec::new();
                for name in ["--asan-options=", "--tsan-suppressions=", "--run-under=", "--symbolizer="] {
                    b.extend_from_slice(name.as_bytes());
                    b.extend(rng.texty_bytes(40).into_iter().filter(|&c| c != b'\n' && c != 0));
                    b.push(b'\n');
                }
                b.extend(rng.texty_bytes(2000));
                b
            }
        };
        write_file(&conf, &bytes);
        let mut c = sanitizer_cmd(&s);
        c.arg("./pkg/gpu_test");
        let out = pge_checked(&s, &c, &[0, 2], &format!("seed {seed}"));
        if out.code() == 2 {
            out.assert_stderr_contains("sanitizer_wrapper: ");
        }
    }
}

#[test]
fn random_arguments_to_every_binary() {
    let s = sanitizer_sandbox("hostile-args");
    let tag_filters = workspace_bin("tag_filters");
    for seed in 0..rounds() * 4 {
        let mut rng = XorShift64::new(5000 + seed);
        let words: Vec<std::ffi::OsString> = (0..rng.below(6))
            .map(|_| {
                let mut w = {
                    let n = rng.below(40) as usize;
                    rng.texty_bytes(n)
                };
                w.retain(|&b| b != 0);
                if rng.below(2) == 0 {
                    w.splice(0..0, *b"--");
                }
                std::os::unix::ffi::OsStringExt::from_vec(w)
            })
            .collect();
        let what = format!("seed {seed}: {words:?}");
        let out = run_checked(s.dir.path(), &s.lock_dir, Cmd::new(&tag_filters).args(&words), &[0, 2], &what);
        if out.code() == 2 {
            out.assert_stderr_contains("tag_filters: ");
        }
        // The wrappers: the random words, then a test that exists. A word
        // that ends the options becomes the test: not found, or not
        // executable (a directory), each one line.
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", "1").args(&words).args(["--", "./pkg/gpu_test"]);
        pge_checked(&s, &c, &[0, 2, 126, 127], &what);
        let mut c = sanitizer_cmd(&s);
        c.args(&words).args(["--", "./pkg/gpu_test"]);
        pge_checked(&s, &c, &[0, 2, 126, 127], &what);
    }
}

#[test]
fn over_long_arguments_paths_and_environment_values() {
    let s = sanitizer_sandbox("hostile-long");
    let arg = "x".repeat(100_000);
    let long_value = "v".repeat(100_000);
    let test = "./pkg/gpu_test";

    // A 100 KB test argument reaches the test whole; the wrapper's one
    // line about it is cut, not split.
    for gpus in ["0", "1"] {
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", gpus).args([test, &arg]);
        let out = pge_checked(&s, &c, &[0], "100 KB argument");
        assert!(out.stdout.contains(&format!("\narg0={arg}\n")), "argument changed\n{}", out.explain());
    }
    let mut c = sanitizer_cmd(&s);
    c.args([&format!("--asan-options={long_value}"), test, &arg]);
    let out = pge_checked(&s, &c, &[0], "100 KB sanitizer options and argument");
    assert!(out.stdout.contains(&format!("\narg0={arg}\n")), "{}", out.explain());
    assert!(out.stdout.contains(&format!("\nASAN_OPTIONS={long_value}\n")), "{}", out.explain());
    let tag_filters = workspace_bin("tag_filters");
    run_checked(s.dir.path(), &s.lock_dir, Cmd::new(&tag_filters).arg(&arg), &[0], "tag_filters, 100 KB argument");
    run_checked(s.dir.path(), &s.lock_dir, Cmd::new(&tag_filters).args(["--strict", &arg]), &[2], "--strict")
        .assert_stderr_contains("--strict: unexpected argument 'xxxx");

    // A 5,000-byte lock directory: no such path can exist; named in the error.
    let dir = format!("/{}", "l".repeat(4999));
    for (flag, var) in [(Some(format!("--lock-dir={dir}")), None), (None, Some(dir.clone()))] {
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", "1");
        if let Some(v) = &var {
            c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", v);
        }
        c.args(flag.iter()).arg(test);
        pge_checked(&s, &c, &[2], "5000-byte lock directory")
            .assert_stderr_contains("lock directory /llll")
            // ENAMETOOLONG: "File name too long" in glibc, "Filename too long" in musl.
            .assert_stderr_contains("name too long (os error 36)");
    }

    // A test path longer than PATH_MAX: not found (127), with its start named.
    let long_test = format!("./{}t", "d/".repeat(2500));
    for gpus in ["0", "1"] {
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", gpus).arg(&long_test);
        pge_checked(&s, &c, &[127], "test path > PATH_MAX").assert_stderr_contains("not found: ./d/d/d/");
    }
    let mut c = sanitizer_cmd(&s);
    c.arg(&long_test);
    pge_checked(&s, &c, &[127], "sanitizer, test path > PATH_MAX").assert_stderr_contains("not found: ./d/d/d/");
    let mut c = sanitizer_cmd(&s);
    c.args([&format!("--asan-suppressions=ws/{}", "s/".repeat(3000)), test]);
    pge_checked(&s, &c, &[2], "suppression path > PATH_MAX").assert_stderr_contains("cannot find runfile ws/s/s/");

    // 100 KB in each variable the wrappers read.
    for var in ["TEST_SRCDIR", "TEST_WORKSPACE", "RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "PATH"] {
        let test = if var == "PATH" { "./pkg/quiet_test" } else { test };
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", "1").env(var, &long_value).arg(test);
        pge_checked(&s, &c, &[0], var);
        let mut c = sanitizer_cmd(&s);
        c.env(var, &long_value).args(["--asan-options=a=1", test]);
        pge_checked(&s, &c, &[0], var);
    }
    let mut c = s.cmd();
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &long_value).arg(test);
    pge_checked(&s, &c, &[0], "long sysroot").assert_stderr_contains("Execute with no GPU support");
    let mut c = s.cmd();
    c.env("TF_GPU_COUNT", "1").env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &long_value).arg(test);
    pge_checked(&s, &c, &[2], "long lock directory variable").assert_stderr_contains("name too long (os error 36)");
    for var in ["ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"] {
        let vendor = if var == "ROCR_VISIBLE_DEVICES" { "rocm" } else { "cuda" };
        let mut c = s.cmd();
        c.env("TF_GPU_COUNT", "1").env("PARALLEL_GPU_EXECUTE_VENDOR", vendor).env(var, &long_value).arg(test);
        pge_checked(&s, &c, &[2], var).assert_stderr_contains("is not usable in a lock file name");
    }
    let mut c = s.cmd();
    c.env("TF_GPU_COUNT", "1").env("PATH", &long_value).arg("gpu_test_not_on_path");
    pge_checked(&s, &c, &[127], "bare name, long PATH").assert_stderr_contains("not found: gpu_test_not_on_path");
    let mut c = sanitizer_cmd(&s);
    c.env("ASAN_OPTIONS", &long_value).args(["--asan-options=a=1", test]);
    let out = pge_checked(&s, &c, &[0], "long ASAN_OPTIONS");
    assert!(out.stdout.contains(&format!("\nASAN_OPTIONS=a=1:{long_value}\n")), "{}", out.explain());
}
