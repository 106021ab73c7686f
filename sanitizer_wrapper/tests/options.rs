//! Each option on the command line: what the test's `*_OPTIONS` become, and
//! how runfiles paths are found (tree, manifest-only, `<argv0>.runfiles`,
//! absolute).

mod common;

use common::{ManifestOnly, Seen, TEST, Tree, bin, link_binary, suppressions, symbolizer};
use test_support::{Cmd, RECORDING_TEST, TempDir, write_executable, write_file};

/// (option, variable, the two variables it must not touch)
const SUPPRESSIONS: [(&str, &str, [&str; 2]); 3] = [
    ("--asan-suppressions", "ASAN_OPTIONS", ["LSAN_OPTIONS", "TSAN_OPTIONS"]),
    ("--lsan-suppressions", "LSAN_OPTIONS", ["ASAN_OPTIONS", "TSAN_OPTIONS"]),
    ("--tsan-suppressions", "TSAN_OPTIONS", ["ASAN_OPTIONS", "LSAN_OPTIONS"]),
];

#[test]
fn base_options_in_both_forms() {
    let tree = Tree::new("sw-opt-base");
    for (option, variable, others) in [
        ("--asan-options", "ASAN_OPTIONS", ["LSAN_OPTIONS", "TSAN_OPTIONS"]),
        ("--lsan-options", "LSAN_OPTIONS", ["ASAN_OPTIONS", "TSAN_OPTIONS"]),
        ("--tsan-options", "TSAN_OPTIONS", ["ASAN_OPTIONS", "LSAN_OPTIONS"]),
    ] {
        let joined = tree.cmd().arg(format!("{option}=a=1:b=2")).args([TEST, "x"]).run();
        let seen = Seen::from(&joined);
        seen.expect(variable, Some("a=1:b=2")).expect_args(&["x"]);
        for other in others {
            seen.expect(other, None);
        }
        let two_words = tree.cmd().args([option, "c=3", TEST]).run();
        Seen::from(&two_words).expect(variable, Some("c=3"));
    }
}

#[test]
fn suppressions_found_in_the_runfiles_tree() {
    let mut tree = Tree::new("sw-opt-supp-tree");
    for (option, variable, others) in SUPPRESSIONS {
        let rlocation = format!("ws/supp/{variable}.txt");
        let path = tree.add(&rlocation, "leak:foo\n");
        let out = tree.cmd().arg(format!("{option}={rlocation}")).arg(TEST).run();
        let seen = Seen::from(&out);
        seen.expect(variable, Some(&suppressions(&path)));
        for other in others {
            seen.expect(other, None);
        }
    }
}

#[test]
fn suppressions_of_another_repository() {
    let mut tree = Tree::new("sw-opt-supp-repo");
    let path = tree.add("other_repo/asan/ignore.txt", "");
    let out = tree.cmd().args(["--asan-suppressions", "other_repo/asan/ignore.txt", TEST]).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some(&suppressions(&path)));
}

#[test]
fn paths_under_a_relative_runfiles_dir_are_made_absolute() {
    let mut tree = Tree::new("sw-opt-relative");
    tree.add("ws/supp/asan.txt", "");
    // The working directory is <srcdir>/ws.
    let out = tree
        .cmd()
        .env("RUNFILES_DIR", "..")
        .env("TEST_SRCDIR", "..")
        .args(["--asan-suppressions=ws/supp/asan.txt", TEST])
        .run();
    let seen = Seen::from(&out);
    let expected = tree.rf.cwd().join("../ws/supp/asan.txt");
    seen.expect("ASAN_OPTIONS", Some(&suppressions(&expected)));
}

#[test]
fn test_srcdir_when_runfiles_dir_is_unset() {
    let mut tree = Tree::new("sw-opt-srcdir");
    let path = tree.add("ws/supp/lsan.txt", "");
    let out = tree.cmd().env_remove("RUNFILES_DIR").args(["--lsan-suppressions=ws/supp/lsan.txt", TEST]).run();
    Seen::from(&out).expect("LSAN_OPTIONS", Some(&suppressions(&path)));
}

#[test]
fn suppressions_found_in_the_manifest_only() {
    for dirs_point_nowhere in [false, true] {
        let mut layout = ManifestOnly::new("sw-opt-supp-manifest");
        let nowhere = layout.dir.join("no-such-runfiles");
        for (option, variable, others) in SUPPRESSIONS {
            let rlocation = format!("ws/supp/{variable}.txt");
            let real = layout.add(&rlocation, "");
            let mut cmd = layout.cmd();
            if dirs_point_nowhere {
                cmd.env("RUNFILES_DIR", &nowhere).env("TEST_SRCDIR", &nowhere);
            }
            let out = cmd.arg(format!("{option}={rlocation}")).arg(layout.test()).run();
            let seen = Seen::from(&out);
            seen.expect(variable, Some(&suppressions(&real)));
            for other in others {
                seen.expect(other, None);
            }
        }
    }
}

