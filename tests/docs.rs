//! The reference in `docs/` covers what the binaries accept.
//!
//! - **Flags**: each binary's `--help` is run, and every `--flag` it prints
//!   must appear in that binary's page (`docs/<binary>.md`).
//! - **Environment variables**: the sources of each binary's crate, and of
//!   `wrapper_common`, are searched recursively (whatever their module
//!   layout) for string and byte-string literals that name a variable: an
//!   upper-case name with an underscore (`"TF_GPU_COUNT"`,
//!   `b"ROCR_VISIBLE_DEVICES"`), or any upper-case name passed straight to an
//!   environment lookup or change (`var(b"PATH")`, `.set(b"...")`). Test
//!   modules and `env!`/`option_env!` (build-time variables) are left out.
//!   A binary's variables must appear in its page; `wrapper_common`'s
//!   anywhere in `docs/`.
//!
//! A failure lists everything missing, page by page.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use test_support::{Cmd, workspace_bin};

const BINARIES: [&str; 3] = ["parallel_gpu_execute", "sanitizer_wrapper", "tag_filters"];

/// Calls that take a variable's name as their first argument: the lookups of
/// `wrapper_common::env` (and std's), and `EnvBuilder`'s changes.
const ENV_CALLS: [&str; 7] =
    ["var(", "var_nonempty(", "var_cstr(", "var_nonempty_cstr(", "var_os(", ".set(", ".remove("];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every `*.md` under `docs/`, concatenated.
fn all_docs() -> String {
    let mut pages = Vec::new();
    collect(&root().join("docs"), "md", &mut pages);
    assert!(!pages.is_empty(), "docs/ has no pages");
    pages.iter().map(|p| read(p)).collect::<Vec<_>>().join("\n")
}

/// The files under `dir` whose name ends in `.ext`, recursively, sorted.
fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn is_flag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `text` holds `word` as a whole word: not inside a longer flag or
/// name (`--lock` is not found in `--lock-dir`, `USER` not in `USERS`).
fn mentions(text: &str, word: &str, part_of_word: fn(char) -> bool) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(part_of_word) && !after.is_some_and(part_of_word)
    })
}

/// Every `--flag` in a help text (a bare `--` is not a flag).
fn flags_in(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for (at, _) in help.match_indices("--") {
        if help[..at].chars().next_back().is_some_and(is_flag_char) {
            continue;
        }
        let rest = &help[at + 2..];
        if !rest.starts_with(|c: char| c.is_ascii_lowercase()) {
            continue;
        }
        let name: String = rest.chars().take_while(|&c| is_flag_char(c)).collect();
        let name = name.trim_end_matches(['-', '_']);
        flags.insert(format!("--{name}"));
    }
    flags
}

/// The source with its test modules left out: a `#[cfg(test)]` on a `mod`
/// whose block ends with a `}` at the `mod` line's indentation (rustfmt's
/// layout).
fn without_test_modules(source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            let item = lines.get(j).copied().unwrap_or("");
            let indent = &item[..item.len() - item.trim_start().len()];
            let body = item.trim_start();
            if (body.starts_with("mod ") || body.starts_with("pub mod ")) && body.ends_with('{') {
                let close = format!("{indent}}}");
                let end = (j + 1..lines.len()).find(|&k| lines[k] == close).unwrap_or(lines.len() - 1);
                i = end + 1;
                continue;
            }
        }
        kept.push(lines[i]);
        i += 1;
    }
    kept.join("\n")
}

/// The string literals of a Rust source (plain, byte, C and raw strings):
/// each one's contents and the source text before it (before its prefix).
/// Comments and character literals are skipped.
fn string_literals(src: &str) -> Vec<(String, &str)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            }
            b'\'' => {
                // A character literal ('x', '\n', '"') or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    // The backslash and the escaped character, then the quote.
                    i = src.get(i + 3..).and_then(|r| r.find('\'')).map_or(b.len(), |e| i + 3 + e + 1);
                } else if let Some(c) = src[i + 1..].chars().next() {
                    let after = i + 1 + c.len_utf8();
                    i = if b.get(after) == Some(&b'\'') { after + 1 } else { i + 1 };
                } else {
                    i += 1;
                }
            }
            b'"' | b'r' | b'b' | b'c' => {
                // The prefix of a literal starts a token: not inside a name.
                let starts_token = i == 0 || !is_name_char(b[i - 1] as char);
                let mut j = i;
                if starts_token && matches!(b[j], b'b' | b'c') {
                    j += 1;
                }
                let mut hashes = 0;
                let raw = starts_token && b.get(j) == Some(&b'r');
                if raw {
                    j += 1;
                    while b.get(j) == Some(&b'#') {
                        hashes += 1;
                        j += 1;
                    }
                }
                if b.get(j) != Some(&b'"') || (j != i && !starts_token) {
                    i += 1;
                    continue;
                }
                let start = j + 1;
                let mut k = start;
                let end = loop {
                    if k >= b.len() {
                        break b.len();
                    }
                    if !raw && b[k] == b'\\' {
                        k += 2;
                        continue;
                    }
                    if b[k] == b'"' && b[k + 1..].iter().take(hashes).filter(|&&h| h == b'#').count() == hashes {
                        break k;
                    }
                    k += 1;
                };
                out.push((src[start..end.min(b.len())].to_string(), &src[..i]));
                i = end + 1 + hashes;
            }
            _ => i += 1,
        }
    }
    out
}

