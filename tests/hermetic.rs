//! Each static binary runs in an empty root, as on a remote-execution worker
//! whose image has nothing but what the action brings: the test `chroot`s
//! into a directory holding only the binaries and a static test program
//! (no `/bin/sh`, no `/proc`, no `/sys`, no `/dev`, no `/var/lock`, no
//! dynamic loader) and runs parallel_gpu_execute with a GPU count and with
//! none, sanitizer_wrapper with options and a suppression file, and
//! tag_filters.
//!
//! `chroot` needs root; run as another user, the test fails under `CI=true`
//! and says what it did not check elsewhere (`test_support::prerequisite`).
//! It also needs a C compiler with a static libc (`cc -static`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use test_support::{TempDir, compile_c, copy_executable, elf_interpreter, is_root, workspace_bin, write_file};

/// Prints its argv, the variables the wrappers set, and whether it holds
/// a GPU lock descriptor, then exits 0.
const TEST_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>

static void show(const char *name) {
    const char *v = getenv(name);
    printf("%s=%s\n", name, v ? v : "(unset)");
}

int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++) printf("argv[%d]=%s\n", i, argv[i]);
    show("ROCR_VISIBLE_DEVICES");
    show("HIP_VISIBLE_DEVICES");
    show("CUDA_VISIBLE_DEVICES");
    show("ASAN_OPTIONS");
    int open_fds = 0;
    for (int fd = 3; fd < 64; fd++) if (fcntl(fd, F_GETFD) != -1) open_fds++;
    printf("inherited_fds=%d\n", open_fds);
    return 0;
}
"#;

/// Builds the root: `/bin/<binaries>` (copies of the built, static
/// executables), `/test` (static C), `/supp/asan.txt`. Nothing else.
fn build_root(dir: &TempDir) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    for name in ["parallel_gpu_execute", "sanitizer_wrapper", "tag_filters"] {
        let built = workspace_bin(name);
        let copy = root.join("bin").join(name);
        copy_executable(&built, &copy);
        assert_eq!(elf_interpreter(&copy), Ok(None), "{} is not static: it asks for a loader", built.display());
    }
    let source = dir.join("test.c");
    write_file(&source, TEST_PROGRAM);
    let test = root.join("test");
    compile_c(&["-static", "-O1"], &source, &test);
    assert_eq!(elf_interpreter(&test), Ok(None), "the test program is not static");
    write_file(root.join("supp/asan.txt"), "leak:libfoo\n");
    root
}

/// Runs `program args` chrooted into `root`, from `/`, with exactly `env`.
fn run_in(root: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let root_c = std::ffi::CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().envs(env.iter().copied());
    // SAFETY: between fork and exec only chroot(2) and chdir(2) run, both
    // async-signal-safe, on a C string prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chroot(root_c.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("run {program} in {}: {e}", root.display()));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[track_caller]
fn expect(run: (i32, String, String), stdout_has: &[&str], stderr: &str) {
    let (code, out, err) = run;
    let explain = format!("exit {code}\n--- stdout ---\n{out}--- stderr ---\n{err}");
    assert_eq!(code, 0, "{explain}");
    for needle in stdout_has {
        assert!(out.contains(needle), "stdout lacks {needle:?}\n{explain}");
    }
    assert_eq!(err, stderr, "{explain}");
}

#[test]
fn each_static_binary_runs_in_an_empty_root() {
    if !test_support::prerequisite(is_root(), "root", "the static binaries in an empty root (chroot)") {
        return;
    }
    let dir = TempDir::new("hermetic");
    let root = build_root(&dir);
    let listing = |root: &Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(listing(&root), ["bin", "supp", "test"], "the root holds more than it should");

    // Descriptors the test inherits from this process itself (cargo's
    // jobserver, for one): the wrappers' own are counted on top of them.
    let (code, out, _) = run_in(&root, "/test", &[], &[]);
    assert_eq!(code, 0, "{out}");
    let base: usize = out.split("inherited_fds=").nth(1).unwrap().trim().parse().unwrap();
    let fds = |extra: usize| format!("inherited_fds={}\n", base + extra);

    // A GPU slot: the lock directory is created, the test holds its lock.
    // This empty root is the action's own (TEST_SRCDIR under /bazel-out),
    // and /locks is on its mount: one action at a time runs here, warned.
    expect(
        run_in(
            &root,
            "/bin/parallel_gpu_execute",
            &["--lock-dir=/locks", "/test", "a b"],
            &[
                ("TF_GPU_COUNT", "2"),
                ("PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR", "run"),
                ("TEST_SRCDIR", "//bazel-out/k8-fastbuild/bin/test.runfiles"),
            ],
        ),
        &["argv[0]=/test\n", "argv[1]=a b\n", "CUDA_VISIBLE_DEVICES=0\n", "HIP_VISIBLE_DEVICES=0\n", &fds(1)],
        "parallel_gpu_execute: warning: lock directory /locks is inside this action's own root (TEST_SRCDIR is under /bazel-out), so it coordinates with no other test: tests running at once here may get the same GPU; mount the host's lock directory there in the worker (or set --lock-dir to one the worker mounts from the host), or run one action per GPU there\nRunning test /test a b on GPU(s) 0\n",
    );
    assert!(root.join("locks/gpulock0_0").is_file(), "no lock file in /locks");
    // Relative test and the rocm pool, as Bazel runs it (with no runfiles).
    expect(
        run_in(
            &root,
            "/bin/parallel_gpu_execute",
            &["--lock-dir=/locks", "--vendor=rocm", "./test", "--num_processes=2"],
            &[("TF_GPU_COUNT", "2"), ("ROCR_VISIBLE_DEVICES", "0,1")],
        ),
        &["ROCR_VISIBLE_DEVICES=0,1\n", "HIP_VISIBLE_DEVICES=0,1\n", &fds(2)],
        "Running test ./test --num_processes=2 on GPU(s) 0,1\n",
    );
    // No GPU source at all (no /sys, /proc, /dev, no rocminfo): exec as is.
    expect(
        run_in(&root, "/bin/parallel_gpu_execute", &["/test", "x"], &[]),
        &["argv[0]=/test\n", "argv[1]=x\n", "CUDA_VISIBLE_DEVICES=(unset)\n", &fds(0)],
        "Execute with no GPU support\n",
    );
    // Sanitizer options and an absolute suppression file inside the root.
    expect(
        run_in(
            &root,
            "/bin/sanitizer_wrapper",
            &["--asan-options=x=1", "--asan-suppressions=/supp/asan.txt", "/test"],
            &[],
        ),
        &["ASAN_OPTIONS=x=1:suppressions=/supp/asan.txt\n"],
        "",
    );
    expect(run_in(&root, "/bin/sanitizer_wrapper", &["/test", "y"], &[]), &["argv[1]=y\n"], "");
    // Chained: sanitizer_wrapper -> parallel_gpu_execute -> test.
    expect(
        run_in(
            &root,
            "/bin/sanitizer_wrapper",
            &["--asan-options=x=1", "--run-under=/bin/parallel_gpu_execute", "/test"],
            &[("TF_GPU_COUNT", "1"), ("PARALLEL_GPU_EXECUTE_LOCK_DIR", "/locks")],
        ),
        &["ASAN_OPTIONS=x=1\n", "CUDA_VISIBLE_DEVICES=0\n"],
        "Running test /test on GPU(s) 0\n",
    );
    expect(run_in(&root, "/bin/tag_filters", &["--config=ci_single_gpu"], &[]), &["-no_gpu,", "gpu"], "");
    assert_eq!(listing(&root), ["bin", "locks", "supp", "test"], "something was written outside /locks");
}
