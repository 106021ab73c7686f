//! The standard descriptors, kept out of reach of the wrapper's own files.
//!
//! A process started with stdin, stdout or stderr closed gets the lowest
//! free descriptor from its next `open`. Unguarded, the wrapper's lock file
//! would then become the test's stdin, stdout or stderr: a test (or the
//! harness inside it) that closes or redirects its stdout would drop its
//! GPU slot while it still runs, and another test would be given the same
//! GPU. The classic scripts never hit this, because bash's `exec {fd}>file`
//! gives their lock descriptors 10 and up.
//!
//! So, before the slot search opens anything, each closed standard
//! descriptor is filled with a placeholder: an `O_PATH` descriptor of `/`,
//! close-on-exec. It reads and writes nothing (both fail with `EBADF`, as
//! on a closed descriptor, so a message meant for a closed stderr is still
//! dropped, not written into some file of ours), and `execve` closes it
//! again, so the test starts with the same descriptors closed that the
//! wrapper was given.

use rustix::fd::{AsRawFd, IntoRawFd};
use rustix::fs::{Mode, OFlags};

/// The standard descriptors: stdin, stdout, stderr.
const STANDARD: [i32; 3] = [0, 1, 2];

/// Fills every closed standard descriptor with a close-on-exec placeholder.
/// One `poll` when none is closed; a descriptor that cannot be filled (no
/// descriptor left at all) is left as it is, which is how it was before.
///
/// `poll` is called through libc, not rustix: rustix's takes borrowed
/// descriptors, which must be open, and finding out which are not is the
/// point of the call.
pub fn hold_closed() {
    let mut fds = STANDARD.map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd structures for
    // the call's duration; a zero timeout returns at once.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if ready <= 0 {
        return;
    }
    // In ascending order: the lowest free descriptor, which `open` returns,
    // is then always the closed one at hand.
    for closed in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0).map(|p| p.fd) {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let Ok(placeholder) = rustix::fs::open(c"/", flags, Mode::empty()) else { return };
        if placeholder.as_raw_fd() != closed {
            // Not a gap after all (nothing else opens descriptors here, so
            // this does not happen); dropping it closes it.
            return;
        }
        // Left open on purpose, until the exec closes it.
        let _ = placeholder.into_raw_fd();
    }
}

/// SIGPIPE ignored from here on, where no test is exec'd after (`--drain`,
/// `--undrain`, whose change is made before its line is written): a write
/// to a pipe whose reader has gone then fails with `EPIPE`, and is said,
/// instead of ending the process as if the change had failed.
pub fn ignore_sigpipe() {
    // SAFETY: sigaction with a zeroed action whose handler is SIG_IGN (no
    // handler runs) and a NULL old action.
    unsafe {
        let mut ignore: libc::sigaction = core::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        libc::sigaction(libc::SIGPIPE, &ignore, core::ptr::null_mut());
    }
}
