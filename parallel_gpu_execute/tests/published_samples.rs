//! Every published machine description under `../shared/real-hardware/`
//! (beside the repository; `REAL_HARDWARE_DIR` overrides), run against its
//! `EXPECTED` file: the sample's KFD topology, NVIDIA `/proc` tree, `/dev`
//! listing and `rocminfo` output become a fake host, and the wrapper must
//! count what the runtime would enumerate there and set that vendor's
//! variables. The samples are read where they lie, never copied into the
//! repository; without the directory the test fails under `CI=true` and
//! says what it did not check elsewhere (`test_support::prerequisite`).
//!
//! `EXPECTED`: one tab-separated line per scenario,
//! `SCENARIO RENDER-NODES COUNT VENDOR WHY` (format in the samples' README).

mod common;

use common::{Fixture, Record};
use std::fs;
use std::path::{Path, PathBuf};
use test_support::Output;

fn samples_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("REAL_HARDWARE_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/real-hardware"),
    };
    dir.is_dir().then_some(dir)
}

/// Copies a directory tree (files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every `drm_render_minor` (other than 0) of the sample's topology.
fn topology_render_minors(sample: &Path) -> Vec<u64> {
    let nodes = sample.join("sys/class/kfd/kfd/topology/nodes");
    let Ok(entries) = fs::read_dir(nodes) else { return Vec::new() };
    let mut minors = Vec::new();
    for entry in entries {
        let text = fs::read_to_string(entry.unwrap().path().join("properties")).unwrap_or_default();
        for line in text.lines() {
            if let Some(m) = line.strip_prefix("drm_render_minor ").and_then(|v| v.trim().parse::<u64>().ok()) {
                if m != 0 {
                    minors.push(m);
                }
            }
        }
    }
    minors
}

/// The RENDER-NODES column: `all`, `none`, `-`, `dev.txt`, or a list of
/// minors and ranges (`128,130`, `136-143`).
fn render_nodes(column: &str, sample: &Path) -> Result<Vec<u64>, String> {
    match column {
        "all" => Ok(topology_render_minors(sample)),
        "none" | "-" | "dev.txt" => Ok(Vec::new()),
        list => {
            let mut minors = Vec::new();
            for part in list.split(',') {
                let bad = || format!("bad RENDER-NODES entry '{part}'");
                match part.split_once('-') {
                    Some((a, b)) => {
                        let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                        minors.extend(a..=b);
                    }
                    None => minors.push(part.parse().map_err(|_| bad())?),
                }
            }
            Ok(minors)
        }
    }
}

struct Scenario {
    sample: PathBuf,
    name: String,
    render: String,
    count: u32,
    vendor: String,
    why: String,
}

fn scenarios(dir: &Path) -> Vec<Scenario> {
    let mut found = Vec::new();
    let mut samples: Vec<PathBuf> = Vec::new();
    for kind in fs::read_dir(dir).unwrap().flatten().filter(|e| e.path().is_dir()) {
        for sample in fs::read_dir(kind.path()).unwrap().flatten() {
            if sample.path().join("EXPECTED").is_file() {
                samples.push(sample.path());
            }
        }
    }
    samples.sort();
    for sample in samples {
        let text = fs::read_to_string(sample.join("EXPECTED")).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            let cols: Vec<&str> = line.split('\t').collect();
            assert!(cols.len() >= 4, "{}: bad EXPECTED line {line:?}", sample.display());
            found.push(Scenario {
                sample: sample.clone(),
                name: cols[0].to_string(),
                render: cols[1].to_string(),
                count: cols[2].parse().unwrap_or_else(|_| panic!("{}: bad COUNT in {line:?}", sample.display())),
                vendor: cols[3].to_string(),
                why: cols.get(4).unwrap_or(&"").to_string(),
            });
        }
    }
    found
}

