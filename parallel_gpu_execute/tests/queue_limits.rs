//! A waiter at the edge of what its process may do: one with few file
//! descriptors left never holds the queue up and is still served when its
//! block frees up, a signal that ends a wait at any step, the moments
//! its queue and record are made and put in place included, leaves no
//! record behind, and
//! another user's records cost a look no more than their entries do.

mod common;

use common::{Fixture, on};
use std::time::Duration;
use test_support::{Cmd, Running, hold_lock};

/// The wrapper with the soft `RLIMIT_NOFILE` lowered to `limit` by the
/// shell that execs it, then `wait` and the recording test with `args`,
/// which a shell runs with the limit raised again (it needs more itself).
fn with_descriptors(f: &Fixture, limit: u32, wait: &str, args: &[&str]) -> Cmd {
    let mut c = f.cmd_under("sh", ["-c", &format!("ulimit -S -n {limit}; exec \"$@\""), "sh"]);
    c.args([wait, "/bin/sh", "-c", "ulimit -S -n 1024; exec \"$@\"", "sh", "./pkg/gpu_test"]).args(args);
    c.timeout(Duration::from_secs(60));
    c
}

/// The record names in `gpuqueue/`.
fn records(f: &Fixture) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(f.lock_dir.join("gpuqueue")) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.len() > 17 && n.as_bytes()[16] == b'.' && n[..16].bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    names.sort();
    names
}

/// A waiter that cannot open the records ahead of it (its descriptors
/// spent on its own record) gives that record up rather than count an
/// unreadable one as live without end: behind a stopped waiter it is
/// served once the GPU frees up, and so is the waiter behind it, in order
/// where it had room to keep its place.
#[test]
fn a_waiter_out_of_descriptors_gives_up_its_record_not_the_queue() {
    for limit in [6, 7, 8, 9, 10] {
        let f = Fixture::new("limits-descriptors");
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        let held = hold_lock(f.lock("0", 0));
        let mut stopped = f.cmd();
        on(&mut stopped, 1, 1).arg("./pkg/gpu_test").timeout(Duration::from_secs(60));
        let stopped = f.spawn_queued(&stopped);
        stopped.signal(libc::SIGSTOP);
        let mut short = with_descriptors(&f, limit, "--wait=10", &[]);
        let short = on(&mut short, 1, 1).spawn();
        std::thread::sleep(Duration::from_millis(300));
        if limit >= 8 {
            // Its place taken before the later one comes (two shells
            // first: slow to start on a loaded machine).
            let mine = format!(".{}", short.pid());
            let joined =
                test_support::wait_until(Duration::from_secs(10), || records(&f).iter().any(|n| n.ends_with(&mine)));
            assert!(joined, "limit {limit}: the waiter with few descriptors never made its record");
        }
        let mut later = f.cmd();
        on(&mut later, 1, 1).args(["--wait=10", "./pkg/gpu_test"]).timeout(Duration::from_secs(60));
        let later = later.spawn();
        std::thread::sleep(Duration::from_millis(300));
        drop(held);
        let (short, later) = (short.wait(), later.wait());
        let stopped_pid = stopped.pid();
        stopped.signal(libc::SIGKILL);
        stopped.wait();
        let what = format!("limit {limit}\n{}\n{}", short.explain(), later.explain());
        let (a, b) = (common::Record::of(short.assert_success()), common::Record::of(later.assert_success()));
        // With room for its record, a look and a lock file it keeps its
        // place; with less it waits without one, and may be passed.
        if limit >= 8 {
            assert!(a.get("start") < b.get("start"), "the later waiter was served first: {what}");
        }
        // The stopped waiter's, killed here, stays till the next look.
        let left: Vec<String> = records(&f).into_iter().filter(|n| !n.ends_with(&format!(".{stopped_pid}"))).collect();
        assert!(left.is_empty(), "records left: {left:?}\n{what}");
    }
}

