//! Operating shared GPU hosts: `--status` (who holds which slot, since when,
//! who waits), the wait lines, Bazel annotations, and
//! `--lock-names=physical` for containers that share one lock directory.

mod common;

use common::{Fixture, Record, bin};
use std::time::Duration;
use test_support::hardware::{KfdNode, hosts};
use test_support::{Cmd, hold_lock, wait_until, write_file};

fn is_held(path: &std::path::Path) -> bool {
    path.exists() && !test_support::lock_is_free(path)
}

#[test]
fn status_shows_holders_free_slots_and_waiters() {
    let f = Fixture::new("status");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    // GPU 0 slot 0: a running test (through the wrapper); GPU 1 slot 0: a
    // classic script's lock held by this test process; the rest free.
    let mut holder = f.cmd();
    holder
        .env("TF_GPU_COUNT", "2")
        .env("TF_TESTS_PER_GPU", "1")
        .env("SLEEP", "30")
        .arg("./pkg/gpu_test")
        .arg("--holder");
    let holder = holder.own_process_group().spawn();
    assert!(wait_until(Duration::from_secs(10), || is_held(&f.lock("0", 0))), "the holder never locked");
    let classic = hold_lock(f.lock("1", 0));
    write_file(f.lock_dir.join("unrelated.txt"), "");
    // A waiter needing both GPUs: first in the queue.
    let mut waiter = f.cmd();
    waiter.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").arg("./pkg/gpu_test").arg("--num_processes=2");
    let waiter = waiter.spawn();
    assert!(f.queued(1), "no waiter");
    let record = std::fs::read_dir(f.lock_dir.join("gpuqueue")).unwrap().flatten().next().unwrap().path();

    let out = f.cmd().arg("--status").run();
    out.assert_success();
    let text = &out.stdout;
    assert!(
        text.starts_with(&format!("lock dir {}: 2 slot(s), 2 held, 1 waiting\n", f.lock_dir.display())),
        "{}",
        out.explain()
    );
    let gpu0 = text.lines().find(|l| l.starts_with("xla      0 ")).unwrap_or_else(|| panic!("{}", out.explain()));
    assert!(gpu0.contains(&format!(" held  {:<12}", holder.pid())), "{}", out.explain());
    assert!(gpu0.contains("pkg/gpu_test --holder"), "the holder's command line\n{}", out.explain());
    assert!(gpu0.contains("Z ("), "a start time\n{}", out.explain());
    let me = std::process::id();
    let gpu1 = text.lines().find(|l| l.starts_with("xla      1 ")).unwrap();
    assert!(gpu1.contains(&format!(" held  {me:<12}")), "the classic holder (this process)\n{}", out.explain());
    let queued = text.lines().find(|l| l.starts_with("queued ")).unwrap_or_else(|| panic!("{}", out.explain()));
    assert!(queued.contains(&waiter.pid().to_string()) && queued.contains("2 GPU(s)"), "{}", out.explain());
    assert!(queued.contains(" ok "), "its beat\n{}", out.explain());

    let json = f.cmd().arg("--status=json").run();
    json.assert_success()
        .assert_stdout_contains(&format!("{{\"lock_dir\": \"{}\", \"slots\": [{{\"file\": \"{}\", \"profile\": \"xla\", \"gpu\": \"0\", \"slot\": 0, \"held\": true, \"holders\": [{{\"pid\": {}, \"visible\": true, \"command\": \"", f.lock_dir.display(), f.lock("0", 0).display(), holder.pid()))
        .assert_stdout_contains(&format!("\"waiters\": [{{\"pid\": {}, \"visible\": true, ", waiter.pid()))
        .assert_stdout_contains(&format!("\"position\": \"queued\", \"file\": \"{}\", \"needs\": 2, ", record.display()))
        .assert_stdout_contains("\"owner_uid\": 0, \"record_test\": ")
        .assert_stdout_contains("}], \"exists\": true, \"host_pid_namespace\": true, \"gpus\": [], \"not_shown\": 0}\n");
    // Nothing was taken or created by --status.
    assert!(is_held(&f.lock("0", 0)) && is_held(&record));

    holder.signal_group(libc::SIGKILL);
    holder.wait();
    drop(classic);
    let out = waiter.wait();
    out.assert_success().assert_waited_and_at_most_one_other_line();
    // All free now.
    let out = f.cmd().arg("--status").run();
    out.assert_success().assert_stdout_contains(": 2 slot(s), 0 held, 0 waiting\n");
    assert_eq!(out.stdout.lines().filter(|l| l.ends_with(" free")).count(), 2, "{}", out.explain());
}

