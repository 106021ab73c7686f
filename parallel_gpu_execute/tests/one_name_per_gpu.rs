//! One lock file per physical GPU, whichever way a job names it: by index,
//! by UUID in a preset pool (ROCm's `GPU-<hex unique_id>`, CUDA's
//! `GPU-<UUID>` or a prefix of it), with no pool at all, or under
//! `--lock-names=physical`. Jobs that could book one GPU under two names
//! exclude each other or are refused with the fix; never both run.

mod common;

use common::{Fixture, Record};
use std::path::Path;
use std::time::Duration;
use test_support::hardware::{KfdNode, NvidiaGpu};
use test_support::{Cmd, Output, wait_until};

/// A host with 4 AMD GPUs, unique_ids 1000 to 1003 (0x3e8 to 0x3eb).
fn amd_host(label: &str) -> Fixture {
    let mut f = Fixture::new(label);
    f.sysroot.add_kfd_node(&KfdNode::cpu(64));
    for i in 0..4u64 {
        f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90402, 304, 128 + i).at(0, (0x10 + i) << 8).unique(1000 + i));
    }
    f
}

/// A host with NVIDIA GPUs of `models`, in bus order.
fn nvidia_host(label: &str, models: &[&str]) -> Fixture {
    let f = Fixture::new(label);
    for (i, model) in models.iter().enumerate() {
        f.sysroot.add_nvidia_proc_entry(&NvidiaGpu::new(
            &format!("0000:{:02x}:00.0", 0x18 + 0x10 * i),
            model,
            i as u64,
        ));
    }
    f.sysroot.add_nvidia_dev_nodes(&(0..models.len() as u32).collect::<Vec<_>>());
    f
}

fn uuid(minor: u64) -> String {
    NvidiaGpu::new("0000:00:00.0", "x", minor).uuid
}

/// The wrapper on `f` with one slot per GPU and `pool` in `variable`
/// (none when empty).
fn job(f: &Fixture, variable: &str, pool: &str) -> Cmd {
    let mut c = f.cmd();
    c.env("TF_TESTS_PER_GPU", "1");
    if !pool.is_empty() {
        c.env(variable, pool);
    }
    c
}

fn is_held(path: &Path) -> bool {
    !test_support::lock_is_free(path)
}

/// Starts `c` on a test that holds its GPU, and waits until `lock` is held.
fn holding(mut c: Cmd, lock: &Path) -> test_support::Running {
    c.env("SLEEP", "30").arg("./pkg/gpu_test").own_process_group();
    let held = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || is_held(lock)), "{} was never taken", lock.display());
    held
}

#[track_caller]
fn busy(out: &Output, what: &str) {
    assert_eq!(out.status.code(), Some(1), "{what}: the GPU was given twice\n{}", out.explain());
}

