//! The wait queue: waiters line up on an exclusive `flock(2)` of
//! `<lockdir>/gpulock.queue`; its holder, the head, is the only waiter that
//! looks for slots, so a request for a block of several GPUs at the head is
//! never overtaken by later, smaller ones.
//!
//! A head that stops (SIGSTOP, Ctrl-Z, a debugger, `docker pause` of its
//! container) would keep everyone behind it from free slots. So the head
//! proves that it runs: while it waits it sets the queue file's times every
//! [`HEARTBEAT`]. A waiter behind it checks every [`CHECK_EVERY`]; when the
//! head's last beat is older than [`STALE_AFTER`] (or, where the queue file
//! is not writable by all and so cannot carry beats, when `/proc` shows the
//! head stopped or traced), it moves on to the next lane,
//! `gpulock.queue.1`, whose head then looks for slots in the stopped head's
//! stead; and so on up to [`LANES`] lanes. Waiters move one at a time, the
//! one that started first first, so running waiters keep their order.
//! A stopped head that is continued goes on where it was: it was first.

use crate::error::Error;
use crate::slots::lockfile::{self, LockName, keep_young, named, open_lock_file, try_flock};
use crate::slots::proclocks::{process_state, read_locks, started};
use crate::slots::telemetry::{Place, queued_behind};
use crate::slots::wait::WaitingSignals;
use crate::sys::clock::{Instant, SystemTime, UNIX_EPOCH};
use core::ffi::CStr;
use core::time::Duration;
use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::diag;

/// How often a waiting head beats.
pub const HEARTBEAT: Duration = Duration::from_millis(250);
/// How often a waiter behind the head checks it.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// A head whose last beat is older than this has stopped.
pub const STALE_AFTER: Duration = Duration::from_millis(1000);
/// Lanes at most: `gpulock.queue`, then `.1` to `.7`.
pub const LANES: u32 = 8;

/// A place in the queue, once taken: the head of lane `lane`.
pub struct Queue {
    fd: OwnedFd,
    pub lane: u32,
}

impl Queue {
    /// Tells the waiters behind that the head runs.
    pub fn beat(&self) {
        keep_young(&self.fd);
    }
}

/// `gpulock.queue` for lane 0, `gpulock.queue.<lane>` after it.
fn lane_name(queue_file: &[u8], lane: u32) -> LockName {
    let mut name = LockName::from_bytes(queue_file).unwrap_or_default();
    if lane > 0 {
        let _ = name.push(b".");
        let _ = name.push_u64(u64::from(lane));
    }
    name
}

/// Opens lane 0 if it exists (it is never created on the fast path, so a
/// lock directory the wrapper cannot write still serves tests whose slot is
/// free); refuses anything but a regular file there.
pub fn open_existing(dir_fd: &OwnedFd, dir: &CStr, queue_file: &[u8]) -> Result<Option<OwnedFd>, Error> {
    lockfile::open_existing(dir_fd, dir, &lane_name(queue_file, 0))
}

/// Why there is no queue to wait in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoQueue(pub Errno);

/// Creates (or opens) a lane's file for a wrapper that has to wait. `Err`
/// with the reason when the lock directory does not let it create files:
/// not writable (EACCES, EPERM, EROFS), full (ENOSPC) or over a quota
/// (EDQUOT); the wrapper then waits without the queue.
pub fn create(dir_fd: &OwnedFd, dir: &CStr, queue_file: &[u8], lane: u32) -> Result<Result<OwnedFd, NoQueue>, Error> {
    match open_lock_file(dir_fd, dir, &lane_name(queue_file, lane)) {
        Ok(fd) => {
            // Writable by all, so that any user's head can beat in it.
            if let Ok(st) = rustix::fs::fstat(&fd) {
                if st.st_mode & 0o002 == 0 && st.st_uid == rustix::process::geteuid().as_raw() {
                    let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o666));
                }
            }
            Ok(Ok(fd))
        }
        Err(Error::LockFileCreate {
            errno: errno @ (Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::NOSPC | Errno::DQUOT),
            ..
        }) => Ok(Err(NoQueue(errno))),
        Err(e) => Err(e),
    }
}

