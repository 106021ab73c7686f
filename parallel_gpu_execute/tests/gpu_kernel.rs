//! What the kernel tells of each AMD GPU, on fake KFD hosts with real
//! processes: the processes KFD lists on it (`--status`'s `kernel_users`),
//! a GPU granted while a process outside the lock protocol holds memory on
//! it (one warning line), its RAS counters (`health`,
//! `PARALLEL_GPU_EXECUTE_UNHEALTHY`), and what all this costs a test that
//! finds a free slot.

mod common;

use common::{Fixture, Record};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use test_support::{Cmd, Output, children, hold_lock, wait_until, write_file};

/// The `gpu_id`s the fake topology gives its two GPUs (nodes 1 and 2).
const GPU_IDS: [u64; 2] = [41946, 52913];

/// A host with two AMD GPUs (render minors 128 and 129) and their gpu_ids.
fn kfd_host(label: &str) -> Fixture {
    let mut f = Fixture::new(label);
    f.sysroot.add_kfd_gpus(2);
    let nodes = f.sysroot.root.join("sys/class/kfd/kfd/topology/nodes");
    write_file(nodes.join("0/gpu_id"), "0\n");
    for (k, id) in GPU_IDS.iter().enumerate() {
        write_file(nodes.join(format!("{}/gpu_id", k + 1)), format!("{id}\n"));
    }
    f
}

/// A process KFD lists, holding `vram[k]` bytes on GPU `k`.
fn kfd_process(f: &Fixture, pid: u32, vram: [u64; 2]) {
    let dir = f.sysroot.root.join(format!("sys/class/kfd/kfd/proc/{pid}"));
    for (k, bytes) in vram.iter().enumerate() {
        write_file(dir.join(format!("vram_{}", GPU_IDS[k])), format!("{bytes}\n"));
    }
    write_file(dir.join("pasid"), "32770\n");
}

fn ras(f: &Fixture, minor: u32, block: &str, ue: u64, ce: u64) {
    let file = f.sysroot.root.join(format!("sys/class/drm/renderD{minor}/device/ras/{block}_err_count"));
    write_file(file, format!("ue: {ue}\nce: {ce}\n"));
}

/// Real processes, killed at the end.
struct Procs(Vec<Child>);

impl Procs {
    /// A test holding `lock` (`flock lock sleep 60`), once its child, which
    /// holds it through the inherited descriptor, has started.
    fn holder(&mut self, lock: &Path) -> u32 {
        let holder = self.start("flock", &[lock.to_str().unwrap(), "sleep", "60"]);
        assert!(wait_until(Duration::from_secs(10), || children(holder).len() == 1), "flock did not start its child");
        holder
    }

