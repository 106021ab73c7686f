//! Bazel's visibility check, made on the BUILD files without Bazel: every
//! `//pkg` or `//pkg:target` label in a `deps` or `dev_deps` list names a
//! target whose `visibility` (else its package's `default_visibility`, else
//! private) admits the package that depends on it. A from-source build
//! fails this check at analysis, in the user's build.
//!
//! Each workspace (a directory with a `WORKSPACE`, `WORKSPACE.bazel` or
//! `MODULE.bazel`: the repository, and the test workspaces under `tests/`)
//! is checked on its own. The parser reads what these files hold: calls of
//! `name = value` attributes, strings and lists of strings; labels of
//! other repositories (`@repo//...`) and of the same package are not
//! checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Punct(char),
}

/// Words, strings and punctuation, comments left out.
fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => while chars.next_if(|&d| d != '\n').is_some() {},
            '"' | '\'' => {
                let mut s = String::new();
                while let Some(d) = chars.next().filter(|&d| d != c) {
                    s.push(if d == '\\' { chars.next().unwrap_or(d) } else { d });
                }
                out.push(Tok::Str(s));
            }
            c if c.is_alphanumeric() || c == '_' => {
                let mut w = String::from(c);
                while let Some(d) = chars.next_if(|&d| d.is_alphanumeric() || d == '_' || d == '.') {
                    w.push(d);
                }
                out.push(Tok::Word(w));
            }
            c if c.is_whitespace() => {}
            c => out.push(Tok::Punct(c)),
        }
    }
    out
}

/// One top-level call (`package(...)`, a rule or a macro): its function and
/// its keyword attributes, each as the strings its value holds.
#[derive(Debug)]
struct Call {
    function: String,
    attrs: BTreeMap<String, Vec<String>>,
}

