//! Spawning a case with posix_spawn, waiting for it, and checking it once.

use super::*;

pub(crate) fn cstring(bytes: &[u8]) -> CString {
    CString::new(bytes).expect("no NUL in arguments or environment")
}

pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A case ready for `posix_spawn`: C strings built once, outside the timing.
pub(crate) struct Prepared {
    pub(crate) _argv: Vec<CString>,
    pub(crate) argv_ptrs: Vec<*mut c_char>,
    pub(crate) _envp: Vec<CString>,
    pub(crate) envp_ptrs: Vec<*mut c_char>,
    pub(crate) actions: Box<libc::posix_spawn_file_actions_t>,
    /// The annotation removed before each run (`own_annotation_dir`).
    pub(crate) fresh: Option<PathBuf>,
}

impl Prepared {
    pub(crate) fn new(case: &Case, devnull: RawFd) -> Prepared {
        let argv: Vec<CString> = case.timed_argv().iter().map(|a| cstring(a.as_bytes())).collect();
        let envp: Vec<CString> =
            case.env.iter().map(|(k, v)| cstring(&[k.as_bytes(), b"=", v.as_bytes()].concat())).collect();
        let ptrs = |v: &[CString]| {
            let mut p: Vec<*mut c_char> = v.iter().map(|s| s.as_ptr().cast_mut()).collect();
            p.push(std::ptr::null_mut());
            p
        };
        let (argv_ptrs, envp_ptrs) = (ptrs(&argv), ptrs(&envp));
        let cwd = cstring(case.cwd.as_os_str().as_bytes());
        // SAFETY: an all-zero posix_spawn_file_actions_t is a valid argument
        // for posix_spawn_file_actions_init, which initialises it.
        let mut actions: Box<libc::posix_spawn_file_actions_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `actions` is initialised first; the fds and the path are
        // valid (glibc copies the path).
        unsafe {
            libc::posix_spawn_file_actions_init(&mut *actions);
            for fd in 0..3 {
                libc::posix_spawn_file_actions_adddup2(&mut *actions, devnull, fd);
            }
            libc::posix_spawn_file_actions_addchdir_np(&mut *actions, cwd.as_ptr());
        }
        let fresh = annotation_path(case);
        Prepared { _argv: argv, argv_ptrs, _envp: envp, envp_ptrs, actions, fresh }
    }

    pub(crate) fn spawn(&self, attr: &Attr) -> libc::pid_t {
        let mut pid = 0;
        // SAFETY: argv/envp are NULL-terminated arrays of C strings owned by
        // `self`; the file actions and attributes are initialised.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                self.argv_ptrs[0],
                &*self.actions,
                &attr.0,
                self.argv_ptrs.as_ptr(),
                self.envp_ptrs.as_ptr(),
            )
        };
        if rc != 0 {
            panic!("posix_spawn {:?}: {}", self._argv[0], std::io::Error::from_raw_os_error(rc));
        }
        pid
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut *self.actions) };
    }
}

/// Spawn attributes: SIGPIPE back to its default (the Rust runtime of this
/// benchmark ignores it; Bazel's test runner does not) and no signal blocked.
pub(crate) struct Attr(libc::posix_spawnattr_t);

impl Attr {
    pub(crate) fn new() -> Box<Attr> {
        // SAFETY: zeroed storage initialised by posix_spawnattr_init; the
        // signal sets are initialised by sigemptyset before use.
        unsafe {
            let mut attr: Box<Attr> = Box::new(Attr(std::mem::zeroed()));
            libc::posix_spawnattr_init(&mut attr.0);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::posix_spawnattr_setsigmask(&mut attr.0, &set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            libc::posix_spawnattr_setsigdefault(&mut attr.0, &set);
            let flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
            libc::posix_spawnattr_setflags(&mut attr.0, flags as libc::c_short);
            attr
        }
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

/// `wait4`: the pid, its wait status and resource usage.
pub(crate) fn wait_any(pid: libc::pid_t) -> (libc::pid_t, i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid out-pointers; `pid` is our child (or -1: any).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r > 0 {
            return (r, status, usage);
        }
        let errno = last_errno();
        assert_eq!(errno, libc::EINTR, "wait4: {}", std::io::Error::from_raw_os_error(errno));
    }
}

pub(crate) fn cpu_ns(u: &libc::rusage) -> u64 {
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(u.ru_utime) + tv(u.ru_stime)
}

pub(crate) fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) }
}