    fn start(&mut self, program: &str, args: &[&str]) -> u32 {
        let child = Command::new(program).args(args).stdin(Stdio::null()).spawn().unwrap();
        let pid = child.id();
        self.0.push(child);
        pid
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wrapper(f: &Fixture, slots: u32) -> Cmd {
    let mut c = f.cmd();
    c.env("TF_TESTS_PER_GPU", slots.to_string());
    c
}

#[track_caller]
fn given(out: &Output) -> String {
    out.assert_success();
    Record::of(out).var("HIP_VISIBLE_DEVICES").unwrap_or("").to_string()
}

#[test]
fn status_lists_the_processes_kfd_shows_on_each_gpu_and_its_health() {
    let f = kfd_host("kernel-status");
    let mut procs = Procs(Vec::new());
    let user = procs.start("sleep", &["60"]);
    kfd_process(&f, user, [0, 1 << 20]);
    ras(&f, 129, "umc", 3, 7);
    ras(&f, 129, "gfx", 0, 0);
    ras(&f, 128, "umc", 0, 12);
    let out = wrapper(&f, 1).arg("--status=json").run();
    out.assert_success();
    let json = &out.stdout;
    let gpu0 = format!(
        r#"{{"gpu": "0", "drained": null, "kernel_users": [{{"pid": {user}, "vram_bytes": 0}}], "health": "ok", "configured": true}}"#
    );
    let gpu1 = format!(
        r#"{{"gpu": "1", "drained": null, "kernel_users": [{{"pid": {user}, "vram_bytes": 1048576}}], "health": "uncorrectable memory errors (RAS): umc 3", "configured": true}}"#
    );
    assert!(json.contains(&format!(r#""gpus": [{gpu0}, {gpu1}]"#)), "{}", out.explain());
    let out = wrapper(&f, 1).arg("--status").run();
    let line = out.stdout.lines().find(|l| l.starts_with("1 ")).unwrap_or_else(|| panic!("{}", out.explain()));
    assert!(line.contains("umc 3") && line.contains(&format!("{user} (1 MiB)")), "{line}\n{}", out.explain());

    // Without KFD's process directory the kernel does not tell: null, not [].
    std::fs::remove_dir_all(f.sysroot.root.join("sys/class/kfd/kfd/proc")).unwrap();
    let out = wrapper(&f, 1).arg("--status=json").run();
    assert!(
        out.stdout.contains(r#"{"gpu": "0", "drained": null, "kernel_users": null, "health": "ok""#),
        "{}",
        out.explain()
    );
    // Counted from TF_GPU_COUNT: no GPU is known to the kernel.
    let out = wrapper(&f, 1).env("TF_GPU_COUNT", "2").arg("--status=json").run();
    assert!(
        out.stdout.contains(r#"{"gpu": "1", "drained": null, "kernel_users": null, "health": "ok""#),
        "{}",
        out.explain()
    );
}

fn holds_lock(pid: u32, lock: &Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.flatten().any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == lock)))
        .unwrap_or(false)
}

#[test]
fn a_gpu_in_use_outside_the_lock_protocol_is_told_and_only_then() {
    let f = kfd_host("kernel-outsider");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let mut procs = Procs(Vec::new());
    // GPU 0's slot 0 is taken here: the wrapper is given GPU 1, slot 0.
    let _gpu0 = hold_lock(f.lock("0", 0));
    // A test that holds GPU 1's slot 1 (flock) and its child (sleep),
    // which holds it through the inherited descriptor.
    let lock11 = f.lock("1", 1);
    let holder = procs.holder(&lock11);
    let child = children(holder)[0];
    assert!(wait_until(Duration::from_secs(10), || holds_lock(child, &lock11)), "the child has no lock descriptor");
    kfd_process(&f, holder, [0, 1 << 30]);
    kfd_process(&f, child, [0, 1 << 30]);
    // This test process: an ancestor of the wrapper.
    kfd_process(&f, std::process::id(), [0, 1 << 30]);
    // A process with a context on GPU 1 but no memory there, and one on GPU 0.
    let idle = procs.start("sleep", &["60"]);
    kfd_process(&f, idle, [1 << 20, 0]);

    let out = wrapper(&f, 2).arg("./pkg/gpu_test").run();
    assert_eq!(given(&out), "1");
    assert!(!out.stderr.contains("warning"), "a false alarm\n{}", out.explain());

    // Now one that holds memory on GPU 1 and no slot.
    let outsider = procs.start("sleep", &["61"]);
    kfd_process(&f, outsider, [0, 512 << 20]);
    let out = wrapper(&f, 2).arg("./pkg/gpu_test").run();
    assert_eq!(given(&out), "1");
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", out.explain());
    let w = warnings[0];
    assert!(w.contains(&format!("GPU 1 is in use by PID {outsider} (sleep 61)")), "{w}");
    assert!(w.contains("another user or container that does not share this lock directory"), "{w}");
    for quiet in [holder, child, idle, std::process::id()] {
        assert!(!w.contains(&format!("PID {quiet} ")), "PID {quiet} named: {w}");
    }
}

/// Whether `pid` sleeps in `flock(2)` (`/proc/<pid>/syscall`).
fn blocked_in_flock(pid: u32) -> bool {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    text.split(' ').next() == Some(libc::SYS_flock.to_string().as_str())
}

/// Near the lock protocol but holding no slot: a process blocked on a slot
/// of the GPU (waiting is not holding), and one holding a `flock` on a
/// directory that has a lock file's name (not a lock file). Both hold
/// memory on the GPU the wrapper is given, on both GPUs in fact: both are
/// told.
#[test]
fn a_process_waiting_for_a_slot_or_locking_a_stray_directory_holds_none() {
    let f = kfd_host("kernel-near");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let mut procs = Procs(Vec::new());
    let _gpu0 = hold_lock(f.lock("0", 0));
    // GPU 1's slot 1 is held by a test that is no ancestor of the others
    // (an ancestor's slot covers its children).
    let lock11 = f.lock("1", 1);
    procs.holder(&lock11);
    let waiting = procs.start("flock", &[lock11.to_str().unwrap(), "sleep", "60"]);
    assert!(wait_until(Duration::from_secs(10), || blocked_in_flock(waiting)), "flock never blocked");
    let stray = f.lock("1", 2);
    std::fs::create_dir(&stray).unwrap();
    let locking = procs.start("flock", &[stray.to_str().unwrap(), "sleep", "60"]);
    assert!(wait_until(Duration::from_secs(10), || children(locking).len() == 1), "flock did not start its child");
    kfd_process(&f, waiting, [256 << 20, 512 << 20]);
    kfd_process(&f, locking, [0, 1 << 30]);

    let out = wrapper(&f, 3).arg("./pkg/gpu_test").run();
    assert_eq!(given(&out), "1");
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", out.explain());
    for pid in [waiting, locking] {
        assert!(warnings[0].contains(&format!("PID {pid} (flock ")), "PID {pid} not named\n{}", out.explain());
    }
}

/// Nothing is told where the wrapper cannot tell: a user who may not read
/// a holder's descriptors believes `/proc/locks` (the holder is root's, a
/// test holding GPU 1's slot 1, and its child); in a PID namespace of its
/// own the PIDs KFD gives (the host's) name no process it can see.
#[test]
fn no_false_alarm_for_another_users_holder_or_from_a_pid_namespace() {
    let f = kfd_host("kernel-unseen");
    common::make_shared(&f);
    f.make_lock_dir_shared();
    let mut procs = Procs(Vec::new());
    let lock11 = f.lock("1", 1);
    let holder = procs.holder(&lock11);
    kfd_process(&f, holder, [0, 1 << 30]);
    kfd_process(&f, children(holder)[0], [0, 1 << 30]);
    let outsider = procs.start("sleep", &["61"]);
    let only_gpu1 = |c: &mut Cmd| {
        c.env("ROCR_VISIBLE_DEVICES", "1").env("TF_TESTS_PER_GPU", "2").arg("./pkg/gpu_test");
    };

    if test_support::prerequisite(test_support::is_root(), "root", "a holder whose descriptors this user cannot read") {
        let mut c = f.cmd();
        c.as_user(common::NOBODY, common::NOBODY);
        only_gpu1(&mut c);
        let out = c.run();
        out.assert_success();
        assert_eq!(Record::of(&out).locks(), ["gpulock1_0"], "{}", out.explain());
        assert!(!out.stderr.contains("in use by"), "a false alarm\n{}", out.explain());
    }

    kfd_process(&f, outsider, [0, 512 << 20]);
    let unshare = test_support::is_root() && Path::new("/usr/bin/unshare").exists();
    if test_support::prerequisite(unshare, "root and unshare(1)", "the warning from a PID namespace") {
        let mut c = Cmd::new("/usr/bin/unshare");
        f.runfiles.apply(&mut c);
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
            .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
            .args(["--pid", "--fork", "--mount-proc", common::bin()]);
        only_gpu1(&mut c);
        let out = c.run();
        out.assert_success();
        assert_eq!(Record::of(&out).locks(), ["gpulock1_0"], "{}", out.explain());
        assert!(!out.stderr.contains("in use by"), "PID {outsider} told from a PID namespace\n{}", out.explain());
    }
}

#[test]
fn unhealthy_gpus_are_reported_warned_about_or_avoided_as_the_setting_says() {
    let f = kfd_host("kernel-health");
    ras(&f, 128, "umc", 2, 0);
    let run = |policy: Option<&str>, pool: Option<&str>| {
        let mut c = wrapper(&f, 1);
        if let Some(p) = policy {
            c.env("PARALLEL_GPU_EXECUTE_UNHEALTHY", p);
        }
        if let Some(p) = pool {
            c.env("ROCR_VISIBLE_DEVICES", p);
        }
        c.arg("./pkg/gpu_test").run()
    };
    // report, the default: --status only.
    for policy in [None, Some("report")] {
        let out = run(policy, None);
        assert_eq!(given(&out), "0");
        assert!(!out.stderr.contains("unhealthy"), "{}", out.explain());
    }
    let out = run(Some("warn"), None);
    assert_eq!(given(&out), "0");
    out.assert_stderr_contains(
        "warning: the test is given GPU 0 (unhealthy: uncorrectable memory errors (RAS): umc 2); PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid",
    );
    let out = run(Some("avoid"), None);
    assert_eq!(given(&out), "1", "GPU 0 is passed over");
    let out = run(Some("avoid"), Some("0"));
    out.assert_code(1).assert_one_error_line("GPU 0 (unhealthy: uncorrectable memory errors (RAS): umc 2)");
    // The repair that fits: not an undrain of a GPU that is not drained.
    out.assert_stderr_contains("PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid passes over an unhealthy one");
    assert!(!out.stderr.contains("--undrain"), "{}", out.explain());
    // Drained and unhealthy: named once, as drained.
    wrapper(&f, 1).args(["--drain=0", "--reason=retired"]).run().assert_success();
    let out = run(Some("avoid"), Some("0"));
    out.assert_code(1).assert_one_error_line("out of service: GPU 0 (retired");
    out.assert_stderr_contains("`--undrain=GPU` puts a drained one back");
    assert!(!out.stderr.contains("unhealthy"), "GPU 0 named twice\n{}", out.explain());
    let out = run(Some("drain"), None);
    out.assert_code(2).assert_one_error_line(
        "PARALLEL_GPU_EXECUTE_UNHEALTHY: invalid value 'drain' (expected report, warn or avoid)",
    );
}

#[test]
fn a_free_slot_costs_one_failed_open_for_each_check_on_a_host_without_them() {
    // No drained GPU, no KFD process directory: one failed openat of
    // gpudrain and one failed open of KFD's proc directory, nothing more.
    let f = kfd_host("kernel-cost");
    let strace = Command::new("strace").arg("-V").output().is_ok();
    if !test_support::prerequisite(strace, "strace", "the system calls a free slot costs") {
        return;
    }
    let trace = f.dir.join("trace");
    let calls = "trace=execve,openat,open,stat,newfstatat,statx,access,faccessat,faccessat2";
    let mut c = f.cmd_under("strace", ["-f", "-qq", "-e", calls, "-o", trace.to_str().unwrap()]);
    c.arg("./pkg/gpu_test").env("TF_TESTS_PER_GPU", "1");
    let out = c.run();
    assert_eq!(given(&out), "0");
    let text = std::fs::read_to_string(&trace).unwrap();
    // The wrapper's own calls: up to the exec of the test.
    let wrapper_lines: Vec<&str> =
        text.lines().take_while(|l| !(l.contains("execve(") && l.contains("/pkg/gpu_test\", ["))).collect();
    let of = |needle: &str| wrapper_lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(of("gpudrain"), 1, "{text}");
    assert!(wrapper_lines.iter().any(|l| l.contains("gpudrain") && l.contains("ENOENT")), "{text}");
    assert_eq!(of("kfd/kfd/proc"), 1, "{text}");
    assert!(wrapper_lines.iter().any(|l| l.contains("kfd/kfd/proc") && l.contains("ENOENT")), "{text}");
    assert_eq!(of("/ras"), 0, "RAS counters read on the way to a slot\n{text}");
}

#[test]
fn under_physical_lock_names_a_gpu_is_drained_by_its_physical_name() {
    let mut f = Fixture::new("kernel-physical");
    f.sysroot.add_kfd_cpu();
    for (k, uid) in [111u64, 222].iter().enumerate() {
        f.sysroot
            .add_kfd_node_with_render(&test_support::hardware::KfdNode::gpu(90402, 304, 128 + k as u64).unique(*uid));
    }
    let cmd = || {
        let mut c = wrapper(&f, 1);
        c.env("PARALLEL_GPU_EXECUTE_LOCK_NAMES", "physical");
        c
    };
    cmd().args(["--drain=uid-111", "--reason=bad HBM"]).run().assert_success();
    assert!(f.lock_dir.join("gpudrain/uid-111").exists());
    assert_eq!(given(&cmd().arg("./pkg/gpu_test").run()), "1", "the first GPU, uid-111, is drained");
    let out = cmd().arg("--status=json").run();
    out.assert_stdout_contains(r#"{"gpu": "uid-111", "drained": {"reason": "bad HBM", "#);
    // By index the GPU is not known under physical names.
    let out = cmd().args(["--drain=0", "--reason=x"]).run();
    out.assert_code(2).assert_one_error_line("unknown GPU '0': the GPUs here are uid-111, uid-222");
    // A container that sees only the second GPU still names it alike.
    let out = cmd().env("ROCR_VISIBLE_DEVICES", "1").arg("--status=json").run();
    out.assert_stdout_contains(r#""gpus": [{"gpu": "uid-222", "drained": null"#);
    out.assert_stdout_contains(r#"{"gpu": "uid-111", "drained": {"reason": "bad HBM""#);
}