#[test]
fn a_rocm_pool_by_uuid_takes_the_lock_of_the_gpus_index() {
    let f = amd_host("uuid-rocm");
    let rocr = "ROCR_VISIBLE_DEVICES";
    // KFD GPU 1 by its UUID, as ROCm documents it (16 hex digits, in
    // either case, as ROCr upper-cases it), while jobs name it by index or
    // have no pool.
    for by_uuid in ["GPU-00000000000003e9", "GPU-00000000000003E9", "gpu-00000000000003e9"] {
        let held = holding(job(&f, rocr, by_uuid), &f.lock("1", 0));
        let out = job(&f, rocr, "1").args(["--wait=0", "./pkg/gpu_test"]).run();
        busy(&out, "by index");
        let out = job(&f, rocr, "").args(["--wait=0", "./pkg/gpu_test", "--num_processes=4"]).run();
        busy(&out, "without a pool");
        // And the other way round: the index held, the UUID waits.
        held.signal_group(libc::SIGKILL);
        held.wait();
        let held = holding(job(&f, rocr, ""), &f.lock("0", 0));
        let out = job(&f, rocr, "GPU-00000000000003e8").args(["--wait=0", "./pkg/gpu_test"]).run();
        busy(&out, "GPU 0 by UUID");
        held.signal_group(libc::SIGKILL);
        held.wait();
    }
    // The test is given its pool as it was, and the GPU's place in it.
    let pool = "GPU-00000000000003eb,GPU-00000000000003e9";
    let out = job(&f, rocr, pool).args(["./pkg/gpu_test", "--num_processes=2"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock1_0", "gpulock3_0"], "{}", out.explain());
    assert_eq!(r.var(rocr), Some(pool), "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0,1"), "{}", out.explain());
    // One GPU named twice, a UUID no GPU has, an id ROCr cannot read:
    // refused, with the fix.
    job(&f, rocr, "GPU-00000000000003e9,1").arg("./pkg/gpu_test").run().assert_code(2).assert_one_error_line(
        "ROCR_VISIBLE_DEVICES: cannot tell which GPU index '1' is (it names GPU 1 twice, also as 'GPU-00000000000003e9')",
    );
    // ROCr matches the id as the beginning of the 16 digits, not as a
    // number: `GPU-3e9` is not unique_id 0x3e9.
    job(&f, rocr, "GPU-3e9").arg("./pkg/gpu_test").run().assert_code(2).assert_one_error_line(
        "cannot tell which GPU index 'GPU-3e9' is (no usable KFD GPU's UUID (GPU- and its unique_id in 16 hex digits, as ROCr matches it) begins with GPU-3E9)",
    );
    job(&f, rocr, "GPU-00000000000003e").arg("./pkg/gpu_test").run().assert_code(2).assert_one_error_line(
        "(the UUIDs of 4 GPUs begin with GPU-00000000000003E: more of its digits tell them apart)",
    );
    job(&f, rocr, "gpu1")
        .arg("./pkg/gpu_test")
        .run()
        .assert_code(2)
        .assert_one_error_line("'gpu1' is neither an index nor GPU-<hex unique_id>");
    // Physically named, two spellings of one GPU are one lock file twice.
    let out = job(&f, rocr, "GPU-00000000000003EA,gpu-00000000000003ea")
        .args(["--lock-names=physical", "./pkg/gpu_test", "--num_processes=2"])
        .run();
    out.assert_code(2)
        .assert_one_error_line("'GPU-00000000000003EA' and 'gpu-00000000000003ea' name one GPU, uid-1002");
    let out = job(&f, rocr, "abc").arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line("name the pool's GPUs by index (ROCR_VISIBLE_DEVICES=1,...)");
    assert!(!out.stderr.contains("let this container see"), "it sees /sys/class/kfd\n{}", out.explain());
}

/// A UUID shorter than 16 digits is the GPU whose UUID it begins, as ROCr
/// takes it, not the GPU whose unique_id has that value.
#[test]
fn a_rocm_uuid_prefix_is_the_gpu_rocr_shows() {
    let mut f = Fixture::new("uuid-prefix");
    f.sysroot.add_kfd_node(&KfdNode::cpu(64));
    for (i, uid) in [0x3e9u64, 0x3e9a_5c00_0000_1234].into_iter().enumerate() {
        let i = i as u64;
        f.sysroot.add_kfd_node_with_render(&KfdNode::gpu(90402, 304, 128 + i).at(0, (0x10 + i) << 8).unique(uid));
    }
    let out = job(&f, "ROCR_VISIBLE_DEVICES", "GPU-3e9a").arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock1_0"], "ROCr shows GPU 1, whose UUID is GPU-3E9A5C0000001234\n{}", out.explain());
    let out = job(&f, "ROCR_VISIBLE_DEVICES", "GPU-00000000000003E9").arg("./pkg/gpu_test").run();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0"], "{}", out.explain());
}

#[test]
fn a_rocm_uuid_that_cannot_be_placed_is_refused_with_the_fix() {
    // Partitions of one MI300X share its unique_id: which one is meant?
    let mut f = Fixture::new("uuid-partitions");
    test_support::hardware::hosts::mi300x_cpx_partitions(&mut f.sysroot);
    let out = job(&f, "ROCR_VISIBLE_DEVICES", "GPU-0000000000002000").arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line("8 GPUs (partitions of one device) have the UUID GPU-0000000000002000");
    assert!(out.stderr.contains("name the pool's GPUs by index"), "{}", out.explain());
    // A count that does not come from KFD, and no KFD to look at.
    let f = Fixture::new("uuid-no-kfd");
    let out = job(&f, "ROCR_VISIBLE_DEVICES", "GPU-3e9")
        .env("TF_GPU_COUNT", "4")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .arg("./pkg/gpu_test")
        .run();
    out.assert_code(2).assert_one_error_line("this container sees no KFD topology (/sys/class/kfd)");
    // Indexes alone need no look at the hardware.
    let out = job(&f, "ROCR_VISIBLE_DEVICES", "2")
        .env("TF_GPU_COUNT", "4")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .arg("./pkg/gpu_test")
        .run();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock2_0"], "{}", out.explain());
}

#[test]
fn a_cuda_pool_by_uuid_takes_the_lock_of_the_gpus_index() {
    let f = nvidia_host("uuid-cuda", &["NVIDIA H100 80GB HBM3"; 4]);
    let cuda = "CUDA_VISIBLE_DEVICES";
    let third = uuid(2);
    // The whole UUID, a prefix of it as CUDA accepts, and another case.
    for by_uuid in [third.clone(), third[..20].to_string(), third.to_lowercase()] {
        let held = holding(job(&f, cuda, &by_uuid), &f.lock("2", 0));
        busy(&job(&f, cuda, "2").args(["--wait=0", "./pkg/gpu_test"]).run(), "by index");
        busy(&job(&f, cuda, "").args(["--wait=0", "./pkg/gpu_test", "--num_processes=4"]).run(), "without a pool");
        held.signal_group(libc::SIGKILL);
        held.wait();
    }
    let out = job(&f, cuda, &third).arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock2_0"], "{}", out.explain());
    assert_eq!(r.var(cuda), Some(third.as_str()), "the pool is given as it was\n{}", out.explain());
    // A prefix every GPU shares, a UUID no GPU has: refused.
    let out = job(&f, cuda, "GPU-0000").arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line("4 GPUs have UUIDs that start so");
    let out = job(&f, cuda, "GPU-ffffffff").arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line("no usable NVIDIA GPU has that UUID");
    // A MIG instance keeps a lock of its own.
    let mig = format!("MIG-{third}/1/0");
    let out = job(&f, cuda, &mig).arg("./pkg/gpu_test").run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), [format!("gpulockMIG-{third}+1+0_0")], "{}", out.explain());
}

