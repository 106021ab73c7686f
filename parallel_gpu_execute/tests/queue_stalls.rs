//! The wait queue never stalls a waiter while its slot is free: however
//! many heads in a row are stopped, when the queue's file is one nobody may
//! add to, when an earlier process in the queue never acts, when the clock
//! or the timestamps lie, when SIGALRM comes blocked; and a multi-GPU
//! waiter keeps its place after a stop episode. Each case runs the built
//! wrapper against a lock held by this test process.

mod common;

use common::{Fixture, NOBODY, Record, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use test_support::{Cmd, Running, hold_lock, is_root, wait_until, write_file};

/// One slot on one GPU (`gpus` GPUs), waited for without a limit.
fn waiter(f: &Fixture, gpus: u32, records: &Path, name: &str, extra: &[&str]) -> Cmd {
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", gpus.to_string()).env("TF_TESTS_PER_GPU", "1").env("RECORD_FILE", records.join(name));
    c.arg("./pkg/gpu_test").arg(name).args(extra);
    c.timeout(Duration::from_secs(60));
    c
}

/// A fixture with its lock directory made, and where its tests record.
fn fixture(name: &str) -> (Fixture, PathBuf) {
    let f = Fixture::new(name);
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let records = records(&f);
    (f, records)
}

fn records(f: &Fixture) -> PathBuf {
    let r = f.dir.join("records");
    std::fs::create_dir_all(&r).unwrap();
    r
}

/// Whether `/proc/locks` shows `pid` holding or blocked on the file at
/// `path` (by inode).
fn in_flock(pid: i32, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(inode) = std::fs::metadata(path).map(|m| m.ino()) else { return false };
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let w = if w.get(1) == Some(&"->") { &w[1..] } else { &w[..] };
        w.len() > 5
            && w[1] == "FLOCK"
            && w[4] == pid.to_string()
            && w[5].rsplit(':').next() == Some(inode.to_string().as_str())
    })
}

/// Starts a waiter and returns once it is in the queue.
fn queued(c: &Cmd, queue: &Path) -> Running {
    let r = c.spawn();
    let pid = r.pid();
    assert!(
        wait_until(Duration::from_secs(10), || in_flock(pid, queue)),
        "the waiter never queued on {}\n{}",
        queue.display(),
        c.describe()
    );
    r
}

/// The start time the recording test wrote.
fn start_of(records: &Path, name: &str) -> u128 {
    let text = std::fs::read_to_string(records.join(name))
        .unwrap_or_else(|e| panic!("no record of {name} in {}: {e}", records.display()));
    text.lines().find_map(|l| l.strip_prefix("start=")).unwrap().parse().unwrap()
}

#[track_caller]
fn served_within(r: Running, limit: Duration, since: Instant) {
    let out = r.wait();
    let took = since.elapsed();
    assert!(out.status.success(), "{}", out.explain());
    assert!(took < limit, "served only after {took:?} (limit {limit:?})\n{}", out.explain());
}

/// Whether `/proc/locks` shows `pid` blocked in `flock(2)`.
fn blocked(pid: i32) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.get(1) == Some(&"->") && w.get(5) == Some(&pid.to_string().as_str())
    })
}

#[test]
fn eight_stopped_heads_in_a_row_keep_no_one_from_a_free_slot() {
    // Each waiter is stopped once it looks for slots (the head, then each
    // one standing in for the stopped one before it). With lanes .queue
    // to .7, the ninth found no lane left and stayed blocked.
    let (f, records) = fixture("q-eight-stopped");
    let held = hold_lock(f.lock("0", 0));
    let queue = f.lock_dir.join("gpulock.queue");
    let mut stopped = Vec::new();
    for i in 0..9 {
        let c = waiter(&f, 1, &records, &format!("w{i}"), &[]);
        let r = queued(&c, &queue);
        let pid = r.pid();
        assert!(looking(pid), "waiter {i} never looked for slots with {i} stopped heads before it\n{}", c.describe());
        if i == 8 {
            let freed = Instant::now();
            drop(held);
            served_within(r, Duration::from_secs(5), freed);
            break;
        }
        r.signal(libc::SIGSTOP);
        stopped.push(r);
    }
    for (i, r) in stopped.iter().enumerate() {
        assert!(!records.join(format!("w{i}")).exists(), "stopped waiter {i} ran");
        r.signal(libc::SIGKILL);
    }
}

