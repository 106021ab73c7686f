//! Fixtures for parallel_gpu_execute's integration tests: a runfiles tree
//! holding a recording test at `ws/pkg/gpu_test`, an empty fake sysroot (so
//! the machine's real hardware never answers) and a private lock directory.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use test_support::{Cmd, Output, RECORDING_TEST, Runfiles, Sysroot, TempDir, parse_record, record_value};

/// The binary under test: this build's, or the one in
/// `GPU_CI_WRAPPERS_TEST_BINS` (`test_support::bin_under_test`).
pub fn bin() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        test_support::bin_under_test("parallel_gpu_execute", env!("CARGO_BIN_EXE_parallel_gpu_execute"))
    })
}

pub struct Fixture {
    pub dir: TempDir,
    pub runfiles: Runfiles,
    pub sysroot: Sysroot,
    pub lock_dir: PathBuf,
}

impl Fixture {
    pub fn new(label: &str) -> Fixture {
        let dir = TempDir::new(label);
        let mut runfiles = Runfiles::new(&dir, "ws");
        runfiles.add("ws/pkg/gpu_test", RECORDING_TEST, true);
        let sysroot = Sysroot::new(&dir);
        let lock_dir = dir.join("locks");
        Fixture { dir, runfiles, sysroot, lock_dir }
    }

    /// The wrapper as Bazel runs it: from the runfiles workspace directory,
    /// with the test variables set, on the fake sysroot and lock directory.
    pub fn cmd(&self) -> Cmd {
        let mut c = Cmd::new(bin());
        self.apply(&mut c);
        c
    }

    /// [`cmd`](Fixture::cmd) run under `program` (strace, unshare, perl):
    /// `program ARGS... <the wrapper>`, with the same environment; the
    /// wrapper's own arguments follow.
    pub fn cmd_under<S: AsRef<std::ffi::OsStr>>(&self, program: &str, args: impl IntoIterator<Item = S>) -> Cmd {
        let mut c = Cmd::new(program);
        c.args(args).arg(bin());
        self.apply(&mut c);
        c
    }

