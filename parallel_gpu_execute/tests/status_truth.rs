//! `--status` and the waiting line tell the operator the truth: a holder
//! it can see is never called hidden (root in the host's PID namespace,
//! while tests start and end by the hundred), a file name reaches the text
//! escaped, a lock of another kind is no slot's, a process is found
//! holding or waiting through any of its descriptors and by its wait
//! channel where its system call cannot be read, a waiter that is served,
//! or makes its record again, while it looks is told as it is, and a
//! waiter in a PID
//! namespace of its own counts the busy slots it can prove and those it
//! can see held.

mod common;

use common::{Fixture, NOBODY, bin, shared_fixture, slot_in, slot_json, status};
use std::time::{Duration, Instant};
use test_support::{Cmd, Output, hold_lock, lock_is_free, wait_until};

/// Root in the host's PID namespace sees every process: while tests start
/// and end by the hundred, no held row may call its holder hidden (a lock
/// let go between the read of /proc/locks and the scan of the processes
/// once was).
#[test]
fn root_in_the_host_namespace_never_calls_a_holder_hidden_while_tests_churn() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let in_host = std::fs::read_to_string("/proc/2/stat").is_ok_and(|s| s.contains("kthreadd"));
    if !test_support::prerequisite(
        test_support::is_root() && in_host,
        "root in the host's PID namespace",
        "no holder called hidden by one who sees every process",
    ) {
        return;
    }
    let f = Fixture::new("status-churn");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let stop = AtomicBool::new(false);
    let (mut held_rows, mut hidden_rows, mut looks) = (0, Vec::new(), 0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let out = f
                        .cmd()
                        .env("TF_GPU_COUNT", "2")
                        .env("TF_TESTS_PER_GPU", "2")
                        .args(["/bin/sleep", "0.02"])
                        .run();
                    out.assert_success();
                }
            });
        }
        let start = Instant::now();
        // Four seconds, or longer where the machine is too loaded for 20
        // held rows in that time (20 s at most).
        while start.elapsed() < Duration::from_secs(4) || (held_rows < 20 && start.elapsed() < Duration::from_secs(20))
        {
            let out = status(&f, 2, 2, "text");
            looks += 1;
            for line in out.stdout.lines().filter(|l| l.contains(" held ")) {
                held_rows += 1;
                if line.contains("not visible from here") {
                    hidden_rows.push(line.to_string());
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(held_rows >= 20, "too few held rows to tell: {held_rows} in {looks} looks");
    assert!(
        hidden_rows.is_empty(),
        "{} of {held_rows} held rows called a holder hidden:\n{}",
        hidden_rows.len(),
        hidden_rows.join("\n")
    );
}

/// `--status=json` held up by strace for `delay` in the `flock` that shows
/// the first record held (as `user`, where given).
fn status_held_up(f: &Fixture, delay: Duration, user: Option<u32>) -> test_support::Running {
    let inject = format!("inject=flock:delay_exit={}:when=1", delay.as_micros());
    let mut c = f.cmd_under("strace", ["-qq", "-o", "/dev/null", "-e", "trace=flock", "-e", &inject]);
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg("--status=json");
    if let Some(uid) = user {
        c.as_user(uid, uid);
    }
    let r = c.spawn();
    // Until `--status`, strace's child, sits in that `flock`.
    let in_flock = || common::traced_child_in(&r, libc::SYS_flock);
    wait_until(Duration::from_secs(10), in_flock);
    assert!(in_flock(), "--status never reached its first flock");
    r
}

/// What happens to a waiter between `--status`'s read of its record and
/// its look for the record's holder (strace holds `--status` up between
/// the two) is told as it is: one served meanwhile (its record removed, its
/// test exec'd) is the slot's holder, not also a hidden waiter still
/// queued; one whose `gpuqueue/` a cleaner removed, and which made its
/// record again, is still queued, and named; one stopped, its record
/// removed, is still queued for a user who cannot see root's processes
/// (the kernel shows its lock held).
#[test]
fn a_waiter_that_changes_while_status_looks_is_told_as_it_is() {
    if !test_support::prerequisite(
        test_support::find_program("strace").is_some() && test_support::is_root(),
        "strace, and root",
        "a waiter that changes in the middle of a --status",
    ) {
        return;
    }
    for case in ["served", "queue removed", "stopped, record removed"] {
        let f = shared_fixture("status-changes");
        f.make_lock_dir_shared();
        let mut held = Some(hold_lock(f.lock("0", 0)));
        let mut w = f.cmd();
        w.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").args(["/bin/sleep", "3"]);
        let w = f.spawn_queued(&w);
        let queue = f.lock_dir.join("gpuqueue");
        let looking = status_held_up(&f, Duration::from_millis(1500), (case.starts_with("stopped")).then_some(NOBODY));
        match case {
            "served" => {
                drop(held.take());
                wait_until(Duration::from_secs(5), || f.waiters().is_empty());
            }
            "queue removed" => {
                assert!(test_support::remove_tree_as_a_cleaner(&queue), "gpuqueue/ could not be removed");
                wait_until(Duration::from_secs(5), || f.waiters().contains(&w.pid()));
            }
            _ => {
                w.signal(libc::SIGSTOP);
                // The stop lands at once, yet not within the kill.
                assert!(wait_until(Duration::from_secs(5), || test_support::process_state(w.pid()) == Some('T')));
                for e in std::fs::read_dir(&queue).unwrap() {
                    std::fs::remove_file(e.unwrap().path()).unwrap();
                }
            }
        }
        let out = looking.wait();
        out.assert_success();
        let what = format!("{case}: {}\nthe waiter's {}", out.explain(), w.pid());
        let waiters = common::waiters_json(&out);
        let queued = waiters.contains("\"queued\"");
        match case {
            "served" => {
                assert!(!queued, "a waiter served is listed as queued: {what}");
                let slot = slot_json(&out, &f.lock("0", 0));
                assert!(slot.contains(&format!("\"pid\": {}", w.pid())), "its slot does not name it: {what}");
                w.wait().assert_success();
            }
            "queue removed" => {
                assert!(waiters.contains(&format!("\"pid\": {}", w.pid())), "the waiter is not named: {what}");
                drop(held.take());
                w.wait().assert_success();
            }
            _ => {
                assert!(queued, "a waiter stopped, its record removed, is not listed: {what}");
                w.signal(libc::SIGKILL);
                w.signal(libc::SIGCONT);
                drop(held.take());
                let _ = w.wait();
            }
        }
    }
}

/// Any user may name a file in a 1777 lock directory: a terminal escape or
/// a newline in a lock file's name reaches the text as `\xNN`, never raw,
/// so it can neither drive the operator's terminal nor forge a row.
#[test]
fn the_text_escapes_what_comes_from_a_file_name() {
    let f = Fixture::new("status-escapes");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let escape = f.lock_dir.join("gpulock\x1b]0;owned\x07\x1b[2J_0");
    let forged = f.lock_dir.join("gpulock7_0\nxla      9    0  held  1 running -     fake_1");
    for p in [&escape, &forged] {
        test_support::write_file(p, "");
    }
    let _held = hold_lock(&escape);
    let out = status(&f, 1, 1, "text");
    assert!(!out.stdout.contains('\x1b') && !out.stdout.contains('\x07'), "a raw control character\n{}", out.explain());
    assert!(out.stdout.contains("\\x1b]0;owned\\x07\\x1b[2J"), "the escaped name is missing\n{}", out.explain());
    assert!(
        !out.stdout.lines().any(|l| l.starts_with("xla      9")),
        "a newline in a file name forged a row\n{}",
        out.explain()
    );
    assert!(out.stdout.contains("7_0\\x0axla"), "the newline is not shown escaped\n{}", out.explain());
    // `--list` shows the lock directory's path as `--status` does: a
    // newline or an escape in it never reaches the terminal raw.
    let odd = f.dir.join("nl\nx\x1b[31m");
    let out = f.cmd().env("TF_GPU_COUNT", "1").arg(format!("--lock-dir={}", odd.display())).arg("--list").run();
    out.assert_success();
    assert!(!out.stdout.contains('\x1b'), "a raw escape in --list\n{}", out.explain());
    assert!(out.stdout.contains("nl\\x0ax\\x1b[31m"), "the path is not shown escaped\n{}", out.explain());
}

/// Unicode format characters in names another user gave lock files, a
/// drain reason and a record's test (a zero-width space, a right-to-left
/// override, which shows the rest of a line reversed) reach the text as
/// `\u{NNNN}`, never raw; a lock file named with an Arabic-Indic zero
/// (`gpulock\u{660}_0`) is listed among the other lock files, not as GPU 0.
#[test]
fn the_text_escapes_format_characters_and_marks_look_alike_digits() {
    let f = Fixture::new("status-format-chars");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let names = ["gpulock\u{200b}0_0", "gpulock\u{202e}0 ,dleh_0", "gpulock\u{660}_0"];
    for name in names {
        test_support::write_file(f.lock_dir.join(name), "");
    }
    let _held = hold_lock(f.lock_dir.join(names[1]));
    let mut c = f.cmd();
    c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").args(["--drain=0", "--reason=bad \u{202e}MAR"]);
    c.run().assert_success();
    let out = status(&f, 1, 1, "text");
    let raw = ['\u{200b}', '\u{202e}'];
    assert!(!out.stdout.contains(raw), "a raw format character\n{}", out.explain());
    for shown in ["\\u{200b}0", "\\u{202e}0 ,dleh", "bad \\u{202e}MAR"] {
        assert!(out.stdout.contains(shown), "{shown} is missing\n{}", out.explain());
    }
    let others = out.stdout.find("other lock files in the directory").unwrap_or(usize::MAX);
    let arabic = out.stdout.find("\u{660}").unwrap_or(0);
    assert!(arabic > others, "GPU \u{660} is not among the other lock files\n{}", out.explain());
    let json = status(&f, 1, 1, "json");
    assert!(!json.stdout.contains(raw), "a raw format character in the JSON\n{}", json.explain());
    assert!(json.stdout.contains("\"gpu\": \"\\u202e0 ,dleh\""), "{}", json.explain());
}

/// Runs `script` (sh) as PID 1 of a PID namespace of its own, with its own
/// `/proc`, the fixture's sysroot and lock directory, and 4 GPUs of one
/// slot each; `None` (after saying so) where no namespace can be made.
fn in_pid_namespace(f: &Fixture, script: &str) -> Option<Output> {
    let what = "the busy count of a waiter in a PID namespace";
    let unshare = test_support::is_root() && std::path::Path::new("/usr/bin/unshare").exists();
    if !test_support::prerequisite(unshare, "root and unshare(1)", what) {
        return None;
    }
    let mut c = Cmd::new("/usr/bin/unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--mount", "sh", "-c", script])
        .env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
        .env("TF_GPU_COUNT", "4")
        .env("TF_TESTS_PER_GPU", "1");
    let out = c.run();
    if out.code() != 0 && out.stderr.starts_with("unshare:") {
        let why = format!("a PID namespace (unshare failed: {})", out.stderr.trim());
        test_support::prerequisite(false, &why, what);
        return None;
    }
    Some(out)
}

/// Inside a PID namespace of its own, `/proc/locks` leaves out every lock
/// whose taker it cannot see. A waiter at the head that needs 2 of 4 GPUs
/// and finds none free has proven 2 slots busy (each run of two has a
/// held GPU) even when it sees no holder, and 1 when GPUs 0 and 3 are
/// drained (one run of two in service); where the takers have exited and
/// the locks live on in a process inside (the classic `flock -n "$fd"`),
/// the scan of the processes' descriptors finds all four held, and the
/// count, being all, needs no "as seen from" suffix.
#[test]
fn a_waiter_in_a_pid_namespace_counts_the_slots_it_can_prove_and_see_busy() {
    let f = Fixture::new("telemetry-pidns");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let line = |out: &Output| {
        out.assert_code(1);
        let err = out.stderr.lines().find(|l| l.contains(" waiting for 2 GPU(s) for ")).unwrap_or("").to_string();
        (err, out.explain())
    };
    let waiter = format!("{} --wait=0.3 /bin/true --num_processes=2", bin());

    // Held from outside: nothing inside shows a holder.
    let outside = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("2", 0))];
    let Some(out) = in_pid_namespace(&f, &waiter) else { return };
    let (err, explain) = line(&out);
    assert!(err.ends_with(": 2 of 4 slots busy as seen from this PID namespace, first in the queue"), "{explain}");
    drop(outside);

    // Taken by processes that exited, held by the namespace's shell.
    let dir = f.lock_dir.display();
    let script = format!(
        "exec 6>{dir}/gpulock0_0 7>{dir}/gpulock1_0 8>{dir}/gpulock2_0 9>{dir}/gpulock3_0\n\
         flock -n 6 && flock -n 7 && flock -n 8 && flock -n 9 || {{ echo 'flock failed' >&2; exit 3; }}\n\
         {waiter} 6>&- 7>&- 8>&- 9>&-\n\
         exit $?"
    );
    let Some(out) = in_pid_namespace(&f, &script) else { return };
    let (err, explain) = line(&out);
    assert!(err.ends_with(": 4 of 4 slots busy, first in the queue"), "{explain}");

    // GPUs 0 and 3 drained, GPU 1 held from outside: one block in service.
    for gpu in ["0", "3"] {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "4").env("TF_TESTS_PER_GPU", "1").args([format!("--drain={gpu}"), "--reason=x".into()]);
        c.run().assert_success();
    }
    let _outside = hold_lock(f.lock("1", 0));
    let Some(out) = in_pid_namespace(&f, &waiter) else { return };
    let (err, explain) = line(&out);
    assert!(err.ends_with(": 1 of 4 slots busy as seen from this PID namespace, first in the queue"), "{explain}");
}