/// Lays out the scenario's host; returns the wrapper flags it implies.
fn build(f: &mut Fixture, s: &Scenario) -> Result<Vec<String>, String> {
    for tree in ["sys", "proc"] {
        if s.sample.join(tree).is_dir() {
            copy_tree(&s.sample.join(tree), &f.sysroot.root.join(tree));
        }
    }
    let dev_txt = s.sample.join("dev.txt");
    if dev_txt.is_file() {
        for entry in fs::read_to_string(&dev_txt).unwrap().lines().map(str::trim).filter(|l| !l.is_empty()) {
            f.sysroot.add_dev_entry(entry.trim_start_matches("/dev/"));
        }
    } else if s.render == "dev.txt" {
        return Err("RENDER-NODES is dev.txt but the sample has none".into());
    }
    for minor in render_nodes(&s.render, &s.sample)? {
        f.sysroot.add_render_node(minor);
    }
    let rocminfo = s.sample.join("rocminfo.txt");
    if rocminfo.is_file() {
        let copy = f.dir.join("rocminfo.txt");
        fs::copy(&rocminfo, &copy).unwrap();
        f.runfiles.add("rocm/bin/rocminfo", &format!("#!/bin/sh\ncat '{}'\n", copy.display()), true);
    }
    match s.name.as_str() {
        "host" | "default" => Ok(Vec::new()),
        other => match other.strip_prefix("vendor=") {
            Some(v) => Ok(vec![format!("--vendor={v}")]),
            None => Err(format!("unknown SCENARIO '{other}'")),
        },
    }
}

/// Checks one scenario; `Err` says what went wrong.
fn check(s: &Scenario) -> Result<(), String> {
    let label = s.sample.file_name().unwrap().to_string_lossy().to_string();
    let mut f = Fixture::new(&format!("sample-{label}"));
    let flags = build(&mut f, s)?;
    let listed = f.cmd().args(&flags).arg("--list").run();
    let detail = |what: String, out: &Output| format!("{what}\n--list:\n{}\n{}", listed.stdout, out.explain());
    let count = f.cmd().args(&flags).arg("--list=count").run();
    if count.code() != 0 || count.stdout.trim() != s.count.to_string() {
        return Err(detail(format!("--list=count says {:?}, EXPECTED {}", count.stdout.trim(), s.count), &count));
    }
    let mut c = f.cmd();
    c.args(&flags).arg("./pkg/gpu_test").arg(format!("--num_processes={}", s.count.max(1)));
    let out = c.run();
    if out.code() != 0 {
        return Err(detail("the test did not run".into(), &out));
    }
    let r = Record::of(&out);
    let ids: Vec<String> = (0..s.count).map(|i| i.to_string()).collect();
    let ids = ids.join(",");
    let (rocr, hip, cuda) =
        (r.var("ROCR_VISIBLE_DEVICES"), r.var("HIP_VISIBLE_DEVICES"), r.var("CUDA_VISIBLE_DEVICES"));
    let ok = match s.vendor.as_str() {
        // rocm mode: XLA main's variables.
        "rocm" => hip == Some(ids.as_str()) && cuda == Some(ids.as_str()) && rocr.is_none(),
        "cuda" => cuda == Some(ids.as_str()) && rocr.is_none() && hip.is_none(),
        "none" => rocr.is_none() && cuda.is_none() && out.stderr.contains("Execute with no GPU support"),
        other => return Err(format!("unknown VENDOR '{other}'")),
    };
    if !ok {
        return Err(detail(
            format!("want {} with ids {ids:?}; got ROCR={rocr:?} HIP={hip:?} CUDA={cuda:?}", s.vendor),
            &out,
        ));
    }
    Ok(())
}

#[test]
fn every_published_sample_counts_as_its_runtime_would() {
    let Some(dir) = samples_dir() else {
        let what = "published samples (../shared/real-hardware beside the repository, or REAL_HARDWARE_DIR)";
        test_support::prerequisite(false, what, "the count on every published machine");
        return;
    };
    let all = scenarios(&dir);
    assert!(!all.is_empty(), "no EXPECTED files under {}", dir.display());
    let mut failures = Vec::new();
    for s in &all {
        let name = format!("{} [{}]", s.sample.strip_prefix(&dir).unwrap_or(&s.sample).display(), s.name);
        match check(s) {
            Ok(()) => eprintln!("ok: {name}: {} {} ({})", s.count, s.vendor, s.why),
            Err(e) => failures.push(format!("FAIL: {name}: {e}")),
        }
    }
    eprintln!("{} of {} published scenarios as EXPECTED", all.len() - failures.len(), all.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