    /// The runfiles, the fake sysroot and the lock directory, as the
    /// wrapper is given them.
    fn apply(&self, c: &mut Cmd) {
        self.runfiles.apply(c);
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &self.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &self.lock_dir);
    }

    /// `cmd()` running `./pkg/gpu_test` with `args`.
    pub fn run_test(&self, configure: impl FnOnce(&mut Cmd), args: &[&str]) -> Output {
        let mut c = self.cmd();
        configure(&mut c);
        c.arg("./pkg/gpu_test").args(args);
        c.run()
    }

    /// The wrapper as JAX's CI would start it: the executable called
    /// `parallel_accelerator_execute` (the jax profile), on the fixture.
    pub fn jax_cmd(&self) -> Cmd {
        let exe = self.dir.join("bin/parallel_accelerator_execute");
        if !exe.exists() {
            std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(bin(), &exe).unwrap();
        }
        let mut c = Cmd::new(&exe);
        self.runfiles.apply(&mut c);
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &self.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &self.lock_dir);
        c
    }

    pub fn test_path(&self) -> PathBuf {
        self.runfiles.cwd().join("pkg/gpu_test")
    }

    pub fn lock(&self, gpu: &str, slot: u32) -> PathBuf {
        self.lock_dir.join(format!("gpulock{gpu}_{slot}"))
    }

    /// The PIDs of the waiters with a record in the queue, earliest first.
    pub fn waiters(&self) -> Vec<i32> {
        test_support::queued_pids(&self.lock_dir)
    }

    /// Makes the lock directory, mode 1777, as `/var/lock` is: every user
    /// may take slots there.
    pub fn make_lock_dir_shared(&self) {
        std::fs::create_dir_all(&self.lock_dir).unwrap();
        std::fs::set_permissions(&self.lock_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    }

    /// Starts `c` and returns once its process has a record in the queue.
    #[track_caller]
    pub fn spawn_queued(&self, c: &Cmd) -> test_support::Running {
        let r = c.spawn();
        let pid = r.pid();
        let mut r = r;
        let mut seen = false;
        test_support::wait_until(std::time::Duration::from_secs(10), || {
            seen = self.waiters().contains(&pid);
            seen || r.has_exited()
        });
        if !seen {
            // What it said, and how it ended (killed here if still running).
            if !r.has_exited() {
                // SAFETY: kill(2) of our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            panic!("the waiter never queued\n{}", r.wait().explain());
        }
        r
    }

    /// Whether `n` waiters have a record within ten seconds.
    pub fn queued(&self, n: usize) -> bool {
        test_support::wait_until(std::time::Duration::from_secs(10), || self.waiters().len() >= n)
    }
}

/// The record the test printed on stdout.
pub struct Record(pub Vec<(String, String)>);

impl Record {
    #[track_caller]
    pub fn of(out: &Output) -> Record {
        let r = parse_record(&out.stdout);
        assert!(record_value(&r, "argc").is_some(), "the test did not run\n{}", out.explain());
        Record(r)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        record_value(&self.0, key)
    }

    /// A variable: `None` when the record says it is unset.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.get(key)
    }

    pub fn args(&self) -> Vec<String> {
        let n: usize = self.get("argc").unwrap().parse().unwrap();
        (0..n).map(|i| self.get(&format!("arg{i}")).unwrap().to_string()).collect()
    }

    /// How long after `at` the test started (its `start`, the wall clock
    /// in ns as its first act): a wait's end, measured without the test's
    /// own run and exit, which a loaded machine can stretch.
    #[track_caller]
    pub fn started_after(&self, at: std::time::SystemTime) -> std::time::Duration {
        let start: u64 = self.get("start").and_then(|s| s.parse().ok()).expect("the record has no start");
        let at = at.duration_since(std::time::UNIX_EPOCH).unwrap();
        std::time::Duration::from_nanos(start).saturating_sub(at)
    }

    /// The record the test wrote into `file` (`RECORD_FILE`).
    pub fn read(file: &std::path::Path) -> Record {
        Record(parse_record(&test_support::read_to_string(file)))
    }

    /// A list of descriptor numbers (`fds`, `lockfds`), sorted. The
    /// recording test always writes both keys; a record without one fails.
    #[track_caller]
    pub fn descriptors(&self, key: &str) -> Vec<u32> {
        let list = self.get(key).unwrap_or_else(|| panic!("the record has no {key}: {:?}", self.0));
        let mut fds: Vec<u32> = list.split_whitespace().map(|n| n.parse().unwrap()).collect();
        fds.sort();
        fds
    }

    /// The lock files among the test's descriptors, sorted.
    pub fn locks(&self) -> Vec<String> {
        let mut locks: Vec<String> = self.get("locks").unwrap_or("").split_whitespace().map(str::to_string).collect();
        locks.sort();
        locks
    }
}

/// The uid and gid of `nobody`, for runs as an unprivileged user.
pub const NOBODY: u32 = 65534;

/// A fixture whose directory tree an unprivileged user can traverse.
pub fn shared_fixture(label: &str) -> Fixture {
    let f = Fixture::new(label);
    make_shared(&f);
    f
}

/// Lets an unprivileged user traverse `f`'s directory and those above it.
pub fn make_shared(f: &Fixture) {
    let mut p = f.dir.path().to_path_buf();
    loop {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode | 0o755)).unwrap();
        if !p.pop() || p.as_os_str() == "/" {
            break;
        }
    }
}

/// `--status=<format>` with `gpus` GPUs of `slots` slots each; it must succeed.
pub fn status(f: &Fixture, gpus: u32, slots: u32, format: &str) -> Output {
    let out = f
        .cmd()
        .env("TF_GPU_COUNT", gpus.to_string())
        .env("TF_TESTS_PER_GPU", slots.to_string())
        .arg(format!("--status={format}"))
        .run();
    out.assert_success();
    out
}

/// The object of the slot whose lock file is `file`, in `--status=json`.
#[track_caller]
pub fn slot_json<'a>(out: &'a Output, file: &Path) -> &'a str {
    slot_in(&out.stdout, file).unwrap_or_else(|| panic!("no slot {}\n{}", file.display(), out.explain()))
}