/// Whether `pid` is out of `flock(2)` on five looks in a row: looking for
/// slots, not only woken by its timer (blocked again within microseconds).
fn looking(pid: i32) -> bool {
    let mut free_looks = 0;
    wait_until(Duration::from_secs(10), || {
        free_looks = if blocked(pid) { 0 } else { free_looks + 1 };
        std::thread::sleep(Duration::from_millis(30));
        free_looks >= 5
    })
}

#[test]
fn one_waiter_stands_in_for_a_stopped_head_and_goes_back_when_it_runs_again() {
    // The first waiter that runs stands in; the one behind it stays in
    // flock(2) (unless each waiter took part, or counted the others, all
    // stood in at once). When the head runs again, the stand-in goes back
    // into the queue, and the three are served in their order.
    let (f, records) = fixture("q-one-stand-in");
    let queue = f.lock_dir.join("gpulock.queue");
    let held = hold_lock(f.lock("0", 0));
    let head = queued(&waiter(&f, 1, &records, "head", &[]), &queue);
    head.signal(libc::SIGSTOP);
    let w1 = queued(&waiter(&f, 1, &records, "w1", &[]), &queue);
    std::thread::sleep(Duration::from_millis(100));
    let w2 = queued(&waiter(&f, 1, &records, "w2", &[]), &queue);
    assert!(looking(w1.pid()), "the first waiter never stood in for the stopped head");
    // Long enough for the second to find the head stale too; a stand-in
    // would be out of flock(2) for five looks in a row.
    std::thread::sleep(Duration::from_millis(1200));
    let (mut free, mut longest) = (0, 0);
    for _ in 0..30 {
        free = if blocked(w2.pid()) { 0 } else { free + 1 };
        longest = longest.max(free);
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(longest < 5, "the second waiter stood in as well");
    head.signal(libc::SIGCONT);
    let w1_back = wait_until(Duration::from_secs(3), || blocked(w1.pid()) && in_flock(w1.pid(), &queue));
    assert!(w1_back, "the stand-in did not go back into the queue when the head ran again");
    drop(held);
    let (head, w1, w2) = (head.wait(), w1.wait(), w2.wait());
    for out in [&head, &w1, &w2] {
        assert!(out.status.success(), "{}", out.explain());
    }
    assert!(w1.stderr.contains("does not run"), "no stand-in message\n{}", w1.explain());
    assert!(!w2.stderr.contains("does not run"), "the second waiter stood in\n{}", w2.explain());
    let order = ["head", "w1", "w2"].map(|n| start_of(&records, n));
    assert!(order[0] < order[1] && order[1] < order[2], "out of order: {order:?}");
}

/// A waiter that became the head keeps its part in the queue until it runs
/// its test; the next waiter still counts it once: "second in the queue".
#[test]
fn a_head_that_had_waited_is_counted_once_by_the_next_waiter() {
    let (f, records) = fixture("q-count-head");
    let queue = f.lock_dir.join("gpulock.queue");
    let held = hold_lock(f.lock("0", 0));
    let first = queued(&waiter(&f, 1, &records, "first", &[]), &queue);
    let second = queued(&waiter(&f, 1, &records, "second", &[]), &queue);
    first.signal(libc::SIGKILL);
    first.wait();
    let pid = second.pid();
    assert!(wait_until(Duration::from_secs(10), || in_flock(pid, &queue) && !blocked(pid)), "the second never led");
    let third = queued(&waiter(&f, 1, &records, "third", &[]), &queue);
    drop(held);
    second.wait().assert_success();
    let out = third.wait();
    out.assert_success();
    let line = out.stderr.lines().next().unwrap_or("");
    assert!(line.ends_with(": 1 of 1 slots busy, second in the queue"), "{}", out.explain());

    // A stopped waiter, out of flock(2), is still counted by the next.
    let held = hold_lock(f.lock("0", 0));
    let head = queued(&waiter(&f, 1, &records, "head", &[]), &queue);
    let stopped = queued(&waiter(&f, 1, &records, "stopped", &[]), &queue);
    stopped.signal(libc::SIGSTOP);
    let last = queued(&waiter(&f, 1, &records, "last", &[]), &queue);
    stopped.signal(libc::SIGCONT);
    drop(held);
    for r in [head, stopped] {
        r.wait().assert_success();
    }
    let out = last.wait();
    out.assert_success();
    let line = out.stderr.lines().next().unwrap_or("");
    assert!(line.ends_with(": 1 of 1 slots busy, in the queue behind 2 others"), "{}", out.explain());
}

/// A waiter behind the head counts the busy slots it sees: GPUs 0 and 1
/// held, GPU 2's lock file there but free (the head waits for all three).
#[test]
fn a_waiter_behind_the_head_counts_the_busy_slots() {
    let (f, records) = fixture("q-count-busy");
    let queue = f.lock_dir.join("gpulock.queue");
    let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    write_file(f.lock("2", 0), "");
    let head = queued(&waiter(&f, 3, &records, "head", &["--num_processes=3"]), &queue);
    let behind = queued(&waiter(&f, 3, &records, "behind", &[]), &queue);
    drop(held);
    let out = head.wait();
    let line = out.assert_success().stderr.lines().next().unwrap_or("");
    assert!(line.ends_with(": 2 of 3 slots busy, first in the queue"), "{}", out.explain());
    let out = behind.wait();
    out.assert_success();
    let line = out.stderr.lines().next().unwrap_or("");
    assert!(line.ends_with(": 2 of 3 slots busy, second in the queue"), "{}", out.explain());
}

#[test]
fn a_queue_no_one_may_add_to_with_a_stopped_head_keeps_no_one_waiting() {
    // A root-owned 0755 lock directory with gpulock0_0 and gpulock.queue
    // made 0666 in advance: nobody can create anything there.
    if !test_support::prerequisite(is_root(), "root", "a stopped head in a lock directory nobody may add to") {
        return;
    }
    let f = shared_fixture("q-read-only-dir");
    let records = records(&f);
    std::fs::set_permissions(&records, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let queue = f.lock_dir.join("gpulock.queue");
    for p in [&f.lock("0", 0), &queue] {
        write_file(p, "");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let held = hold_lock(f.lock("0", 0));
    let mut head = waiter(&f, 1, &records, "head", &[]);
    head.as_user(NOBODY, NOBODY);
    let head = queued(&head, &queue);
    head.signal(libc::SIGSTOP);
    let mut second = waiter(&f, 1, &records, "second", &[]);
    second.as_user(NOBODY, NOBODY);
    let second = queued(&second, &queue);
    std::thread::sleep(Duration::from_millis(300));
    let freed = Instant::now();
    drop(held);
    served_within(second, Duration::from_secs(5), freed);
    head.signal(libc::SIGCONT);
    let head = head.wait();
    assert!(head.status.success(), "{}", head.explain());
}

#[test]
fn a_full_file_system_with_a_stopped_head_keeps_no_one_waiting_and_space_freed_brings_the_queue_back() {
    if !test_support::prerequisite(is_root(), "root", "a stopped head on a full file system") {
        return;
    }
    let f = Fixture::new("q-full-fs");
    let records = records(&f);
    let mnt = f.dir.join("small");
    // The root, the lock directory, a lock file and a filler (later the queue).
    let _mounted = test_support::mounts::Mounted::tmpfs(&mnt, "size=64k,nr_inodes=4");
    let locks = mnt.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    write_file(locks.join("gpulock0_0"), "");
    let filler = locks.join("filler");
    write_file(&filler, "");
    let nospc = std::fs::File::create(locks.join("one-more")).unwrap_err();
    assert_eq!(nospc.raw_os_error(), Some(libc::ENOSPC), "the file system is not full");
    let held = hold_lock(locks.join("gpulock0_0"));
    let queue = locks.join("gpulock.queue");
    // No room for the queue: the first waiter waits without it, and
    // queues as soon as there is room again.
    let mut c = waiter(&f, 1, &records, "first", &[]);
    c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &locks);
    let first = c.spawn();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!queue.exists());
    std::fs::remove_file(&filler).unwrap();
    let pid = first.pid();
    assert!(
        wait_until(Duration::from_secs(5), || in_flock(pid, &queue)),
        "space came back, but the waiter never took the queue {}",
        queue.display()
    );
    // Full again (the queue took the last inode), and the head stops: the
    // next waiter is served anyway.
    assert_eq!(std::fs::File::create(&filler).unwrap_err().raw_os_error(), Some(libc::ENOSPC));
    first.signal(libc::SIGSTOP);
    let mut c = waiter(&f, 1, &records, "second", &[]);
    c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &locks);
    let second = queued(&c, &queue);
    std::thread::sleep(Duration::from_millis(300));
    let freed = Instant::now();
    drop(held);
    served_within(second, Duration::from_secs(5), freed);
    first.signal(libc::SIGCONT);
    let first = first.wait();
    let out = first;
    assert!(out.status.success(), "{}", out.explain());
    assert!(out.stderr.contains("No space left on device"), "no word of the full file system\n{}", out.explain());
}

