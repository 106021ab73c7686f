//! What operators see and do cannot be falsified or abused: `--status`,
//! `--status=openmetrics` and `--drain`, looked at as root, as another user
//! (`setpriv`), and as root without `CAP_SYS_PTRACE` (a metrics container
//! with `--pid=host`, a hardened systemd unit), against another user's
//! locks, a lock in flight between two processes, a maintenance script's
//! `flock` of the directory, forged drain records, names that are not
//! UTF-8, thousands of junk files, and a lock directory made by `--drain`.

mod common;

use common::{Fixture, NOBODY, root, shared_fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use test_support::{Cmd, Output, Running, wait_until};

/// Who looks.
#[derive(Clone, Copy, Debug)]
enum Viewer {
    Root,
    Nobody,
    /// Root with `CAP_SYS_PTRACE` dropped from every set.
    RootWithoutPtrace,
}

const VIEWERS: [Viewer; 3] = [Viewer::Root, Viewer::Nobody, Viewer::RootWithoutPtrace];

/// The wrapper on `f` (2 GPUs, one slot each) with `args`, as `who`.
fn wrapper(f: &Fixture, who: Viewer, args: &[&str]) -> Output {
    let mut c = match who {
        Viewer::RootWithoutPtrace => {
            let mut c = Cmd::new("setpriv");
            c.args(["--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"]).arg(common::bin());
            c
        }
        _ => Cmd::new(common::bin()),
    };
    f.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir);
    c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1");
    if let Viewer::Nobody = who {
        c.as_user(NOBODY, NOBODY);
    }
    c.args(args);
    c.run()
}

/// `--status` in text and OpenMetrics as `who`: (text, metrics).
fn look(f: &Fixture, who: Viewer) -> (Output, Output) {
    let text = wrapper(f, who, &["--status"]);
    text.assert_success();
    let metrics = wrapper(f, who, &["--status=openmetrics"]);
    metrics.assert_success();
    (text, metrics)
}

#[track_caller]
fn says_held(f: &Fixture, who: Viewer, gpu: &str) {
    let (text, metrics) = look(f, who);
    assert!(text.stdout.contains(": 2 slot(s), 1 held, 0 waiting\n"), "{who:?}\n{}", text.explain());
    let sample = format!(
        "parallel_gpu_execute_slots{{lock_dir=\"{}\",profile=\"xla\",gpu=\"{gpu}\",state=\"held\"}} 1\n",
        f.lock_dir.display()
    );
    assert!(metrics.stdout.contains(&sample), "{who:?}\n{}", metrics.explain());
}

fn shared_locks(f: &Fixture) {
    f.make_lock_dir_shared();
}

fn stop(r: Running) {
    r.signal_group(libc::SIGKILL);
    r.wait();
}

/// Point 1: a lock passed over a unix socket by a process that exited,
/// not yet received: held, by a hidden holder, for every viewer.
#[test]
fn a_lock_in_flight_between_two_processes_is_shown_held() {
    if !root("viewers other than root") {
        return;
    }
    let Some(python) = test_support::find_program("python3") else {
        test_support::prerequisite(false, "python3", "a lock in flight over a unix socket");
        return;
    };
    let f = shared_fixture("truth-in-flight");
    shared_locks(&f);
    let lock = f.lock("0", 0);
    let script = r#"
import os, socket, fcntl, sys, time
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
pid = os.fork()
if pid == 0:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    socket.send_fds(a, [b"lock"], [fd])
    os._exit(0)
os.waitpid(pid, 0)
a.close()
time.sleep(60)
"#;
    let mut c = Cmd::new(&python);
    c.args(["-c", script]).arg(&lock).own_process_group().timeout(Duration::from_secs(90));
    let sender = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || lock.exists() && !test_support::lock_is_free(&lock)));
    for who in VIEWERS {
        says_held(&f, who, "0");
        let (text, _) = look(&f, who);
        assert!(text.stdout.contains("hidden"), "{who:?}: the holder is not named\n{}", text.explain());
    }
    stop(sender);
    // Let go with the socket: free again.
    let (text, _) = look(&f, Viewer::Root);
    assert!(text.stdout.contains(": 2 slot(s), 0 held, 0 waiting\n"), "{}", text.explain());
}