/// The object of the slot whose lock file is `file`, in the JSON `json`.
pub fn slot_in<'a>(json: &'a str, file: &Path) -> Option<&'a str> {
    let rest = &json[json.find(&format!("{{\"file\": \"{}\", ", file.display()))?..];
    let last = rest.find("\"configured\": ")?;
    Some(&rest[..last + rest[last..].find('}')? + 1])
}

/// The waiters' array of `--status=json`.
pub fn waiters_json(out: &Output) -> &str {
    let at = out.stdout.find("\"waiters\": [").unwrap_or_else(|| panic!("{}", out.explain()));
    &out.stdout[at..]
}

/// How many stderr lines say that the lock directory at `place` is private
/// (coordinates with no other test).
pub fn said_private(out: &Output, place: &str) -> usize {
    out.stderr.lines().filter(|l| l.contains("coordinates with no other test") && l.contains(place)).count()
}

/// The wrapper refused a private lock directory at `place`: exit 2, said
/// once, and the test never ran.
#[track_caller]
pub fn refused(out: &Output, place: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", out.explain());
    assert_eq!(said_private(out, place), 1, "{}", out.explain());
    assert!(!out.stdout.contains("argc="), "the test ran\n{}", out.explain());
}

/// `--status`'s line of GPU `gpu`, which must be drained.
#[track_caller]
pub fn drained_line(out: &Output, gpu: &str) -> String {
    let line = out.stdout.lines().find(|l| l.starts_with(&format!("{gpu} ")) && l.contains(" drained "));
    line.unwrap_or_else(|| panic!("GPU {gpu} not drained\n{}", out.explain())).to_string()
}

/// `TF_GPU_COUNT=gpus TF_TESTS_PER_GPU=slots` for `c`.
pub fn on(c: &mut Cmd, gpus: u32, slots: u32) -> &mut Cmd {
    c.env("TF_GPU_COUNT", gpus.to_string()).env("TF_TESTS_PER_GPU", slots.to_string())
}

/// Whether strace can trace here (else a one-line skip; a failure under CI).
pub fn strace_runs(what: &str) -> bool {
    let probe = std::process::Command::new("strace").args(["-qq", "-o", "/dev/null", "true"]).status();
    test_support::prerequisite(matches!(probe, Ok(s) if s.success()), "strace(1) able to trace here", what)
}

/// The wrapper under strace, as `Fixture::cmd` runs it, with the system
/// calls that `inject` names held (`strace -e inject=...`, e.g.
/// `flock:delay_enter=2000000:when=2`), only those on `path` where given
/// (`-P`); 60 s at most.
pub fn held_by_strace(f: &Fixture, inject: &str, path: Option<&Path>) -> Cmd {
    let inject = format!("inject={inject}");
    let mut args = vec!["-f", "-qq", "-o", "/dev/null", "-e", &inject];
    let path = path.map(|p| p.to_str().expect("a UTF-8 path"));
    if let Some(path) = path {
        args.extend(["-P", path]);
    }
    let mut c = f.cmd_under("strace", args);
    c.timeout(std::time::Duration::from_secs(60));
    c
}

/// Whether the first child of `strace` (the traced wrapper) sits in the
/// system call numbered `nr` (`/proc/<pid>/syscall`), as it does while
/// strace holds it there.
pub fn traced_child_in(strace: &test_support::Running, nr: i64) -> bool {
    let Some(&pid) = strace.children().first() else { return false };
    let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    call.split(' ').next() == Some(nr.to_string().as_str())
}

/// When the test that `RECORD_FILE` `path` recorded started (ns); `u64::MAX`
/// where it recorded none, so that a test that never ran is never first.
pub fn started(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let r = parse_record(&text);
    r.iter().find(|(k, _)| k == "start").and_then(|(_, v)| v.parse().ok()).unwrap_or(u64::MAX)
}

/// Whether this runs as root (else a one-line skip; a failure under CI).
pub fn root(what: &str) -> bool {
    test_support::prerequisite(test_support::is_root(), "root", what)
}