#[test]
fn an_earlier_process_in_the_queue_that_never_acts_is_passed_by() {
    // A plain `flock` holding the queue (never beats), then one blocked
    // behind it that started before our waiter (never moves): neither
    // keeps the waiter from a free slot.
    let (f, records) = fixture("q-non-participants");
    let queue = f.lock_dir.join("gpulock.queue");
    write_file(&queue, "");
    let held = hold_lock(f.lock("0", 0));
    let flock = |secs: &str| {
        let mut c = Cmd::new("flock");
        c.arg(&queue).args(["sleep", secs]).timeout(Duration::from_secs(60));
        c.spawn()
    };
    let holder = flock("60");
    let hpid = holder.pid();
    assert!(wait_until(Duration::from_secs(5), || in_flock(hpid, &queue)));
    let blocked = queued(
        &{
            let mut c = Cmd::new("flock");
            c.arg(&queue).args(["sleep", "60"]).timeout(Duration::from_secs(60));
            c
        },
        &queue,
    );
    let ours = queued(&waiter(&f, 1, &records, "ours", &[]), &queue);
    std::thread::sleep(Duration::from_millis(300));
    let freed = Instant::now();
    drop(held);
    served_within(ours, Duration::from_secs(5), freed);
    holder.signal(libc::SIGKILL);
    blocked.signal(libc::SIGKILL);
}