/// Point 2: another user's held slot, seen by root without
/// `CAP_SYS_PTRACE` (which may not read that user's descriptors), by root,
/// and the other way round by that user.
#[test]
fn another_users_held_slot_is_held_for_root_without_ptrace() {
    if !root("viewers other than root") {
        return;
    }
    let f = shared_fixture("truth-ptrace");
    shared_locks(&f);
    let lock = f.lock("1", 0);
    let mut c = Cmd::new("flock");
    c.arg(&lock).args(["sleep", "60"]).as_user(NOBODY, NOBODY).own_process_group();
    let holder = c.spawn();
    assert!(wait_until(Duration::from_secs(10), || lock.exists() && !test_support::lock_is_free(&lock)));
    for who in VIEWERS {
        says_held(&f, who, "1");
    }
    stop(holder);
    // Root's slot, seen by nobody: held, by a hidden holder.
    let held = test_support::hold_lock(f.lock("0", 0));
    std::fs::set_permissions(f.lock("0", 0), std::fs::Permissions::from_mode(0o666)).unwrap();
    for who in VIEWERS {
        says_held(&f, who, "0");
    }
    drop(held);
}

/// Point 3: a maintenance script's `flock` of the lock directory (shared
/// and exclusive, by root and by another user) is nobody's wait.
#[test]
fn a_flock_of_the_lock_directory_is_no_waiter() {
    if !root("viewers other than root") {
        return;
    }
    let f = shared_fixture("truth-dir-flock");
    shared_locks(&f);
    let mut scripts = Vec::new();
    for (how, user) in [("-s", Some(NOBODY)), ("-x", None)] {
        let mut c = Cmd::new("flock");
        c.arg(how).arg(&f.lock_dir).args(["sleep", "60"]).own_process_group();
        if let Some(u) = user {
            c.as_user(u, u);
        }
        scripts.push(c.spawn());
        std::thread::sleep(Duration::from_millis(200));
    }
    // A third waits for the exclusive one: blocked on the directory.
    let mut c = Cmd::new("flock");
    c.arg(&f.lock_dir).args(["sleep", "60"]).as_user(NOBODY, NOBODY).own_process_group();
    scripts.push(c.spawn());
    std::thread::sleep(Duration::from_millis(300));
    for who in VIEWERS {
        let (text, metrics) = look(&f, who);
        assert!(text.stdout.contains(": 2 slot(s), 0 held, 0 waiting\n"), "{who:?}\n{}", text.explain());
        assert!(!text.stdout.contains("hidden"), "{who:?}: an invented holder\n{}", text.explain());
        let dir = f.lock_dir.display();
        for sample in [
            format!("parallel_gpu_execute_waiters{{lock_dir=\"{dir}\",profile=\"xla\"}} 0\n"),
            format!("parallel_gpu_execute_oldest_wait_seconds{{lock_dir=\"{dir}\",profile=\"xla\"}} 0\n"),
        ] {
            assert!(metrics.stdout.contains(&sample), "{who:?}\n{}", metrics.explain());
        }
    }
    for s in scripts {
        stop(s);
    }
}

