//! The pass-through paths allocate nothing from process start to exec.
//!
//! The release binaries are static, and a static binary's `malloc` cannot be
//! interposed, so this test builds a dynamically linked copy of the two exec
//! wrappers (same sources, `-C target-feature=-crt-static`, a separate target
//! directory) and runs it with `tests/alloc_count/alloc_count.c` preloaded:
//! that library counts every allocation call and records the count when the
//! process calls `execve`.
//!
//! Checked: parallel_gpu_execute when no GPU is found (no source at all,
//! `TF_GPU_COUNT=0`, a KFD topology without a usable GPU (its render node
//! missing, or present without `/dev/kfd`, which warns), an NVIDIA directory
//! that is empty, a rocminfo that lists none, a GPU that
//! `ROCR_VISIBLE_DEVICES`/`CUDA_VISIBLE_DEVICES` hides), and sanitizer_wrapper with no
//! options and no configuration. And, so that the counter itself is known to
//! work, paths that do allocate must show a non-zero count.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use test_support::{Cmd, RECORDING_TEST, Runfiles, Sysroot, TempDir, compile_c, fake_rocminfo_script, read_to_string};

struct Instrumented {
    parallel_gpu_execute: PathBuf,
    sanitizer_wrapper: PathBuf,
    preload: PathBuf,
}

/// Builds the dynamic binaries and the preload library once per test run.
fn instrumented() -> &'static Instrumented {
    static BUILT: OnceLock<Instrumented> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target_dir = root.join("target/alloc-check");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let triple = "x86_64-unknown-linux-gnu";
        let status = Command::new(&cargo)
            .current_dir(root)
            .args(["build", "--offline", "--locked", "-p", "parallel_gpu_execute", "-p", "sanitizer_wrapper"])
            .args(["--target", triple, "--target-dir"])
            .arg(&target_dir)
            .env("RUSTFLAGS", "-C target-feature=-crt-static")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("run cargo build for the dynamically linked copies");
        assert!(status.success(), "building the dynamically linked copies failed");
        let bins = target_dir.join(triple).join("debug");
        let preload = target_dir.join("liballoc_count.so");
        let source = root.join("tests/alloc_count/alloc_count.c");
        compile_c(&["-shared", "-fPIC", "-O1"], &source, &preload);
        Instrumented {
            parallel_gpu_execute: bins.join("parallel_gpu_execute"),
            sanitizer_wrapper: bins.join("sanitizer_wrapper"),
            preload,
        }
    })
}

