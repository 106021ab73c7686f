//! Every failure: one line on stderr starting with `sanitizer_wrapper: `,
//! the documented exit code, and the test not started.

mod common;

use common::{ManifestOnly, TEST, Tree, assert_test_not_run, bin};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use test_support::{Cmd, TempDir, write_file};

#[test]
fn unresolved_files_in_a_runfiles_tree() {
    let tree = Tree::new("sw-err-tree");
    let srcdir = tree.rf.srcdir.display();
    let manifest = tree.rf.write_manifest();
    for option in ["--asan-suppressions", "--lsan-suppressions", "--tsan-suppressions", "--symbolizer", "--run-under"] {
        let out = tree.cmd().arg(format!("{option}=ws/missing/file")).arg(TEST).run();
        out.assert_code(2).assert_one_error_line(&format!(
            "sanitizer_wrapper: {option}: cannot find runfile ws/missing/file \
             (looked for {srcdir}/ws/missing/file and in manifest {})",
            manifest.display()
        ));
        assert_test_not_run(&out);
    }
}

#[test]
fn unresolved_file_in_a_tree_without_manifest() {
    let tree = Tree::new("sw-err-no-manifest");
    let out = tree.cmd().args(["--symbolizer=llvm/bin/llvm-symbolizer", TEST]).run();
    out.assert_code(2).assert_one_error_line(&format!(
        "sanitizer_wrapper: --symbolizer: cannot find runfile llvm/bin/llvm-symbolizer (looked for {}/llvm/bin/llvm-symbolizer; no manifest)",
        tree.rf.srcdir.display()
    ));
    assert_test_not_run(&out);
}

#[test]
fn unresolved_file_in_a_manifest_only_layout() {
    let layout = ManifestOnly::new("sw-err-manifest");
    let nowhere = layout.dir.join("no-such-runfiles");
    let out = layout.cmd().env("RUNFILES_DIR", &nowhere).arg("--tsan-suppressions=ws/t.txt").arg(layout.test()).run();
    out.assert_code(2).assert_one_error_line(&format!(
        "sanitizer_wrapper: --tsan-suppressions: cannot find runfile ws/t.txt (looked for {}/ws/t.txt and in manifest {})",
        nowhere.display(),
        layout.manifest.display()
    ));
    assert_test_not_run(&out);
}

#[test]
fn manifest_entry_naming_a_missing_file() {
    let mut layout = ManifestOnly::new("sw-err-dangling");
    let gone = layout.add_dangling("ws/supp/asan.txt");
    let out = layout.cmd().arg("--asan-suppressions=ws/supp/asan.txt").arg(layout.test()).run();
    out.assert_code(2).assert_one_error_line(&format!(
        "sanitizer_wrapper: --asan-suppressions: runfile ws/supp/asan.txt is {} in manifest {}, which does not exist",
        gone.display(),
        layout.manifest.display()
    ));
    assert_test_not_run(&out);
}

#[test]
fn no_runfiles_at_all() {
    // Started through PATH, argv[0] names no place for runfiles either.
    let dir = TempDir::new("sw-err-none");
    let bin_dir = std::path::Path::new(bin()).parent().unwrap();
    let test = dir.join("t");
    test_support::write_executable(&test, test_support::RECORDING_TEST);
    let out = Cmd::new("sanitizer_wrapper")
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .arg("--asan-suppressions=ws/a.txt")
        .arg(&test)
        .run();
    out.assert_code(2).assert_one_error_line(
        "sanitizer_wrapper: --asan-suppressions: cannot find runfile ws/a.txt (no runfiles directory or manifest)",
    );
    assert_test_not_run(&out);
}

#[test]
fn missing_absolute_path() {
    let tree = Tree::new("sw-err-absolute");
    let out = tree.cmd().args(["--lsan-suppressions=/no/such/lsan.txt", TEST]).run();
    out.assert_code(2)
        .assert_one_error_line("sanitizer_wrapper: --lsan-suppressions: /no/such/lsan.txt does not exist");
    assert_test_not_run(&out);
}