/// Whether the head of the lane `fd` has stopped. A queue file that this
/// wrapper could open for writing and that is writable by all carries the
/// head's beats; otherwise only a head that `/proc` shows stopped or traced
/// counts.
fn head_stopped(fd: &OwnedFd) -> bool {
    let Ok(st) = rustix::fs::fstat(fd) else { return false };
    let writable = rustix::fs::fcntl_getfl(fd).is_ok_and(|f| f.contains(OFlags::RDWR));
    if writable && st.st_mode & 0o002 != 0 {
        let beat = Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec.clamp(0, 999_999_999) as u32);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        return now.saturating_sub(beat) > STALE_AFTER;
    }
    read_locks()
        .iter()
        .filter(|l| l.flock && !l.blocked && l.inode == st.st_ino && l.pid > 0)
        .any(|l| matches!(process_state(l.pid), Some('T' | 't')))
}

/// Whether no other waiter blocked on the lane `fd` came before this
/// wrapper: none that `/proc/locks` lists started earlier (then has the
/// lower PID). Waiters move on from a stopped head one at a time, in that
/// order, so that they keep it in the next lane. (Not the order of
/// `/proc/locks` itself: a waiter that the timer interrupts joins the end
/// of the kernel's list when it blocks again.)
fn first_in_line(fd: &OwnedFd) -> bool {
    let Ok(st) = rustix::fs::fstat(fd) else { return true };
    let me = i64::from(rustix::process::getpid().as_raw_nonzero().get());
    let Some(mine) = started(me) else { return true };
    read_locks()
        .iter()
        .filter(|l| l.flock && l.blocked && l.inode == st.st_ino && l.pid > 0 && l.pid != me)
        .all(|l| started(l.pid).is_none_or(|t| (t, l.pid) > (mine, me)))
}

/// Takes a place at the head of a lane, starting with lane 0 (`first`):
/// at once when nobody holds it, else by sleeping in `flock(2)`, at most
/// until `deadline`, and moving to the next lane when the head ahead has
/// stopped. Returns the place and whether it had to wait.
#[allow(clippy::too_many_arguments)]
pub fn take(
    first: OwnedFd,
    dir_fd: &OwnedFd,
    dir: &CStr,
    queue_file: &[u8],
    signals: &mut Option<WaitingSignals>,
    deadline: Option<Instant>,
    no_slot: &dyn Fn() -> Error,
    announce: &mut dyn FnMut(Place),
) -> Result<(Queue, bool), Error> {
    let (mut fd, mut lane, mut waited, mut more_lanes) = (first, 0, false, true);
    loop {
        let name = lane_name(queue_file, lane);
        if try_flock(&fd, || named(dir, name.as_bytes()))? {
            // A head that did not wait beats before its first wait; one that
            // came from a stopped lane beats now, before anyone behind looks.
            if waited {
                keep_young(&fd);
            }
            if let Some(s) = signals.as_mut() {
                s.disarm_timer();
            }
            return Ok((Queue { fd, lane }, waited));
        }
        if !waited {
            announce(Place::Behind(queued_behind(&fd)));
        }
        waited = true;
        let s = signals.get_or_insert_with(WaitingSignals::install);
        let next_check = || {
            let check = Instant::now() + CHECK_EVERY;
            deadline.map_or(check, |d| d.min(check))
        };
        s.arm_timer(next_check());
        let stopped = loop {
            match rustix::fs::flock(&fd, FlockOperation::LockExclusive) {
                Ok(()) => break false,
                Err(Errno::INTR) if deadline.is_some_and(|d| Instant::now() >= d) => return Err(no_slot()),
                Err(Errno::INTR) if more_lanes && lane + 1 < LANES && head_stopped(&fd) && first_in_line(&fd) => {
                    break true;
                }
                Err(Errno::INTR) => s.arm_timer(next_check()),
                Err(errno) => {
                    return Err(Error::System { what: "cannot flock", path: Some(named(dir, name.as_bytes())), errno });
                }
            }
        };
        if !stopped {
            s.disarm_timer();
            keep_young(&fd);
            return Ok((Queue { fd, lane }, waited));
        }
        match create(dir_fd, dir, queue_file, lane + 1)? {
            Ok(next) => {
                diag::report(
                    crate::TOOL,
                    format_args!(
                        "the waiter at the head of {} has stopped: queueing in {}",
                        diag::Bytes(named(dir, name.as_bytes()).as_ref()),
                        diag::Bytes(named(dir, lane_name(queue_file, lane + 1).as_bytes()).as_ref())
                    ),
                );
                fd = next;
                lane += 1;
            }
            // No next lane to be had: wait in this one.
            Err(_) => more_lanes = false,
        }
    }
}