#[test]
fn a_multi_gpu_waiter_keeps_its_place_after_a_stop_episode() {
    // The head stops; a 2-GPU waiter and, after it, a stream of 1-GPU
    // waiters queue. The head is continued and served; then GPU 0 frees
    // while GPU 1 is still busy: the 1-GPU waiters must not take it, and
    // the 2-GPU waiter is served first when both are free.
    let (f, records) = fixture("q-multi-after-stop");
    let queue = f.lock_dir.join("gpulock.queue");
    let gpu0 = hold_lock(f.lock("0", 0));
    let gpu1 = hold_lock(f.lock("1", 0));
    let head = queued(&waiter(&f, 2, &records, "head", &[]), &queue);
    head.signal(libc::SIGSTOP);
    let multi = queued(&waiter(&f, 2, &records, "multi", &["--num_processes=2"]), &queue);
    // The 2-GPU waiter stands in for the stopped head.
    std::thread::sleep(Duration::from_millis(1500));
    let singles: Vec<Running> = (0..4)
        .map(|i| {
            let mut c = waiter(&f, 2, &records, &format!("single{i}"), &[]);
            c.env("SLEEP", "0.2");
            let r = queued(&c, &queue);
            std::thread::sleep(Duration::from_millis(100));
            r
        })
        .collect();
    head.signal(libc::SIGCONT);
    drop(gpu0);
    let head = head.wait();
    assert!(head.status.success(), "{}", head.explain());
    // GPU 0 is free, GPU 1 is not: nobody behind the 2-GPU waiter takes it.
    std::thread::sleep(Duration::from_millis(800));
    for i in 0..4 {
        assert!(!records.join(format!("single{i}")).exists(), "single{i} overtook the 2-GPU waiter on GPU 0");
    }
    drop(gpu1);
    let multi = multi.wait();
    assert!(multi.status.success(), "{}", multi.explain());
    let m = Record::read(&records.join("multi"));
    assert_eq!(m.locks(), ["gpulock0_0", "gpulock1_0"], "{}", multi.explain());
    for r in singles {
        let out = r.wait();
        assert!(out.status.success(), "{}", out.explain());
    }
    let multi_start = start_of(&records, "multi");
    for i in 0..4 {
        let s = start_of(&records, &format!("single{i}"));
        assert!(multi_start < s, "single{i} started at {s}, before the 2-GPU waiter at {multi_start}");
    }
}