#[test]
fn first_unresolved_file_is_the_one_reported() {
    let tree = Tree::new("sw-err-first");
    let out = tree.cmd().args(["--run-under=ws/a", "--tsan-suppressions=ws/b", "--symbolizer=ws/c", TEST]).run();
    out.assert_code(2).assert_one_error_line("sanitizer_wrapper: --tsan-suppressions: cannot find runfile ws/b");
}

#[test]
fn bad_options() {
    let tree = Tree::new("sw-err-options");
    let usage = "usage: sanitizer_wrapper [OPTIONS] [--] TEST [ARGS...] (see --help)";
    for (args, message) in [
        (&["--asan-option=x", TEST][..], "unknown option '--asan-option=x'"),
        (&["-x", TEST], "unknown option '-x'"),
        (&["--symbolizer"], "--symbolizer needs a value"),
        (&["--asan-options=a=1"], "no test command given"),
        (&[], "no test command given"),
        (&["--"], "no test command given"),
    ] {
        let out = tree.cmd().args(args).run();
        out.assert_code(2).assert_one_error_line(&format!("sanitizer_wrapper: {message}; {usage}"));
        assert_test_not_run(&out);
    }
}

#[test]
fn test_not_found() {
    let tree = Tree::new("sw-err-127");
    let out = tree.cmd().arg("./pkg/no_such_test").run();
    out.assert_code(127).assert_one_error_line("sanitizer_wrapper: not found: ./pkg/no_such_test: ");
    let out = tree.cmd().args(["--asan-options=a=1", "no-such-program-anywhere"]).run();
    out.assert_code(127).assert_one_error_line("sanitizer_wrapper: not found: no-such-program-anywhere");
}

#[test]
fn test_not_executable() {
    let mut tree = Tree::new("sw-err-126");
    let real = tree.rf.add("ws/pkg/data_test", "#!/bin/sh\n", false);
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = tree.cmd().arg("./pkg/data_test").run();
    out.assert_code(126).assert_one_error_line("sanitizer_wrapper: cannot execute: ./pkg/data_test: ");
    let out = tree.cmd().arg("./pkg").run();
    out.assert_code(126).assert_one_error_line("sanitizer_wrapper: cannot execute: ./pkg: ");
}

#[test]
fn unquotable_path() {
    let tree = Tree::new("sw-err-quote");
    let file = tree.dir.join("a'b\"c d.txt");
    write_file(&file, "");
    let out = tree.cmd().arg(format!("--asan-suppressions={}", file.display())).arg(TEST).run();
    out.assert_code(2).assert_one_error_line("so no sanitizer option can carry it");
    assert_test_not_run(&out);
}

fn make_fifo(path: &Path) {
    let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}

