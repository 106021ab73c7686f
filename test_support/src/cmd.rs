//! Running the binaries under test: [`Cmd`], a command with a scrubbed
//! environment, and [`Output`], its result with everything needed to explain
//! a failure (command line, working directory, environment, status, stdout
//! and stderr).

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The result of running a [`Cmd`], with everything needed to explain it.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// The harness killed it at its timeout: [`code`](Self::code) is then
    /// [`TIMED_OUT`](Self::TIMED_OUT), never the 137 of a SIGKILL.
    pub timed_out: bool,
    description: String,
}

impl Output {
    /// What [`code`](Self::code) says of a run the harness killed at its
    /// timeout: no exit status and no signal gives it, so a hang cannot pass
    /// for the SIGKILL (137) or any exit code a test expects.
    pub const TIMED_OUT: i32 = -124;

    /// The exit code, or 128+signal when the process was killed, as a shell
    /// reports it; [`TIMED_OUT`](Self::TIMED_OUT) when the harness killed it
    /// at its timeout.
    pub fn code(&self) -> i32 {
        if self.timed_out {
            return Output::TIMED_OUT;
        }
        match (self.status.code(), self.status.signal()) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            _ => -1,
        }
    }

    /// Everything about the run, for a failure message.
    pub fn explain(&self) -> String {
        format!(
            "{}\nstatus: {}{} (code {})\nelapsed: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--------------",
            self.description,
            self.status,
            if self.timed_out { ", TIMED OUT: killed by the test harness" } else { "" },
            self.code(),
            self.elapsed,
            self.stdout,
            self.stderr
        )
    }

    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Output {
        assert_eq!(self.code(), code, "unexpected exit code\n{}", self.explain());
        self
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Output {
        self.assert_code(0)
    }

    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &Output {
        assert!(self.stderr.contains(needle), "stderr lacks {needle:?}\n{}", self.explain());
        self
    }

    /// Asserts that the program wrote at most one line to stderr (the
    /// wrapper's own message, or nothing) and no panic or backtrace.
    #[track_caller]
    pub fn assert_at_most_one_stderr_line(&self) -> &Output {
        assert!(self.stderr.lines().count() <= 1, "more than one stderr line\n{}", self.explain());
        for bad in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
            assert!(!self.stderr.contains(bad), "panic output ({bad})\n{}", self.explain());
        }
        self
    }

    /// Like [`assert_at_most_one_stderr_line`](Self::assert_at_most_one_stderr_line),
    /// for a wrapper that waited: its two wait lines (`waiting for ...` when
    /// it starts waiting, `waited ...` when it gets its GPUs) must both be
    /// there, and besides them at most one line.
    #[track_caller]
    pub fn assert_waited_and_at_most_one_other_line(&self) -> &Output {
        let telemetry = |l: &str| {
            l.starts_with("parallel_gpu_execute: waiting for ") || l.starts_with("parallel_gpu_execute: waited ")
        };
        let waits = self.stderr.lines().filter(|l| telemetry(l)).count();
        let others = self.stderr.lines().filter(|l| !telemetry(l)).count();
        assert_eq!(waits, 2, "want both wait lines\n{}", self.explain());
        assert!(others <= 1, "more than one other stderr line\n{}", self.explain());
        for bad in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
            assert!(!self.stderr.contains(bad), "panic output ({bad})\n{}", self.explain());
        }
        self
    }

    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) -> &Output {
        assert!(self.stdout.contains(needle), "stdout lacks {needle:?}\n{}", self.explain());
        self
    }

    #[track_caller]
    pub fn assert_stdout_eq(&self, expected: &str) -> &Output {
        assert_eq!(self.stdout, expected, "stdout differs\n{}", self.explain());
        self
    }

    /// Asserts stderr is exactly one line (the one-clear-line rule for bad
    /// input) and that it carries `needle`.
    #[track_caller]
    pub fn assert_one_error_line(&self, needle: &str) -> &Output {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "expected exactly one stderr line\n{}", self.explain());
        self.assert_stderr_contains(needle);
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "panic output\n{}",
            self.explain()
        );
        self
    }
}

