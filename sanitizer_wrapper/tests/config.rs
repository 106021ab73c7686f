//! The configuration file `<argv[0]>.sanitizer_wrapper.conf`, as the Bazel
//! macro writes it beside the `<name>` symlink to the wrapper.

mod common;

use common::{ManifestOnly, Seen, TEST, Tree, assert_test_not_run, link_binary, suppressions, symbolizer};
use test_support::{Cmd, write_file};

/// The wrapper as `ws/pkg/asan_wrapper` with a configuration beside it.
fn configured_tree(label: &str, conf: &str) -> Tree {
    let tree = Tree::new(label);
    tree.link_wrapper("ws/pkg/asan_wrapper");
    tree.conf_beside("ws/pkg/asan_wrapper", conf);
    tree
}

/// `program` run as Bazel runs the `--run_under` wrapper in `tree`.
fn run_as(tree: &Tree, program: &str) -> Cmd {
    let mut cmd = Cmd::new(program);
    tree.rf.apply(&mut cmd);
    cmd
}

#[test]
fn config_beside_a_relative_argv0() {
    let mut tree = Tree::new("sw-conf-relative");
    let asan = tree.add("ws/supp/asan.txt", "");
    let lsan = tree.add("ws/supp/lsan.txt", "");
    let tsan = tree.add("ws/supp/tsan.txt", "");
    let llvm = tree.add_executable("llvm/bin/llvm-symbolizer", "#!/bin/sh\n");
    tree.link_wrapper("ws/pkg/asan_wrapper");
    tree.conf_beside(
        "ws/pkg/asan_wrapper",
        "# sanitizer_wrapper options for //pkg:asan_wrapper, one per line.\n\
         \n\
         --asan-options=detect_leaks=1:check_initialization_order=1\n\
         \t--lsan-options=use_stacks=0   \n\
         --tsan-options=history_size=3\r\n\
         \x20  # indented comment\n\
         --asan-suppressions=ws/supp/asan.txt\n\
         --lsan-suppressions=ws/supp/lsan.txt\n\
         --tsan-suppressions=ws/supp/tsan.txt\n\
         --symbolizer=llvm/bin/llvm-symbolizer",
    );
    for argv0 in ["pkg/asan_wrapper", "./pkg/asan_wrapper"] {
        let out = run_as(&tree, argv0).args([TEST, "arg"]).run();
        let seen = Seen::from(&out);
        seen.expect_args(&["arg"]);
        seen.expect(
            "ASAN_OPTIONS",
            Some(&format!("detect_leaks=1:check_initialization_order=1:{}:{}", suppressions(&asan), symbolizer(&llvm))),
        );
        seen.expect("LSAN_OPTIONS", Some(&format!("use_stacks=0:{}", suppressions(&lsan))));
        seen.expect("TSAN_OPTIONS", Some(&format!("history_size=3:{}:{}", suppressions(&tsan), symbolizer(&llvm))));
    }
}

#[test]
fn config_beside_an_absolute_argv0() {
    let tree = configured_tree("sw-conf-absolute", "--tsan-options=history_size=3\n");
    let argv0 = tree.rf.srcdir.join("ws/pkg/asan_wrapper");
    let out = run_as(&tree, argv0.to_str().unwrap()).arg(TEST).run();
    Seen::from(&out).expect("TSAN_OPTIONS", Some("history_size=3")).expect("ASAN_OPTIONS", None);
}

#[test]
fn config_of_a_wrapper_in_another_repository() {
    let tree = Tree::new("sw-conf-other-repo");
    tree.link_wrapper("tools_repo/pkg/w");
    tree.conf_beside("tools_repo/pkg/w", "--asan-options=from=tools_repo\n");
    let out = run_as(&tree, "../tools_repo/pkg/w").arg(TEST).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some("from=tools_repo"));
}

#[test]
fn command_line_overrides_the_config() {
    let tree = configured_tree(
        "sw-conf-override",
        "--asan-options=from_file=1\n--tsan-options=kept=1\n--lsan-options=dropped=1\n",
    );
    let out =
        run_as(&tree, "pkg/asan_wrapper").args(["--asan-options=from_cli=1", "--lsan-options=", "--", TEST]).run();
    Seen::from(&out)
        .expect("ASAN_OPTIONS", Some("from_cli=1"))
        .expect("TSAN_OPTIONS", Some("kept=1"))
        .expect("LSAN_OPTIONS", None);
}

#[test]
fn last_line_wins_in_the_config() {
    let tree = configured_tree("sw-conf-last", "--asan-options=a=1\n--asan-options=a=2\n");
    let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some("a=2"));
}

#[test]
fn a_config_of_comments_only_is_a_pass_through() {
    let tree = configured_tree("sw-conf-empty", "# nothing configured\n\n");
    let out = run_as(&tree, "pkg/asan_wrapper").env("ASAN_OPTIONS", "u=1").arg(TEST).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some("u=1")).expect("TSAN_OPTIONS", None);
}

#[test]
fn config_found_through_the_manifest_when_there_is_no_tree() {
    let mut layout = ManifestOnly::new("sw-conf-manifest");
    let supp = layout.add("ws/supp/asan.txt", "");
    layout.add("ws/pkg/asan_wrapper.sanitizer_wrapper.conf", "--asan-suppressions=ws/supp/asan.txt\n");
    link_binary(&layout.cwd.join("pkg/asan_wrapper"));
    let nowhere = layout.dir.join("no-such-runfiles");
    for argv0 in ["pkg/asan_wrapper", "./pkg/asan_wrapper"] {
        let out = layout.cmd_for(argv0).arg(layout.test()).run();
        Seen::from(&out).expect("ASAN_OPTIONS", Some(&suppressions(&supp)));
        let out = layout.cmd_for(argv0).env("RUNFILES_DIR", &nowhere).arg(layout.test()).run();
        Seen::from(&out).expect("ASAN_OPTIONS", Some(&suppressions(&supp)));
    }
}