#[test]
fn manifest_in_the_runfiles_dir_when_the_tree_lacks_the_file() {
    let mut tree = Tree::new("sw-opt-dir-manifest");
    let real = tree.dir.join("elsewhere/tsan.txt");
    write_file(&real, "race:foo\n");
    tree.rf.add_manifest_only("ws/supp/tsan.txt", &real);
    tree.rf.write_manifest();
    let out = tree.cmd().args(["--tsan-suppressions=ws/supp/tsan.txt", TEST]).run();
    Seen::from(&out).expect("TSAN_OPTIONS", Some(&suppressions(&real)));
}

#[test]
fn absolute_suppression_paths() {
    let tree = Tree::new("sw-opt-supp-abs");
    let file = tree.dir.join("abs/ignore.txt");
    write_file(&file, "");
    for (option, variable, _) in SUPPRESSIONS {
        let out = tree.cmd().arg(format!("{option}={}", file.display())).arg(TEST).run();
        Seen::from(&out).expect(variable, Some(&suppressions(&file)));
    }
    // No runfiles at all: an absolute path needs none.
    let out = Cmd::new(bin())
        .arg(format!("--asan-suppressions={}", file.display()))
        .arg(tree.rf.cwd().join("pkg/foo_test"))
        .run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some(&suppressions(&file)));
}

#[test]
fn argv0_runfiles_directory_when_no_variable_names_one() {
    let dir = TempDir::new("sw-opt-argv0-runfiles");
    let wrapper = link_binary(&dir.join("bin/w"));
    let supp = dir.join("bin/w.runfiles/ws/supp/asan.txt");
    write_file(&supp, "");
    let test = dir.join("bin/w.runfiles/ws/pkg/foo_test");
    write_executable(&test, RECORDING_TEST);
    let out = Cmd::new(&wrapper).args(["--asan-suppressions=ws/supp/asan.txt"]).arg(&test).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some(&suppressions(&supp)));
}

#[test]
fn argv0_runfiles_manifest_when_no_variable_names_one() {
    let dir = TempDir::new("sw-opt-argv0-manifest");
    let wrapper = link_binary(&dir.join("bin/w"));
    let supp = dir.join("real/lsan.txt");
    write_file(&supp, "");
    write_file(dir.join("bin/w.runfiles_manifest"), format!("ws/supp/lsan.txt {}\n", supp.display()));
    let test = dir.join("real/foo_test");
    write_executable(&test, RECORDING_TEST);
    let out = Cmd::new(&wrapper).args(["--lsan-suppressions=ws/supp/lsan.txt"]).arg(&test).run();
    Seen::from(&out).expect("LSAN_OPTIONS", Some(&suppressions(&supp)));
}

#[test]
fn symbolizer_goes_to_asan_and_tsan_only() {
    let mut tree = Tree::new("sw-opt-symbolizer");
    let path = tree.add_executable("llvm/bin/llvm-symbolizer", "#!/bin/sh\n");
    let out = tree.cmd().args(["--symbolizer", "llvm/bin/llvm-symbolizer", TEST]).run();
    Seen::from(&out)
        .expect("ASAN_OPTIONS", Some(&symbolizer(&path)))
        .expect("TSAN_OPTIONS", Some(&symbolizer(&path)))
        .expect("LSAN_OPTIONS", None);
}

#[test]
fn symbolizer_in_the_manifest_only() {
    let mut layout = ManifestOnly::new("sw-opt-symbolizer-manifest");
    let real = layout.add_executable("llvm/bin/llvm-symbolizer", "#!/bin/sh\n");
    let out = layout.cmd().arg("--symbolizer=llvm/bin/llvm-symbolizer").arg(layout.test()).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some(&symbolizer(&real))).expect("TSAN_OPTIONS", Some(&symbolizer(&real)));
}

#[test]
fn everything_together_in_order_with_the_users_value_last() {
    let mut tree = Tree::new("sw-opt-all");
    let asan = tree.add("ws/supp/asan.txt", "");
    let lsan = tree.add("ws/supp/lsan.txt", "");
    let tsan = tree.add("ws/supp/tsan.txt", "");
    let llvm = tree.add_executable("llvm/bin/llvm-symbolizer", "#!/bin/sh\n");
    let out = tree
        .cmd()
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .env("LSAN_OPTIONS", "report_objects=1")
        .args([
            "--asan-options=detect_leaks=0:halt_on_error=1",
            "--lsan-options=use_stacks=0",
            "--tsan-options=history_size=3",
            "--asan-suppressions=ws/supp/asan.txt",
            "--lsan-suppressions=ws/supp/lsan.txt",
            "--tsan-suppressions=ws/supp/tsan.txt",
            "--symbolizer=llvm/bin/llvm-symbolizer",
            TEST,
            "--asan-options=arg",
        ])
        .run();
    let seen = Seen::from(&out);
    seen.expect_args(&["--asan-options=arg"]);
    seen.expect(
        "ASAN_OPTIONS",
        Some(&format!("detect_leaks=0:halt_on_error=1:{}:{}:detect_leaks=1", suppressions(&asan), symbolizer(&llvm))),
    );
    seen.expect("LSAN_OPTIONS", Some(&format!("use_stacks=0:{}:report_objects=1", suppressions(&lsan))));
    seen.expect("TSAN_OPTIONS", Some(&format!("history_size=3:{}:{}", suppressions(&tsan), symbolizer(&llvm))));
}