fn calls(text: &str) -> Vec<Call> {
    let toks = tokens(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < toks.len() {
        let (Tok::Word(function), Tok::Punct('(')) = (&toks[i], &toks[i + 1]) else {
            i += 1;
            continue;
        };
        let mut call = Call { function: function.clone(), attrs: BTreeMap::new() };
        let (mut depth, mut key, mut j) = (1, None::<String>, i + 2);
        while j < toks.len() && depth > 0 {
            match &toks[j] {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => depth -= 1,
                Tok::Punct(',') if depth == 1 => key = None,
                Tok::Word(w) if depth == 1 && toks.get(j + 1) == Some(&Tok::Punct('=')) => {
                    key = Some(w.clone());
                    call.attrs.entry(w.clone()).or_default();
                }
                Tok::Str(s) => {
                    if let Some(k) = &key {
                        call.attrs.get_mut(k).unwrap().push(s.clone());
                    }
                }
                _ => {}
            }
            j += 1;
        }
        out.push(call);
        i = j;
    }
    out
}

/// A package: its default visibility and its targets' own, by name.
#[derive(Debug, Default)]
struct Package {
    default_visibility: Option<Vec<String>>,
    visibility: BTreeMap<String, Option<Vec<String>>>,
    /// (depending target, label) of each `deps` and `dev_deps` entry.
    deps: Vec<(String, String)>,
}

fn package(text: &str) -> Package {
    let mut pkg = Package::default();
    for call in calls(text) {
        if call.function == "package" {
            pkg.default_visibility = call.attrs.get("default_visibility").cloned();
            continue;
        }
        let Some(name) = call.attrs.get("name").and_then(|n| n.first()) else { continue };
        pkg.visibility.insert(name.clone(), call.attrs.get("visibility").cloned());
        for key in ["deps", "dev_deps"] {
            for label in call.attrs.get(key).into_iter().flatten() {
                pkg.deps.push((name.clone(), label.clone()));
            }
        }
    }
    pkg
}

/// Whether `entries` (a visibility list) admits package `from`.
fn admits(entries: &[String], from: &str) -> bool {
    entries.iter().any(|entry| {
        if entry == "//visibility:public" {
            return true;
        }
        if entry == "//visibility:private" {
            return false;
        }
        let spec = entry.strip_prefix("//").unwrap_or_else(|| panic!("visibility entry {entry} is not read here"));
        match spec.split_once(':') {
            Some((pkg, "__pkg__")) => pkg == from,
            Some((pkg, "__subpackages__")) => pkg.is_empty() || from == pkg || from.starts_with(&format!("{pkg}/")),
            _ => panic!("visibility entry {entry} (a package_group?) is not read here"),
        }
    })
}

/// `//a/b:t` as (`a/b`, `t`); `//a/b` as (`a/b`, `b`).
fn split_label(label: &str) -> (String, String) {
    let rest = &label[2..];
    match rest.split_once(':') {
        Some((pkg, target)) => (pkg.to_string(), target.to_string()),
        None => (rest.to_string(), rest.rsplit('/').next().unwrap_or(rest).to_string()),
    }
}

fn is_workspace(dir: &Path) -> bool {
    ["WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel"].iter().any(|f| dir.join(f).is_file())
}

/// Every package under `dir`, by workspace root, then package path.
fn packages(dir: &Path, workspace: &Path, out: &mut BTreeMap<PathBuf, BTreeMap<String, Package>>) {
    let workspace = if is_workspace(dir) { dir } else { workspace };
    for name in ["BUILD.bazel", "BUILD"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            let pkg = dir.strip_prefix(workspace).unwrap().to_string_lossy().into_owned();
            out.entry(workspace.to_path_buf()).or_default().insert(pkg, package(&text));
            break;
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let skipped =
            name.starts_with('.') || name.starts_with("bazel-") || ["target", "node_modules"].contains(&name.as_str());
        if !skipped && entry.file_type().is_ok_and(|t| t.is_dir()) {
            packages(&entry.path(), workspace, out);
        }
    }
}

#[test]
fn every_workspace_dependency_is_visible_to_its_package() {
    let mut workspaces = BTreeMap::new();
    packages(root(), root(), &mut workspaces);
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    for (workspace, pkgs) in &workspaces {
        let ws = workspace.strip_prefix(root()).unwrap();
        for (from, pkg) in pkgs {
            let file = ws.join(from).join("BUILD.bazel");
            for (target, label) in &pkg.deps {
                if !label.starts_with("//") {
                    continue; // another repository's, or this package's
                }
                let (to, name) = split_label(label);
                if &to == from {
                    continue;
                }
                let at = format!("{}: {target} depends on {label}", file.display());
                let Some(dep_pkg) = pkgs.get(&to) else {
                    problems.push(format!("{at}, but there is no package //{to}"));
                    continue;
                };
                let Some(own) = dep_pkg.visibility.get(&name) else {
                    problems.push(format!("{at}, but //{to} has no target {name}"));
                    continue;
                };
                let private = vec!["//visibility:private".to_string()];
                let visibility = own.as_ref().or(dep_pkg.default_visibility.as_ref()).unwrap_or(&private);
                if !admits(visibility, from) {
                    problems.push(format!("{at}, whose visibility {visibility:?} does not admit //{from}"));
                }
                checked.push(format!("//{from} -> {label}"));
            }
        }
    }
    assert!(problems.is_empty(), "dependencies Bazel's visibility check refuses:\n  {}", problems.join("\n  "));
    // The parse found what the repository holds.
    for edge in ["//tag_filters -> //wrapper_common", "//sanitizer_wrapper -> //test_support"] {
        assert!(checked.iter().any(|c| c == edge), "{edge} was not checked; checked: {checked:?}");
    }
}

#[test]
fn the_parser_reads_calls_lists_and_visibility() {
    let pkg = package(
        r#"load("//x:y.bzl", "m")  # a comment with "quotes"
package(default_visibility = ["//a:__subpackages__"])
m(
    name = "one",
    deps = ["//b", "//c:d"],  # trailing
    other = m2(x = ["//not:dep"]),
    visibility = ["//e:__pkg__"],
)
m(name = "two", dev_deps = [":local"])
"#,
    );
    assert_eq!(pkg.default_visibility, Some(vec!["//a:__subpackages__".to_string()]));
    assert_eq!(pkg.visibility["one"], Some(vec!["//e:__pkg__".to_string()]));
    assert_eq!(pkg.visibility["two"], None);
    let deps: Vec<(&str, &str)> = pkg.deps.iter().map(|(t, l)| (t.as_str(), l.as_str())).collect();
    assert_eq!(deps, [("one", "//b"), ("one", "//c:d"), ("two", ":local")]);
    assert_eq!(split_label("//b"), ("b".into(), "b".into()));
    assert_eq!(split_label("//a/b"), ("a/b".into(), "b".into()));
    assert_eq!(split_label("//:t"), ("".into(), "t".into()));
    let vis = |e: &[&str]| e.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(admits(&vis(&["//a:__subpackages__"]), "a/b") && admits(&vis(&["//a:__subpackages__"]), "a"));
    assert!(!admits(&vis(&["//a:__subpackages__"]), "ab") && !admits(&vis(&["//a:__pkg__"]), "a/b"));
    assert!(admits(&vis(&["//:__subpackages__"]), "x/y") && admits(&vis(&["//visibility:public"]), "x"));
    assert!(!admits(&vis(&["//visibility:private"]), "x"));
}