/// The `PATH` a command gets unless the test sets one.
const SCRUBBED_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A command with a scrubbed environment: only `PATH` and what the test sets
/// reach the program, so the host (a CI runner with `CUDA_VISIBLE_DEVICES`,
/// say) cannot change the outcome.
pub struct Cmd {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    user: Option<(u32, u32)>,
    own_process_group: bool,
    closed: Vec<i32>,
    blocked: Vec<i32>,
}

impl Cmd {
    /// `program` is a path, or a bare name. Unless the test sets the
    /// command's `PATH` itself, a bare name is looked up on this test
    /// process's `PATH` ([`find_program`](crate::find_program), what
    /// [`have_program`](crate::have_program) checks), not on the scrubbed
    /// one the command gets: a test runs the program it checked.
    pub fn new(program: impl AsRef<Path>) -> Cmd {
        Cmd {
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            env: vec![("PATH".into(), SCRUBBED_PATH.into())],
            cwd: None,
            stdin: None,
            timeout: Duration::from_secs(60),
            user: None,
            own_process_group: false,
            closed: Vec::new(),
            blocked: Vec::new(),
        }
    }

    pub fn arg(&mut self, a: impl AsRef<OsStr>) -> &mut Cmd {
        self.args.push(a.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self.arg(a);
        }
        self
    }