#[test]
fn status_shows_a_holder_it_cannot_see_as_hidden() {
    let pid_namespace = test_support::is_root() && std::path::Path::new("/usr/bin/unshare").exists();
    if !test_support::prerequisite(pid_namespace, "root and unshare(1)", "a holder hidden by a PID namespace") {
        return;
    }
    let f = Fixture::new("status-hidden");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    // --status from inside a new PID namespace (with its own /proc): this
    // process, the holder, is not visible there, and the kernel leaves its
    // lock out of that /proc/locks. A process there that waits for the lock
    // (`flock` without -n) shows that it is held. (--status used to find
    // such a holder by taking a shared lock itself, which could make a
    // test that tried the slot at that instant fail; it takes none now.)
    let script = format!(
        "flock {lock} true & w=$!\n\
         for i in $(seq 500); do [ \"$(cut -d' ' -f1 /proc/$w/syscall 2>/dev/null)\" = {flock} ] && break; sleep 0.02; done\n\
         {bin} --lock-dir={dir} --status=json\n\
         kill $w",
        lock = f.lock("0", 0).display(),
        flock = libc::SYS_flock,
        bin = bin(),
        dir = f.lock_dir.display(),
    );
    let out = Cmd::new("/usr/bin/unshare")
        .args(["--pid", "--fork", "--mount-proc", "--mount", "sh", "-c"])
        .arg(&script)
        .run();
    if out.code() != 0 && out.stderr.contains("unshare") {
        let why = format!("PID namespace (unshare failed: {})", out.stderr.trim());
        test_support::prerequisite(false, &why, "a holder hidden by a PID namespace");
        return;
    }
    out.assert_success().assert_stdout_contains(
        "\"gpu\": \"0\", \"slot\": 0, \"held\": true, \"holders\": [{\"pid\": 0, \"visible\": false, \"command\": null, \"started\": null, \"state\": null, \"uid\": null}]",
    );
    out.assert_stdout_contains("\"position\": \"blocked\"");
}

#[test]
fn status_errors_and_empty_directories() {
    let f = Fixture::new("status-errors");
    // Not there yet (the first wrapper to take a slot creates it): empty, exit 0.
    let out = f.cmd().arg("--status").run();
    out.assert_success().assert_stdout_eq(&format!(
        "lock dir {}: does not exist (no test has taken a slot there yet): 0 slot(s), 0 held, 0 waiting\n",
        f.lock_dir.display()
    ));
    assert!(!f.lock_dir.exists(), "--status created the lock directory");
    let out = f.cmd().arg("--status=json").run();
    out.assert_success().assert_stdout_eq(&format!(
        "{{\"lock_dir\": \"{}\", \"slots\": [], \"waiters\": [], \"exists\": false, \"host_pid_namespace\": true, \"gpus\": [], \"not_shown\": 0}}\n",
        f.lock_dir.display()
    ));
    // Not a directory, or not readable: exit 2, one line.
    std::fs::write(&f.lock_dir, "").unwrap();
    let out = f.cmd().arg("--status").run();
    out.assert_code(2).assert_one_error_line("--status: cannot read the lock directory");
    std::fs::remove_file(&f.lock_dir).unwrap();
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let out = f.cmd().arg("--status=json").run();
    out.assert_success().assert_stdout_eq(&format!(
        "{{\"lock_dir\": \"{}\", \"slots\": [], \"waiters\": [], \"exists\": true, \"host_pid_namespace\": true, \"gpus\": [], \"not_shown\": 0}}\n",
        f.lock_dir.display()
    ));
    f.cmd().arg("--status=yaml").run().assert_code(2).assert_one_error_line("--status: invalid value 'yaml'");
}