/// Inside a PID namespace of its own, with every slot held from outside
/// and a waiter inside, `--status` shows no slot free: the waiter proves
/// them held, though their holders cannot be seen. The text, the JSON and
/// the metrics say unknown.
#[test]
fn a_waiter_in_a_pid_namespace_keeps_slots_held_from_outside_from_showing_free() {
    let f = Fixture::new("status-pidns-waiter");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _outside: Vec<_> = (0..4).map(|gpu| hold_lock(f.lock(&gpu.to_string(), 0))).collect();
    let dir = f.dir.path().display();
    let script = format!(
        "{bin} /bin/true 2>{dir}/waiter.err & W=$!\n\
         for i in $(seq 500); do [ -n \"$(ls {queue} 2>/dev/null)\" ] && break; sleep 0.02; done\n\
         {bin} --status >{dir}/text; {bin} --status=json >{dir}/json; {bin} --status=openmetrics >{dir}/metrics\n\
         kill $W; wait $W; true",
        bin = bin(),
        queue = f.lock_dir.join("gpuqueue").display(),
    );
    let Some(out) = in_pid_namespace(&f, &script) else { return };
    let read = |name: &str| std::fs::read_to_string(f.dir.join(name)).unwrap_or_default();
    let (text, json, metrics) = (read("text"), read("json"), read("metrics"));
    let seen = format!(
        "{}\ntext:\n{text}\njson:\n{json}\nmetrics:\n{metrics}\nwaiter:\n{}",
        out.explain(),
        read("waiter.err")
    );
    out.assert_success();
    assert!(read("waiter.err").contains(": 4 of 4 slots busy, first in the queue"), "{seen}");
    assert!(text.contains(": 4 slot(s), 0 held, 4 unknown, 1 waiting\n"), "{seen}");
    assert!(!text.lines().any(|l| l.ends_with("  free")), "{seen}");
    assert!(
        text.contains("a test waits in this lock directory, so a slot with no holder in sight is of unknown state"),
        "{seen}"
    );
    let slot = slot_in(&json, &f.lock("0", 0)).unwrap_or_default();
    assert!(slot.contains("\"held\": null"), "{seen}");
    assert!(
        metrics.contains("gpu=\"0\",state=\"free\"} 0\n") && metrics.contains("gpu=\"0\",state=\"unknown\"} 1\n"),
        "{seen}"
    );
}

