//! Running a program with its stdout on a pipe: the output is handed to a
//! callback as it streams by; stdin and stderr are the wrapper's own. For
//! `rocminfo` (the count's last resort) and `nvidia-smi` (`--list=bazelrc`).

use core::ffi::c_char;
use rustix::fd::{AsFd, AsRawFd};
use rustix::io::Errno;
use wrapper_common::env;

/// Runs `argv` (NUL-terminated; `argv[0]` a path, or with `search_path` a
/// name looked up in `PATH`), calls `on_output` with each chunk of its
/// stdout, and returns its wait status as `waitpid` gives it (an exec that
/// failed: exit 127).
pub fn run(argv: &[*const c_char], search_path: bool, mut on_output: impl FnMut(&[u8])) -> Result<i32, Errno> {
    debug_assert!(argv.last().is_some_and(|p| p.is_null()));
    let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let envp = env::environ_ptr();
    let pending_before = sigchld_pending();
    let _reaped_here = SigchldDefault::set();
    // SAFETY: the wrapper is single-threaded, so the child may run any code;
    // it only calls dup2/fcntl/execve (or execvpe)/_exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(wrapper_common::last_errno());
    }
    if pid == 0 {
        let w = write_end.as_raw_fd();
        // SAFETY: plain syscalls on descriptors this process owns, with valid
        // NUL-terminated argv/envp arrays; the child never returns from here.
        unsafe {
            if w == 1 {
                libc::fcntl(1, libc::F_SETFD, 0);
            } else {
                libc::dup2(w, 1);
            }
            if search_path {
                libc::execvpe(argv[0], argv.as_ptr(), envp);
            } else {
                libc::execve(argv[0], argv.as_ptr(), envp);
            }
            libc::_exit(127);
        }
    }
    drop(write_end);
    let mut buf = [0u8; 4096];
    loop {
        match rustix::io::read(read_end.as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => on_output(&buf[..n]),
            Err(Errno::INTR) => {}
            Err(_) => break,
        }
    }
    drop(read_end);
    Ok(reap(pid, pending_before))
}

/// SIGCHLD's default action while a child of [`run`] runs, where the
/// caller ignores it (`SIG_IGN`): the kernel would reap the child itself,
/// and its wait status, a failure included, would be lost (`waitpid` then
/// fails with `ECHILD`). Put back as it was when dropped, before the test
/// inherits it.
struct SigchldDefault(Option<libc::sigaction>);

impl SigchldDefault {
    fn set() -> SigchldDefault {
        // SAFETY: sigaction with a NULL new action only reads the current
        // one; setting SIG_DFL with a zeroed struct and an empty mask.
        unsafe {
            let mut old: libc::sigaction = core::mem::zeroed();
            libc::sigaction(libc::SIGCHLD, core::ptr::null(), &mut old);
            if old.sa_sigaction != libc::SIG_IGN {
                return SigchldDefault(None);
            }
            let mut default: libc::sigaction = core::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut default.sa_mask);
            libc::sigaction(libc::SIGCHLD, &default, core::ptr::null_mut());
            SigchldDefault(Some(old))
        }
    }
}

impl Drop for SigchldDefault {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: restoring a disposition that sigaction itself reported.
            unsafe { libc::sigaction(libc::SIGCHLD, old, core::ptr::null_mut()) };
        }
    }
}

/// Whether SIGCHLD is pending for this process (it can be only while it is
/// blocked: a mask inherited from the caller, which the test inherits too).
fn sigchld_pending() -> bool {
    // SAFETY: sigpending writes one sigset_t, which sigismember then reads.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, libc::SIGCHLD) == 1
    }
}

/// Whether this process has no child left (the caller may have left it
/// some, which the test inherits).
fn no_children() -> bool {
    // SAFETY: waitid with WNOHANG | WNOWAIT only looks: it reaps nothing,
    // and writes one siginfo_t.
    unsafe {
        let mut info: libc::siginfo_t = core::mem::zeroed();
        libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) < 0
            && wrapper_common::last_errno() == Errno::CHILD
    }
}