#[test]
fn annotations_reach_bazel_and_a_failure_to_write_them_is_a_warning() {
    let f = Fixture::new("annotations");
    let dir = f.dir.join("annotations");
    std::fs::create_dir_all(&dir).unwrap();
    let part = dir.join("parallel_gpu_execute.part");
    // Runs the test on `gpus` GPUs (of as many) with the annotations
    // directory set; the annotation it left, and what it printed.
    let annotated = |gpus: &str, args: &[&str]| {
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", gpus).env("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR", &dir);
            },
            args,
        );
        Record::of(out.assert_success());
        (std::fs::read_to_string(&part).unwrap(), out)
    };
    let (written, out) = annotated("2", &["--num_processes=2"]);
    assert_eq!(out.stderr.lines().count(), 1, "no extra line for a test that did not wait\n{}", out.explain());
    assert_eq!(written, "parallel_gpu_execute: GPU(s) 0,1 slot 0 mode classic waited 0.0 s\n");
    // A file left by an earlier run (a retry) is rewritten in place and cut
    // to the new line: nothing of the longer old content is left behind.
    std::fs::write(&part, "x".repeat(500)).unwrap();
    let (written, out) = annotated("1", &[]);
    assert_eq!(written, "parallel_gpu_execute: GPU(s) 0 slot 0 mode classic waited 0.0 s\n", "{}", out.explain());
    // One shorter than the line is overwritten whole.
    std::fs::write(&part, "x".repeat(10)).unwrap();
    let (written, out) = annotated("2", &["--num_processes=2"]);
    assert_eq!(written, "parallel_gpu_execute: GPU(s) 0,1 slot 0 mode classic waited 0.0 s\n", "{}", out.explain());
    // A directory that does not exist: one warning, the test runs.
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "1").env("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR", f.dir.join("missing"));
        },
        &[],
    );
    Record::of(out.assert_success());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.explain());
    assert!(lines[0].starts_with("parallel_gpu_execute: warning: cannot write the annotation "), "{}", out.explain());
    assert!(lines[0].ends_with("No such file or directory (os error 2); running the test anyway"), "{}", out.explain());
    // A symlink where the annotation goes is not followed: one warning, and
    // the file it points to is left as it was.
    let canary = f.dir.join("canary");
    std::fs::write(&canary, "untouched").unwrap();
    std::fs::remove_file(&part).unwrap();
    std::os::unix::fs::symlink(&canary, &part).unwrap();
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "1").env("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR", &dir);
        },
        &[],
    );
    Record::of(out.assert_success());
    out.assert_stderr_contains("warning: cannot write the annotation ").assert_stderr_contains("(os error 40)"); // ELOOP, in glibc's or musl's words
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "untouched", "{}", out.explain());
}