/// A POSIX lock (`lockf`) on a lock file is not the slot's `flock`: the
/// slot is free, as the wrapper finds it. A holder whose shell opened the
/// lock file twice, and locked it through the first descriptor, holds it
/// (the second, which holds nothing, does not undo the first).
#[test]
fn a_posix_lock_holds_no_slot_and_a_second_descriptor_undoes_no_holder() {
    let f = Fixture::new("status-kinds");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let (posix, twice) = (f.lock("0", 0), f.lock("1", 0));
    let marker = f.dir.join("lockf-taken");
    let script = "import fcntl, os, sys, time\n\
                  fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n\
                  fcntl.lockf(fd, fcntl.LOCK_EX)\n\
                  open(sys.argv[2], 'w').close()\n\
                  time.sleep(30)";
    let Some(python) = test_support::python_with("python3", &["fcntl"]) else {
        test_support::prerequisite(false, "python3", "a POSIX lock holding no slot");
        return;
    };
    let mut c = Cmd::new(python);
    c.args(["-c", script]).arg(&posix).arg(&marker).own_process_group();
    let lockf = c.spawn();
    let mut c = Cmd::new("/bin/bash");
    c.args(["-c", "exec 8<>\"$0\" 9<\"$0\"; flock -n 8 || exit 9; exec sleep 30"]).arg(&twice).own_process_group();
    let holder = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || marker.exists()), "python3 never took its lockf lock");
    assert!(wait_until(Duration::from_secs(10), || !lock_is_free(&twice)), "bash never locked");

    let out = status(&f, 2, 1, "json");
    assert!(slot_json(&out, &posix).contains("\"held\": false, \"holders\": []"), "{}", out.explain());
    let held = format!("\"held\": true, \"holders\": [{{\"pid\": {}, \"visible\": true, ", holder.pid());
    assert!(slot_json(&out, &twice).contains(&held), "{}", out.explain());
    for p in [lockf, holder] {
        p.signal_group(libc::SIGKILL);
        p.wait();
    }
}