/// A waiter needs no more descriptors than an arrival does: one that
/// waited for a block of two GPUs takes it when it frees up, giving up its
/// watch and record for the descriptors, where an arrival would have taken
/// it with as few.
#[test]
fn a_waiter_out_of_descriptors_takes_its_block_when_it_frees_up() {
    for limit in [6, 7, 8, 9] {
        let f = Fixture::new("limits-block");
        std::fs::create_dir_all(&f.lock_dir).unwrap();
        let held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
        let mut waiter = with_descriptors(&f, limit, "--wait=10", &["--num_processes=2"]);
        let waiter = on(&mut waiter, 2, 1).spawn();
        std::thread::sleep(Duration::from_millis(500));
        drop(held);
        let out = waiter.wait();
        let r = common::Record::of(out.assert_success());
        assert_eq!(r.locks(), ["gpulock0_0", "gpulock1_0"], "limit {limit}\n{}", out.explain());
        assert!(records(&f).is_empty(), "records left: {:?}\n{}", records(&f), out.explain());
    }
}

/// SIGHUP (a closed terminal, a session ended) ends a waiting wrapper as
/// SIGTERM does: exit 129, its record and `gpuqueue/` removed.
#[test]
fn sighup_while_waiting_ends_the_wait_and_removes_the_record() {
    let f = Fixture::new("limits-sighup");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c, 1, 1).arg("./pkg/gpu_test").timeout(Duration::from_secs(60));
    let r = f.spawn_queued(&c);
    r.signal(libc::SIGHUP);
    let out = r.wait();
    assert_eq!(out.status.code(), Some(129), "{}", out.explain());
    assert!(!f.lock_dir.join("gpuqueue").exists(), "gpuqueue/ left: {:?}\n{}", records(&f), out.explain());
}

/// A SIGTERM that comes while the record is put in place (here, while the
/// `renameat` that puts it there returns, slowed down by strace) ends the
/// wrapper once the record is registered for removal: nothing is left.
#[test]
fn a_signal_while_the_record_is_put_in_place_leaves_nothing_behind() {
    if test_support::find_program("strace").is_none() {
        test_support::prerequisite(false, "strace", "a signal in the middle of a rename");
        return;
    }
    let f = Fixture::new("limits-rename");
    f.make_lock_dir_shared();
    // `gpuqueue/` there already: the record's is the one rename.
    std::fs::create_dir(f.lock_dir.join("gpuqueue")).unwrap();
    std::fs::set_permissions(f.lock_dir.join("gpuqueue"), std::os::unix::fs::PermissionsExt::from_mode(0o1777))
        .unwrap();
    let _held = hold_lock(f.lock("0", 0));
    let strace = ["-f", "-qq", "-o", "/dev/null", "-e", "trace=renameat,renameat2"];
    let mut c = f.cmd_under("strace", strace.into_iter().chain(["-e", "inject=renameat,renameat2:delay_exit=1500000"]));
    on(&mut c, 1, 1).args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(60));
    let r: Running = c.spawn();
    // The record is in place as soon as the rename is done, before it
    // returns: its name holds the waiter's PID.
    let mut named = Vec::new();
    test_support::wait_until(Duration::from_secs(10), || {
        named = records(&f);
        !named.is_empty()
    });
    let Some(pid) = named.first().and_then(|n| n[17..].parse::<i32>().ok()) else {
        panic!("no record appeared\n{}", r.wait().explain());
    };
    // SAFETY: kill(2) of the traced wrapper, a descendant of this test.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = r.wait();
    assert_eq!(out.status.code(), Some(143), "{}", out.explain());
    assert!(records(&f).is_empty(), "the record was left: {:?}\n{}", records(&f), out.explain());
}