#[test]
fn a_wrapper_that_waited_says_how_long_and_annotates_it() {
    let f = Fixture::new("waited");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let dir = f.dir.join("annotations");
    std::fs::create_dir_all(&dir).unwrap();
    let held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1")
        .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
        .env("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR", &dir)
        .arg("./pkg/gpu_test");
    // Queued (its wait begun) before the 0.6 s it waits at least.
    let waiter = f.spawn_queued(&c);
    std::thread::sleep(Duration::from_millis(600));
    drop(held);
    let out = waiter.wait();
    out.assert_success().assert_waited_and_at_most_one_other_line();
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(lines[0].starts_with("parallel_gpu_execute: waiting for 1 GPU(s) for "), "{}", out.explain());
    let waited: f64 = lines[1]
        .strip_prefix("parallel_gpu_execute: waited ")
        .and_then(|r| r.strip_suffix(" s for GPU(s) 0 (slot 0)"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no 'waited' line\n{}", out.explain()));
    assert!((0.5..5.0).contains(&waited), "waited {waited} s\n{}", out.explain());
    let part = std::fs::read_to_string(dir.join("parallel_gpu_execute.part")).unwrap();
    assert!(
        part.starts_with("parallel_gpu_execute: GPU(s) 0 slot 0 mode rocm waited ") && part.ends_with(" s\n"),
        "{part}"
    );
}

/// One host with 4 GPUs (unique ids), seen by two containers as sysroots
/// that differ in their render nodes.
fn container(label: &str, given: &[usize]) -> Fixture {
    let mut f = Fixture::new(label);
    f.sysroot.add_kfd_node(&KfdNode::cpu(64));
    for i in 0..4u64 {
        let gpu = KfdNode::gpu(90402, 304, 128 + i).at(0, (0x10 + i) << 8).unique(1000 + i);
        if given.contains(&(i as usize)) {
            f.sysroot.add_kfd_node_with_render(&gpu);
        } else {
            f.sysroot.add_kfd_node(&gpu);
        }
    }
    f
}

#[test]
fn physical_lock_names_keep_containers_that_share_a_lock_directory_apart() {
    let a = container("phys-a", &[0, 1]);
    let b = container("phys-b", &[2, 3]);
    let shared = a.dir.join("host-locks");
    // Container A holds both its GPUs' only slot; B must still get its own.
    let mut running = Vec::new();
    for (f, tag) in [(&a, "a"), (&a, "a2")] {
        let mut c = f.cmd();
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared)
            .env("TF_TESTS_PER_GPU", "1")
            .env("SLEEP", "30")
            .arg("--lock-names=physical")
            .arg("./pkg/gpu_test")
            .arg(tag);
        running.push(c.own_process_group().spawn());
    }
    assert!(wait_until(Duration::from_secs(10), || is_held(&shared.join("gpulockuid-1000_0"))
        && is_held(&shared.join("gpulockuid-1001_0"))));
    let out = b
        .cmd()
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared)
        .env("TF_TESTS_PER_GPU", "1")
        .args(["--wait=0", "--lock-names=physical", "./pkg/gpu_test"])
        .run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulockuid-1002_0"], "B's own first GPU\n{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "the index as B's runtime sees it\n{}", out.explain());
    // By index, B's GPUs 0 and 1 are the lock names of A's GPUs 0 and 1,
    // which A would hold under index names too: B would wait for GPUs it
    // does not share (here, with --wait=0, fail at once).
    let by_index = [hold_lock(shared.join("gpulock0_0")), hold_lock(shared.join("gpulock1_0"))];
    let out = b
        .cmd()
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared)
        .env("TF_TESTS_PER_GPU", "1")
        .args(["--wait=0", "--lock-names=index", "./pkg/gpu_test"])
        .run();
    assert_eq!(out.status.code(), Some(1), "B took an index lock that A holds\n{}", out.explain());
    assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
    // Physical names where index-named lock files are: refused with the
    // fix (the two namings would book one GPU twice); once those files are
    // gone, as it says, B runs on its own GPUs.
    let physical_b = || {
        b.cmd()
            .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared)
            .env("TF_TESTS_PER_GPU", "1")
            .env("PARALLEL_GPU_EXECUTE_LOCK_NAMES", "physical")
            .args(["--wait=0", "./pkg/gpu_test", "--num_processes=2"])
            .run()
    };
    physical_b().assert_code(2).assert_one_error_line("holds lock files named by index");
    drop(by_index);
    for name in ["gpulock0_0", "gpulock1_0"] {
        std::fs::remove_file(shared.join(name)).unwrap();
    }
    let out2 = b
        .cmd()
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared)
        .env("TF_TESTS_PER_GPU", "1")
        .env("PARALLEL_GPU_EXECUTE_LOCK_NAMES", "physical")
        .args(["--wait=0", "./pkg/gpu_test", "--num_processes=2"])
        .run();
    let r = Record::of(out2.assert_success());
    assert_eq!(r.locks(), ["gpulockuid-1002_0", "gpulockuid-1003_0"], "{}", out2.explain());
    for mut p in running {
        p.signal_group(libc::SIGKILL);
        let _ = p.has_exited();
        p.wait();
    }
}

/// MI300A: four APUs, each its own PCI domain, all at bus 2 device 0
/// (`location_id` 512). With unique ids they are `uid-<id>`; a kernel that
/// reports `unique_id` 0 leaves the PCI address, where only the domain
/// tells them apart: without it, four APUs would share one lock name.
#[test]
fn mi300a_apus_get_a_lock_name_each_with_and_without_unique_ids() {
    type Host = fn(&mut test_support::Sysroot) -> u32;
    type Name = fn(u64) -> String;
    let uid: Name = |apu| format!("uid-{}", 0x5a00_0000_0000_0000u64 + apu * 0x1_0001);
    let pci: Name = |apu| format!("pci-{apu:04x}.02.00.0");
    let cases: [(&str, Host, Name); 2] =
        [("mi300a-uid", hosts::mi300a_four_apus, uid), ("mi300a-pci", hosts::mi300a_four_apus_without_unique_id, pci)];
    for (label, host, name) in cases {
        let mut f = Fixture::new(label);
        assert_eq!(host(&mut f.sysroot), 4);
        let out = f.run_test(
            |c| {
                c.env("TF_TESTS_PER_GPU", "1").arg("--lock-names=physical");
            },
            &["--num_processes=4"],
        );
        let r = Record::of(out.assert_success().assert_at_most_one_stderr_line());
        let want: Vec<String> = (0..4).map(|apu| format!("gpulock{}_0", name(apu))).collect();
        assert_eq!(r.locks(), want, "{}", out.explain());
        let by_id = |id: &str| name(id.parse().expect("a numeric id"));
        if let Err(e) = test_support::check_gpus_match_locks(&r.0, "HIP_VISIBLE_DEVICES", by_id) {
            panic!("{e}\n{}", out.explain());
        }
    }
}

