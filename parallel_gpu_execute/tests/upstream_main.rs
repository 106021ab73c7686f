//! parallel_gpu_execute against what the upstream scripts do on the branch
//! that CI runs, each at the commit docs/differences.md and docs/jax.md cite:
//!
//! - XLA's `build_tools/rocm/parallel_gpu_execute.sh` on openxla/xla main,
//!   last changed in 7fbacdd7 (2026-05-04) and unchanged at 183fa00c
//!   (2026-08-22);
//! - the ROCm/jax fork's `build/parallel_accelerator_execute.sh` on its
//!   `main`, last changed in 4443705e (2022-07-06);
//! - JAX's `build/parallel_accelerator_execute.sh` on jax-ml/jax main, last
//!   changed in 58d4536f (read at cec06d11, 2026-08-08).
//!
//! Each script is modelled below in a few lines of shell written for these
//! tests from the behaviour the docs describe (count, slot order, lock
//! names, variables, the "no slot" exit): the model and the wrapper run on
//! the same fake host, and their records are compared. The models close the
//! lock files they could not lock, so that a test's record lists only the
//! lock it holds.

mod common;

use common::{Fixture, Record};
use std::path::Path;
use std::time::Duration;
use test_support::{Cmd, Output, fake_rocminfo_script, hold_lock, parse_record, read_to_string, record_value};

/// XLA main's ROCm script at 7fbacdd7, modelled: rocminfo from the runfiles
/// counts the GPUs (`TF_GPU_COUNT` is overwritten), none: the test runs as
/// it is; `TF_TESTS_PER_GPU` slots (8); slot-outer, GPU-inner, `flock -n`
/// on `<dir>/gpulock<i>_<j>`; `CUDA_VISIBLE_DEVICES=i` and
/// `HIP_VISIBLE_DEVICES=i`, `ROCR_VISIBLE_DEVICES` untouched; one GPU per
/// test; nothing free: exit 1. `MODEL_LOCK_DIR` stands for `/var/lock`.
const XLA_MAIN_MODEL: &str = r#"
info=$(find -L "${TEST_SRCDIR:-.}" -name rocminfo -path '*/bin/rocminfo' | head -n 1)
gpus=$("$info" | grep -c 'Name: *gfx')
slots=${TF_TESTS_PER_GPU:-8}
if [ "$gpus" -eq 0 ]; then echo "Execute with no GPU support"; exec "$@"; fi
export TF_PER_DEVICE_MEMORY_LIMIT_MB=${TF_PER_DEVICE_MEMORY_LIMIT_MB:-4096}
mkdir -p "$MODEL_LOCK_DIR"
for ((j = 0; j < slots; j++)); do
  for ((i = 0; i < gpus; i++)); do
    exec {fd}>"$MODEL_LOCK_DIR/gpulock${i}_${j}" || exit 1
    if flock -n "$fd"; then
      export CUDA_VISIBLE_DEVICES=$i HIP_VISIBLE_DEVICES=$i
      echo "Running test $* on GPU $i"
      "$@"; rc=$?; exit $rc
    fi
    exec {fd}>&-
  done
done
echo "Cannot find a free GPU to run the test $* on, exiting with failure..."
exit 1
"#;

/// JAX's script, modelled for both versions: `JAX_ACCELERATOR_COUNT` (4)
/// and `JAX_TESTS_PER_ACCELERATOR` (8), nothing counted; slot-outer,
/// accelerator-inner, `flock -n` on
/// `<dir>/jax_accelerator_lock_<i>_<j>`; `MODEL_VARIABLES` are set to `i`.
const JAX_MODEL: &str = r#"
count=${JAX_ACCELERATOR_COUNT:-4}
slots=${JAX_TESTS_PER_ACCELERATOR:-8}
export TF_PER_DEVICE_MEMORY_LIMIT_MB=${TF_PER_DEVICE_MEMORY_LIMIT_MB:-2048}
mkdir -p "$MODEL_LOCK_DIR"
for ((j = 0; j < slots; j++)); do
  for ((i = 0; i < count; i++)); do
    exec {fd}>"$MODEL_LOCK_DIR/jax_accelerator_lock_${i}_${j}" || exit 1
    if flock -n "$fd"; then
      for v in $MODEL_VARIABLES; do export "$v=$i"; done
      echo "Running test $* on accelerator $i"
      "$@"; rc=$?; exit $rc
    fi
    exec {fd}>&-
  done
