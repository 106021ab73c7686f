//! The house rules of the source tree, checked: imports run one way, from
//! the entry point down to the system layer; no module imports one that
//! imports it back; few files directly in parallel_gpu_execute's `src/`; no source file
//! over 600 lines.
//!
//! An import is any `crate::a::b` path (or `crate::{a, b}`) outside
//! comments and outside a file's `#[cfg(test)] mod tests`; it points at
//! the longest module that the path names. `crate::prelude` and
//! `crate::TOOL` (the crate's prelude and its name, which every layer
//! takes from the crate root) are not arrows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// parallel_gpu_execute's layers, from the top: a module may import from a
/// lower layer, or within its own layer when no circle results.
const PGE_LAYERS: &[&[&str]] = &[
    &["launch", "jax", "report"],
    &["cli", "settings"],
    &["slots"],
    &["hardware"],
    &["error"],
    &["profile"],
    &["sys"],
];

const CRATES: &[&str] =
    &["parallel_gpu_execute", "sanitizer_wrapper", "tag_filters", "wrapper_common", "test_support", "wait_model"];
const MAX_LINES: usize = 600;
const MAX_FILES_IN_SRC: usize = 8;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".output" && !name.to_string_lossy().starts_with('.') {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a::b` for `src/a/b.rs` and `src/a/b/mod.rs`; `""` for `src/lib.rs`;
/// `None` for binaries' entry points.
fn module_name(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    match parts.as_slice() {
        [one] if one == "main" => return None,
        [one] if one == "lib" => return Some(String::new()),
        _ => {}
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts.join("::"))
}

/// The file's code without comments and without its unit tests.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn ident_path_at(text: &str) -> Vec<&str> {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(text.len());
    text[..end].split("::").filter(|s| !s.is_empty()).collect()
}

/// Every module of the crate and the modules each one imports.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut code = BTreeMap::new();
    for file in &files {
        if let Some(name) = module_name(src, file) {
            code.insert(name, code_of(&std::fs::read_to_string(file).unwrap()));
        }
    }
    let known: BTreeSet<String> = code.keys().cloned().collect();
    let resolve = |path: &[&str]| -> Option<String> {
        if matches!(path.first(), Some(&"prelude") | Some(&"TOOL")) {
            return None;
        }
        (1..=path.len()).rev().map(|k| path[..k].join("::")).find(|c| known.contains(c))
    };
    let mut graph = BTreeMap::new();
    for (name, text) in &code {
        let mut to = BTreeSet::new();
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                let list = &list[..list.find('}').unwrap_or(list.len())];
                for item in list.split(',') {
                    let path: Vec<&str> = item.trim().split("::").collect();
                    to.extend(resolve(&path));
                }
            } else {
                to.extend(resolve(&ident_path_at(rest)));
            }
        }
        to.remove(name);
        graph.insert(name.clone(), to);
    }
    graph
}

/// The circles of the graph (strongly connected parts of two or more).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: reachability both ways.
    let reach = |from: &str, forward: bool| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(v) = stack.pop() {
            let next: Vec<String> = if forward {
                graph.get(&v).map(|s| s.iter().cloned().collect()).unwrap_or_default()
            } else {
                graph.iter().filter(|(_, to)| to.contains(&v)).map(|(k, _)| k.clone()).collect()
            };
            for w in next {
                if seen.insert(w.clone()) {
                    stack.push(w);
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for v in graph.keys() {
        if done.contains(v) {
            continue;
        }
        let both: Vec<String> = reach(v, true).intersection(&reach(v, false)).cloned().collect();
        if both.len() > 1 {
            done.extend(both.iter().cloned());
            out.push(both);
        }
    }
    out
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

fn describe(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    graph
        .iter()
        .flat_map(|(from, to)| {
            to.iter().map(move |t| format!("  {} -> {}\n", if from.is_empty() { "<root>" } else { from }, t))
        })
        .collect()
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    for krate in CRATES {
        let graph = import_graph(&root().join(krate).join("src"));
        assert!(graph.len() > 1, "{krate}: no modules found under src/");
        let found = circles(&graph);
        assert!(found.is_empty(), "{krate}: modules in a circle: {found:?}\nimports:\n{}", describe(&graph));
    }
}

/// The arrows of `graph` that point up `layers` or at the entry point.
fn against_layers(graph: &BTreeMap<String, BTreeSet<String>>, layers: &[&[&str]]) -> Vec<String> {
    let layer = |m: &str| layers.iter().position(|l| l.contains(&top(m)));
    let mut wrong = Vec::new();
    for (from, to) in graph {
        if from.is_empty() {
            continue; // the entry point (lib.rs) may take anything
        }
        let Some(from_layer) = layer(from) else {
            wrong.push(format!("{from}: a top-level module that no layer names"));
            continue;
        };
        for t in to {
            if top(t) == top(from) {
                continue;
            }
            match layer(t) {
                Some(l) if l >= from_layer => {}
                Some(_) => wrong.push(format!("{from} -> {t}: points up")),
                None => wrong.push(format!("{from} -> {t}: to the entry point")),
            }
        }
    }
    wrong
}

#[test]
fn parallel_gpu_execute_imports_run_from_the_entry_point_down() {
    let graph = import_graph(&root().join("parallel_gpu_execute/src"));
    let wrong = against_layers(&graph, PGE_LAYERS);
    assert!(
        wrong.is_empty(),
        "arrows against the layers {PGE_LAYERS:?}:\n{}\nimports:\n{}",
        wrong.join("\n"),
        describe(&graph)
    );
}

#[test]
fn parallel_gpu_execute_keeps_few_files_directly_in_src() {
    {
        let krate = "parallel_gpu_execute";
        let src = root().join(krate).join("src");
        let files: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            files.len() <= MAX_FILES_IN_SRC,
            "{krate}/src has {} files (at most {MAX_FILES_IN_SRC}): {files:?}",
            files.len()
        );
    }
}

#[test]
fn no_source_file_is_over_600_lines() {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    assert!(files.len() > 50, "found only {} Rust files under {}", files.len(), root().display());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.strip_prefix(root()).unwrap_or(f).display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}

#[test]
fn the_checker_sees_a_circle_and_an_upward_arrow() {
    let dir = std::env::temp_dir().join(format!("layout-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sys")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod a;\npub mod sys;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::sys::clock::Instant;\n// crate::nothing\n").unwrap();
    std::fs::write(dir.join("sys/mod.rs"), "pub mod clock;\n").unwrap();
    std::fs::write(
        dir.join("sys/clock.rs"),
        "use crate::{a, prelude::*};\n#[cfg(test)]\nmod tests { use crate::b; }\n",
    )
    .unwrap();
    let graph = import_graph(&dir);
    assert_eq!(graph["a"], BTreeSet::from(["sys::clock".to_string()]));
    assert_eq!(graph["sys::clock"], BTreeSet::from(["a".to_string()]));
    assert_eq!(circles(&graph), vec![vec!["a".to_string(), "sys::clock".to_string()]]);
    assert_eq!(against_layers(&graph, &[&["a"], &["sys"]]), ["sys::clock -> a: points up"]);
    assert!(against_layers(&graph, &[&["sys"], &["a"]]).contains(&"a -> sys::clock: points up".to_string()));
    std::fs::remove_dir_all(&dir).unwrap();
}