#[test]
fn physical_names_fall_back_to_index_names_with_one_note_and_a_preset_pool_never_does() {
    let f = Fixture::new("phys-fallback");
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2").arg("--lock-names=physical");
        },
        &[],
    );
    let r = Record::of(out.assert_success());
    assert!(r.locks()[0].starts_with("gpulock") && r.locks()[0].ends_with("_0"));
    assert!(!r.locks()[0].contains("uid-"), "{}", out.explain());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.explain());
    assert_eq!(
        lines[0],
        "parallel_gpu_execute: note: --lock-names=physical: no hardware identity (the count comes from TF_GPU_COUNT); lock files are named by index"
    );
    // A preset pool whose GPUs cannot be told is refused, not named by
    // index (another container may know the same GPU by another index):
    // the count given by hand, the hardware is looked at, and shows none.
    let out = f.run_test(
        |c| {
            c.env("TF_GPU_COUNT", "2").env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm").env("ROCR_VISIBLE_DEVICES", "1");
            c.arg("--lock-names=physical");
        },
        &[],
    );
    out.assert_code(2).assert_one_error_line(
        "--lock-names=physical: cannot tell which physical GPUs ROCR_VISIBLE_DEVICES names (it names GPU 1, but this container sees 0 usable KFD GPU(s)); give the pool by GPU UUID",
    );
    f.cmd()
        .args(["--lock-names=serial", "--list"])
        .run()
        .assert_code(2)
        .assert_one_error_line("--lock-names: invalid value 'serial' (expected index or physical)");
}

#[test]
fn nvidia_physical_names_are_gpu_uuids_handed_to_cuda() {
    let mut f = Fixture::new("phys-nvidia");
    test_support::hardware::hosts::h100_cdi_pod(&mut f.sysroot);
    let out = f.run_test(
        |c| {
            c.arg("--lock-names=physical");
        },
        &[],
    );
    let r = Record::of(out.assert_success());
    let uuid = "GPU-00000006-0000-4000-8000-000000000007";
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(uuid), "{}", out.explain());
    assert_eq!(r.locks(), [format!("gpulock{uuid}_0")]);
}

/// An MI300X host in CPX mode seen by two containers: A is given
/// partitions 0 and 3 of the first device (nodes 2 and 5), B partition 3
/// alone. The partitions share the device's unique_id.
fn cpx_container(label: &str, given: &[u64]) -> Fixture {
    let mut f = Fixture::new(label);
    hosts::mi300x_cpx_partitions(&mut f.sysroot);
    // The same topology; only the render nodes this container was given.
    for minor in 128..191u64 {
        if !given.contains(&(minor - 128)) {
            f.sysroot.remove_dev_entry(&format!("dri/renderD{minor}"));
        }
    }
    f
}

