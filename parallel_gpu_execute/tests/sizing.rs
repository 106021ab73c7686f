//! Sizing a host's test jobs to its GPUs' memory: `--list=bazelrc` and
//! `TF_TESTS_PER_GPU=auto`, on fake hosts with amdgpu's
//! `mem_info_vram_total`, `/proc/meminfo` and a fake `nvidia-smi`.

mod common;

use common::{Fixture, Record};
use test_support::{hold_lock, write_executable, write_file};

const GIB: u64 = 1024 * 1024 * 1024;

/// A KFD host whose GPUs have these memories (bytes), and `ram_gib` of RAM.
fn amd_host(label: &str, vram: &[u64], ram_gib: u64) -> Fixture {
    let mut f = Fixture::new(label);
    f.sysroot.add_kfd_gpus(vram.len() as u32);
    for (i, bytes) in vram.iter().enumerate() {
        let dir = f.sysroot.root.join(format!("sys/class/drm/renderD{}/device", 128 + i));
        write_file(dir.join("mem_info_vram_total"), format!("{bytes}\n"));
    }
    write_file(
        f.sysroot.root.join("proc/meminfo"),
        format!("MemTotal:       {} kB\nMemFree: 1 kB\n", ram_gib * 1024 * 1024),
    );
    f
}

fn cpus() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// The `--list=bazelrc` lines (comment, jobs, slots) of a command.
fn bazelrc(out: &test_support::Output) -> Vec<String> {
    out.assert_success();
    out.stdout.lines().map(str::to_string).collect()
}

#[test]
fn bazelrc_sizes_jobs_to_the_smallest_gpu_the_cpus_and_the_ram() {
    let f = amd_host("bazelrc-amd", &[64 * GIB, 48 * GIB, 64 * GIB], 512);
    let out = f.cmd().arg("--list=bazelrc").run();
    let lines = bazelrc(&out);
    assert_eq!(lines.len(), 3, "{}", out.explain());
    assert!(
        lines[0].starts_with(
            "# parallel_gpu_execute --list=bazelrc (xla profile): 3 GPU(s) (kfd); 49152 MiB each (the smallest"
        ),
        "{}",
        out.explain()
    );
    // 48 GiB / 4096 MiB = 12 a GPU; 36 jobs, capped by the CPUs and 512/6 = 85.
    assert_eq!(lines[1], format!("test --local_test_jobs={}", cpus().min(36).min(85)), "{}", out.explain());
    assert_eq!(lines[2], "test --test_env=TF_TESTS_PER_GPU=12", "{}", out.explain());
    // The memory a test may take, when set.
    let out = f.cmd().env("TF_PER_DEVICE_MEMORY_LIMIT_MB", "16384").arg("--list=bazelrc").run();
    assert_eq!(bazelrc(&out)[2], "test --test_env=TF_TESTS_PER_GPU=3", "{}", out.explain());
    // A job's slice: its pool, not the host's GPUs.
    let out = f.cmd().env("ROCR_VISIBLE_DEVICES", "1").arg("--list=bazelrc").run();
    let lines = bazelrc(&out);
    assert!(lines[0].contains(": 1 GPU(s) (kfd) in the pool of ROCR_VISIBLE_DEVICES;"), "{}", out.explain());
    assert_eq!(lines[1], format!("test --local_test_jobs={}", cpus().min(12)), "{}", out.explain());
    // A set TF_TESTS_PER_GPU wins.
    let out = f.cmd().env("TF_TESTS_PER_GPU", "5").arg("--list=bazelrc").run();
    let lines = bazelrc(&out);
    assert_eq!(lines[2], "test --test_env=TF_TESTS_PER_GPU=5", "{}", out.explain());
    assert!(lines[0].contains("TF_TESTS_PER_GPU=5 as set"), "{}", out.explain());
    // The jax profile: its variable and its 2048 MiB a test.
    let out = f.cmd().env("PARALLEL_GPU_EXECUTE_PROFILE", "jax").arg("--list=bazelrc").run();
    assert_eq!(bazelrc(&out)[2], "test --test_env=JAX_TESTS_PER_ACCELERATOR=24", "{}", out.explain());
}

#[test]
fn bazelrc_caps_jobs_by_ram_and_by_gpus() {
    // 6 GiB of RAM: one test at a time.
    let f = amd_host("bazelrc-ram", &[64 * GIB], 6);
    let lines = bazelrc(&f.cmd().arg("--list=bazelrc").run());
    assert_eq!(lines[1], "test --local_test_jobs=1");
    assert!(lines[0].contains("6 GiB RAM / 6 GiB a test = 1"), "{lines:?}");
    // One 4 GiB GPU: one test, whatever the CPUs.
    let f = amd_host("bazelrc-small-gpu", &[4 * GIB], 512);
    let lines = bazelrc(&f.cmd().arg("--list=bazelrc").run());
    assert_eq!(lines[1..], ["test --local_test_jobs=1", "test --test_env=TF_TESTS_PER_GPU=1"]);
}

