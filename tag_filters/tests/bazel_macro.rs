//! The `tag_filters` Bazel macro (`defs.bzl`) and the binary agree on what
//! a config name is. The macro writes each config as the table line
//! `NAME = TAG,...`: every name it lets through must be one the binary reads
//! back as that very config (not a failure when the target runs, nor
//! another config: `weird: = x` is `weird := x`, a config that replaces the
//! filter), and every name the binary reads so must pass the macro. The
//! macro's rule is read from `defs.bzl` (its character set and the checks
//! around it); the binary's is its table parser.

use std::path::Path;
use tag_filters::tables::Table;

fn defs_bzl() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../defs.bzl");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The string `_CONFIG_NAME_CHARS` of defs.bzl: what a config name may hold.
fn macro_name_chars(defs: &str) -> String {
    let line = defs
        .lines()
        .find_map(|line| line.strip_prefix("_CONFIG_NAME_CHARS = \""))
        .expect("defs.bzl defines _CONFIG_NAME_CHARS = \"...\" on one line");
    let chars = line.strip_suffix('"').expect("_CONFIG_NAME_CHARS is one plain string");
    assert!(!chars.contains('\\'), "_CONFIG_NAME_CHARS has an escape, which this test does not read: {chars}");
    chars.to_string()
}

/// `_check_config_name` of defs.bzl: not `base` or `preset`, not empty, no
/// leading `-`, every character in the set.
fn macro_accepts(name: &str, chars: &str) -> bool {
    name != "base"
        && name != "preset"
        && !name.is_empty()
        && !name.starts_with('-')
        && name.chars().all(|c| chars.contains(c))
}

/// Whether the binary reads the line the macro writes for `name` as a
/// config called `name` that appends its tag.
fn binary_reads_as_written(name: &str) -> bool {
    let text = format!("base = a\n{name} = x\n");
    match Table::parse(text.as_bytes(), Path::new("t.conf")) {
        Ok(table) => {
            table.configs.len() == 1
                && table.configs[0].name == name
                && !table.configs[0].replaces
                && table.configs[0].tags == ["x"]
        }
        Err(_) => false,
    }
}

#[test]
fn the_macro_checks_config_names_with_the_binarys_rule() {
    let defs = defs_bzl();
    // The checks this test stands for are the ones the macro makes.
    for needed in [
        "_check_config_name(owner, config)",
        "if name in [\"base\", \"preset\"]:",
        "if not name or name.startswith(\"-\"):",
        "if name[i] not in _CONFIG_NAME_CHARS:",
    ] {
        assert!(defs.contains(needed), "defs.bzl no longer has `{needed}`: update this test with the macro");
    }
    let chars = macro_name_chars(&defs);

    let mut singles: Vec<char> = (0u8..=0x7f).map(char::from).collect();
    singles.extend(['\u{a0}', '\u{e9}', '\u{feff}', '\u{2028}']);
    let mut names: Vec<String> =
        ["", "base", "preset", "ci_single_gpu", "a.b-c_9", "-x", "x-", "weird:", "ci/x", "a:=b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for c in singles {
        names.extend([format!("{c}"), format!("a{c}"), format!("{c}a"), format!("a{c}b")]);
    }
    let disagree: Vec<String> = names
        .iter()
        .filter(|name| macro_accepts(name, &chars) != binary_reads_as_written(name))
        .map(|name| {
            let side = if macro_accepts(name, &chars) { "the macro accepts" } else { "the binary reads" };
            format!("{name:?} ({side} it)")
        })
        .collect();
    assert!(disagree.is_empty(), "defs.bzl and the table parser disagree on config names: {}", disagree.join(", "));
    // Both sides were seen: names accepted and names refused.
    assert!(names.iter().any(|n| macro_accepts(n, &chars)) && names.iter().any(|n| !macro_accepts(n, &chars)));
}
