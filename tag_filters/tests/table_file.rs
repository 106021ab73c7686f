//! The tag table as data: `--table=FILE`, `<argv0>.tag_filters.conf` beside
//! the executable, their precedence, every output using the table in force,
//! and one `tag_filters: FILE:LINE: ...` line (exit 2) for a bad table.

mod common;

use common::{bin, run};
use std::os::unix::fs::symlink;
use test_support::{Cmd, TempDir, write_file};

const TABLE: &str = "\
# the project's own table
base = -no_gpu, -requires-gpu-nvidia

ci_single_gpu = requires-gpu-amd,-multi_gpu
  ci_multi_gpu=multi_gpu
nightly = -flaky
";

fn table_dir(label: &str, contents: &str) -> (TempDir, String) {
    let dir = TempDir::new(label);
    let file = dir.join("tags.conf");
    write_file(&file, contents);
    let file = file.to_str().unwrap().to_string();
    (dir, file)
}

#[test]
fn a_table_file_replaces_the_compiled_in_table() {
    let (_dir, file) = table_dir("tf-table", TABLE);
    let table = format!("--table={file}");
    let out = run(&[&table, "--config=nightly", "--config=ci_multi_gpu"]);
    out.assert_success().assert_stdout_eq("-no_gpu,-requires-gpu-nvidia,-flaky,multi_gpu\n");
    // Both spellings; the compiled-in configs are gone with the table.
    let out = run(&["--table", &file, "--config=asan", "--strict"]);
    out.assert_code(2).assert_one_error_line(
        "tag_filters: --config: unknown config 'asan' under --strict (known configs: ci_single_gpu, ci_multi_gpu, nightly)",
    );
    let out = run(&[&table, "--format=flags", "--config=ci_single_gpu"]);
    out.assert_success().assert_stdout_eq(
        "--build_tag_filters=-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu \
         --test_tag_filters=-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu\n",
    );
}

#[test]
fn bazelrc_and_help_use_the_table_in_force() {
    let (_dir, file) = table_dir("tf-table-help", TABLE);
    let table = format!("--table={file}");
    run(&[&table, "--format=bazelrc"]).assert_success().assert_stdout_eq(
        "build:ci_single_gpu --build_tag_filters=-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu\n\
         test:ci_single_gpu --test_tag_filters=-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu\n\
         build:ci_multi_gpu --build_tag_filters=-no_gpu,-requires-gpu-nvidia,multi_gpu\n\
         test:ci_multi_gpu --test_tag_filters=-no_gpu,-requires-gpu-nvidia,multi_gpu\n\
         build:nightly --build_tag_filters=-no_gpu,-requires-gpu-nvidia,-flaky\n\
         test:nightly --test_tag_filters=-no_gpu,-requires-gpu-nvidia,-flaky\n",
    );
    let out = run(&["--help", &table]);
    out.assert_success()
        .assert_stdout_contains(&format!("\nTable: {file}\n"))
        .assert_stdout_contains("\nBase list:\n  -no_gpu,-requires-gpu-nvidia\n")
        .assert_stdout_contains("\n  nightly        -flaky\n");
    assert!(!out.stdout.contains("-noasan"), "the compiled-in configs are not listed\n{}", out.explain());
    run(&["--help"]).assert_success().assert_stdout_contains("\nTable: preset xla-rocm (compiled in)\n");
}

#[test]
fn the_file_beside_the_executable_is_used_and_the_flag_wins_over_it() {
    let dir = TempDir::new("tf-beside");
    let exe = dir.join("rocm_tags");
    symlink(bin(), &exe).unwrap();
    write_file(dir.join("rocm_tags.tag_filters.conf"), TABLE);
    let out = Cmd::new(&exe).arg("--config=nightly").run();
    out.assert_success().assert_stdout_eq("-no_gpu,-requires-gpu-nvidia,-flaky\n");

    let other = dir.join("other.conf");
    write_file(&other, "base = -x\nnightly = -y\n");
    let out = Cmd::new(&exe).arg(format!("--table={}", other.display())).arg("--config=nightly").run();
    out.assert_success().assert_stdout_eq("-x,-y\n");

    // The same binary under a name with no table beside it: compiled in.
    let plain = dir.join("plain_tags");
    symlink(bin(), &plain).unwrap();
    let out = Cmd::new(&plain).arg("--config=ci_multi_gpu").run();
    out.assert_success().assert_stdout_contains(",-oss_serial,multi_gpu\n");
}