done
echo "Cannot find a free accelerator to run the test $* on, exiting with failure..."
exit 1
"#;

/// The ROCm/jax fork's variables (4443705e).
const FORK_VARIABLES: &str = "TPU_VISIBLE_CHIPS CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES";
/// JAX main's (58d4536f).
const JAX_MAIN_VARIABLES: &str = "TPU_VISIBLE_CHIPS CUDA_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES ONEAPI_VISIBLE_DEVICES";

/// The variables each comparison looks at.
const VARIABLES: [&str; 6] = [
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "TPU_VISIBLE_CHIPS",
    "ONEAPI_VISIBLE_DEVICES",
    "TF_PER_DEVICE_MEMORY_LIMIT_MB",
];

/// An AMD host of `gpus` GPUs, seen by KFD (ours) and by a rocminfo in the
/// runfiles (the XLA model), with a lock directory shared by both.
fn amd_host(label: &str, gpus: u32) -> Fixture {
    let mut f = Fixture::new(label);
    f.sysroot.add_kfd_gpus(gpus);
    f.runfiles.add("local_config_rocm/rocm/rocm_dist/bin/rocminfo", &fake_rocminfo_script(gpus as usize), true);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    f
}

/// A model run as the wrapper would be: from the runfiles, on the test.
fn model(f: &Fixture, script: &str, variables: &str) -> Cmd {
    let mut c = Cmd::new("/bin/bash");
    f.runfiles.apply(&mut c);
    c.env("MODEL_LOCK_DIR", &f.lock_dir).env("MODEL_VARIABLES", variables).args(["-c", script, "model"]);
    c.arg(f.test_path());
    c
}

/// Ours, under the name JAX's scripts have (the jax profile), with its
/// lock directory from `JAX_LOCK_DIR`.
fn ours_as_jax(f: &Fixture) -> Cmd {
    let mut c = f.jax_cmd();
    c.env("JAX_LOCK_DIR", &f.lock_dir).env_remove("PARALLEL_GPU_EXECUTE_LOCK_DIR");
    c
}

/// What a comparison looks at in one run: the lock it held and the
/// variables.
fn seen(r: &Record) -> Vec<String> {
    let mut out = vec![format!("locks={}", r.locks().join(" "))];
    out.extend(VARIABLES.iter().map(|v| format!("{v}={}", r.var(v).unwrap_or("(unset)"))));
    out
}

/// Runs `ours` and `theirs` with the lock files `held` held by a third
/// party, each in a lock directory of its own state, and requires the same
/// lock and variables.
#[track_caller]
fn assert_same(f: &Fixture, held: &[&str], ours: &mut Cmd, theirs: &mut Cmd, what: &str) -> Vec<String> {
    let run = |c: &mut Cmd| -> (Output, Vec<String>) {
        let _ = std::fs::remove_dir_all(&f.lock_dir);
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        let _held: Vec<_> = held.iter().map(|name| hold_lock(f.lock_dir.join(name))).collect();
        let out = c.run();
        let r = Record::of(out.assert_success());
        let s = seen(&r);
        (out, s)
    };
    let (ours_out, ours_seen) = run(ours);
    let (theirs_out, theirs_seen) = run(theirs);
    assert_eq!(
        ours_seen,
        theirs_seen,
        "{what}, with {held:?} held: ours (left) against upstream (right)\nours:\n{}\nupstream:\n{}",
        ours_out.explain(),
        theirs_out.explain()
    );
    ours_seen
}

