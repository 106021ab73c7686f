//! Contract point 10 (the wrapper's own flags) and the bad-input rules: one
//! line naming the flag or variable and the value, a documented exit code,
//! never a panic, never a file written where it should not be.

mod common;

use common::{Fixture, NOBODY, Record, bin, shared_fixture};
use std::os::unix::fs::{PermissionsExt, symlink};
use test_support::{Cmd, is_root, prerequisite, write_executable, write_file};

#[test]
fn help_and_version() {
    let out = Cmd::new(bin()).arg("--help").run();
    out.assert_success().assert_stdout_contains("usage: parallel_gpu_execute [OPTIONS] [--] TEST [ARGS...]");
    for flag in ["--lock-dir", "--vendor", "--wait", "TF_GPU_COUNT", "TF_TESTS_PER_GPU", "PARALLEL_GPU_EXECUTE_SYSROOT"]
    {
        out.assert_stdout_contains(flag);
    }
    assert_eq!(out.stderr, "");
    let out = Cmd::new(bin()).arg("--version").run();
    out.assert_success().assert_stdout_eq(&format!("parallel_gpu_execute {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn flags_win_over_their_variables() {
    let f = Fixture::new("flagwins");
    let flag_dir = f.dir.join("flag-locks");
    let out = f
        .cmd()
        .env("TF_GPU_COUNT", "1")
        .args([format!("--lock-dir={}", flag_dir.display()).as_str(), "./pkg/gpu_test"])
        .run();
    out.assert_success();
    assert!(flag_dir.join("gpulock0_0").exists(), "{}", out.explain());
    assert!(!f.lock_dir.exists(), "the variable's directory was used");
    // --wait=0 wins over an unlimited variable... and over a long one.
    let _held = test_support::hold_lock(flag_dir.join("gpulock0_0"));
    let out = f
        .cmd()
        .env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1")
        .env("PARALLEL_GPU_EXECUTE_WAIT", "600")
        .args(["--lock-dir", flag_dir.to_str().unwrap(), "--wait", "0", "./pkg/gpu_test"])
        .run();
    out.assert_code(1).assert_one_error_line("waiting is off");
}

#[test]
fn options_end_at_the_test_or_double_dash() {
    let f = Fixture::new("dashdash");
    let r = Record::of(
        f.cmd().env("TF_GPU_COUNT", "1").args(["--", "./pkg/gpu_test", "--wait=x", "--help"]).run().assert_success(),
    );
    assert_eq!(r.args(), ["--wait=x", "--help"]);
    // A test whose name starts with a dash needs `--`.
    let dashed = f.runfiles.cwd().join("-dash_test");
    write_executable(&dashed, test_support::RECORDING_TEST);
    f.cmd().env("TF_GPU_COUNT", "1").args(["--", "-dash_test"]).run().assert_success();
}

/// Runs with `env` set and `args`, expecting one error line and exit 2.
fn bad(f: &Fixture, env: &[(&str, &str)], args: &[&str], needle: &str) {
    let mut c = f.cmd();
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args);
    let out = c.run();
    out.assert_code(2).assert_one_error_line(needle);
    assert!(out.stderr.starts_with("parallel_gpu_execute: "), "{}", out.explain());
    assert!(!f.lock_dir.exists(), "bad input created the lock directory\n{}", out.explain());
}

#[test]
fn bad_numbers_are_named_with_their_value() {
    let f = Fixture::new("badnum");
    let t = ["./pkg/gpu_test"];
    for v in ["abc", "-1", "4097", "99999999999999999999999", "1e3", " 2", "0x10"] {
        bad(
            &f,
            &[("TF_GPU_COUNT", v)],
            &t,
            &format!("TF_GPU_COUNT: invalid value '{v}' (expected an integer from 0 to 4096)"),
        );
    }
    for v in ["0", "1025", "x", "-8"] {
        bad(
            &f,
            &[("TF_GPU_COUNT", "1"), ("TF_TESTS_PER_GPU", v)],
            &t,
            &format!("TF_TESTS_PER_GPU: invalid value '{v}' (expected an integer from 1 to 1024, or auto)"),
        );
    }
    for v in ["-1", "abc", "1e9", "2592001", "1.", "inf"] {
        bad(&f, &[("PARALLEL_GPU_EXECUTE_WAIT", v)], &t, &format!("PARALLEL_GPU_EXECUTE_WAIT: invalid value '{v}'"));
    }
    bad(&f, &[], &["--wait=soon", "./pkg/gpu_test"], "--wait: invalid value 'soon'");
    // Even with no GPU, bad configuration is reported rather than ignored.
    bad(&f, &[("TF_GPU_COUNT", "0"), ("TF_TESTS_PER_GPU", "0")], &t, "TF_TESTS_PER_GPU: invalid value '0'");
}

#[test]
fn bad_vendor_and_usage() {
    let f = Fixture::new("badvendor");
    bad(
        &f,
        &[("PARALLEL_GPU_EXECUTE_VENDOR", "amd")],
        &["./pkg/gpu_test"],
        "PARALLEL_GPU_EXECUTE_VENDOR: invalid value 'amd' (expected rocm, cuda or classic)",
    );
    bad(&f, &[], &["--vendor=nvidia", "./pkg/gpu_test"], "--vendor: invalid value 'nvidia'");
    bad(
        &f,
        &[("PARALLEL_GPU_EXECUTE_VISIBLE", "ROCR")],
        &["./pkg/gpu_test"],
        "PARALLEL_GPU_EXECUTE_VISIBLE: invalid value 'ROCR' (expected hip or rocr)",
    );
    bad(&f, &[], &["--visible=cuda", "./pkg/gpu_test"], "--visible: invalid value 'cuda' (expected hip or rocr)");
    // Checked even where no GPU is found and the setting would not apply.
    bad(&f, &[("TF_GPU_COUNT", "0")], &["--visible=", "./pkg/gpu_test"], "--visible: invalid value ''");
    bad(&f, &[], &[], "no test command given; usage: parallel_gpu_execute");
    bad(&f, &[], &["--wait=1"], "no test command given");
    // A forgotten value: the flag took the test, and the value is named.
    bad(&f, &[], &["--wait", "./pkg/gpu_test"], "--wait: invalid value './pkg/gpu_test' (expected seconds");
    bad(&f, &[], &["--vendor", "./pkg/gpu_test"], "--vendor: invalid value './pkg/gpu_test'");
    bad(&f, &[], &["--lock-dir"], "--lock-dir needs a value");
    bad(&f, &[], &["--lock-dir=", "./pkg/gpu_test"], "--lock-dir: invalid value ''");
    bad(&f, &[], &["--jobs=4", "./pkg/gpu_test"], "unknown option '--jobs=4'");
    bad(&f, &[], &["-\u{1b}[31m", "x"], "unknown option '-\\x1b[31m'");
}

#[test]
fn missing_and_non_executable_tests() {
    let f = Fixture::new("badtest");
    for gpus in ["0", "1"] {
        let out = f.cmd().env("TF_GPU_COUNT", gpus).arg("./pkg/no_such_test").run();
        out.assert_code(127).assert_stderr_contains("not found: ").assert_stderr_contains("no_such_test");
        let plain = f.runfiles.cwd().join("pkg/plain_file");
        write_file(&plain, "not a program");
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = f.cmd().env("TF_GPU_COUNT", gpus).arg("./pkg/plain_file").run();
        out.assert_code(126).assert_stderr_contains("cannot execute: ").assert_stderr_contains("plain_file");
    }
    // A test the runfiles tree has but cannot run is that tree's 126, even
    // where the manifest names a runnable file for it: the tree is looked
    // in first, and only a test missing there is looked up in the manifest.
    let mut f2 = Fixture::new("badtest-manifest");
    let plain = f2.runfiles.cwd().join("pkg/plain_file");
    write_file(&plain, "not a program");
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    f2.runfiles.add_manifest_only("ws/pkg/plain_file", &f2.test_path());
    f2.runfiles.write_manifest();
    let out = f2.cmd().env("TF_GPU_COUNT", "1").arg("./pkg/plain_file").run();
    out.assert_code(126).assert_stderr_contains("cannot execute: ").assert_stderr_contains("plain_file");
    assert!(!out.stdout.contains("argc="), "the manifest's test ran\n{}", out.explain());
    // With a GPU, a missing test fails before any lock is taken.
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg("no-such-program-on-path").run();
    out.assert_code(127).assert_one_error_line("not found: no-such-program-on-path");
    assert!(!f.lock_dir.join("gpulock0_0").exists());
}

/// What only the exec can tell, named as bash names it, with or without a
/// GPU: a `#!` interpreter that does not exist (Windows line endings), an
/// ELF loader that does not, another architecture's ELF (never given to
/// `/bin/sh`), a directory.
#[test]
fn a_test_the_kernel_cannot_start_is_named_for_what_it_lacks() {
    let f = Fixture::new("badexec");
    let pkg = f.runfiles.cwd().join("pkg");
    let exe = |name: &str, bytes: &[u8]| {
        std::fs::write(pkg.join(name), bytes).unwrap();
        std::fs::set_permissions(pkg.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe("crlf_test", b"#!/bin/sh\r\necho ran\r\n");
    // /bin/true, its ELF header's machine made one no kernel (nor binfmt
    // handler such as qemu's) runs.
    let mut elf = std::fs::read("/bin/true").unwrap();
    elf[18..20].copy_from_slice(&0x1234u16.to_le_bytes());
    exe("other_arch_test", &elf);
    // An ELF whose loader is a path that does not exist.
    let mut loaderless = std::fs::read("/bin/true").unwrap();
    let at = loaderless.windows(4).position(|w| w == b"/lib").expect("a dynamic /bin/true");
    loaderless[at + 1..at + 4].copy_from_slice(b"zzz");
    exe("loaderless_test", &loaderless);
    std::fs::create_dir_all(pkg.join("dir_test")).unwrap();
    for gpus in ["0", "1"] {
        let run = |test: &str| f.cmd().env("TF_GPU_COUNT", gpus).arg(format!("./pkg/{test}")).run();
        let out = run("crlf_test");
        out.assert_stderr_contains("parallel_gpu_execute: cannot execute: ");
        out.assert_code(126).assert_stderr_contains(
            "pkg/crlf_test: its #! interpreter '/bin/sh\\x0d' does not exist (its first line ends in a carriage return",
        );
        let out = run("other_arch_test");
        out.assert_code(126).assert_stderr_contains("pkg/other_arch_test: Exec format error");
        let out = run("loaderless_test");
        out.assert_code(127).assert_stderr_contains("pkg/loaderless_test: its ELF loader");
        let out = run("dir_test");
        out.assert_code(126).assert_stderr_contains("pkg/dir_test: Is a directory");
        assert!(!out.stdout.contains("ran"), "{}", out.explain());
    }
}

/// What a lock path that is not a regular file of its own (`what`) does
/// to a test on one GPU: with two slots it is skipped, in one warning line
/// with the repair, and the test runs on the other slot; with one slot
/// nothing is left, and the test is refused (exit 2) in one line, with the
/// repair.
#[track_caller]
fn skipped_then_refused(f: &Fixture, user: Option<u32>, what: &str) {
    let path = f.lock("0", 0);
    let error = format!("refusing lock path {}: it is {what}", path.display());
    // A directory is removed with rmdir.
    let rm = if what.starts_with("a directory") { "rmdir" } else { "rm" };
    let warning =
        format!("warning: {error}: skipping that slot; to repair, its owner or root runs: {rm} {}", path.display());
    let cmd = |slots: &str| {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", slots).arg("./pkg/gpu_test");
        if let Some(uid) = user {
            c.as_user(uid, uid);
        }
        c.timeout(std::time::Duration::from_secs(10));
        c.run()
    };
    let out = cmd("2");
    let r = Record::of(out.assert_success().assert_stderr_contains(&warning));
    assert_eq!(r.get("locks"), Some("gpulock0_1"), "{}", out.explain());
    assert_eq!(out.stderr.matches("warning:").count(), 1, "{}", out.explain());
    let out = cmd("1");
    out.assert_code(2).assert_one_error_line(&format!(
        "parallel_gpu_execute: {error}: no slot this test could take is left; to repair, its owner or root runs: {rm} {} (while no test runs)\n",
        path.display()
    ));
}

#[test]
fn a_symlink_at_a_lock_path_is_refused_and_its_target_untouched() {
    let f = Fixture::new("symlink");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let canary = f.dir.join("canary");
    write_file(&canary, "precious");
    symlink(&canary, f.lock("0", 0)).unwrap();
    skipped_then_refused(&f, None, "a symbolic link, not a regular file");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "precious");
    // A dangling symlink is refused too, and nothing is created through it.
    let target = f.dir.join("would-be-created");
    std::fs::remove_file(f.lock("0", 0)).unwrap();
    symlink(&target, f.lock("0", 0)).unwrap();
    f.cmd().env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("./pkg/gpu_test").run().assert_code(2);
    assert!(!target.exists(), "a file was created through the symlink");
}

#[test]
fn a_directory_or_fifo_at_a_lock_path_is_refused() {
    let f = Fixture::new("notregular");
    std::fs::create_dir_all(f.lock("0", 0)).unwrap();
    skipped_then_refused(&f, None, "a directory, not a regular file");
    std::fs::remove_dir(f.lock("0", 0)).unwrap();
    let fifo = std::ffi::CString::new(f.lock("0", 0).to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    skipped_then_refused(&f, None, "a FIFO, not a regular file");
    // Also where this user may only read it: the read-only retry does not
    // block on the FIFO either.
    if prerequisite(is_root(), "root", "a FIFO another user may only read") {
        let g = shared_fixture("fifo-readonly");
        std::fs::create_dir_all(&g.lock_dir).unwrap();
        std::fs::set_permissions(&g.lock_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = std::ffi::CString::new(g.lock("0", 0).to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        skipped_then_refused(&g, Some(NOBODY), "a FIFO, not a regular file");
    }
    // Device nodes (/dev/null's numbers, and the first loop device's).
    if prerequisite(is_root(), "root", "device nodes at a lock path (mknod)") {
        for (kind, (major, minor), what) in
            [(libc::S_IFCHR, (1, 3), "a character device"), (libc::S_IFBLK, (7, 0), "a block device")]
        {
            std::fs::remove_file(f.lock("0", 0)).unwrap();
            std::fs::remove_file(f.lock("0", 1)).unwrap();
            // SAFETY: mknod with a valid path; the nodes are opened, never read or written.
            assert_eq!(unsafe { libc::mknod(fifo.as_ptr(), kind | 0o600, libc::makedev(major, minor)) }, 0);
            skipped_then_refused(&f, None, &format!("{what}, not a regular file"));
        }
    }
}

/// Two lock files that are one file (a hard link between them, their
/// owner's `ln`): a 2-GPU test would hold the first and wait on its own
/// lock for the second without end. The second is skipped, said once, and
/// with no other block the test is refused at once (exit 2); a build
/// without the change waited out its limit (exit 1). A hard link from a
/// lock file to a name that is no lock file's changes nothing: the test
/// runs, unsaid.
#[test]
fn lock_files_that_are_one_file_are_skipped_and_a_link_elsewhere_is_nothing() {
    let f = Fixture::new("hardlink");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    write_file(f.lock("0", 0), "");
    std::fs::hard_link(f.lock("0", 0), f.lock("1", 0)).unwrap();
    let two = |f: &Fixture, gpus: &str| {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", gpus).env("TF_TESTS_PER_GPU", "1").timeout(std::time::Duration::from_secs(20));
        c.args(["--wait=5", "./pkg/gpu_test", "--num_processes=2"]).run()
    };
    let out = two(&f, "2");
    out.assert_code(2);
    let error =
        format!("refusing lock path {}: it is a hard link to another lock file of its block", f.lock("1", 0).display());
    // One line: the error, what follows, and the repair.
    out.assert_one_error_line(&format!(
        "parallel_gpu_execute: {error}: no slot this test could take is left; to repair, its owner or root runs: rm {} (while no test runs)\n",
        f.lock("1", 0).display()
    ));
    // The other name removed: the block is the test's.
    std::fs::remove_file(f.lock("1", 0)).unwrap();
    let r = Record::of(two(&f, "2").assert_success());
    assert_eq!(r.locks(), ["gpulock0_0", "gpulock1_0"]);
    // A second name outside the lock files.
    let g = Fixture::new("hardlink-other");
    std::fs::create_dir_all(&g.lock_dir).unwrap();
    write_file(g.lock("0", 0), "");
    std::fs::hard_link(g.lock("0", 0), g.lock_dir.join("elsewhere")).unwrap();
    let out = g.cmd().env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0"], "{}", out.explain());
    assert!(!out.stderr.contains("warning"), "{}", out.explain());
    // Such a link to a lock file this user may not open is said as that,
    // never as a link between lock files.
    if prerequisite(is_root(), "root", "a linked lock file another user may not open") {
        let h = shared_fixture("hardlink-unopenable");
        std::fs::create_dir_all(&h.lock_dir).unwrap();
        std::fs::set_permissions(&h.lock_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        write_file(h.lock("0", 0), "");
        std::fs::set_permissions(h.lock("0", 0), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(h.lock("0", 0), h.lock_dir.join("backup")).unwrap();
        let mut c = h.cmd();
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").as_user(NOBODY, NOBODY);
        let out = c.arg("./pkg/gpu_test").run();
        out.assert_code(2).assert_stderr_contains("cannot open lock file");
        assert!(!out.stderr.contains("hard link"), "{}", out.explain());
    }
}

#[test]
fn a_lock_directory_that_cannot_be_created_names_its_cause() {
    let f = Fixture::new("nodir");
    let file = f.dir.join("a-file");
    write_file(&file, "");
    let dir = file.join("locks");
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg(format!("--lock-dir={}", dir.display())).arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line(&format!(
        "lock directory {}: cannot open it: Not a directory (os error 20) (a part of its path is a file, not a directory)",
        dir.display(),
    ));
    assert!(!out.stderr.contains("Bazel"), "not Bazel's doing\n{}", out.explain());
    // The lock directory's path itself a file: the same line, and no test.
    let out =
        f.cmd().env("TF_GPU_COUNT", "1").arg(format!("--lock-dir={}", file.display())).arg("./pkg/gpu_test").run();
    out.assert_code(2)
        .assert_one_error_line(&format!("lock directory {}: cannot open it: Not a directory", file.display()));
}

#[test]
fn an_unwritable_lock_directory_is_a_clear_error() {
    if !prerequisite(is_root(), "root", "running the wrapper as another user") {
        return;
    }
    // No lock file exists yet, and nobody cannot create one.
    let f = shared_fixture("unwritable");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = f.cmd().env("TF_GPU_COUNT", "1").as_user(NOBODY, NOBODY).arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line(&format!(
        "cannot create lock file {}: Permission denied (os error 13) ({d} is uid 0's, mode 0755, and this user is uid 65534: its owner or root runs chmod 1777 {d}, or make the lock files beforehand)",
        f.lock_dir.join("gpulock0_0").display(),
        d = f.lock_dir.display()
    ));
    assert!(!out.stderr.contains("Bazel"), "not Bazel's doing\n{}", out.explain());
}

#[test]
fn lock_files_precreated_by_another_user_still_work() {
    if !prerequisite(is_root(), "root", "running the wrapper as another user") {
        return;
    }
    let f = shared_fixture("otheruser");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    for name in ["gpulock0_0", "gpulock.queue"] {
        let p = f.lock_dir.join(name);
        write_file(&p, "");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // The directory is not writable for nobody, so nothing can be created:
    // the read-only opens of the existing files are all it needs.
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = f.cmd().env("TF_GPU_COUNT", "1").as_user(NOBODY, NOBODY).arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0"]);
    assert_eq!(std::fs::metadata(f.lock("0", 0)).unwrap().len(), 0, "never written");
}