/// Runs `cmd` with the counter preloaded; returns the allocation count the
/// wrapper process had at its `execve` of `expect_exec` (or at exit).
fn allocations(dir: &TempDir, mut cmd: Cmd, expect_exec: &str) -> u64 {
    let report = dir.join(format!("allocs-{}", rand_suffix()));
    cmd.env("LD_PRELOAD", &instrumented().preload).env("ALLOC_COUNT_FILE", &report);
    let running = cmd.spawn();
    let pid = running.pid().to_string();
    let out = running.wait();
    let text = read_to_string(&report);
    let line = text
        .lines()
        .find(|l| l.split(' ').next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("no report from pid {pid}: {text:?}\n{}", out.explain()));
    let fields: Vec<&str> = line.splitn(4, ' ').collect();
    assert_eq!(fields[1], "execve", "the wrapper did not exec: {line:?}\n{}", out.explain());
    assert!(fields[3].ends_with(expect_exec), "exec'd {:?}, expected {expect_exec:?}\n{}", fields[3], out.explain());
    fields[2].parse().unwrap()
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A runfiles tree with a recording test; the wrapper's command line.
fn setup(label: &str) -> (TempDir, Runfiles, Sysroot) {
    let dir = TempDir::new(label);
    let mut runfiles = Runfiles::new(&dir, "ws");
    runfiles.add("ws/pkg/gpu_test", RECORDING_TEST, true);
    let sysroot = Sysroot::new(&dir);
    (dir, runfiles, sysroot)
}

fn pge(runfiles: &Runfiles, sysroot: &Sysroot, lock_dir: &Path) -> Cmd {
    let mut c = Cmd::new(&instrumented().parallel_gpu_execute);
    runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", lock_dir);
    c.args(["--wait=5", "./pkg/gpu_test", "--gtest_filter=*"]);
    c
}

#[test]
fn parallel_gpu_execute_without_a_gpu_allocates_nothing() {
    let (dir, mut runfiles, mut sysroot) = setup("alloc-pge");
    let locks = dir.join("locks");

    // No source answers at all.
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "no GPU source");

    // TF_GPU_COUNT=0.
    let mut c = pge(&runfiles, &sysroot, &locks);
    c.env("TF_GPU_COUNT", "0");
    assert_eq!(allocations(&dir, c, "./pkg/gpu_test"), 0, "TF_GPU_COUNT=0");

    // The jax profile with JAX_ACCELERATOR_COUNT=0 and its default lock
    // directory, which is built from $USER only when a lock is looked for.
    let mut c = pge(&runfiles, &sysroot, &locks);
    c.env_remove("PARALLEL_GPU_EXECUTE_LOCK_DIR").env("PARALLEL_GPU_EXECUTE_PROFILE", "jax");
    c.env("JAX_ACCELERATOR_COUNT", "0").env("USER", "alloc-test");
    assert_eq!(allocations(&dir, c, "./pkg/gpu_test"), 0, "jax profile, JAX_ACCELERATOR_COUNT=0");

    // An empty NVIDIA directory and no device nodes.
    std::fs::create_dir_all(sysroot.root.join("proc/driver/nvidia/gpus")).unwrap();
    std::fs::create_dir_all(sysroot.root.join("dev")).unwrap();
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "empty NVIDIA");

    // A rocminfo in the runfiles that lists no GPU, found by walking the tree
    // and then through the manifest.
    runfiles.add("rocm/bin/rocminfo", &fake_rocminfo_script(0), true);
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "rocminfo, tree walk");
    runfiles.write_manifest();
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "rocminfo, manifest");
    // One that fails and says why on stdout, in colour: the warning and its
    // last lines are formatted on the stack.
    runfiles.add(
        "rocm/bin/rocminfo",
        "#!/bin/sh\nprintf '\\033[31mUnable to open /dev/kfd read-write: Permission denied\\n\\033[0m'\nexit 8\n",
        true,
    );
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "rocminfo failing");

    // A KFD topology whose GPU this container cannot open.
    sysroot.add_kfd_cpu();
    sysroot.add_kfd_gpu_raw(128, false);
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "KFD without access");
    // Its render node given, but not /dev/kfd: the warning is formatted on
    // the stack too.
    sysroot.add_render_node(128);
    sysroot.remove_dev_entry("kfd");
    let c = pge(&runfiles, &sysroot, &locks);
    let out = c.run();
    out.assert_success().assert_stderr_contains("/dev/kfd does not exist here");
    assert_eq!(allocations(&dir, pge(&runfiles, &sysroot, &locks), "./pkg/gpu_test"), 0, "KFD without /dev/kfd");

    // A usable GPU, hidden by the pool variable: set and empty, or -1.
    sysroot.add_render_node(128);
    let mut c = pge(&runfiles, &sysroot, &locks);
    c.env("ROCR_VISIBLE_DEVICES", "");
    let out = c.run();
    out.assert_success().assert_stderr_contains("(ROCR_VISIBLE_DEVICES hides every GPU)");
    let mut c = pge(&runfiles, &sysroot, &locks);
    c.env("ROCR_VISIBLE_DEVICES", "");
    assert_eq!(allocations(&dir, c, "./pkg/gpu_test"), 0, "ROCR_VISIBLE_DEVICES empty");
    let mut c = pge(&runfiles, &sysroot, &locks);
    c.env("TF_GPU_COUNT", "1").env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda").env("CUDA_VISIBLE_DEVICES", "-1");
    assert_eq!(allocations(&dir, c, "./pkg/gpu_test"), 0, "CUDA_VISIBLE_DEVICES=-1");
    assert!(!locks.exists());
}

#[test]
fn sanitizer_wrapper_pass_through_allocates_nothing() {
    let (dir, runfiles, _) = setup("alloc-san");
    let mut c = Cmd::new(&instrumented().sanitizer_wrapper);
    runfiles.apply(&mut c);
    c.args(["./pkg/gpu_test", "--gtest_filter=*"]);
    assert_eq!(allocations(&dir, c, "./pkg/gpu_test"), 0);
}

#[test]
fn the_counter_sees_allocations_where_there_are_some() {
    let (dir, runfiles, sysroot) = setup("alloc-control");
    // Taking a slot builds a new environment: that allocates.
    let mut c = pge(&runfiles, &sysroot, &dir.join("locks"));
    c.env("TF_GPU_COUNT", "1");
    assert!(allocations(&dir, c, "/pkg/gpu_test") > 0, "the lock path must show allocations");
    let mut c = Cmd::new(&instrumented().sanitizer_wrapper);
    runfiles.apply(&mut c);
    c.args(["--asan-options=detect_leaks=0", "./pkg/gpu_test"]);
    assert!(allocations(&dir, c, "./pkg/gpu_test") > 0, "setting ASAN_OPTIONS must show allocations");
}