/// On an AMD host without a preset pool, a single-GPU test gets what XLA
/// main's script gives it: the same lock file, taken in the same order
/// (slot 0 on every GPU before slot 1), and the same variables
/// (`HIP_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` the index, no
/// `ROCR_VISIBLE_DEVICES`, the 4096 MB limit).
#[test]
fn against_xla_main_7fbacdd7_a_single_gpu_test_gets_the_same_lock_and_variables() {
    let f = amd_host("xla-main-same", 2);
    let cases: [(&[&str], &str); 4] = [
        (&[], "gpulock0_0"),
        (&["gpulock0_0"], "gpulock1_0"),
        (&["gpulock0_0", "gpulock1_0"], "gpulock0_1"),
        (&["gpulock0_0", "gpulock1_0", "gpulock0_1"], "gpulock1_1"),
    ];
    for (held, want) in cases {
        let mut ours = f.cmd();
        ours.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir).env("TF_TESTS_PER_GPU", "2").arg("./pkg/gpu_test");
        let mut theirs = model(&f, XLA_MAIN_MODEL, "");
        theirs.env("TF_TESTS_PER_GPU", "2");
        let got = assert_same(&f, held, &mut ours, &mut theirs, "XLA main");
        assert_eq!(got[0], format!("locks={want}"), "slot-outer, GPU-inner: {got:?}");
        let gpu = &want["gpulock".len()..want.len() - 2];
        assert!(got.contains(&format!("HIP_VISIBLE_DEVICES={gpu}")), "{got:?}");
        assert!(got.contains(&"ROCR_VISIBLE_DEVICES=(unset)".to_string()), "{got:?}");
    }
    // Every slot taken: both fail with exit 1 (ours at once with --wait=0).
    let names = ["gpulock0_0", "gpulock1_0"];
    let _held: Vec<_> = names.iter().map(|n| hold_lock(f.lock_dir.join(n))).collect();
    let ours = f.cmd().env("TF_TESTS_PER_GPU", "1").args(["--wait=0", "./pkg/gpu_test"]).run();
    let theirs = model(&f, XLA_MAIN_MODEL, "").env("TF_TESTS_PER_GPU", "1").run();
    assert_eq!((ours.code(), theirs.code()), (1, 1), "ours:\n{}\nupstream:\n{}", ours.explain(), theirs.explain());
}

/// XLA main's script and ours on one host, one lock directory, run at once
/// in a mix: no lock file is ever held by two tests at a time, and each
/// test's `HIP_VISIBLE_DEVICES` is the GPU its lock file names, so no GPU
/// slot is booked twice.
#[test]
fn against_xla_main_7fbacdd7_both_on_one_host_never_book_a_slot_twice() {
    let f = amd_host("xla-main-mix", 2);
    let mut running = Vec::new();
    for k in 0..8 {
        let record = f.dir.join(format!("rec{k}"));
        let mut c = if k % 2 == 0 {
            let mut c = f.cmd();
            c.arg("./pkg/gpu_test");
            c
        } else {
            model(&f, XLA_MAIN_MODEL, "")
        };
        // 2 GPUs x 2 slots: at most four at once; ours waits for a slot,
        // the model fails when it finds none (exit 1, as upstream).
        c.env("TF_TESTS_PER_GPU", "2").env("SLEEP", "0.4").env("RECORD_FILE", &record);
        let mut r = c.spawn();
        if k % 2 == 1 {
            // The model (a shell script, slower to start than ours) has
            // taken a slot and runs its test, or has given up, before the
            // next of ours comes, so that both run whatever the machine's
            // load (the test's record is written only as it ends).
            // Its child `gpu_test` is the recording test: it holds a slot.
            test_support::wait_until(Duration::from_secs(10), || r.has_child_named("gpu_test") || r.has_exited());
        }
        running.push((k, record, r));
        std::thread::sleep(Duration::from_millis(30));
    }
    let mut spans: Vec<(usize, String, u128, u128)> = Vec::new();
    for (k, record, r) in running {
        let out = r.wait();
        if k % 2 == 1 && out.code() == 1 {
            assert!(out.stdout.contains("Cannot find a free GPU"), "{}", out.explain());
            continue;
        }
        out.assert_success();
        let rec = parse_record(&read_to_string(&record));
        let lock = record_value(&rec, "locks").unwrap_or_default().to_string();
        assert!(lock.starts_with("gpulock") && !lock.contains(' '), "run {k}: one lock, got {lock:?}");
        let gpu = &lock["gpulock".len()..lock.rfind('_').unwrap()];
        assert_eq!(record_value(&rec, "HIP_VISIBLE_DEVICES"), Some(gpu), "run {k}: {rec:?}");
        assert_eq!(record_value(&rec, "CUDA_VISIBLE_DEVICES"), Some(gpu), "run {k}: {rec:?}");
        let start: u128 = record_value(&rec, "start").unwrap().parse().unwrap();
        let end: u128 = record_value(&rec, "end").unwrap().parse().unwrap();
        spans.push((k, lock, start, end));
    }
    assert!(spans.iter().any(|s| s.0 % 2 == 0) && spans.iter().any(|s| s.0 % 2 == 1), "both ran: {spans:?}");
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            let overlap = a.2 < b.3 && b.2 < a.3;
            assert!(!(overlap && a.1 == b.1), "runs {} and {} held {} at once: {spans:?}", a.0, b.0, a.1);
        }
    }
}