#[test]
fn a_beat_in_the_future_does_not_hide_a_stopped_head() {
    let (f, records) = fixture("q-future-beat");
    let queue = f.lock_dir.join("gpulock.queue");
    let held = hold_lock(f.lock("0", 0));
    let head = queued(&waiter(&f, 1, &records, "head", &[]), &queue);
    head.signal(libc::SIGSTOP);
    let st = Command::new("touch").args(["-d", "+1 hour"]).arg(&queue).status().unwrap();
    assert!(st.success());
    let second = queued(&waiter(&f, 1, &records, "second", &[]), &queue);
    std::thread::sleep(Duration::from_millis(300));
    let freed = Instant::now();
    drop(held);
    served_within(second, Duration::from_secs(5), freed);
    head.signal(libc::SIGKILL);
}

#[test]
fn whole_second_timestamps_on_a_full_disk_do_not_make_a_running_head_look_stopped() {
    // ext4 with 128-byte inodes keeps whole seconds only; full, it takes
    // no counter into the empty queue file: the head's beat is its times
    // alone, which change once a second. (A waiter that gave times alone
    // the counter's one-second limit took this head for stopped.)
    if !test_support::prerequisite(is_root(), "root", "a running head on whole-second timestamps (an ext4 image)") {
        return;
    }
    let f = Fixture::new("q-whole-seconds");
    let records = records(&f);
    let image = f.dir.join("ext4.img");
    let mnt = f.dir.join("ext4");
    let _mounted = test_support::mounts::Mounted::ext4_image(&image, "4M", &["-I", "128"], &mnt);
    let locks = mnt.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let probe = locks.join("probe");
    write_file(&probe, "");
    let out = Command::new("stat").args(["-c", "%y"]).arg(&probe).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(".000000000"), "not whole seconds: {out:?}");
    let queue = locks.join("gpulock.queue");
    write_file(&queue, "");
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o666)).unwrap();
    let held = hold_lock(locks.join("gpulock0_0"));
    let fill = Command::new("dd")
        .args(["if=/dev/zero", "bs=64k"])
        .arg(format!("of={}", mnt.join("fill").display()))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&fill.stderr).contains("No space left"), "the image did not fill: {fill:?}");
    // ext4 keeps blocks back from one large write: small files take them.
    let topped = (0..10_000).find(|i| std::fs::write(mnt.join(format!("fill{i}")), [0u8; 1024]).is_err());
    assert!(topped.is_some(), "the image never filled");
    let run = |name: &str| {
        let mut c = waiter(&f, 1, &records, name, &[]);
        c.env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &locks);
        queued(&c, &queue)
    };
    let head = run("head");
    let second = run("second");
    // Both run; the head keeps beating for 5 s.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(std::fs::metadata(&queue).unwrap().len(), 0, "the head wrote a counter: the disk was not full");
    drop(held);
    let (head, second) = (head.wait(), second.wait());
    assert!(head.status.success(), "{}", head.explain());
    assert!(second.status.success(), "{}", second.explain());
    assert!(!second.stderr.contains("does not run"), "a running head was taken for stopped\n{}", second.explain());
    assert!(start_of(&records, "head") < start_of(&records, "second"), "out of order");
}