#[test]
fn users_value_wins_and_empty_parts_are_skipped() {
    let tree = Tree::new("sw-opt-user-wins");
    let out = tree.cmd().env("ASAN_OPTIONS", "detect_leaks=1").args(["--asan-options=detect_leaks=0", TEST]).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some("detect_leaks=0:detect_leaks=1"));
    let out = tree.cmd().env("ASAN_OPTIONS", "").args(["--asan-options=detect_leaks=0", TEST]).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some("detect_leaks=0"));
}

#[test]
fn unconfigured_variables_are_not_touched() {
    let tree = Tree::new("sw-opt-untouched");
    let out = tree
        .cmd()
        .env("LSAN_OPTIONS", "keep=1")
        .env("TSAN_OPTIONS", "")
        .env("OTHER", "x")
        .args(["--asan-options=a=1", "/usr/bin/env"])
        .run();
    out.assert_success();
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort();
    let srcdir = tree.rf.srcdir.display();
    let mut want = vec![
        "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
        format!("TEST_SRCDIR={srcdir}"),
        format!("RUNFILES_DIR={srcdir}"),
        "TEST_WORKSPACE=ws".to_string(),
        "LSAN_OPTIONS=keep=1".to_string(),
        "TSAN_OPTIONS=".to_string(),
        "OTHER=x".to_string(),
        "ASAN_OPTIONS=a=1".to_string(),
    ];
    want.sort();
    assert_eq!(got, want, "{}", out.explain());
}

#[test]
fn last_value_wins_on_the_command_line() {
    let tree = Tree::new("sw-opt-last");
    let out = tree.cmd().args(["--tsan-options=a=1", "--tsan-options", "a=2", TEST]).run();
    Seen::from(&out).expect("TSAN_OPTIONS", Some("a=2"));
}

#[test]
fn paths_with_separators_are_quoted() {
    let mut tree = Tree::new("sw-opt-quote");
    let path = tree.add("ws/supp dir/a:b.txt", "");
    let out = tree.cmd().args(["--asan-suppressions=ws/supp dir/a:b.txt", TEST]).run();
    Seen::from(&out).expect("ASAN_OPTIONS", Some(&format!("suppressions=\"{}\"", path.display())));
}

#[test]
fn help_and_version() {
    let out = Cmd::new(bin()).arg("--help").run();
    out.assert_success().assert_stdout_contains("usage: sanitizer_wrapper [OPTIONS] [--] TEST [ARGS...]");
    for option in [
        "--asan-options",
        "--lsan-options",
        "--tsan-options",
        "--asan-suppressions",
        "--lsan-suppressions",
        "--tsan-suppressions",
        "--symbolizer",
        "--run-under",
    ] {
        out.assert_stdout_contains(option);
    }
    assert!(out.stderr.is_empty(), "{}", out.explain());
    Cmd::new(bin()).args(["--asan-options=x", "-h"]).run().assert_success().assert_stdout_contains("usage:");
    let out = Cmd::new(bin()).arg("--version").run();
    out.assert_success().assert_stdout_eq(&format!("sanitizer_wrapper {}\n", env!("CARGO_PKG_VERSION")));
}

/// A directory listed as one manifest entry (a tree artifact, as Bazel
/// writes it) holds the files below it: a suppression list in it is found
/// as Bazel's runfiles libraries find it, by the longest entry above it,
/// and the manifest's own entry for a file still wins.
#[test]
fn a_file_in_a_directory_listed_in_the_manifest_is_found() {
    let mut layout = ManifestOnly::new("sw-manifest-tree");
    let tree = layout.add_dangling("ws/supp");
    write_file(tree.join("asan.txt"), "leak:x\n");
    let own = layout.add("ws/supp/lsan.txt", "leak:y\n");
    write_file(tree.join("lsan.txt"), "not this one\n");
    let test = layout.test();
    let out = layout
        .cmd()
        .args(["--asan-suppressions=ws/supp/asan.txt", "--lsan-suppressions=ws/supp/lsan.txt"])
        .arg(&test)
        .run();
    let seen = Seen::from(&out);
    seen.expect("ASAN_OPTIONS", Some(&suppressions(&tree.join("asan.txt"))));
    seen.expect("LSAN_OPTIONS", Some(&suppressions(&own)));
}