/// With a preset pool (`ROCR_VISIBLE_DEVICES=2,3`, a container given GPUs 2
/// and 3), XLA main's script counts the two GPUs ROCr shows and locks
/// `gpulock0_*`/`gpulock1_*`, names that mean GPUs 0 and 1 to a job
/// without a pool; ours locks by the pool's ids, `gpulock2_*`. The test's
/// variables are the same in both: `HIP_VISIBLE_DEVICES` and
/// `CUDA_VISIBLE_DEVICES` index the pool, which stays as it is.
#[test]
fn against_xla_main_7fbacdd7_a_preset_pool_gets_the_same_variables_and_other_lock_names() {
    let mut f = Fixture::new("xla-main-pool");
    f.sysroot.add_kfd_gpus(4);
    // rocminfo under ROCR_VISIBLE_DEVICES=2,3 lists the two GPUs it shows.
    f.runfiles.add("local_config_rocm/rocm/rocm_dist/bin/rocminfo", &fake_rocminfo_script(2), true);
    let pool = |c: &mut Cmd| {
        c.env("ROCR_VISIBLE_DEVICES", "2,3").env("TF_TESTS_PER_GPU", "1");
    };
    let mut ours = f.cmd();
    pool(&mut ours);
    let out = ours.arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    let mut theirs = model(&f, XLA_MAIN_MODEL, "");
    pool(&mut theirs);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let main_dir = f.dir.join("main-locks");
    let their_out = theirs.env("MODEL_LOCK_DIR", &main_dir).run();
    let t = Record::of(their_out.assert_success());
    fn vars(r: &Record) -> [Option<&str>; 3] {
        ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"].map(|v| r.var(v))
    }
    assert_eq!(vars(&r), [Some("2,3"), Some("0"), Some("0")], "{}", out.explain());
    assert_eq!(vars(&r), vars(&t), "ours:\n{}\nupstream:\n{}", out.explain(), their_out.explain());
    assert_eq!((r.locks(), t.locks()), (vec!["gpulock2_0".to_string()], vec!["gpulock0_0".to_string()]));
}

/// The ROCm/jax fork's script shares `/var/lock` with our jax profile when
/// `JAX_LOCK_DIR=/var/lock` and `--visible=hip` are given: the same lock
/// file in the same order, and the fork's variables (`TPU_VISIBLE_CHIPS`,
/// `CUDA_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES` the index, no
/// `ROCR_VISIBLE_DEVICES`).
#[test]
fn against_rocm_jax_fork_4443705e_visible_hip_gets_the_same_lock_and_variables() {
    let f = amd_host("jax-fork", 2);
    let cases: [(&[&str], &str); 3] = [
        (&[], "jax_accelerator_lock_0_0"),
        (&["jax_accelerator_lock_0_0"], "jax_accelerator_lock_1_0"),
        (&["jax_accelerator_lock_0_0", "jax_accelerator_lock_1_0"], "jax_accelerator_lock_0_1"),
    ];
    for (held, want) in cases {
        let counts = |c: &mut Cmd| {
            c.env("JAX_ACCELERATOR_COUNT", "2").env("JAX_TESTS_PER_ACCELERATOR", "2");
        };
        let mut ours = ours_as_jax(&f);
        counts(&mut ours);
        ours.args(["--visible=hip", "./pkg/gpu_test"]);
        let mut theirs = model(&f, JAX_MODEL, FORK_VARIABLES);
        counts(&mut theirs);
        let got = assert_same(&f, held, &mut ours, &mut theirs, "the ROCm/jax fork");
        assert_eq!(got[0], format!("locks={want}"), "{got:?}");
    }
    // Counted from KFD instead of JAX_ACCELERATOR_COUNT, the same.
    let mut ours = ours_as_jax(&f);
    ours.env("JAX_TESTS_PER_ACCELERATOR", "2").args(["--visible=hip", "./pkg/gpu_test"]);
    let mut theirs = model(&f, JAX_MODEL, FORK_VARIABLES);
    theirs.env("JAX_ACCELERATOR_COUNT", "2").env("JAX_TESTS_PER_ACCELERATOR", "2");
    assert_same(&f, &["jax_accelerator_lock_0_0"], &mut ours, &mut theirs, "the ROCm/jax fork, counted");
}