    /// Sets (or replaces) one environment variable.
    pub fn env(&mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> &mut Cmd {
        let k = k.as_ref().to_os_string();
        self.env.retain(|(key, _)| *key != k);
        self.env.push((k, v.as_ref().to_os_string()));
        self
    }

    pub fn env_remove(&mut self, k: impl AsRef<OsStr>) -> &mut Cmd {
        let k = k.as_ref();
        self.env.retain(|(key, _)| key != k);
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Cmd {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    pub fn stdin(&mut self, data: impl Into<Vec<u8>>) -> &mut Cmd {
        self.stdin = Some(data.into());
        self
    }

    /// Starts the command in a process group of its own, as Bazel starts a
    /// test, so that [`Running::signal_group`] reaches all it started.
    pub fn own_process_group(&mut self) -> &mut Cmd {
        self.own_process_group = true;
        self
    }

    /// Starts the command with these of its standard descriptors (0, 1, 2)
    /// closed, as a cron job or a daemon may start it. What a closed stdout
    /// or stderr would have carried is then missing from the output.
    pub fn close_standard(&mut self, fds: &[i32]) -> &mut Cmd {
        assert!(fds.iter().all(|fd| (0..3).contains(fd)), "only 0, 1 and 2: {fds:?}");
        self.closed = fds.to_vec();
        self
    }

    /// Starts the command with these signals blocked, as a parent's
    /// signal mask is inherited across `execve`.
    pub fn block_signals(&mut self, signals: &[i32]) -> &mut Cmd {
        self.blocked = signals.to_vec();
        self
    }

    /// Runs the command as another user (the test must run as root).
    pub fn as_user(&mut self, uid: u32, gid: u32) -> &mut Cmd {
        self.user = Some((uid, gid));
        self
    }

    pub fn timeout(&mut self, t: Duration) -> &mut Cmd {
        self.timeout = t;
        self
    }

    /// The command as a reader of a failure report needs it: environment,
    /// working directory and a shell-quoted command line.
    pub fn describe(&self) -> String {
        let mut s = String::from("command:");
        for (k, v) in &self.env {
            let _ = write!(s, " {}={}", k.to_string_lossy(), shell_quote(v));
        }
        let _ = write!(s, " {}", shell_quote(self.program().as_os_str()));
        for a in &self.args {
            let _ = write!(s, " {}", shell_quote(a));
        }
        if let Some(cwd) = &self.cwd {
            let _ = write!(s, "\ncwd: {}", cwd.display());
        }
        if let Some((uid, gid)) = self.user {
            let _ = write!(s, "\nuser: uid {uid}, gid {gid}");
        }
        if !self.closed.is_empty() {
            let _ = write!(s, "\nstarted with descriptors {:?} closed", self.closed);
        }
        if !self.blocked.is_empty() {
            let _ = write!(s, "\nstarted with signals {:?} blocked", self.blocked);
        }
        s
    }

    /// What runs: a bare name found on this process's `PATH` when the
    /// command keeps the scrubbed one (see [`Cmd::new`]).
    fn program(&self) -> PathBuf {
        let own_path = self.env.iter().any(|(k, v)| k == "PATH" && v != SCRUBBED_PATH);
        let bare = self.program.to_str().filter(|p| !p.contains('/') && !own_path);
        bare.and_then(crate::find_program).unwrap_or_else(|| self.program.clone())
    }

    fn command(&self) -> Command {
        let mut c = Command::new(self.program());
        c.args(&self.args).env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            c.current_dir(cwd);
        }
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            c.uid(uid).gid(gid);
        }
        if self.own_process_group {
            use std::os::unix::process::CommandExt;
            c.process_group(0);
        }
        if !self.closed.is_empty() {
            use std::os::unix::process::CommandExt;
            let closed = self.closed.clone();
            // SAFETY: the closure runs in the forked child before its exec
            // and only calls `close`, which is async-signal-safe.
            unsafe {
                c.pre_exec(move || {
                    for &fd in &closed {
                        libc::close(fd);
                    }
                    Ok(())
                });
            }
        }
        if !self.blocked.is_empty() {
            use std::os::unix::process::CommandExt;
            let blocked = self.blocked.clone();
            // SAFETY: the closure runs in the forked child before its exec
            // and only calls sigemptyset, sigaddset and sigprocmask on a
            // set of its own, which are async-signal-safe.
            unsafe {
                c.pre_exec(move || {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    for &sig in &blocked {
                        libc::sigaddset(&mut set, sig);
                    }
                    libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                    Ok(())
                });
            }
        }
        c
    }

    /// Starts the command with piped stdout/stderr, for tests that need to act
    /// while it runs (signals, concurrency).
    pub fn spawn(&self) -> Running {
        let mut c = self.command();
        c.stdin(if self.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn failed: {e}\n{}", self.describe()));
        if let Some(data) = &self.stdin {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(data).expect("write stdin");
        }
        Running { child, description: self.describe(), started: Instant::now(), timeout: self.timeout }
    }

    /// Runs to completion (bounded by the timeout, after which the process
    /// is killed and the test fails with its output).
    pub fn run(&self) -> Output {
        self.spawn().wait()
    }
}

/// A started [`Cmd`].
pub struct Running {
    pub child: Child,
    description: String,
    started: Instant,
    timeout: Duration,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The PIDs of its children ([`children`]).
    pub fn children(&self) -> Vec<u32> {
        children(self.child.id())
    }

    /// Whether a child of it has the command name `name` (`/proc/<pid>/comm`:
    /// a program's file name once it has exec'd it).
    pub fn has_child_named(&self, name: &str) -> bool {
        let comm = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        self.children().into_iter().any(|pid| comm(pid).strip_suffix('\n') == Some(name))
    }

    /// Sends a signal to the process.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) with a pid of our own child and a valid signal number.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.pid());
    }

    /// Sends a signal to the process group the command leads (see
    /// [`Cmd::own_process_group`]).
    pub fn signal_group(&self, sig: i32) {
        // SAFETY: kill(2) with a negative pid addresses our child's group.
        let rc = unsafe { libc::kill(-self.pid(), sig) };
        assert_eq!(rc, 0, "kill(-{}, {sig}) failed", self.pid());
    }

    /// Whether the process has ended (without reaping it).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the process, killing it at the timeout; reads its output.
    pub fn wait(mut self) -> Output {
        let mut stdout = self.child.stdout.take().unwrap();
        let mut stderr = self.child.stderr.take().unwrap();
        let out_reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stdout, &mut v);
            v
        });
        let err_reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut v);
            v
        });
        let deadline = self.started + self.timeout;
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                timed_out = true;
                let _ = self.child.kill();
                break self.child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let elapsed = self.started.elapsed();
        let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
        let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
        let mut description = self.description;
        if timed_out {
            description.push_str(&format!("\nKILLED after the {:?} timeout", self.timeout));
        }
        Output { status, stdout, stderr, elapsed, timed_out, description }
    }
}

/// The children of `pid` (`/proc/<pid>/task/<pid>/children`; none where
/// it is gone).
pub fn children(pid: u32) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

fn shell_quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
