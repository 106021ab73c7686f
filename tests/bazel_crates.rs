//! The from-source Bazel build's crates (`bazel/crates.bzl`) agree with
//! Cargo: every crate Cargo resolves for the wrappers on Linux is there, at
//! Cargo.lock's version and checksum (the sha256 of the `.crate` file, which
//! Bazel's `http_archive` checks), with the features Cargo resolves; and each
//! crate's `BUILD.bazel` names the crates.io dependencies of its Cargo.toml.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The quoted strings of a Starlark list literal (`["a", "b"]`).
fn strings(list: &str) -> Vec<String> {
    list.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

#[derive(Debug, PartialEq, Eq)]
struct Pin {
    version: String,
    sha256: String,
    features: Vec<String>,
}

/// `CRATES` of bazel/crates.bzl: name -> (version, sha256, features).
fn bazel_crates() -> BTreeMap<String, Pin> {
    let text = read("bazel/crates.bzl");
    let body = text.split("CRATES = {").nth(1).expect("CRATES in crates.bzl");
    let body = &body[..body.find("\n}\n").expect("end of CRATES")];
    let mut crates = BTreeMap::new();
    // Entries are `"name": (version, sha256, crate_name, [features], [deps], bool),`.
    for entry in body.split("),").filter(|e| e.contains(':')) {
        let (name, rest) = entry.split_once(':').unwrap();
        let name = strings(name).pop().expect("crate name");
        let lists: Vec<&str> = rest.split('[').skip(1).map(|l| l.split(']').next().unwrap()).collect();
        let scalars = strings(rest.split('[').next().unwrap());
        crates
            .insert(name, Pin { version: scalars[0].clone(), sha256: scalars[1].clone(), features: strings(lists[0]) });
    }
    crates
}

/// What Cargo resolves: registry packages of the lock file with their
/// checksums, and their features on x86_64 Linux (`cargo metadata`).
fn cargo_crates() -> BTreeMap<String, Pin> {
    let lock = read("Cargo.lock");
    let mut checksums = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |k: &str| {
            package
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                .map(|v| v.trim_end_matches('"').to_string())
        };
        if let (Some(name), Some(version), Some(sum)) = (field("name"), field("version"), field("checksum")) {
            checksums.insert(name, (version, sum));
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--filter-platform", "x86_64-unknown-linux-gnu"])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let json = String::from_utf8(out.stdout).unwrap();
    let resolve = json.split("\"resolve\":").nth(1).expect("resolve in cargo metadata");
    let mut crates = BTreeMap::new();
    for node in resolve.split("{\"id\":\"").skip(1) {
        let id = node.split('"').next().unwrap();
        let Some(pkg) = id.strip_prefix("registry+https://github.com/rust-lang/crates.io-index#") else { continue };
        let (name, version) = pkg.split_once('@').unwrap();
        let features =
            node.split("\"features\":[").nth(1).map(|f| strings(f.split(']').next().unwrap())).unwrap_or_default();
        let (locked, sha256) = checksums.get(name).cloned().unwrap_or_else(|| panic!("{name} not in Cargo.lock"));
        assert_eq!(locked, version);
        crates.insert(name.to_string(), Pin { version: version.to_string(), sha256, features });
    }
    crates
}

#[test]
fn bazel_crates_match_cargo_lock_and_cargos_features() {
    let bazel = bazel_crates();
    let cargo = cargo_crates();
    // errno is a dependency of rustix's libc backend, which Linux does not use.
    let cargo: BTreeMap<_, _> = cargo.into_iter().filter(|(name, _)| name != "errno").collect();
    assert_eq!(
        bazel, cargo,
        "bazel/crates.bzl and Cargo disagree; update CRATES from Cargo.lock and `cargo tree -e features`"
    );
}

#[test]
fn build_files_name_the_crates_io_dependencies_of_cargo_toml() {
    for krate in ["parallel_gpu_execute", "sanitizer_wrapper", "tag_filters", "test_support", "wrapper_common"] {
        let toml = read(&format!("{krate}/Cargo.toml"));
        let deps = toml.split("[dependencies]").nth(1).map(|d| d.split("\n[").next().unwrap()).unwrap_or("");
        let mut want: Vec<String> = deps
            .lines()
            .filter_map(|l| l.split_once('.').or_else(|| l.split_once(' ')).map(|(n, _)| n.trim().to_string()))
            .filter(|n| ["libc", "rustix"].contains(&n.as_str()))
            .collect();
        want.sort();
        let build = read(&format!("{krate}/BUILD.bazel"));
        let mut got =
            build.split("crates = [").nth(1).map(|l| strings(l.split(']').next().unwrap())).unwrap_or_default();
        got.sort();
        assert_eq!(got, want, "{krate}/BUILD.bazel `crates` vs {krate}/Cargo.toml [dependencies]");
    }
}

#[test]
fn the_checksums_are_those_of_the_crate_files() {
    // Cargo keeps the .crate files it downloaded to build this workspace:
    // every crate Bazel pins is one of them, and each is hashed. Without
    // the cache (or with a crate missing from it) the check cannot run:
    // a failure under CI, one line saying so elsewhere.
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let checks = "the pinned crates' checksums against the downloaded .crate files";
    let Some(cache) = home.map(|h| h.join("registry/cache")) else {
        test_support::prerequisite(false, "CARGO_HOME or HOME (for Cargo's registry cache)", checks);
        return;
    };
    let Ok(indexes) = std::fs::read_dir(&cache) else {
        test_support::prerequisite(false, &format!("Cargo registry cache {}", cache.display()), checks);
        return;
    };
    let dirs: Vec<_> = indexes.flatten().map(|e| e.path()).collect();
    let pins = bazel_crates();
    assert!(!pins.is_empty(), "no crates in bazel/crates.bzl");
    let (mut checked, mut missing) = (0, Vec::new());
    for (name, pin) in &pins {
        let file = format!("{name}-{}.crate", pin.version);
        let Some(path) = dirs.iter().map(|d| d.join(&file)).find(|p| p.is_file()) else {
            missing.push(file);
            continue;
        };
        let out = Command::new("sha256sum").arg(&path).output().expect("sha256sum");
        let sum = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string();
        assert_eq!(sum, pin.sha256, "{}", path.display());
        checked += 1;
    }
    eprintln!("{checked} of {} pinned .crate files hashed", pins.len());
    let what = format!("{} in {}", missing.join(", "), cache.display());
    if test_support::prerequisite(missing.is_empty(), &what, checks) {
        assert_eq!(checked, pins.len());
    }
}