/// Where a user may not read its own processes' `syscall` (Yama's
/// ptrace_scope 1, made here by mounting a root-only file over it), a
/// waiter is found by its wait channel, and in a PID namespace of its own
/// (whose `/proc/locks` leaves out a lock taken outside, with everyone
/// blocked on it) that is all that shows it. W and E each have the lock
/// file open twice and wait through one of the two descriptors, W with its
/// `syscall` unreadable, E with it readable; O has the file open, its
/// `syscall` unreadable too, and waits for nothing.
#[test]
fn waiters_are_found_by_their_wait_channel_where_their_system_call_cannot_be_read() {
    let what = "waiters found by their wait channel";
    let unshare = test_support::is_root() && std::path::Path::new("/usr/bin/unshare").exists();
    if !test_support::prerequisite(unshare, "root and unshare(1)", what) {
        return;
    }
    let f = shared_fixture("status-wchan");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let lock = f.lock("0", 0);
    let _outside = hold_lock(&lock);
    let secret = f.dir.join("secret");
    test_support::write_file(&secret, "");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let dir = f.dir.path().display();
    let script = format!(
        "nobody='setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups'\n\
         blocked() {{ [ \"$(cut -d' ' -f1 /proc/$1/syscall)\" = {nr} ]; }}\n\
         L={lock}\n\
         $nobody sh -c 'exec 8<\"$0\"; exec flock \"$0\" true' \"$L\" & W=$!\n\
         $nobody sh -c 'exec 8<\"$0\"; exec flock \"$0\" true' \"$L\" & E=$!\n\
         $nobody sh -c 'exec 8<\"$0\"; exec sleep 60' \"$L\" & O=$!\n\
         for i in $(seq 500); do blocked $W && blocked $E && [ -e /proc/$O/fd/8 ] && break; sleep 0.02; done\n\
         blocked $W && blocked $E || {{ echo 'the waiters never blocked' >&2; exit 3; }}\n\
         for p in $W $O; do for t in /proc/$p/task/*; do mount --bind {secret} $t/syscall || exit 4; done; done\n\
         $nobody cat /proc/$W/task/$W/syscall 2>/dev/null && {{ echo 'syscall still readable' >&2; exit 5; }}\n\
         $nobody {bin} --status=json >{dir}/status.json; echo \"$W $E $O\" >{dir}/pids\n\
         kill $W $E $O",
        nr = libc::SYS_flock,
        lock = lock.display(),
        secret = secret.display(),
        bin = bin(),
    );
    let mut c = Cmd::new("/usr/bin/unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--mount", "sh", "-c", &script])
        .env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir)
        .env("TF_GPU_COUNT", "1")
        .env("TF_TESTS_PER_GPU", "1");
    let out = c.run();
    if out.code() != 0 && out.stderr.starts_with("unshare:") {
        test_support::prerequisite(false, &format!("a PID namespace ({})", out.stderr.trim()), what);
        return;
    }
    out.assert_success();
    let json = std::fs::read_to_string(f.dir.join("status.json")).unwrap();
    let pids = std::fs::read_to_string(f.dir.join("pids")).unwrap();
    let [w, e, o] = [0, 1, 2].map(|k| pids.split_whitespace().nth(k).unwrap().to_string());
    let slot = slot_in(&json, &lock).unwrap_or_default();
    assert!(slot.contains("\"held\": true, \"holders\": [{\"pid\": 0, \"visible\": false"), "{json}");
    let waiters = &json[json.find("\"waiters\": [").unwrap_or_default()..];
    for pid in [&w, &e] {
        assert!(waiters.contains(&format!("{{\"pid\": {pid}, ")), "waiter {pid} (W {w}, E {e}, O {o}) missing\n{json}");
    }
    assert!(!waiters.contains(&format!("{{\"pid\": {o}, ")), "O ({o}) waits for nothing\n{json}");
}