#[test]
fn a_bad_table_is_one_line_naming_file_and_line() {
    let cases = [
        ("base = a\nci_x a,b\n", ":2: expected NAME = TAG,TAG,... but found 'ci_x a,b'"),
        ("# c\n\nbase = a,,b\n", ":3: empty tag in 'a,,b'"),
        (
            "base = a\nx = -b*\n",
            ":2: bad tag '-b*' (no whitespace, '=', '*', '?', '[', '#', '$', '\\' or quote in a tag)",
        ),
        ("base = a\nx = b\nx = c\n", ":3: config 'x' is defined twice"),
        ("x = b\n", ": no 'base = TAG,TAG,...' line"),
    ];
    for (contents, tail) in cases {
        let (_dir, file) = table_dir("tf-bad-table", contents);
        // A bad table fails every request, --help included: it is the table
        // a CI job would run with.
        for extra in [&[][..], &["--help"], &["--format=bazelrc"]] {
            let mut args = vec!["--table".to_string(), file.clone()];
            args.extend(extra.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run(&args);
            out.assert_code(2).assert_stdout_eq("");
            assert_eq!(out.stderr, format!("tag_filters: {file}{tail}\n"), "{}", out.explain());
        }
    }
    let missing = "/nonexistent/tags.conf";
    let out = run(&["--table", missing]);
    out.assert_code(2).assert_stdout_eq("");
    assert_eq!(
        out.stderr,
        format!("tag_filters: {missing}: cannot read the tag table: No such file or directory (os error 2)\n"),
        "{}",
        out.explain()
    );
    run(&["--table"]).assert_code(2).assert_one_error_line("tag_filters: --table: missing value");
}

#[test]
fn a_bad_table_beside_the_executable_is_reported_too() {
    let dir = TempDir::new("tf-beside-bad");
    let exe = dir.join("t");
    symlink(bin(), &exe).unwrap();
    let conf = dir.join("t.tag_filters.conf");
    write_file(&conf, "base = ok\nbad line\n");
    let out = Cmd::new(&exe).run();
    out.assert_code(2);
    assert_eq!(
        out.stderr,
        format!("tag_filters: {}:2: expected NAME = TAG,TAG,... but found 'bad line'\n", conf.display()),
        "{}",
        out.explain()
    );
    // A symbolic link there that leads nowhere (a runfiles tree without the
    // file it names) is said, not the compiled-in table in its place.
    std::fs::remove_file(&conf).unwrap();
    symlink("/nowhere/t.tag_filters.conf", &conf).unwrap();
    let out = Cmd::new(&exe).run();
    out.assert_code(2).assert_stdout_eq("");
    assert_eq!(
        out.stderr,
        format!("tag_filters: {}: cannot read the tag table: No such file or directory (os error 2)\n", conf.display()),
        "{}",
        out.explain()
    );
}

/// A table that is a device, a FIFO nobody writes, or a file too large to
/// be one ends in one line (exit 2), never a read without end or a blocked
/// open; a pipe that is written (`--table=<(...)`) is read as a file is.
/// A build without the change read `/dev/zero` until it ran out of memory,
/// and hung on the FIFO.
#[test]
fn a_device_fifo_or_huge_table_is_one_line_and_a_pipe_is_read() {
    let limit = std::time::Duration::from_secs(10);
    for device in ["/dev/zero", "/dev/null"] {
        let out = Cmd::new(bin()).args(["--table", device]).timeout(limit).run();
        out.assert_code(2).assert_one_error_line(&format!(
            "tag_filters: {device}: cannot read the tag table: it is a device, not a file"
        ));
    }
    let dir = TempDir::new("tf-fifo-table");
    let fifo = dir.join("tags.fifo");
    let made = Cmd::new("mkfifo").arg(&fifo).run();
    made.assert_success();
    let out = Cmd::new(bin()).arg("--table").arg(&fifo).timeout(limit).run();
    out.assert_code(2).assert_stdout_eq("");
    assert!(out.stderr.starts_with(&format!("tag_filters: {}", fifo.display())), "{}", out.explain());
    let huge = dir.join("huge.conf");
    let mut text = String::from("base = a\n");
    while text.len() <= 1 << 20 {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    write_file(&huge, &text);
    let out = Cmd::new(bin()).arg("--table").arg(&huge).timeout(limit).run();
    out.assert_code(2).assert_one_error_line("cannot read the tag table: it is over 1 MiB, which no tag table is");
    // A pipe with a writer, as bash's process substitution gives.
    let script = format!("exec {} --table=<(sleep 0.3; printf 'base = -gpu\\n')", bin());
    let out = Cmd::new("bash").args(["-c", &script]).timeout(limit).run();
    out.assert_success().assert_stdout_contains("-gpu");
}

/// A table near the 1 MiB limit, of many tags on one line or of many
/// configs, is read in time linear in its size: a build that checked each
/// tag against every earlier one took over 35 s for 130,000 tags, which
/// the harness's limit here stops (a bound on a hang, not a timing). A tag
/// or a config repeated at the end of such a table is still found.
#[test]
fn a_table_near_its_size_limit_reads_in_linear_time() {
    let limit = std::time::Duration::from_secs(10);
    let dir = TempDir::new("tf-big-table");
    let tags: Vec<String> = (0..120_000).map(|i| format!("-t{i}")).collect();
    let wide = dir.join("wide.conf");
    write_file(&wide, format!("base = {}\n", tags.join(",")));
    let out = Cmd::new(bin()).arg("--table").arg(&wide).timeout(limit).run();
    out.assert_success();
    assert!(out.stdout.trim_end() == tags.join(","), "not every tag in order\n{}", out.explain());
    let repeated = dir.join("repeated.conf");
    write_file(&repeated, format!("base = {},-t7\n", tags.join(",")));
    let out = Cmd::new(bin()).arg("--table").arg(&repeated).timeout(limit).run();
    out.assert_code(2).assert_one_error_line("tag '-t7' is listed twice");
    let mut many = String::from("base = a\n");
    for i in 0..40_000 {
        many.push_str(&format!("c{i} = t{i}\n"));
    }
    many.push_str("c39999 = again\n");
    let configs = dir.join("configs.conf");
    write_file(&configs, &many);
    let out = Cmd::new(bin()).arg("--table").arg(&configs).timeout(limit).run();
    out.assert_code(2).assert_one_error_line("config 'c39999' is defined twice");
    // 20,000 `--config`s (and as many unknown ones) against 40,000 configs:
    // each is found by name, not by a scan of the table.
    many.truncate(many.rfind("c39999 = again").unwrap());
    write_file(&configs, &many);
    let mut c = Cmd::new(bin());
    c.arg("--table").arg(&configs).timeout(limit);
    for i in 0..20_000 {
        c.arg(format!("--config=c{}", i * 2)).arg(format!("--config=x{i}"));
    }
    let out = c.run();
    out.assert_success();
    assert!(out.stdout.starts_with("a,t0,t2,t4,") && out.stdout.ends_with(",t39998\n"), "{}", out.explain());
}

/// `bazel run` starts the binary in its runfiles directory and names the
/// directory it was started in in `BUILD_WORKING_DIRECTORY`: a relative
/// `--table` is taken from there, an absolute one as given.
#[test]
fn a_relative_table_under_bazel_run_is_taken_from_the_build_working_directory() {
    let (dir, file) = table_dir("tf-table-bwd", TABLE);
    let runfiles = dir.join("runfiles");
    std::fs::create_dir_all(&runfiles).unwrap();
    let under_bazel_run = |table: &str| {
        let mut cmd = Cmd::new(bin());
        cmd.current_dir(&runfiles).env("BUILD_WORKING_DIRECTORY", dir.path()).args([table, "--config=nightly"]);
        cmd.run()
    };
    let want = "-no_gpu,-requires-gpu-nvidia,-flaky\n";
    under_bazel_run("--table=tags.conf").assert_success().assert_stdout_eq(want);
    under_bazel_run("--table=./tags.conf").assert_success().assert_stdout_eq(want);
    under_bazel_run(&format!("--table={file}")).assert_success().assert_stdout_eq(want);
    // Where it looked is what a missing file names.
    let out = under_bazel_run("--table=gone.conf");
    out.assert_code(2).assert_one_error_line(&format!(
        "tag_filters: {}: cannot read the tag table: No such file or directory (os error 2)",
        dir.join("gone.conf").display()
    ));
    // Without the variable, or with it empty, from the working directory.
    let mut plain = Cmd::new(bin());
    plain.current_dir(dir.path()).args(["--table=tags.conf", "--config=nightly"]);
    plain.run().assert_success().assert_stdout_eq(want);
    plain.env("BUILD_WORKING_DIRECTORY", "");
    plain.run().assert_success().assert_stdout_eq(want);
}