/// JAX main's script and the jax profile, where the count is given
/// (`JAX_ACCELERATOR_COUNT`, as JAX's CI passes it): the same lock file in
/// the same order and the same variables, `ROCR_VISIBLE_DEVICES` among them.
#[test]
fn against_jax_main_58d4536f_a_given_count_gets_the_same_lock_and_variables() {
    let f = Fixture::new("jax-main");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    for held in [&[][..], &["jax_accelerator_lock_0_0"], &["jax_accelerator_lock_0_0", "jax_accelerator_lock_1_0"]] {
        let counts = |c: &mut Cmd| {
            c.env("JAX_ACCELERATOR_COUNT", "2").env("JAX_TESTS_PER_ACCELERATOR", "2");
        };
        let mut ours = ours_as_jax(&f);
        counts(&mut ours);
        ours.arg("./pkg/gpu_test");
        let mut theirs = model(&f, JAX_MODEL, JAX_MAIN_VARIABLES);
        counts(&mut theirs);
        assert_same(&f, held, &mut ours, &mut theirs, "JAX main");
    }
}

/// Where JAX main's variables break, on AMD GPUs: with
/// `ROCR_VISIBLE_DEVICES=1` ROCr shows one GPU, and HIP, without a
/// `HIP_VISIBLE_DEVICES`, reads `CUDA_VISIBLE_DEVICES=1` as an index among
/// that one GPU, which names none. The jax profile gives the same lock and
/// `ROCR_VISIBLE_DEVICES`, and tells HIP (and its CUDA alias) index 0.
#[test]
fn against_jax_main_58d4536f_amd_gpus_get_indices_hip_can_use() {
    let f = amd_host("jax-main-amd", 2);
    let _held = hold_lock(f.lock_dir.join("jax_accelerator_lock_0_0"));
    let out = ours_as_jax(&f).env("JAX_TESTS_PER_ACCELERATOR", "2").arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    let theirs = model(&f, JAX_MODEL, JAX_MAIN_VARIABLES)
        .env("JAX_ACCELERATOR_COUNT", "2")
        .env("JAX_TESTS_PER_ACCELERATOR", "2")
        .run();
    let t = Record::of(theirs.assert_success());
    assert_eq!(r.locks(), t.locks(), "ours:\n{}\nupstream:\n{}", out.explain(), theirs.explain());
    for v in ["ROCR_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS", "ONEAPI_VISIBLE_DEVICES"] {
        assert_eq!(r.var(v), t.var(v), "{v}: ours:\n{}\nupstream:\n{}", out.explain(), theirs.explain());
    }
    assert_eq!(t.var("CUDA_VISIBLE_DEVICES"), Some("1"), "upstream: {}", theirs.explain());
    assert_eq!(
        (r.var("HIP_VISIBLE_DEVICES"), r.var("CUDA_VISIBLE_DEVICES")),
        (Some("0"), Some("0")),
        "{}",
        out.explain()
    );
}

/// The models are the scripts' behaviour only if the shell has what they
/// need; a host without `flock` would make every comparison above fail for
/// the wrong reason, so say so once, plainly.
#[test]
fn the_models_have_their_tools() {
    for tool in ["flock", "find", "grep"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| Path::new(&d).join(tool).exists()))
            .unwrap_or(false);
        assert!(found, "{tool} is not in PATH: the upstream models need it");
    }
}