/// Point 4: a drain's author is its record's owner. Another user can
/// neither replace nor undrain root's drain (the directory is sticky), and
/// a record whose text claims root is shown as its owner's, flagged (its
/// `user` text is not shown: a name comes from `/etc/passwd`, and this
/// host has none).
#[test]
fn a_drain_is_its_owners_and_a_forged_one_is_flagged() {
    if !root("another user's drain records") {
        return;
    }
    let f = shared_fixture("truth-drain");
    shared_locks(&f);
    wrapper(&f, Viewer::Root, &["--drain=0", "--reason=root's maintenance"]).assert_success();
    let drain_dir = f.lock_dir.join("gpudrain");
    let mode = std::fs::metadata(&drain_dir).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o1777, "gpudrain/ made {mode:o}");
    let out = wrapper(&f, Viewer::Nobody, &["--drain=0", "--reason=scheduled maintenance (approved)"]);
    out.assert_code(2).assert_one_error_line("cannot replace the drain of GPU 0: it was drained by uid 0");
    wrapper(&f, Viewer::Nobody, &["--undrain=0"]).assert_code(2).assert_one_error_line("cannot undrain GPU 0");
    // By hand, as the review did: rename over root's record. The sticky
    // directory refuses.
    let script = "printf 'reason forged\\nuid 65534\\n' > \"$0/../x\" && mv -f \"$0/../x\" \"$0/0\"";
    let mut c = Cmd::new("sh");
    c.args(["-c", script]).arg(&drain_dir).as_user(NOBODY, NOBODY);
    let out = c.run();
    assert_ne!(out.code(), 0, "another user replaced root's record\n{}", out.explain());
    // A record for GPU 1 written by nobody, claiming root and 2001.
    let mut c = Cmd::new("sh");
    c.args([
        "-c",
        "printf 'reason scheduled maintenance (approved)\\ntime 1000000000\\nuid 0\\nuser root\\n' > \"$0/1\"",
    ])
    .arg(&drain_dir)
    .as_user(NOBODY, NOBODY);
    c.run().assert_success();
    for who in VIEWERS {
        let (text, _) = look(&f, who);
        let line0 = text.stdout.lines().find(|l| l.starts_with("0 ")).unwrap_or_default().to_string();
        assert!(line0.contains("by uid 0: root's maintenance"), "{who:?}: {line0}\n{}", text.explain());
        let line1 = text.stdout.lines().find(|l| l.starts_with("1 ")).unwrap_or_default().to_string();
        assert!(
            line1.contains("by uid 65534 (its record claims uid 0, but the file is uid 65534's"),
            "{who:?}: {line1}\n{}",
            text.explain()
        );
        let json = wrapper(&f, who, &["--status=json"]);
        assert!(
            json.stdout.contains(r#""uid": 0, "user": null, "owner_uid": 65534, "disowned": true, "untrusted": null}"#),
            "{}",
            json.explain()
        );
        assert!(json.stdout.contains(r#""owner_uid": 0, "disowned": false, "untrusted": null}"#), "{}", json.explain());
    }
}

/// Point 5: names another user puts in the lock directory that are not GPU
/// ids (bytes that are not UTF-8 in `gpudrain/`, hundreds of lock files of
/// GPUs these settings do not have) neither duplicate a series nor grow the
/// output; node_exporter's textfile collector and prometheus_client read it.
#[test]
fn odd_names_and_junk_neither_duplicate_nor_grow_the_output() {
    if !root("another user's files in the lock directory") {
        return;
    }
    let f = shared_fixture("truth-junk");
    shared_locks(&f);
    let baseline: Vec<usize> = VIEWERS
        .iter()
        .map(|&w| {
            let (t, m) = look(&f, w);
            t.stdout.len() + m.stdout.len()
        })
        .collect();
    let drain_dir = f.lock_dir.join("gpudrain");
    std::fs::create_dir_all(&drain_dir).unwrap();
    std::fs::set_permissions(&drain_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let script = "cd \"$0\" && printf 'reason a\\n' > \"$(printf 'g\\377')\" && printf 'reason b\\n' > \"$(printf 'g\\376')\" \
                  && cd .. && i=100; while [ $i -lt 600 ]; do : > gpulock${i}_0; i=$((i+1)); done";
    let mut c = Cmd::new("sh");
    c.args(["-c", script]).arg(&drain_dir).as_user(NOBODY, NOBODY);
    c.run().assert_success();
    for (k, who) in VIEWERS.into_iter().enumerate() {
        let (text, metrics) = look(&f, who);
        assert!(!metrics.stdout.contains('\u{fffd}'), "{who:?}: a name became U+FFFD\n{}", metrics.explain());
        let mut seen = std::collections::BTreeSet::new();
        for line in metrics.stdout.lines().filter(|l| !l.starts_with('#')) {
            let series = line.rsplit_once(' ').map_or(line, |(s, _)| s);
            assert!(seen.insert(series.to_string()), "{who:?}: a duplicate series: {series}\n{}", metrics.explain());
        }
        let grown = text.stdout.len() + metrics.stdout.len();
        assert!(
            grown < baseline[k] + 64 * 80 + 200,
            "{who:?}: {grown} bytes against {}\n{}",
            baseline[k],
            text.explain()
        );
        assert!(text.stdout.contains("note: 436 more lock files or drain records"), "{who:?}\n{}", text.explain());
        let json = wrapper(&f, who, &["--status=json"]);
        assert!(json.stdout.contains(r#""not_shown": 436}"#), "{who:?}\n{}", json.explain());
    }
    // node_exporter's textfile collector, as a cron job feeds it.
    let (_, metrics) = look(&f, Viewer::RootWithoutPtrace);
    let exporter = Path::new("/usr/bin/prometheus-node-exporter");
    if test_support::prerequisite(exporter.exists(), "prometheus-node-exporter", "the textfile collector") {
        let textfiles = f.dir.join("textfiles");
        std::fs::create_dir_all(&textfiles).unwrap();
        test_support::write_file(textfiles.join("gpu.prom"), &metrics.stdout);
        let scraped = scrape_textfile(exporter, &textfiles);
        assert!(scraped.contains("node_textfile_scrape_error 0"), "{scraped}");
        let sample = format!(
            "parallel_gpu_execute_slots{{gpu=\"0\",lock_dir=\"{}\",profile=\"xla\",state=\"free\"}} 1",
            f.lock_dir.display()
        );
        assert!(scraped.contains(&sample), "{sample} not in\n{scraped}");
    }
}

/// The xla and jax profiles on one lock directory (the advice for the
/// ROCm/jax fork), each exported by its own `--status` into one textfile
/// directory: every sample of both is scraped. Without the `profile`
/// label, their series shared label sets, and node_exporter kept one
/// file's, silently (its scrape error still 0).
#[test]
fn both_profiles_of_one_lock_directory_are_exported_side_by_side() {
    let exporter = Path::new("/usr/bin/prometheus-node-exporter");
    if !test_support::prerequisite(exporter.exists(), "prometheus-node-exporter", "two profiles' metrics") {
        return;
    }
    let f = Fixture::new("truth-two-profiles");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let textfiles = f.dir.join("textfiles");
    std::fs::create_dir_all(&textfiles).unwrap();
    for profile in ["xla", "jax"] {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1");
        c.env("JAX_ACCELERATOR_COUNT", "2").env("JAX_TESTS_PER_ACCELERATOR", "1");
        let out = c.arg(format!("--profile={profile}")).arg("--status=openmetrics").run();
        test_support::write_file(textfiles.join(format!("{profile}.prom")), &out.assert_success().stdout);
    }
    let scraped = scrape_textfile(exporter, &textfiles);
    assert!(scraped.contains("node_textfile_scrape_error 0"), "{scraped}");
    for profile in ["xla", "jax"] {
        let waiters =
            format!("parallel_gpu_execute_waiters{{lock_dir=\"{}\",profile=\"{profile}\"}} 0", f.lock_dir.display());
        assert!(scraped.contains(&waiters), "{waiters} not in\n{scraped}");
        let free = format!("gpu=\"1\",lock_dir=\"{}\",profile=\"{profile}\",state=\"free\"}} 1", f.lock_dir.display());
        assert!(scraped.contains(&free), "{free} not in\n{scraped}");
    }
}

/// Runs node_exporter with only its textfile collector on `dir`, and
/// returns what one scrape of `/metrics` says.
fn scrape_textfile(exporter: &Path, dir: &Path) -> String {
    use std::io::{Read, Write};
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut c = Cmd::new(exporter);
    c.args(["--collector.disable-defaults", "--collector.textfile"])
        .arg(format!("--collector.textfile.directory={}", dir.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .own_process_group()
        .timeout(Duration::from_secs(60));
    let running = c.spawn();
    let mut body = String::new();
    let got = wait_until(Duration::from_secs(10), || {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
        let _ = s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        body.clear();
        s.read_to_string(&mut body).is_ok() && body.contains("node_textfile_scrape_error")
    });
    stop(running);
    assert!(got, "node_exporter never answered on port {port}: {body}");
    body
}

/// Point 6: `--drain` on a lock directory that does not exist makes it as
/// the wrapper makes one for tests (1777), so every user's tests still run;
/// a lock file that cannot be made names the directory's owner and mode,
/// not Bazel's sandbox.
#[test]
fn a_drain_never_changes_who_may_use_the_lock_directory() {
    if !root("another user's tests") {
        return;
    }
    let f = shared_fixture("truth-drain-mkdir");
    assert!(!f.lock_dir.exists());
    wrapper(&f, Viewer::Root, &["--drain=0", "--reason=fan"]).assert_success();
    let mode = std::fs::metadata(&f.lock_dir).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o1777, "--drain made the lock directory {mode:o}");
    let out = wrapper(&f, Viewer::Nobody, &["./pkg/gpu_test"]);
    let r = common::Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock1_0"], "{}", out.explain());
    // A directory root made 0755 by hand: nobody is told whose it is.
    let other = shared_fixture("truth-drain-0755");
    std::fs::create_dir_all(&other.lock_dir).unwrap();
    std::fs::set_permissions(&other.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = wrapper(&other, Viewer::Nobody, &["./pkg/gpu_test"]);
    out.assert_code(2).assert_one_error_line(&format!(
        "({d} is uid 0's, mode 0755, and this user is uid 65534: its owner or root runs chmod 1777 {d}, or make the lock files beforehand)",
        d = other.lock_dir.display()
    ));
    assert!(!out.stderr.contains("Bazel"), "{}", out.explain());
    // A lock directory to be made under root's 0755 one: the repair makes
    // it, and never opens the parent up.
    let missing = other.lock_dir.join("gpu");
    let mut c = Cmd::new(common::bin());
    other.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &other.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &missing)
        .env("TF_GPU_COUNT", "1")
        .as_user(NOBODY, NOBODY)
        .arg("./pkg/gpu_test");
    let out = c.run();
    out.assert_code(2).assert_one_error_line(&format!(
        "({d} is uid 0's, mode 0755, and this user is uid 65534: root runs mkdir -p {m} && chmod 1777 {m})",
        d = other.lock_dir.display(),
        m = missing.display()
    ));
    assert!(!missing.exists(), "{}", out.explain());
    // Root without CAP_DAC_OVERRIDE, in a directory of nobody's.
    let third = shared_fixture("truth-drain-nobody");
    std::fs::create_dir_all(&third.lock_dir).unwrap();
    std::fs::set_permissions(&third.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&third.lock_dir, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut c = Cmd::new("setpriv");
    c.args([
        "--inh-caps=-dac_override,-dac_read_search,-fowner",
        "--bounding-set=-dac_override,-dac_read_search,-fowner",
    ])
    .arg(common::bin());
    third.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &third.sysroot.root)
        .env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &third.lock_dir)
        .env("TF_GPU_COUNT", "1")
        .arg("./pkg/gpu_test");
    let out = c.run();
    out.assert_code(2).assert_one_error_line(&format!(
        "({d} is uid 65534's, mode 0755, and this user is uid 0: its owner or root runs chmod 1777 {d}",
        d = third.lock_dir.display()
    ));
}

/// The GPU line of `--status` text for `gpu`, as `who`.
fn gpu_line(f: &Fixture, who: Viewer, gpu: &str) -> (String, Output) {
    let (text, _) = look(f, who);
    let line = text.stdout.lines().find(|l| l.starts_with(&format!("{gpu} "))).unwrap_or_default().to_string();
    (line, text)
}

/// `gpudrain/` exists only while a GPU is drained, so any user may make it
/// in the 1777 lock directory, and its owner is not bound by its sticky
/// bit. `--drain` refuses to write into one of another user's, with the
/// repair; a drain that sits in one (made there by an older release) is
/// flagged wherever it was moved, and tests still pass its GPU over.
#[test]
fn a_drain_in_another_users_gpudrain_is_refused_or_flagged() {
    if !root("another user's gpudrain/") {
        return;
    }
    let f = shared_fixture("truth-drain-dir");
    shared_locks(&f);
    let drain_dir = f.lock_dir.join("gpudrain");
    let mut c = Cmd::new("sh");
    c.args(["-c", "mkdir \"$0\" && chmod 1777 \"$0\""]).arg(&drain_dir).as_user(NOBODY, NOBODY);
    c.run().assert_success();
    let refusal = format!(
        "cannot drain GPU 0: {d}/gpudrain/ belongs to uid 65534, who could rename or remove the drain (only root's, the lock directory owner's or your own is used); root runs: chown root {d}/gpudrain",
        d = f.lock_dir.display()
    );
    wrapper(&f, Viewer::Root, &["--drain=0", "--reason=ECC errors"]).assert_code(2).assert_one_error_line(&refusal);
    // A third user, who is not root, is refused the same way.
    let mut c = Cmd::new(common::bin());
    f.runfiles.apply(&mut c);
    c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir);
    c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").as_user(12345, 12345);
    c.args(["--drain=0", "--reason=ECC errors"]).run().assert_code(2).assert_one_error_line(&refusal);
    assert_eq!(std::fs::read_dir(&drain_dir).unwrap().count(), 0, "a drain was written");
    // Its owner's own drain there is trusted.
    wrapper(&f, Viewer::Nobody, &["--drain=1", "--reason=mine"]).assert_success();
    let (line, text) = gpu_line(&f, Viewer::Root, "1");
    assert!(line.contains("drained ") && !line.contains("cannot be trusted"), "{line}\n{}", text.explain());
    wrapper(&f, Viewer::Nobody, &["--undrain=1"]).assert_success();
    // Root's drain in a gpudrain/ that became nobody's, moved by nobody
    // from GPU 0 to GPU 1.
    wrapper(&f, Viewer::Root, &["--drain=0", "--reason=ECC errors"]).assert_success();
    std::os::unix::fs::chown(&drain_dir, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut c = Cmd::new("mv");
    c.arg(drain_dir.join("0")).arg(drain_dir.join("1")).as_user(NOBODY, NOBODY);
    c.run().assert_success();
    for who in VIEWERS {
        let (line, text) = gpu_line(&f, who, "1");
        assert!(
            line.contains("by uid 0: ECC errors (which GPU it names cannot be trusted: gpudrain/ belongs to uid 65534, who may rename or remove any drain in it; tests pass it over)"),
            "{who:?}: {line}\n{}",
            text.explain()
        );
        let json = wrapper(&f, who, &["--status=json"]);
        assert!(
            json.stdout.contains(r#""disowned": false, "untrusted": "gpudrain/ belongs to uid 65534, who may rename or remove any drain in it"}"#),
            "{who:?}\n{}",
            json.explain()
        );
    }
    let out = wrapper(&f, Viewer::Root, &["--wait=0", "./pkg/gpu_test"]);
    assert_eq!(common::Record::of(&out).locks(), ["gpulock0_0"], "GPU 1 is passed over\n{}", out.explain());
}

/// A `gpudrain/` every user may write without the sticky bit (root's,
/// `chmod 777`): any user could rename a drain in it. `--drain` refuses
/// to write there unless it may give the directory its sticky bit (its
/// owner's own); a drain that sits in one is flagged in every format, and
/// tests still pass its GPU over.
#[test]
fn a_drain_in_a_gpudrain_without_the_sticky_bit_is_refused_or_flagged() {
    if !root("a gpudrain/ without the sticky bit") {
        return;
    }
    let f = shared_fixture("truth-drain-unsticky");
    shared_locks(&f);
    let drain_dir = f.lock_dir.join("gpudrain");
    let unsticky = || std::fs::set_permissions(&drain_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir(&drain_dir).unwrap();
    unsticky();
    let d = f.lock_dir.display();
    let refusal = format!(
        "cannot drain GPU 0: {d}/gpudrain/ may be written by every user and has no sticky bit, so any user could rename or remove the drain; root runs: chmod 1777 {d}/gpudrain"
    );
    wrapper(&f, Viewer::Nobody, &["--drain=0", "--reason=ECC errors"]).assert_code(2).assert_one_error_line(&refusal);
    assert_eq!(std::fs::read_dir(&drain_dir).unwrap().count(), 0, "a drain was written");
    // Root, its owner, gives it the sticky bit and drains.
    wrapper(&f, Viewer::Root, &["--drain=0", "--reason=ECC errors"]).assert_success();
    assert_eq!(std::fs::metadata(&drain_dir).unwrap().permissions().mode() & 0o7777, 0o1777);
    // Made 0777 again: the drain is flagged, and still passed over.
    unsticky();
    let why =
        "gpudrain/ may be written by every user and has no sticky bit: any user may rename or remove a drain in it";
    for who in VIEWERS {
        let (line, text) = gpu_line(&f, who, "0");
        assert!(
            line.contains(&format!(
                "by uid 0: ECC errors (which GPU it names cannot be trusted: {why}; tests pass it over)"
            )),
            "{who:?}: {line}\n{}",
            text.explain()
        );
        let json = wrapper(&f, who, &["--status=json"]);
        assert!(json.stdout.contains(&format!(r#""untrusted": "{why}"}}"#)), "{who:?}\n{}", json.explain());
    }
    let metrics = wrapper(&f, Viewer::Root, &["--status=openmetrics"]);
    let sample = format!(
        "parallel_gpu_execute_gpu_drain_untrusted{{lock_dir=\"{d}\",profile=\"xla\",gpu=\"0\",why=\"{why}\"}} 1\n"
    );
    assert!(metrics.stdout.contains(&sample), "{}", metrics.explain());
    assert_eq!(metrics.stdout.matches("parallel_gpu_execute_gpu_drain_untrusted{").count(), 1, "{}", metrics.explain());
    let out = wrapper(&f, Viewer::Root, &["--wait=0", "./pkg/gpu_test"]);
    assert_eq!(common::Record::of(&out).locks(), ["gpulock1_0"], "GPU 0 is passed over\n{}", out.explain());
    // Trusted again once sticky: no such series.
    std::fs::set_permissions(&drain_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let metrics = wrapper(&f, Viewer::Root, &["--status=openmetrics"]);
    assert!(!metrics.stdout.contains("drain_untrusted"), "{}", metrics.explain());
}

/// A hard link to a drain record (another user's `ln`, where
/// `fs.protected_hardlinks` is 0; made here by root) names a second GPU
/// with the first one's owner: both are flagged, and both passed over.
#[test]
fn a_hard_linked_drain_record_is_flagged() {
    if !root("a record's hard link") {
        return;
    }
    let f = shared_fixture("truth-drain-link");
    shared_locks(&f);
    wrapper(&f, Viewer::Root, &["--drain=0", "--reason=ECC errors"]).assert_success();
    let drain_dir = f.lock_dir.join("gpudrain");
    std::fs::hard_link(drain_dir.join("0"), drain_dir.join("1")).unwrap();
    for (who, gpu) in [(Viewer::Root, "0"), (Viewer::Nobody, "1")] {
        let (line, text) = gpu_line(&f, who, gpu);
        assert!(
            line.contains("ECC errors (which GPU it names cannot be trusted: the record has 2 names (hard links), which another user may have made; tests pass it over)"),
            "{who:?} {gpu}: {line}\n{}",
            text.explain()
        );
    }
    let json = wrapper(&f, Viewer::Root, &["--status=json"]);
    assert!(json.stdout.contains(r#""untrusted": "the record has 2 names"#), "{}", json.explain());
    wrapper(&f, Viewer::Root, &["--wait=0", "./pkg/gpu_test"]).assert_code(1);
}