#[test]
fn partitions_of_one_device_keep_their_names_in_every_container() {
    let a = cpx_container("cpx-a", &[0, 3]);
    let b = cpx_container("cpx-b", &[3]);
    let shared = a.dir.join("host-locks");
    let physical = |f: &Fixture| {
        let mut c = f.cmd();
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared).env("TF_TESTS_PER_GPU", "1").arg("--lock-names=physical");
        c
    };
    // B holds its one partition, node 5 (partition 3 of device 0x2000).
    let mut c = physical(&b);
    c.env("SLEEP", "30").arg("./pkg/gpu_test").own_process_group();
    let held = c.spawn();
    let b_lock = shared.join("gpulockuid-8192.3_0");
    assert!(wait_until(Duration::from_secs(10), || is_held(&b_lock)), "B never took {}", b_lock.display());
    // A gets partition 0 (its ROCR 0), never B's partition 3 ...
    let out = physical(&a).args(["--wait=0", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulockuid-8192_0"], "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("0"), "{}", out.explain());
    // ... and with partition 0 held too, nothing: both its GPUs are busy.
    let mut c = physical(&a);
    c.env("SLEEP", "30").arg("./pkg/gpu_test").own_process_group();
    let a_held = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || is_held(&shared.join("gpulockuid-8192_0"))));
    let out = physical(&a).args(["--wait=0", "./pkg/gpu_test"]).run();
    assert_eq!(out.status.code(), Some(1), "A was given B's partition\n{}", out.explain());
    // B's partition, once free, goes to A under the same name.
    held.signal_group(libc::SIGKILL);
    held.wait();
    let out = physical(&a).args(["--wait=0", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulockuid-8192.3_0"], "{}", out.explain());
    assert_eq!(r.var("HIP_VISIBLE_DEVICES"), Some("1"), "node 5 is A's second GPU\n{}", out.explain());
    a_held.signal_group(libc::SIGKILL);
    a_held.wait();
}

#[test]
fn a_preset_pool_is_named_by_the_physical_gpus_its_ids_stand_for() {
    // One container sees only GPU 3 and is given ROCR_VISIBLE_DEVICES=0;
    // another sees all four and runs with ROCR_VISIBLE_DEVICES=3: the same
    // GPU, so the same lock file.
    let a = container("preset-a", &[3]);
    let b = container("preset-b", &[0, 1, 2, 3]);
    let shared = a.dir.join("host-locks");
    let physical = |f: &Fixture, pool: &str| {
        let mut c = f.cmd();
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &shared)
            .env("TF_TESTS_PER_GPU", "1")
            .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm")
            .env("ROCR_VISIBLE_DEVICES", pool)
            .arg("--lock-names=physical");
        c
    };
    let mut c = physical(&a, "0");
    c.env("SLEEP", "30").arg("./pkg/gpu_test").own_process_group();
    let held = c.spawn();
    let lock = shared.join("gpulockuid-1003_0");
    assert!(wait_until(Duration::from_secs(10), || is_held(&lock)), "A never took {}", lock.display());
    for pool in ["3", "GPU-00000000000003eb"] {
        let out = physical(&b, pool).args(["--wait=0", "./pkg/gpu_test"]).run();
        assert_eq!(out.status.code(), Some(1), "B was given A's GPU through {pool}\n{}", out.explain());
    }
    // B's other GPUs are its own.
    let out = physical(&b, "2,3").args(["--wait=0", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulockuid-1002_0"], "{}", out.explain());
    held.signal_group(libc::SIGKILL);
    held.wait();
    let out = physical(&b, "GPU-00000000000003EB").args(["--wait=0", "./pkg/gpu_test"]).run();
    let r = Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulockuid-1003_0"], "{}", out.explain());
    // An index past what the container sees: refused with the fix.
    let out = physical(&a, "1").arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line("it names GPU 1, but this container sees 1 usable KFD GPU(s)");
}

#[test]
fn a_preset_cuda_pool_is_named_by_uuid_and_its_indexes_only_in_bus_order() {
    let mut f = Fixture::new("preset-cuda");
    test_support::hardware::hosts::h100_cdi_pod(&mut f.sysroot);
    let uuid = "GPU-00000006-0000-4000-8000-000000000007";
    let run = |pool: &str, order: Option<&str>| {
        f.run_test(
            |c| {
                c.env("CUDA_VISIBLE_DEVICES", pool).arg("--lock-names=physical");
                if let Some(o) = order {
                    c.env("CUDA_DEVICE_ORDER", o);
                }
            },
            &[],
        )
    };
    for (pool, order) in [(uuid, None), ("0", Some("PCI_BUS_ID"))] {
        let out = run(pool, order);
        let r = Record::of(out.assert_success());
        assert_eq!(r.locks(), [format!("gpulock{uuid}_0")], "{pool}\n{}", out.explain());
        assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(pool), "the pool is given as it was\n{}", out.explain());
    }
    run("0", None).assert_code(2).assert_one_error_line("CUDA numbers GPUs fastest first");
    // A MIG instance by its path: its own lock name, the pool as it was.
    let mig = "MIG-GPU-00000006-0000-4000-8000-000000000007/1/0";
    let out = run(mig, None);
    let r = Record::of(out.assert_success());
    assert!(r.locks()[0].starts_with("gpulockMIG-GPU-00000006-"), "{}", out.explain());
    assert_eq!(r.var("CUDA_VISIBLE_DEVICES"), Some(mig), "{}", out.explain());
}