#[test]
fn sigalrm_inherited_blocked_neither_stalls_a_waiter_nor_stays_unblocked_for_the_test() {
    let (f, records) = fixture("q-sigalrm-blocked");
    let queue = f.lock_dir.join("gpulock.queue");
    let held = hold_lock(f.lock("0", 0));
    // A head that waits forever keeps the second one in flock(2): only
    // its timer makes it look up, and it must give up at --wait=2.
    let head = queued(&waiter(&f, 1, &records, "head", &[]), &queue);
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("--wait=2").arg("./pkg/gpu_test");
    c.timeout(Duration::from_secs(20));
    c.block_signals(&[libc::SIGALRM]);
    let started = Instant::now();
    let out = c.run();
    out.assert_code(1);
    assert!(started.elapsed() < Duration::from_secs(6), "--wait=2 took {:?}\n{}", started.elapsed(), out.explain());
    // Served after a wait, the test finds SIGALRM blocked as it was given.
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1");
    // grep itself, not a shell: dash empties the mask it is given.
    c.args(["grep", "^SigBlk:", "/proc/self/status"]);
    c.block_signals(&[libc::SIGALRM]);
    let blocked = c.spawn();
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    head.wait().assert_success();
    let out = blocked.wait();
    out.assert_success();
    let mask = out.stdout.trim().rsplit(['\t', ' ']).next().unwrap_or("");
    let mask = u64::from_str_radix(mask, 16).unwrap_or_else(|_| panic!("no SigBlk line\n{}", out.explain()));
    assert_ne!(mask & (1 << (libc::SIGALRM - 1)), 0, "SIGALRM was not blocked again for the test\n{}", out.explain());
}

#[test]
fn a_queue_file_this_user_cannot_use_is_passed_by_with_the_repair() {
    if !test_support::prerequisite(is_root(), "root", "a queue file another user made unusable") {
        return;
    }
    for (what, make) in [
        (
            "0600",
            &(|q: &Path| {
                write_file(q, "");
                std::fs::set_permissions(q, std::fs::Permissions::from_mode(0o600)).unwrap();
            }) as &dyn Fn(&Path),
        ),
        ("0644, not writable", &|q: &Path| {
            write_file(q, "");
            std::fs::set_permissions(q, std::fs::Permissions::from_mode(0o644)).unwrap();
        }),
        ("a planted link", &|q: &Path| std::os::unix::fs::symlink("/etc/passwd", q).unwrap()),
        ("a FIFO", &|q: &Path| {
            let st = Command::new("mkfifo").arg("-m").arg("0644").arg(q).status();
            assert!(st.is_ok_and(|s| s.success()), "mkfifo {}", q.display());
        }),
    ] {
        let f = shared_fixture("q-unusable-queue");
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let queue = f.lock_dir.join("gpulock.queue");
        make(&queue);
        // A free slot: the test runs, without a word.
        let out = f.run_test(
            |c| {
                c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").as_user(NOBODY, NOBODY);
            },
            &[],
        );
        out.assert_success();
        assert_eq!(out.stderr.lines().filter(|l| l.contains("queue file")).count(), 0, "{what}\n{}", out.explain());
        // A busy one: it waits without the queue, names it and the repair.
        let held = hold_lock(f.lock("0", 0));
        std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").as_user(NOBODY, NOBODY);
        c.arg("./pkg/gpu_test");
        let r = c.spawn();
        // Past the first wait (the 2 s safety rescan), where it looks at the
        // queue file again: opening and closing it must not wake it at once
        // (it spun, where it could open the file).
        std::thread::sleep(Duration::from_millis(2600));
        let cpu = test_support::cpu_time(r.pid());
        drop(held);
        let out = r.wait();
        out.assert_success();
        assert!(cpu < Duration::from_millis(300), "{what}: waiting used {cpu:?} of CPU in 2.6 s\n{}", out.explain());
        let q = queue.display().to_string();
        assert!(
            out.stderr.contains(&format!("cannot use queue file {q}")) && out.stderr.contains(&format!("rm -f {q}")),
            "{what}: no warning naming the queue file and the repair\n{}",
            out.explain()
        );
    }
}