/// A pool whose GPUs cannot be told (a CUDA UUID where no NVIDIA driver
/// tree is seen): a test here is refused, and `--status` lists none of its
/// slots, saying why in the words of the refusal, not as a host with none;
/// `--list` shows the pool and the refusal beside it.
#[test]
fn a_pool_whose_gpus_cannot_be_told_is_said_not_listed_as_none() {
    let f = Fixture::new("truth-unresolved-pool");
    let on_pool = |c: &mut test_support::Cmd| {
        c.env("TF_GPU_COUNT", "2")
            .env("TF_TESTS_PER_GPU", "1")
            .env("PARALLEL_GPU_EXECUTE_VENDOR", "cuda")
            .env("CUDA_VISIBLE_DEVICES", "GPU-abc,1");
    };
    let refused = f.run_test(on_pool, &[]);
    refused.assert_code(2);
    let why = refused.stderr.trim_end().strip_prefix("parallel_gpu_execute: ").unwrap_or_default().to_string();
    assert!(why.contains("GPU-abc"), "{}", refused.explain());
    let mut text = f.cmd();
    on_pool(&mut text);
    let text = text.arg("--status").run();
    text.assert_success();
    let note = format!("note: the slots of these settings are not listed, as a test here is refused: {why}");
    assert!(text.stdout.lines().any(|l| l == note), "{}\nexpected: {note}", text.explain());
    let mut json = f.cmd();
    on_pool(&mut json);
    let json = json.arg("--status=json").run();
    json.assert_success();
    assert!(json.stdout.contains("\"pool_error\": \"CUDA_VISIBLE_DEVICES: "), "{}", json.explain());
    // `--list` shows the pool as given, and the refusal beside it.
    let mut list = f.cmd();
    on_pool(&mut list);
    let list = list.arg("--list").run();
    list.assert_success();
    let note = format!("note: a test here is refused: {why}");
    assert!(list.stdout.lines().any(|l| l == note), "{}\nexpected: {note}", list.explain());
    let mut list = f.cmd();
    on_pool(&mut list);
    let list = list.arg("--list=json").run();
    list.assert_success();
    assert!(list.stdout.contains(", \"pool_error\": \"CUDA_VISIBLE_DEVICES: "), "{}", list.explain());
    // `--list=count`, which scripts read, neither names the pool nor says
    // anything of it.
    for flags in [&["--list=count"][..], &["--lock-names=physical", "--list=count"]] {
        let mut count = f.cmd();
        on_pool(&mut count);
        let count = count.args(flags).run();
        count.assert_success();
        assert_eq!((count.stdout.as_str(), count.stderr.as_str()), ("2\n", ""), "{}", count.explain());
    }
    // A pool that can be told: no such note.
    let mut plain = f.cmd();
    plain.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").env("CUDA_VISIBLE_DEVICES", "1");
    let plain = plain.arg("--list").run();
    plain.assert_success();
    assert!(!plain.stdout.contains("refused"), "{}", plain.explain());
}

