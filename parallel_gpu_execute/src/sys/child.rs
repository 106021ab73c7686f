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
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 || wrapper_common::last_errno() != Errno::INTR {
            break;
        }
    }
    Ok(status)
}

/// Whether a wait status says the program exited 0.
pub fn succeeded(status: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}