/// Runs `argv` in a user namespace of its own, as a rootless container
/// does: its uid and gid map is `sys.argv[1]` (`inside outside count`
/// ranges, `;` between them), written from outside; it runs there as the
/// namespace's root, the outside id that 0 maps to. Exit 99 where no user
/// namespace can be made.
pub const ROOTLESS: &str = "import os, sys, ctypes\n\
    libc = ctypes.CDLL(None, use_errno=True)\n\
    ranges = [r.split() for r in sys.argv[1].split(';')]\n\
    owner = [int(o) for i, o, n in ranges if i == '0'][0]\n\
    r, w = os.pipe(); r2, w2 = os.pipe()\n\
    pid = os.fork()\n\
    if pid == 0:\n\
    \x20   os.setgroups([]); os.setresgid(owner, owner, owner); os.setresuid(owner, owner, owner)\n\
    \x20   if libc.unshare(0x10000000) != 0: os._exit(99)\n\
    \x20   os.write(w, b'x'); os.read(r2, 1)\n\
    \x20   os.execv(sys.argv[2], sys.argv[2:])\n\
    os.read(r, 1)\n\
    for f in ('uid_map', 'gid_map'):\n\
    \x20   open('/proc/%d/%s' % (pid, f), 'w').write(sys.argv[1].replace(';', '\\n') + '\\n')\n\
    os.write(w2, b'x')\n\
    _, st = os.waitpid(pid, 0)\n\
    sys.exit(os.waitstatus_to_exitcode(st))\n";

/// What makes the wrapper's command in a rootless container's user
/// namespace whose map is `map` (`"0 100000 65536"`, or `"0 1000 1;1
/// 100000 65536"`), as that namespace's root, on `f`; the wrapper's own
/// arguments follow. `None`, said as a skip (a failure under CI), where
/// this is not root, or python3 with ctypes or user namespaces are missing.
pub fn rootless<'a>(f: &'a Fixture, map: &'a str) -> Option<impl Fn() -> Cmd + 'a> {
    let python = test_support::python_with("python3", &["ctypes"]);
    if !test_support::prerequisite(python.is_some(), "python3 with ctypes", "a rootless container's user namespace")
        || !root("a rootless container's user namespace")
    {
        return None;
    }
    let python = python?.to_string_lossy().into_owned();
    let works = Cmd::new(&python).args(["-c", ROOTLESS, map, "/bin/true"]).run().code() == 0;
    if !test_support::prerequisite(works, "user namespaces", "a rootless container's user namespace") {
        return None;
    }
    Some(move || f.cmd_under(&python, ["-c", ROOTLESS, map]))
}

/// A PID and mount namespace of its own whose first process is `sleep`,
/// with a second `sleep` entered from outside as its pid 2 (its parent
/// outside, shown as 0, as `docker exec` makes it). Its namespace goes with
/// its first process when dropped (unshare kills it as it dies), and
/// nsenter reaps its own child, so that no zombie is left.
pub struct EnteredNamespace {
    init: std::process::Child,
    second: std::process::Child,
    /// The first process, as `nsenter -t` takes it.
    pub pid1: String,
}

impl EnteredNamespace {
    pub fn new() -> EnteredNamespace {
        let init = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child", "--mount-proc", "sleep", "60"])
            .spawn()
            .expect("unshare");
        let children = format!("/proc/{0}/task/{0}/children", init.id());
        let mut pid1 = String::new();
        test_support::wait_until(std::time::Duration::from_secs(5), || {
            pid1 = std::fs::read_to_string(&children).unwrap_or_default().trim().to_string();
            !pid1.is_empty()
        });
        let second = std::process::Command::new("nsenter")
            .args(["-t", &pid1, "--pid", "--mount", "sleep", "60"])
            .spawn()
            .expect("nsenter");
        let its = format!("/proc/{0}/task/{0}/children", second.id());
        test_support::wait_until(std::time::Duration::from_secs(5), || {
            !std::fs::read_to_string(&its).unwrap_or_default().trim().is_empty()
        });
        EnteredNamespace { init, second, pid1 }
    }

    /// `nsenter`'s arguments that enter it.
    pub fn enter(&self) -> [&str; 4] {
        ["-t", &self.pid1, "--pid", "--mount"]
    }
}

impl Drop for EnteredNamespace {
    fn drop(&mut self) {
        let _ = self.init.kill();
        let _ = self.init.wait();
        let _ = self.second.wait();
    }
}

/// Sets the permission bits of `path` to `mode`.
pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