/// Another program's record that says it began to wait at boot (ticket 1),
/// written and beaten by a process a second old: `--status` shows it
/// waiting since its process started, in text, JSON and metrics, not for
/// as long as the machine has run (an alert out of nothing). A build
/// without the change showed the boot time.
#[test]
fn a_ticket_from_before_its_process_started_is_not_a_wait_of_hours() {
    const FORGER: &str = "import fcntl, os, struct, sys, time\n\
        q = os.path.join(sys.argv[1], 'gpuqueue')\n\
        os.makedirs(q, exist_ok=True)\n\
        name = '%016x.%d' % (1, os.getpid())\n\
        beat = lambda c, at: struct.pack('<QQQ', c, at, c ^ at ^ 0x9e3779b97f4a7c15)\n\
        now = lambda: time.clock_gettime_ns(time.CLOCK_BOOTTIME)\n\
        fd = os.open(os.path.join(q, name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)\n\
        fcntl.flock(fd, fcntl.LOCK_EX)\n\
        text = 'name %s\\nneeded 1\\nfiles gpulock0_0\\ntest ./pkg/early_test\\n' % name\n\
        os.write(fd, b'gpuq\\x02\\0\\0\\0' + beat(0, now()) + text.encode())\n\
        open(sys.argv[2], 'w').close()\n\
        for c in range(1, 200):\n\
        \x20   os.pwrite(fd, beat(c, now()), 8)\n\
        \x20   time.sleep(0.2)\n";
    let Some(python) = test_support::python_with("python3", &["fcntl"]) else {
        test_support::prerequisite(false, "python3", "a record with an early ticket");
        return;
    };
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").unwrap().split(' ').next().unwrap().parse().unwrap();
    if !test_support::prerequisite(uptime > 120.0, "a machine up for 2 minutes", "a ticket from boot") {
        return;
    }
    let f = shared_fixture("status-early-ticket");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let marker = f.dir.join("written");
    let mut c = Cmd::new(python);
    c.args(["-c", FORGER]).arg(&f.lock_dir).arg(&marker).own_process_group();
    let forger = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || marker.exists()), "python3 never wrote its record");
    std::thread::sleep(Duration::from_millis(1500));
    let metrics = status(&f, 1, 1, "openmetrics");
    let json = status(&f, 1, 1, "json");
    let text = status(&f, 1, 1, "text");
    // Read by a user who cannot see the record's holder (another user's
    // process): its start is unknown, and the record's birth bounds the
    // ticket instead (a build without the bound showed the uptime).
    let as_nobody = |format: &str| {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "1").env("TF_TESTS_PER_GPU", "1").arg(format!("--status={format}"));
        c.as_user(NOBODY, NOBODY).run()
    };
    let (unseen, unseen_text) = (as_nobody("openmetrics"), as_nobody("text"));
    forger.signal_group(libc::SIGKILL);
    forger.wait();
    let oldest = |out: &Output| {
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix("parallel_gpu_execute_oldest_wait_seconds{"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    assert!(oldest(&metrics).is_some_and(|s| s <= 30), "{:?}\n{}", oldest(&metrics), metrics.explain());
    unseen.assert_success();
    assert!(
        unseen_text.stdout.lines().any(|l| l.starts_with("queued") && l.contains(" hidden ")),
        "{}",
        unseen_text.explain()
    );
    assert!(oldest(&unseen).is_some_and(|s| s <= 30), "{:?}\n{}", oldest(&unseen), unseen.explain());
    assert!(json.stdout.contains("\"position\": \"queued\""), "{}", json.explain());
    let ago = text.stdout.lines().find(|l| l.starts_with("queued ")).unwrap_or_default();
    assert!(!ago.is_empty() && !ago.contains(" h ago") && !ago.contains("1970"), "{ago}\n{}", text.explain());
}

/// A lock directory that is a symbolic link to nothing fails every test
/// there (exit 2, one line). `--status` said "does not exist (no test has
/// taken a slot there yet)", every slot free, exit 0; it now says what the
/// tests say, in every format.
#[test]
fn a_lock_directory_that_leads_nowhere_is_said_as_the_tests_say_it() {
    let f = Fixture::new("truth-dangling");
    std::os::unix::fs::symlink("../nowhere/run", &f.lock_dir).unwrap();
    let test = f.cmd().env("TF_GPU_COUNT", "1").arg("./pkg/gpu_test").run();
    test.assert_code(2);
    for format in ["text", "json", "openmetrics"] {
        let out = f.cmd().env("TF_GPU_COUNT", "1").arg(format!("--status={format}")).run();
        out.assert_code(2).assert_one_error_line(test.stderr.trim_end());
        assert!(out.stdout.is_empty(), "{}", out.explain());
    }
}