/// A suppression list that is a directory, a FIFO, a device or a socket is one line and
/// exit 2 before the test starts: the sanitizer runtime would fail on it (or
/// block reading the FIFO) only once the test runs.
#[test]
fn a_suppression_list_that_is_not_a_regular_file() {
    let tree = Tree::new("sw-err-not-a-file");
    let dir = tree.rf.srcdir.join("ws/supp");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = tree.dir.join("tsan.fifo");
    make_fifo(&fifo);
    // A runfile as Bazel lays it out: a symlink in the tree to the real file.
    let fifo_runfile = tree.rf.srcdir.join("ws/tsan.supp");
    symlink(&fifo, &fifo_runfile).unwrap();
    let socket = tree.dir.join("asan.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind a Unix socket");
    let not_a_file = |what: &str| format!("{what}, not a regular file");
    let mut cases = vec![
        (
            "--asan-suppressions=ws/supp".to_string(),
            not_a_file(&format!("--asan-suppressions: runfile ws/supp is {}, a directory", dir.display())),
        ),
        (
            format!("--lsan-suppressions={}", dir.display()),
            not_a_file(&format!("--lsan-suppressions: {} is a directory", dir.display())),
        ),
        (
            format!("--tsan-suppressions={}", fifo.display()),
            not_a_file(&format!("--tsan-suppressions: {} is a FIFO", fifo.display())),
        ),
        (
            "--tsan-suppressions=ws/tsan.supp".to_string(),
            not_a_file(&format!("--tsan-suppressions: runfile ws/tsan.supp is {}, a FIFO", fifo_runfile.display())),
        ),
        (
            "--asan-suppressions=/dev/null".to_string(),
            not_a_file("--asan-suppressions: /dev/null is a character device"),
        ),
        (
            format!("--asan-suppressions={}", socket.display()),
            not_a_file(&format!("--asan-suppressions: {} is a socket", socket.display())),
        ),
    ];
    let block = tree.dir.join("lsan.blk");
    if test_support::prerequisite(test_support::is_root(), "root", "a block device as a suppression list (mknod)") {
        let c_path = CString::new(block.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call; the device
        // numbers (7, 250: a loop device) are never opened.
        let rc = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 250)) };
        assert_eq!(rc, 0, "mknod {}: {}", block.display(), std::io::Error::last_os_error());
        cases.push((
            format!("--lsan-suppressions={}", block.display()),
            not_a_file(&format!("--lsan-suppressions: {} is a block device", block.display())),
        ));
    }
    for (arg, message) in cases {
        let out = tree.cmd().arg(&arg).arg(TEST).run();
        out.assert_code(2).assert_one_error_line(&format!("sanitizer_wrapper: {message}"));
        assert_eq!(out.stderr, format!("sanitizer_wrapper: {message}\n"), "{}", out.explain());
        assert_test_not_run(&out);
    }
}

/// The same from the configuration file the Bazel macro writes.
#[test]
fn a_configured_suppression_list_that_is_a_directory() {
    let tree = Tree::new("sw-err-conf-dir");
    let dir = tree.rf.srcdir.join("ws/supp");
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = tree.link_wrapper("ws/pkg/asan_wrapper");
    tree.conf_beside("ws/pkg/asan_wrapper", "--asan-options=detect_leaks=1\n--lsan-suppressions=ws/supp\n");
    let mut cmd = Cmd::new(&wrapper);
    tree.rf.apply(&mut cmd);
    let out = cmd.arg(TEST).run();
    out.assert_code(2).assert_one_error_line(&format!(
        "sanitizer_wrapper: --lsan-suppressions: runfile ws/supp is {}, a directory, not a regular file",
        dir.display()
    ));
    assert_test_not_run(&out);
}

/// A manifest that is missing, or a directory, is said as such where a
/// configured file is not found, not only named as looked in.
#[test]
fn a_manifest_that_cannot_be_read_is_said() {
    let dir = TempDir::new("sw-manifest-unreadable");
    for (manifest, why) in [
        (dir.join("missing"), "which cannot be read: No such file or directory"),
        (dir.path().to_path_buf(), "which cannot be read: Is a directory"),
    ] {
        let mut c = Cmd::new(bin());
        c.env("RUNFILES_MANIFEST_FILE", &manifest).current_dir(dir.path());
        let out = c.args(["--asan-suppressions=ws/supp.txt", "/bin/true"]).run();
        out.assert_code(2).assert_one_error_line(&format!("in manifest {}, {why}", manifest.display()));
    }
}