#[test]
fn bazelrc_says_when_memory_cannot_be_read_and_uses_8() {
    let mut f = Fixture::new("bazelrc-unknown");
    f.sysroot.add_kfd_gpus(2);
    let out = f.cmd().arg("--list=bazelrc").run();
    let lines = bazelrc(&out);
    assert!(lines[0].contains("their memory cannot be read here"), "{}", out.explain());
    assert!(lines[0].contains("RAM unknown"), "{}", out.explain());
    assert_eq!(lines[1], format!("test --local_test_jobs={}", cpus().min(16)));
    assert_eq!(lines[2], "test --test_env=TF_TESTS_PER_GPU=8");
    // No GPU: the jobs line alone.
    let f = Fixture::new("bazelrc-none");
    let lines = bazelrc(&f.cmd().arg("--list=bazelrc").run());
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("no GPU"), "{lines:?}");
}

#[test]
fn bazelrc_asks_nvidia_smi_on_nvidia_hosts() {
    let f = Fixture::new("bazelrc-nvidia");
    f.sysroot.add_nvidia_proc_gpus(2);
    let bin = f.dir.join("bin");
    write_executable(
        bin.join("nvidia-smi"),
        "#!/bin/sh\n[ \"$*\" = '--query-gpu=memory.total --format=csv,noheader,nounits' ] || exit 9\nprintf '81559\\n40960\\n'\n",
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let out = f.cmd().env("PATH", &path).arg("--list=bazelrc").run();
    let lines = bazelrc(&out);
    assert!(lines[0].contains("40960 MiB each (the smallest; nvidia-smi memory.total)"), "{}", out.explain());
    assert_eq!(lines[2], "test --test_env=TF_TESTS_PER_GPU=10", "{}", out.explain());
    // Not on PATH: unknown, 8.
    let out = f.cmd().env("PATH", "/nonexistent").arg("--list=bazelrc").run();
    assert_eq!(bazelrc(&out)[2], "test --test_env=TF_TESTS_PER_GPU=8", "{}", out.explain());
    // A run never starts it: auto there is the default, with a note.
    let out = f.cmd().env("PATH", &path).env("TF_TESTS_PER_GPU", "auto").arg("./pkg/gpu_test").run();
    Record::of(out.assert_success());
    assert!(
        out.stderr.contains("note: TF_TESTS_PER_GPU=auto: the GPUs' memory cannot be read here (only AMD GPUs counted from KFD show it in sysfs); 8 slots per GPU"),
        "{}",
        out.explain()
    );
}

#[test]
fn auto_slots_come_from_sysfs_memory() {
    // 8 GiB a GPU, 4096 MiB a test: two slots.
    let f = amd_host("auto-slots", &[8 * GIB], 64);
    let out = f.cmd().env("TF_TESTS_PER_GPU", "auto").arg("--list").run();
    out.assert_success();
    assert!(out.stdout.contains("\nslots per GPU: 2\n"), "{}", out.explain());
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let first = hold_lock(f.lock("0", 0));
    let out = f.run_test(
        |c| {
            c.env("TF_TESTS_PER_GPU", "auto").arg("--wait=0");
        },
        &[],
    );
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_1"], "{}", out.explain());
    let second = hold_lock(f.lock("0", 1));
    let out = f.run_test(
        |c| {
            c.env("TF_TESTS_PER_GPU", "auto").arg("--wait=0");
        },
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "a third slot\n{}", out.explain());
    drop((first, second));
    // Unreadable memory: the default, with one note.
    std::fs::remove_file(f.sysroot.root.join("sys/class/drm/renderD128/device/mem_info_vram_total")).unwrap();
    let out = f.run_test(
        |c| {
            c.env("TF_TESTS_PER_GPU", "auto");
        },
        &[],
    );
    Record::of(out.assert_success());
    assert_eq!(out.stderr.lines().filter(|l| l.contains("TF_TESTS_PER_GPU=auto")).count(), 1, "{}", out.explain());
    // A bad value names auto among the choices.
    let out = f.run_test(
        |c| {
            c.env("TF_TESTS_PER_GPU", "lots");
        },
        &[],
    );
    out.assert_one_error_line("TF_TESTS_PER_GPU: invalid value 'lots' (expected an integer from 1 to 1024, or auto)");
}

#[test]
fn bazelrc_never_prints_a_slot_count_the_wrapper_refuses() {
    // 8 GPUs of 192 GiB with 128 MiB a test: 1536 a GPU by the memory,
    // past the 1-1024 that TF_TESTS_PER_GPU takes.
    let f = amd_host("bazelrc-huge", &[192 * GIB; 8], 2048);
    let out = f.cmd().env("TF_PER_DEVICE_MEMORY_LIMIT_MB", "128").arg("--list=bazelrc").run();
    let lines = bazelrc(&out);
    assert_eq!(lines[2], "test --test_env=TF_TESTS_PER_GPU=1024", "{}", out.explain());
    assert!(lines[0].contains("at most 1024 tests per GPU"), "{}", out.explain());
    // What it printed, the wrapper takes.
    let value = lines[2].rsplit('=').next().unwrap();
    let out = f.run_test(
        |c| {
            c.env("TF_TESTS_PER_GPU", value);
        },
        &[],
    );
    Record::of(out.assert_success());
    // And so for the jax profile's variable and auto.
    let out = f
        .cmd()
        .env("PARALLEL_GPU_EXECUTE_PROFILE", "jax")
        .env("TF_PER_DEVICE_MEMORY_LIMIT_MB", "64")
        .arg("--list=bazelrc")
        .run();
    assert_eq!(bazelrc(&out)[2], "test --test_env=JAX_TESTS_PER_ACCELERATOR=1024", "{}", out.explain());
}