/// Waits for the child `pid` and returns its wait status. The SIGCHLD its
/// exit raised, pending where the caller's mask blocks it, is taken where
/// it can be no other's: none was pending before the child was made
/// (`pending_before`), and no other child is left (one the caller left
/// this process, whose exit in between would have raised the same signal,
/// which does not queue). Pending signals survive `execve`: the test would
/// find a SIGCHLD from no child of its own.
fn reap(pid: libc::pid_t, pending_before: bool) -> i32 {
    let mut status = 0;
    // SAFETY: waiting for our own child; `status` is a valid out-pointer.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && wrapper_common::last_errno() == Errno::INTR {}
    if !pending_before && sigchld_pending() && no_children() {
        // SAFETY: sigtimedwait with a valid one-signal set and a zero
        // timeout: it only takes the pending SIGCHLD, never blocks.
        unsafe {
            let mut set: libc::sigset_t = core::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            libc::sigtimedwait(&set, core::ptr::null_mut(), &zero);
        }
    }
    status
}

/// Whether a wait status says the program exited 0.
pub fn succeeded(status: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Whether the first process of this PID namespace is one that reaps the
/// orphans it inherits, by its name (`/proc/1/comm`): an init system, a
/// container's init (tini as `docker run --init` installs it, dumb-init,
/// catatonit, Kubernetes' pause), Bazel's `linux-sandbox`, or a shell.
/// A program that does not reap (a CI driver, Python, a runner started as
/// PID 1) would keep each orphan as a zombie.
pub fn init_reaps_orphans() -> bool {
    const REAPERS: [&[u8]; 12] = [
        b"systemd",
        b"init",
        b"linux-sandbox",
        b"tini",
        b"docker-init",
        b"dumb-init",
        b"catatonit",
        b"pause",
        b"s6-svscan",
        b"runit",
        b"bash",
        b"containerd-shim",
    ];
    let Ok(fd) = wrapper_common::lines::open_for_reading(c"/proc/1/comm") else { return false };
    let mut buf = [0u8; 32];
    let Ok(n) = rustix::io::read(&fd, &mut buf) else { return false };
    let name = buf[..n].strip_suffix(b"\n").unwrap_or(&buf[..n]);
    REAPERS.contains(&name)
}

/// Closes `fd` so that the cost of its last close is paid by a short-lived
/// orphan process rather than before the caller's exec: an inotify
/// instance's last close waits for an SRCU grace period (about 15 ms),
/// during which a waiter that has just taken its GPUs would hold them
/// idle. A child forks a grandchild and exits at once (the caller reaps
/// it, so the test inherits no child, nor its SIGCHLD); the grandchild closes every other
/// descriptor, waits until the caller execs (the end of a pipe the caller
/// holds closes then), closes `fd` last and exits. The orphan is the
/// namespace's first process's to reap, so this is done only where that one
/// is known to reap orphans ([`init_reaps_orphans`]): else each waited test
/// would leave a zombie behind. (A nearer ancestor that made itself a child
/// subreaper, such as `systemd --user` or a build tool's process wrapper,
/// takes the orphan instead; one that does not reap it leaves its zombie
/// until it exits itself, when the zombie goes up to be reaped.) Where it is not done (that, the caller is
/// PID 1 itself, no `close_range` before Linux 5.9), `fd` is closed here.
pub fn close_after_exec(fd: rustix::fd::OwnedFd) {
    if rustix::process::getpid().is_init() || !init_reaps_orphans() {
        return;
    }
    let Ok((read_end, write_end)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) else { return };
    let (keep, wait_on) = (fd.as_raw_fd(), read_end.as_raw_fd());
    let (low, high) = (keep.min(wait_on) as u32, keep.max(wait_on) as u32);
    let pending_before = sigchld_pending();
    // SAFETY: the wrapper is single-threaded, so the children may run any
    // code; they only call close_range/close/read/fork/_exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain syscalls on this process's own descriptors; never returns.
        unsafe {
            // The system call itself: musl has no close_range wrapper.
            let close_range = |first: u32, last: u32| libc::syscall(libc::SYS_close_range, first, last, 0u32) == 0;
            let closed = low == 0 || close_range(0, low - 1);
            let closed = closed && (high == low + 1 || close_range(low + 1, high - 1));
            if !closed || !close_range(high + 1, u32::MAX) {
                libc::_exit(1);
            }
            if libc::fork() == 0 {
                let mut b = 0u8;
                while libc::read(wait_on, (&mut b as *mut u8).cast(), 1) < 0
                    && wrapper_common::last_errno() == Errno::INTR
                {}
                libc::close(keep);
                libc::_exit(0);
            }
            libc::_exit(0);
        }
    }
    drop(read_end);
    if pid > 0 {
        let status = reap(pid, pending_before);
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            // Both close at the exec: `fd` at once (the grandchild holds it),
            // the pipe's end to let the grandchild go.
            core::mem::forget(write_end);
            return;
        }
    }
    drop(write_end);
    drop(fd);
}