/// With physical names, a CUDA UUID's prefix, or another case, is the
/// GPU's whole UUID where the driver shows it: one lock file per GPU, as
/// its index under the bus order takes.
#[test]
fn a_cuda_uuid_prefix_takes_the_gpus_physical_lock_file() {
    let f = nvidia_host("uuid-cuda-physical", &["NVIDIA H100", "NVIDIA H100"]);
    let cuda = "CUDA_VISIBLE_DEVICES";
    let physical = |pool: &str| {
        let mut c = job(&f, cuda, pool);
        c.env("CUDA_DEVICE_ORDER", "PCI_BUS_ID").arg("--lock-names=physical");
        c
    };
    let whole = uuid(1);
    let lock = f.lock_dir.join(format!("gpulock{whole}_0"));
    let held = holding(physical(&whole[..12]), &lock);
    for pool in ["1", &whole.to_lowercase(), &whole.to_uppercase().replace("GPU-", "gpu-")] {
        let out = physical(pool).args(["--wait=0", "./pkg/gpu_test"]).run();
        busy(&out, pool);
    }
    held.signal_group(libc::SIGKILL);
    held.wait();
    let pool = format!("{},{whole}", &whole[..12]);
    let out = physical(&pool).args(["./pkg/gpu_test", "--num_processes=2"]).run();
    out.assert_code(2).assert_one_error_line(&format!(
        "--lock-names=physical: CUDA_VISIBLE_DEVICES names one GPU twice ('{}' and '{whole}' name one GPU, {whole})",
        &whole[..12]
    ));
    let out = physical("GPU-ffff").args(["./pkg/gpu_test"]).run();
    out.assert_code(2).assert_one_error_line("no NVIDIA GPU this container sees has a UUID that begins GPU-ffff");
}