#[test]
fn config_of_another_repository_through_the_manifest() {
    let mut layout = ManifestOnly::new("sw-conf-manifest-repo");
    layout.add("tools_repo/pkg/w.sanitizer_wrapper.conf", "--tsan-options=from=manifest\n");
    link_binary(&layout.cwd.join("../tools_repo/pkg/w"));
    let out = layout.cmd_for("../tools_repo/pkg/w").arg(layout.test()).run();
    Seen::from(&out).expect("TSAN_OPTIONS", Some("from=manifest"));
}

#[test]
fn manifest_is_not_read_for_the_config_when_the_tree_exists() {
    let mut tree = Tree::new("sw-conf-tree-no-manifest");
    tree.link_wrapper("ws/pkg/asan_wrapper");
    let conf = tree.dir.join("elsewhere/asan_wrapper.conf");
    write_file(&conf, "--asan-options=from=manifest\n");
    tree.rf.add_manifest_only("ws/pkg/asan_wrapper.sanitizer_wrapper.conf", &conf);
    tree.rf.write_manifest();
    let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
    Seen::from(&out).expect("ASAN_OPTIONS", None);
}

#[test]
fn bad_config_lines() {
    for (conf, line, what) in [
        ("--asan-opts=a=1\n", 1, "unknown option '--asan-opts'"),
        ("# ok\n\ndetect_leaks=1\n", 3, "expected --NAME=VALUE, found 'detect_leaks=1'"),
        ("--asan-options\n", 1, "--asan-options needs its value on the same line, as --asan-options=VALUE"),
        ("--asan-options a=1\n", 1, "unknown option '--asan-options a'"),
        ("--help\n", 1, "'--help' is not allowed in a configuration file"),
        ("--tsan-options=x\n--version\n", 2, "'--version' is not allowed in a configuration file"),
        ("--\n", 1, "'--' is not allowed in a configuration file"),
        ("-x\n", 1, "unknown option '-x'"),
    ] {
        let tree = configured_tree("sw-conf-bad", conf);
        let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
        let expected = format!("sanitizer_wrapper: pkg/asan_wrapper.sanitizer_wrapper.conf:{line}: {what}");
        out.assert_code(2).assert_one_error_line(&expected);
        assert!(out.stderr.starts_with(&expected), "{}", out.explain());
        assert_test_not_run(&out);
    }
}

#[test]
fn a_line_longer_than_the_buffer_is_an_error() {
    let long = format!("--asan-options=x={}\n", "y".repeat(9000));
    let tree = configured_tree("sw-conf-long", &format!("# first\n{long}"));
    let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
    out.assert_code(2)
        .assert_one_error_line("sanitizer_wrapper: pkg/asan_wrapper.sanitizer_wrapper.conf:2: line longer than");
    assert_test_not_run(&out);
    // Just under the limit is fine.
    let fits = format!("--asan-options=x={}\n", "y".repeat(8000));
    let tree = configured_tree("sw-conf-fits", &fits);
    let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
    assert_eq!(Seen::from(&out).get("ASAN_OPTIONS").map(str::len), Some(8002));
}

/// A configuration file that is no regular file, or a symbolic link to
/// nothing (a runfiles tree that lacks the file the macro wrote), is one
/// line and exit 2: never a test run as if nothing were configured.
#[test]
fn a_config_that_is_no_file_or_leads_nowhere_is_an_error() {
    let conf = "pkg/asan_wrapper.sanitizer_wrapper.conf";
    type Make = dyn Fn(&std::path::Path);
    let cases: [(&str, &Make, &str); 3] = [
        ("dir", &|p| std::fs::create_dir_all(p).unwrap(), "is a directory, not a regular file"),
        (
            "fifo",
            &|p| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success()),
            "is a FIFO, not a regular file",
        ),
        (
            "dangling",
            &|p| std::os::unix::fs::symlink("/nowhere/asan.conf", p).unwrap(),
            "is a symbolic link to /nowhere/asan.conf, which leads nowhere",
        ),
    ];
    for (label, make, says) in cases {
        let tree = Tree::new(&format!("sw-conf-{label}"));
        tree.link_wrapper("ws/pkg/asan_wrapper");
        make(&tree.rf.srcdir.join("ws").join(conf));
        let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
        out.assert_code(2).assert_one_error_line(&format!("sanitizer_wrapper: configuration file {conf} {says}"));
        assert_test_not_run(&out);
    }
    // `/dev/null` there is a configuration blanked on purpose: nothing set.
    let tree = Tree::new("sw-conf-devnull");
    tree.link_wrapper("ws/pkg/asan_wrapper");
    std::os::unix::fs::symlink("/dev/null", tree.rf.srcdir.join("ws").join(conf)).unwrap();
    let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
    Seen::from(&out).expect("ASAN_OPTIONS", None);
}

#[test]
fn help_works_with_a_broken_config() {
    let tree = configured_tree("sw-conf-help", "nonsense\n");
    run_as(&tree, "pkg/asan_wrapper").arg("--help").run().assert_success().assert_stdout_contains("usage:");
}

#[test]
fn an_unresolved_file_from_the_config_is_an_error() {
    let tree = configured_tree("sw-conf-unresolved", "--lsan-suppressions=ws/supp/missing.txt\n");
    let out = run_as(&tree, "pkg/asan_wrapper").arg(TEST).run();
    out.assert_code(2)
        .assert_one_error_line("sanitizer_wrapper: --lsan-suppressions: cannot find runfile ws/supp/missing.txt");
    assert_test_not_run(&out);
}