/// SIGTERM, SIGINT or SIGHUP that comes while a waiter makes `gpuqueue/`
/// or its temporary record (here just after the `fchmod` of each, by
/// strace) ends the wrapper once the record is registered for removal:
/// neither a temporary directory nor a temporary record is left, where a
/// handled signal left each for a minute.
#[test]
fn a_signal_while_the_queue_or_the_record_is_made_leaves_nothing_behind() {
    if test_support::find_program("strace").is_none() {
        test_support::prerequisite(false, "strace", "a signal in the middle of making a record");
        return;
    }
    // The first `fchmod` is `gpuqueue/`'s, made under a temporary name; the
    // second the temporary record's.
    for (when, signal, code) in [(1, "SIGINT", 130), (2, "SIGTERM", 143), (2, "SIGHUP", 129)] {
        let f = Fixture::new("limits-made");
        f.make_lock_dir_shared();
        let _held = hold_lock(f.lock("0", 0));
        let inject = format!("inject=fchmod:signal={signal}:when={when}");
        let mut c = f.cmd_under("strace", ["-qq", "-o", "/dev/null", "-e", "trace=fchmod", "-e", &inject]);
        on(&mut c, 1, 1).args(["--wait=20", "./pkg/gpu_test"]).timeout(Duration::from_secs(60));
        let out = c.run();
        let what = format!("{signal} at fchmod {when}\n{}", out.explain());
        assert_eq!(out.status.code(), Some(code), "{what}");
        let mut left: Vec<String> = Vec::new();
        for dir in [f.lock_dir.clone(), f.lock_dir.join("gpuqueue")] {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            left.extend(entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()));
        }
        left.retain(|n| n != "gpulock0_0");
        assert!(left.is_empty(), "left behind: {left:?}: {what}");
    }
}

/// Live records another user keeps (locked, beating) that want no lock
/// file of these settings hold nobody up, and cost a look no more than
/// their entries, whatever they say: here 100 records of 19 KiB each, their
/// `files` lines thousands of `*` entries that match nothing. A test on a
/// free slot starts, and `--wait=1` with every slot busy ends, within a
/// bound that a reader which expanded each entry missed by seconds.
#[test]
fn records_that_want_nothing_here_cost_a_look_no_more_than_their_entries() {
    use std::os::unix::fs::FileExt;
    let f = Fixture::new("limits-record-cost");
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir_all(&queue).unwrap();
    let files = vec!["x*"; 6_500].join(" ");
    let beat = |counter: u64| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        let at = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        [counter, at, counter ^ at ^ 0x9e37_79b9_7f4a_7c15].map(u64::to_le_bytes).concat()
    };
    let planted: Vec<(std::fs::File, test_support::HeldLock)> = (1..=100u64)
        .map(|i| {
            let name = format!("{i:016x}.{}", 4_000_000 + i);
            let path = queue.join(&name);
            let mut content = b"gpuq\x02\0\0\0".to_vec();
            content.extend(beat(0));
            content.extend(format!("name {name}\nneeded 1\nfiles {files}\ntest planted\n").bytes());
            test_support::write_file(&path, content);
            (std::fs::OpenOptions::new().write(true).open(&path).unwrap(), hold_lock(&path))
        })
        .collect();
    // Their writer beats them every 200 ms while the test runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beater = {
        let stop = stop.clone();
        let records: Vec<std::fs::File> = planted.iter().map(|(file, _)| file.try_clone().unwrap()).collect();
        std::thread::spawn(move || {
            for counter in 1.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                for file in &records {
                    file.write_all_at(&beat(counter), 8).unwrap();
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let mut c = f.cmd();
    on(&mut c, 8, 8).args(["--wait=1", "./pkg/gpu_test"]).timeout(Duration::from_secs(60));
    let started = std::time::Instant::now();
    let free = c.run();
    let free_took = started.elapsed();
    let held: Vec<_> =
        (0..8).flat_map(|g| (0..8).map(move |s| (g, s))).map(|(g, s)| hold_lock(f.lock(&g.to_string(), s))).collect();
    let started = std::time::Instant::now();
    let busy = c.run();
    let busy_took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    beater.join().unwrap();
    drop((held, planted));
    free.assert_success();
    assert!(free_took < Duration::from_millis(1500), "a free slot took {free_took:?}\n{}", free.explain());
    busy.assert_code(1);
    assert!(busy_took < Duration::from_secs(4), "--wait=1 took {busy_took:?}\n{}", busy.explain());
}