/// Environment variable names in a crate's sources (see the module doc).
fn variables_in(src_dir: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    collect(src_dir, "rs", &mut files);
    assert!(!files.is_empty(), "no Rust sources under {}", src_dir.display());
    let mut names = BTreeSet::new();
    for file in files {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "tests.rs" || name == "test.rs" {
            continue;
        }
        let source = without_test_modules(&read(&file));
        for (text, before) in string_literals(&source) {
            let upper = text.starts_with(|c: char| c.is_ascii_uppercase())
                && text.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !upper {
                continue;
            }
            let before = before.trim_end();
            if before.ends_with("env!(") {
                continue;
            }
            let looks_like_variable = text.split('_').filter(|s| !s.is_empty()).count() >= 2;
            let passed_to_env = ENV_CALLS.iter().any(|call| before.ends_with(call));
            if looks_like_variable || passed_to_env {
                names.insert(text);
            }
        }
    }
    names
}

#[test]
fn every_flag_of_each_help_text_is_in_its_page() {
    let mut missing = BTreeMap::new();
    for binary in BINARIES {
        let page_path = root().join("docs").join(format!("{binary}.md"));
        let page = read(&page_path);
        let out = Cmd::new(workspace_bin(binary)).arg("--help").run();
        out.assert_success();
        let flags = flags_in(&out.stdout);
        assert!(flags.len() >= 3, "{binary} --help printed too few flags to be a help text:\n{}", out.explain());
        let absent: Vec<String> = flags.into_iter().filter(|f| !mentions(&page, f, is_flag_char)).collect();
        if !absent.is_empty() {
            missing.insert(format!("docs/{binary}.md"), absent);
        }
    }
    assert!(missing.is_empty(), "flags printed by --help but not in the reference:\n{}", report(&missing));
}

#[test]
fn every_environment_variable_read_or_set_is_documented() {
    let docs = all_docs();
    let mut missing = BTreeMap::new();
    let mut found = BTreeMap::new();
    for crate_dir in BINARIES.iter().copied().chain(["wrapper_common"]) {
        let names = variables_in(&root().join(crate_dir).join("src"));
        let (where_, text) = if BINARIES.contains(&crate_dir) {
            let page = format!("docs/{crate_dir}.md");
            let text = read(&root().join(&page));
            (page, text)
        } else {
            ("docs/ (any page)".to_string(), docs.clone())
        };
        let absent: Vec<String> = names.iter().filter(|n| !mentions(&text, n, is_name_char)).cloned().collect();
        if !absent.is_empty() {
            missing.insert(format!("{where_} (read or set in {crate_dir}/src)"), absent);
        }
        found.insert(crate_dir, names);
    }
    // The scan itself must still see the sources' variables: a layout it no
    // longer understands would otherwise pass with nothing checked.
    for (crate_dir, expected) in [
        ("parallel_gpu_execute", "TF_GPU_COUNT"),
        ("parallel_gpu_execute", "PARALLEL_GPU_EXECUTE_LOCK_DIR"),
        ("parallel_gpu_execute", "HIP_VISIBLE_DEVICES"),
        ("sanitizer_wrapper", "ASAN_OPTIONS"),
        ("wrapper_common", "RUNFILES_MANIFEST_FILE"),
        ("wrapper_common", "PATH"),
    ] {
        assert!(
            found[crate_dir].contains(expected),
            "the scan of {crate_dir}/src found no {expected}: {:?}",
            found[crate_dir]
        );
    }
    for (crate_dir, names) in &found {
        eprintln!("{crate_dir}: {}", names.iter().cloned().collect::<Vec<_>>().join(", "));
    }
    assert!(missing.is_empty(), "environment variables not in the reference:\n{}", report(&missing));
}

fn report(missing: &BTreeMap<String, Vec<String>>) -> String {
    missing.iter().map(|(page, names)| format!("  {page}: {}\n", names.join(", "))).collect()
}

#[test]
fn the_scanners_find_what_they_should() {
    let flags = flags_in("  --lock-dir=DIR  x (--wait SECONDS), -h, --help\n  --  ignore; a--b, ---x, --Upper");
    assert_eq!(flags.into_iter().collect::<Vec<_>>(), ["--help", "--lock-dir", "--wait"]);

    assert!(mentions("`--lock-dir=DIR`", "--lock-dir", is_flag_char));
    assert!(!mentions("`--lock-dir=DIR`", "--lock", is_flag_char));
    assert!(mentions("`USER`, else", "USER", is_name_char));
    assert!(!mentions("USERS", "USER", is_name_char));

    let source = r####"
        const A: &str = "PARALLEL_GPU_EXECUTE_WAIT"; // "NOT_IN_A_COMMENT"
        let v = env::var_nonempty(b"USER").or(env::var(b"PATH"));
        env.set(b"HIP_VISIBLE_DEVICES", ids).remove(c"CUDA_VISIBLE_DEVICES");
        let q = '"'; let e = '\''; let s = "GPU"; let n = "AFTER_AN_ESCAPE"; let t = r#"RAW_NAME "quoted""#;
        let v = env!("CARGO_PKG_VERSION"); /* "NOR_IN_THIS_ONE" */
        #[cfg(test)]
        mod tests {
            fn f() { var(b"ONLY_IN_A_TEST"); }
        }
        fn after() { var_nonempty(b"AFTER_THE_TESTS"); }
    "####;
    let dir = test_support::TempDir::new("docs-scan");
    fs::create_dir_all(dir.join("src/sub")).unwrap();
    fs::write(dir.join("src/sub/deep.rs"), source).unwrap();
    fs::write(dir.join("src/tests.rs"), "const X: &str = \"IN_TESTS_RS\";").unwrap();
    let names = variables_in(&dir.join("src"));
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [
            "AFTER_AN_ESCAPE",
            "AFTER_THE_TESTS",
            "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "PARALLEL_GPU_EXECUTE_WAIT",
            "PATH",
            "USER"
        ]
    );
}
