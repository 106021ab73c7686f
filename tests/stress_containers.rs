//! Containers that share a host's lock directory, each seeing part of the
//! host's GPUs under its own indices: with `--lock-names=physical`, a load
//! of wrappers from both never books a physical GPU twice (the checker of
//! `stress.rs`, applied to physical identities).

use std::time::Duration;
use test_support::hardware::KfdNode;
use test_support::{
    Cmd, RECORDING_TEST, Runfiles, Sysroot, TempDir, XorShift64, check_gpus_match_locks, max_overlap, parse_record,
    read_to_string, record_value, workspace_bin,
};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One host of 4 GPUs (unique ids 500-503) seen by two containers that share
/// its lock directory: A was given GPUs 0-2, B GPUs 1-3, so each calls its
/// own 0, 1, 2 and they share physical GPUs 1 and 2. With
/// `--lock-names=physical`, the same checker as above, applied to physical
/// identities (the lock file names), proves that no physical GPU ever had
/// more tests than slots, and no slot two tests.
#[test]
fn containers_sharing_a_lock_directory_never_book_a_physical_gpu_twice() {
    const HOST_GPUS: u64 = 4;
    const PHYS_SLOTS: u32 = 1;
    let dir = TempDir::new("stress-physical");
    let mut runfiles = Runfiles::new(&dir, "ws");
    runfiles.add("ws/pkg/gpu_test", RECORDING_TEST, true);
    let lock_dir = dir.join("host-locks");
    let bin = workspace_bin("parallel_gpu_execute");
    let mut roots = Vec::new();
    for (name, given) in [("a", 0..3u64), ("b", 1..4u64)] {
        let sub = TempDir::new(&format!("stress-physical-{name}"));
        let mut root = Sysroot::new(&sub);
        root.add_kfd_node(&KfdNode::cpu(64));
        for i in 0..HOST_GPUS {
            let gpu = KfdNode::gpu(90402, 304, 128 + i).unique(500 + i);
            if given.contains(&i) {
                root.add_kfd_node_with_render(&gpu);
            } else {
                root.add_kfd_node(&gpu);
            }
        }
        roots.push((sub, root));
    }
    let wrappers = env_or("STRESS_PHYSICAL_WRAPPERS", 24usize);
    let mut rng = XorShift64::new(env_or("STRESS_SEED", 4));
    let mut started = Vec::new();
    for i in 0..wrappers {
        let (_, root) = &roots[i % 2];
        let needed = if rng.below(4) == 0 { 2 } else { 1 };
        let record = dir.join(format!("record-{i}"));
        let mut c = Cmd::new(&bin);
        runfiles.apply(&mut c);
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &root.root)
            .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir)
            .env("PARALLEL_GPU_EXECUTE_LOCK_NAMES", "physical")
            .env("TF_TESTS_PER_GPU", PHYS_SLOTS.to_string())
            .env("RECORD_FILE", &record)
            .env("SLEEP", "0.1")
            .timeout(Duration::from_secs(300))
            .arg("./pkg/gpu_test")
            .arg(format!("--num_processes={needed}"));
        started.push((needed, record, c.spawn()));
    }
    // (physical GPU, slot) per run, with its start and end.
    type PhysicalRun = (Vec<(u64, u32)>, u128, u128);
    let mut runs: Vec<PhysicalRun> = Vec::new();
    for (i, (needed, record, running)) in started.into_iter().enumerate() {
        let out = running.wait();
        out.assert_success();
        let rec = parse_record(&read_to_string(&record));
        // The ids the test sees are its container's indices of the physical
        // GPUs whose locks it holds: A's index i is GPU 500+i, B's 501+i.
        let first = 500 + (i % 2) as u64;
        let physical = |id: &str| format!("uid-{}", first + id.parse::<u64>().expect("a numeric id"));
        if let Err(e) = check_gpus_match_locks(&rec, "HIP_VISIBLE_DEVICES", physical) {
            panic!("{e}\nrecord: {rec:?}\n{}", out.explain());
        }
        let get = |k: &str| {
            record_value(&rec, k).unwrap_or_else(|| panic!("no {k} in {rec:?}\n{}", out.explain())).to_string()
        };
        let locks: Vec<(u64, u32)> = get("locks")
            .split_whitespace()
            .map(|l| {
                let (id, slot) =
                    l.strip_prefix("gpulockuid-").and_then(|l| l.split_once('_')).expect("a physical lock name");
                (id.parse().unwrap(), slot.parse().unwrap())
            })
            .collect();
        assert_eq!(locks.len(), needed, "{}", out.explain());
        runs.push((locks, get("start").parse().unwrap(), get("end").parse().unwrap()));
    }
    for gpu in 500..500 + HOST_GPUS {
        let on_gpu = runs.iter().filter(|(l, ..)| l.iter().any(|&(g, _)| g == gpu)).map(|&(_, s, e)| (s, e));
        let most = max_overlap(on_gpu);
        assert!(most <= PHYS_SLOTS as usize, "physical GPU {gpu} had {most} tests at once ({PHYS_SLOTS} slot)");
    }
    let shared: usize = runs.iter().filter(|(l, ..)| l.iter().any(|&(g, _)| g == 501 || g == 502)).count();
    assert!(shared > 0, "no run used a shared GPU");
    println!(
        "physical: {wrappers} wrappers in two containers over 4 GPUs: no physical GPU booked twice ({shared} runs on the shared GPUs)"
    );
}