/// `--help` and `--version` where stdout cannot take the answer: a pipe
/// whose reader has gone kills the wrapper with SIGPIPE (141, nothing on
/// stderr), as it would a shell script; a full device or a stdout that is
/// not open is exit 2 with one line.
#[test]
fn help_and_version_where_stdout_cannot_take_them() {
    let dir = TempDir::new("sw-stdout");
    // The reader closes its end of the pipe and only then creates the file;
    // the writer waits for the file (and a little more, for the shell to
    // drop its own copy of the read end) before starting the wrapper.
    let gone_reader = r#"gone=$1; shift
{ while [ ! -e "$gone" ]; do sleep 0.01; done; sleep 0.1; "$@"; echo "rc=$?" >&2; } \
  | { exec <&-; : > "$gone"; }"#;
    for (i, flag) in ["--help", "--version"].into_iter().enumerate() {
        let gone = dir.join(format!("reader-gone-{i}"));
        let out = Cmd::new("/bin/sh").args(["-c", gone_reader, "sh"]).arg(&gone).arg(bin()).arg(flag).run();
        out.assert_success();
        assert_eq!(out.stderr, "rc=141\n", "{}", out.explain());

        let full = Cmd::new("/bin/sh").args(["-c", r#""$0" "$@" >/dev/full"#]).arg(bin()).arg(flag).run();
        full.assert_code(2).assert_stdout_eq("");
        assert_eq!(
            full.stderr,
            "sanitizer_wrapper: cannot write to stdout: No space left on device (os error 28)\n",
            "{}",
            full.explain()
        );

        let closed = Cmd::new(bin()).arg(flag).close_standard(&[1]).run();
        closed.assert_code(2);
        assert_eq!(
            closed.stderr,
            "sanitizer_wrapper: cannot write to stdout: Bad file descriptor (os error 9)\n",
            "{}",
            closed.explain()
        );
    }
}

/// A symbolizer that is no regular file, or that nobody may run, is one
/// line and exit 2 before the test starts: the runtime would symbolize
/// nothing, and the CI run be wasted, as with a missing one.
#[test]
fn a_symbolizer_that_cannot_run_is_said() {
    let mut tree = Tree::new("sw-err-symbolizer");
    let not_run = tree.add("ws/llvm-symbolizer", "#!/bin/sh\n");
    let dir = tree.dir.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let target = std::fs::canonicalize(&not_run).unwrap();
    let cases = [
        (
            format!("--symbolizer={}", dir.display()),
            format!("--symbolizer: {} is a directory, not a regular file", dir.display()),
        ),
        (
            "--symbolizer=ws/llvm-symbolizer".to_string(),
            format!(
                "--symbolizer: runfile ws/llvm-symbolizer is {}, which cannot be run by this user: Permission denied (os error 13)",
                not_run.display()
            ),
        ),
        (
            format!("--symbolizer={}", target.display()),
            format!("--symbolizer: {} cannot be run by this user: Permission denied (os error 13)", target.display()),
        ),
    ];
    for (arg, message) in cases {
        let out = tree.cmd().arg(&arg).arg(TEST).run();
        out.assert_code(2).assert_one_error_line(&format!("sanitizer_wrapper: {message}"));
        assert_test_not_run(&out);
    }
}

/// A suppression list another user may not read, or one in a directory it
/// may not enter, is said as such before the test starts (the runtime
/// would fail on it in every test), the latter not as missing.
#[test]
fn a_suppression_list_this_user_may_not_read_or_reach_is_said() {
    if !test_support::prerequisite(test_support::is_root(), "root", "a suppression list another user may not read") {
        return;
    }
    let tree = Tree::new("sw-err-unreadable");
    // The tree and the directories above it open to the other user, and the
    // wrapper it runs.
    let mut p = tree.dir.path().to_path_buf();
    while p.as_os_str() != "/" {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode | 0o755)).unwrap();
        p.pop();
    }
    let private = tree.dir.join("private");
    std::fs::create_dir_all(&private).unwrap();
    write_file(private.join("lsan.txt"), "leak:x\n");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let closed = tree.dir.join("asan.txt");
    write_file(&closed, "interceptor_via_fun:x\n");
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cases = [
        (
            format!("--asan-suppressions={}", closed.display()),
            format!(
                "--asan-suppressions: {} cannot be read by this user: Permission denied (os error 13)",
                closed.display()
            ),
        ),
        (
            format!("--lsan-suppressions={}/lsan.txt", private.display()),
            format!(
                "--lsan-suppressions: cannot reach {}/lsan.txt: Permission denied (os error 13)",
                private.display()
            ),
        ),
    ];
    for (arg, message) in cases {
        let out = tree.cmd().as_user(65534, 65534).arg(&arg).arg(TEST).run();
        out.assert_code(2).assert_one_error_line(&format!("sanitizer_wrapper: {message}"));
        assert_test_not_run(&out);
    }
}