pub(crate) fn run_once(p: &Prepared, attr: &Attr, label: &str) -> Sample {
    if let Some(file) = &p.fresh {
        clear_annotation(file, label);
    }
    let start = Instant::now();
    let pid = p.spawn(attr);
    let (_, status, usage) = wait_any(pid);
    let wall = start.elapsed();
    assert_eq!(exit_code(status), 0, "{label}: exit status {status:#x} in a timed run");
    let faults = (usage.ru_minflt + usage.ru_majflt) as u64;
    Sample { wall_ns: wall.as_nanos() as u64, cpu_ns: cpu_ns(&usage), faults }
}

pub(crate) fn open_devnull() -> fs::File {
    fs::OpenOptions::new().read(true).write(true).open("/dev/null").expect("open /dev/null")
}

/// Runs the case once with the probe as its test, output captured, and
/// checks what the wrapper did: its output, and for a case that runs the
/// test on a GPU, that the test holds a locked slot.
pub(crate) fn check(case: &Case) {
    let annotation = annotation_path(case);
    if let Some(file) = &annotation {
        clear_annotation(file, &case.label);
    }
    let argv = case.argv(true);
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(case.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&case.cwd)
        .output()
        .unwrap_or_else(|e| panic!("{}: cannot run {:?}: {e}", case.label, argv[0]));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let explain = || {
        format!(
            "{}\ncommand: {argv:?}\ncwd: {}\nstatus: {}\noutput:\n{text}",
            case.label,
            case.cwd.display(),
            out.status
        )
    };
    assert!(out.status.success(), "the checking run failed: {}", explain());
    for e in &case.expect {
        assert!(text.contains(e.as_str()), "the checking run's output lacks {e:?}: {}", explain());
    }
    for r in &case.reject {
        assert!(!text.contains(r.as_str()), "the checking run's output has {r:?}: {}", explain());
    }
    // A case that says it runs the test on a GPU really took a slot: the
    // test holds the descriptor of GPU 0's lock file, and that file is
    // locked (the probe's `flock -n` on it failed), not just named.
    if case.expect.iter().any(|e| e.contains("on GPU")) {
        assert!(
            text.contains("probe_holds_locked=gpulock0_") && !text.contains("probe_holds_unlocked="),
            "the checking run's test does not hold a locked slot: {}",
            explain()
        );
    }
    if case.key.annotates() {
        let file = annotation.unwrap_or_else(|| panic!("no annotations directory: {}", explain()));
        let written = fs::read_to_string(&file).unwrap_or_default();
        assert!(
            written.starts_with("parallel_gpu_execute: GPU(s) "),
            "the checking run left no annotation in {} ({written:?}): {}",
            file.display(),
            explain()
        );
    }
}

/// `launcher` running the case's timed command line, in the case's
/// environment and directory.
pub(crate) fn launched(launcher: &Path, case: &Case) -> Command {
    let mut c = Command::new(launcher);
    c.args(case.timed_argv()).env_clear().envs(case.env.iter().map(|(k, v)| (k, v))).current_dir(&case.cwd);
    c
}

/// Peak RSS of the case's process (and the children it waited for), in KiB,
/// measured through the small launcher; the largest of `runs`.
pub(crate) fn peak_rss(case: &Case, maxrss: &Path, runs: usize) -> i64 {
    let mut peak = 0;
    for _ in 0..runs {
        let out = launched(maxrss, case).output().expect("run the maxrss launcher");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text.split_whitespace().map(|f| f.parse::<i64>().unwrap_or(-1));
        let (kib, status) = (fields.next().unwrap_or(-1), fields.next().unwrap_or(-1));
        assert!(out.status.success() && status == 0 && kib > 0, "{}: maxrss launcher said {text:?}", case.label);
        peak = peak.max(kib);
    }
    peak
}