#[test]
fn a_cuda_uuid_on_a_host_of_several_models_needs_the_bus_order() {
    let f = nvidia_host("uuid-cuda-mixed", &["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]);
    let out = job(&f, "CUDA_VISIBLE_DEVICES", &uuid(1)).arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line("this host's GPUs are of several models");
    assert!(out.stderr.contains("CUDA_DEVICE_ORDER=PCI_BUS_ID"), "{}", out.explain());
    let out =
        job(&f, "CUDA_VISIBLE_DEVICES", &uuid(1)).env("CUDA_DEVICE_ORDER", "PCI_BUS_ID").arg("./pkg/gpu_test").run();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock1_0"], "{}", out.explain());
}

#[test]
fn index_and_physical_names_never_share_a_lock_directory_unseen() {
    let f = amd_host("mixed-names");
    let physical = |f: &Fixture, dir: &Path| {
        let mut c = job(f, "ROCR_VISIBLE_DEVICES", "");
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", dir).arg("--lock-names=physical");
        c
    };
    let index = |f: &Fixture, dir: &Path| {
        let mut c = job(f, "ROCR_VISIBLE_DEVICES", "");
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", dir);
        c
    };
    // Physical first: the index job that follows is refused, while the
    // physical one holds GPU 0 and after it ended.
    let dir = f.dir.join("physical-first");
    let held = holding(physical(&f, &dir), &dir.join("gpulockuid-1000_0"));
    let out = index(&f, &dir).arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line(&format!(
        "lock directory {d} is shared with jobs that name GPUs physically (--lock-names=physical; they made {d}/gpulock.physical), and this one names them by index",
        d = dir.display()
    ));
    assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
    held.signal_group(libc::SIGKILL);
    held.wait();
    index(&f, &dir).arg("./pkg/gpu_test").run().assert_code(2);
    // Settled as the message says: the marker removed once no physical job
    // uses the directory, index jobs run there.
    std::fs::remove_file(dir.join("gpulock.physical")).unwrap();
    for name in std::fs::read_dir(&dir).unwrap() {
        let name = name.unwrap().path();
        if name.file_name().unwrap().to_string_lossy().starts_with("gpulockuid-") {
            std::fs::remove_file(name).unwrap();
        }
    }
    Record::of(index(&f, &dir).arg("./pkg/gpu_test").run().assert_success());
    // Index first: the physical job is refused, naming the index lock file.
    let out = physical(&f, &dir).arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line(&format!(
        "--lock-names=physical: lock directory {d} holds lock files named by index ({d}/gpulock0_0)",
        d = dir.display()
    ));
    // Its marker stays, though it made it: another physical job may have
    // seen it and run, relying on it to keep index jobs out.
    assert!(dir.join("gpulock.physical").exists(), "the refused job took its marker away\n{}", out.explain());
    index(&f, &dir).arg("./pkg/gpu_test").run().assert_code(2);
    // Started together in a fresh directory, again and again: never both.
    for round in 0..20 {
        let dir = f.dir.join(format!("race-{round}"));
        let mut a = physical(&f, &dir);
        a.arg("./pkg/gpu_test");
        let mut b = index(&f, &dir);
        b.arg("./pkg/gpu_test");
        let (a, b) = (a.spawn(), b.spawn());
        let (a, b) = (a.wait(), b.wait());
        assert!(a.code() != 0 || b.code() != 0, "round {round}: both ran\n{}\n{}", a.explain(), b.explain());
    }
}

/// An index with a leading zero (`01`) is another spelling of the GPU that
/// jobs write without it: it would take a lock file of its own beside that
/// GPU's, so it is refused with the plain spelling, in either mode, while
/// the GPU is held under its plain name and while it is free.
#[test]
fn an_index_with_a_leading_zero_is_refused_not_booked_twice() {
    let f = amd_host("leading-zero");
    let held = holding(job(&f, "ROCR_VISIBLE_DEVICES", "1"), &f.lock("1", 0));
    for (variable, vendor, pool, id, plain) in [
        ("ROCR_VISIBLE_DEVICES", "rocm", "01", "01", "1"),
        ("ROCR_VISIBLE_DEVICES", "rocm", "2,001", "001", "1"),
        ("CUDA_VISIBLE_DEVICES", "cuda", "00", "00", "0"),
    ] {
        let mut c = job(&f, variable, pool);
        c.env("PARALLEL_GPU_EXECUTE_VENDOR", vendor).env("TF_GPU_COUNT", "4");
        let out = c.args(["--wait=0", "./pkg/gpu_test"]).run();
        out.assert_code(2).assert_one_error_line(&format!(
            "{variable}: GPU index '{id}' has a leading zero: the runtime reads it as a GPU that other jobs write without one, and the two would take different lock files; write it '{plain}'"
        ));
        assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
    }
    held.signal_group(libc::SIGKILL);
    held.wait();
    let names: Vec<String> =
        std::fs::read_dir(&f.lock_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, ["gpulock1_0"], "only the plain name's lock file");
    // Indices that merely contain a zero are indices as ever.
    let out = job(&f, "ROCR_VISIBLE_DEVICES", "0,10").env("TF_GPU_COUNT", "4").arg("./pkg/gpu_test").run();
    assert_eq!(Record::of(out.assert_success()).locks(), ["gpulock0_0"], "{}", out.explain());
}

/// CUDA reads the digits a device id begins with, as `strtoul` does
/// (pytorch/pytorch#84879: `1gpu2,2ampere` showed GPUs 1 and 2): `0x1` and
/// `1gpu2` are GPUs 0 and 1 to it, and `-0` is no negative index that
/// hides the rest. Each would take a lock file of its own beside that
/// GPU's, so each is refused in one line that names the plain spelling,
/// and nothing is made. A build without the change took `gpulock0x1_0`.
#[test]
fn a_cuda_id_that_begins_like_an_index_is_refused() {
    let f = amd_host("cuda-not-index");
    for (pool, id) in [("0x1", "0x1"), ("2,1gpu2", "1gpu2"), ("-0", "-0")] {
        let mut c = job(&f, "CUDA_VISIBLE_DEVICES", pool);
        c.env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda").env("TF_GPU_COUNT", "4");
        let out = c.args(["--wait=0", "./pkg/gpu_test"]).run();
        out.assert_code(2).assert_one_error_line(&format!(
            "CUDA_VISIBLE_DEVICES: GPU id '{id}' is no index, yet CUDA reads the digits it begins with: another lock file than the GPU's; write the index alone, or its UUID (GPU-...)"
        ));
        assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
    }
    assert!(std::fs::read_dir(&f.lock_dir).map_or(true, |mut d| d.next().is_none()), "a lock file was made");
}
