//! The wait queue: waiters line up on an exclusive `flock(2)` of
//! `<lockdir>/gpulock.queue`; its holder, the head, is the only waiter that
//! looks for slots, so a request for a block of several GPUs at the head is
//! never overtaken by later, smaller ones. One queue file, never more.
//!
//! A head that stops (SIGSTOP, Ctrl-Z, a debugger, `docker pause` of its
//! container) would keep everyone behind it from free slots. So:
//!
//! - **The head shows that it runs** by changing the queue file every
//!   [`HEARTBEAT`] while it waits: a counter written at its start, and its
//!   times. A waiter behind compares what it sees with what it saw before
//!   (never with its own clock, so a clock stepped back, a file server's
//!   clock ahead, `touch -d` or whole-second timestamps cannot fool it);
//!   nothing changed for [`STALE_AFTER`], by the waiter's monotonic clock,
//!   means the head does not run.
//! - **Waiters that take part say so**: each holds a shared `flock` of the
//!   lock directory itself while it waits. A 0.1.0 wrapper, a plain `flock`
//!   on the queue file or any other process blocked there holds none, and
//!   no waiter ever waits for it to act.
//! - **The first waiter that runs stands in** for a head that does not: of
//!   the waiters that take part, the one that started first among those
//!   that `/proc` does not show stopped leaves its `flock` and looks for
//!   slots as the head would, still holding its place. Everyone else stays
//!   asleep in the kernel behind the stopped head, in order. When the
//!   stand-in is served, the next one stands in at once; when the head
//!   runs again (its file changes) or an earlier waiter does, the stand-in
//!   goes back to waiting; when the stopped head exits, the queue is free
//!   and the stand-in takes it.
//! - **The queue is handed on in the order the waiters started**: the
//!   kernel wakes every waiter when the head lets the queue go, and the
//!   first to run takes it; one that finds an earlier waiter that takes
//!   part and runs gives it back to that one.
//!
//! So no lane, no file beyond the one queue, no state that outlives a
//! wait, and the waiting itself needs no clock: the timer that interrupts
//! the `flock` to look is SIGALRM, unblocked for the wait whatever mask the
//! wrapper inherited (`wait`). The alternatives weighed are in
//! docs/design.md ("The wait queue").

use crate::error::Error;
use crate::slots::holders::LockKey;
use crate::slots::lockfile::{self, LockName, keep_young, named, open_lock_file, try_flock};
use crate::slots::proclocks::{read_locks, state_and_ticks};
use crate::slots::telemetry::{Place, queued_behind};
use crate::slots::wait::WaitingSignals;
use crate::sys::clock::Instant;
use core::ffi::CStr;
use core::time::Duration;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::diag;

/// How often a waiting head beats.
pub const HEARTBEAT: Duration = Duration::from_millis(250);
/// How often a waiter behind the head looks at it.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// A head whose queue file has not changed for this long does not run.
pub const STALE_AFTER: Duration = Duration::from_millis(1000);
/// The same, where the head could write no counter (a full file system)
/// and only the file's times change: long enough for whole-second ones.
const STALE_AFTER_TIMES_ONLY: Duration = Duration::from_millis(2500);

/// How long a waiter that gave the queue up to an earlier one waits
/// before it looks again.
const YIELD_FOR: Duration = Duration::from_millis(20);

/// What a waiter sees of the queue file: the counter and the times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    counter: [u8; 8],
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

fn look(fd: &OwnedFd) -> Option<Look> {
    let st = rustix::fs::fstat(fd).ok()?;
    let mut counter = [0u8; 8];
    let _ = rustix::io::pread(fd, &mut counter, 0);
    Some(Look {
        counter,
        size: st.st_size,
        mtime: (st.st_mtime, st.st_mtime_nsec as u64),
        ctime: (st.st_ctime, st.st_ctime_nsec as u64),
    })
}

/// Whether the head of a queue runs, from the changes a waiter sees.
pub struct Pulse {
    last: Option<Look>,
    changed: Instant,
}

impl Pulse {
    fn new(fd: &OwnedFd) -> Pulse {
        Pulse { last: look(fd), changed: Instant::now() }
    }

    /// Looks again; true when nothing has changed for long enough.
    fn stale(&mut self, fd: &OwnedFd) -> bool {
        let now = look(fd);
        if now != self.last {
            self.last = now;
            self.changed = Instant::now();
            return false;
        }
        let limit = if now.is_some_and(|l| l.size >= 8) { STALE_AFTER } else { STALE_AFTER_TIMES_ONLY };
        self.changed.elapsed() >= limit
    }
}

/// A place in the queue, once taken.
pub struct Queue {
    fd: OwnedFd,
    /// Standing in for a head that does not run: looking for slots without
    /// holding the queue file's lock.
    stand_in: Option<Pulse>,
    beats: u64,
    /// The lock directory's `/proc/locks` key, for a stand-in's looks.
    dir: Option<LockKey>,
}

/// What a stand-in does next.
pub enum Standing {
    /// Go on looking for slots (as the head, when it could take the lock).
    On,
    /// The head runs again, or an earlier waiter does: back into the queue.
    Requeue,
}

impl Queue {
    fn head(fd: OwnedFd) -> Queue {
        Queue { fd, stand_in: None, beats: 0, dir: None }
    }

    /// Tells the waiters behind that the head runs: a new counter at the
    /// start of the file, and new times (which also keep the file young
    /// for cleaners of `/tmp`). Where the counter cannot be written (a full
    /// file system), the times alone change.
    pub fn beat(&mut self) {
        if self.stand_in.is_some() {
            return;
        }
        self.beats = self.beats.wrapping_add(1);
        let _ = rustix::io::pwrite(&self.fd, &self.beats.to_le_bytes(), 0);
        keep_young(&self.fd);
    }

    /// For a stand-in, at each look: takes the queue's lock when the
    /// stopped head has let it go, and says whether to go on standing in.
    pub fn standing(&mut self) -> Standing {
        let Some(pulse) = self.stand_in.as_mut() else { return Standing::On };
        if matches!(rustix::fs::flock(&self.fd, FlockOperation::NonBlockingLockExclusive), Ok(())) {
            self.stand_in = None;
            self.beat();
            return Standing::On;
        }
        if pulse.stale(&self.fd) && first_running(self.dir) { Standing::On } else { Standing::Requeue }
    }
}

/// Opens the queue file if it exists (it is never created on the fast
/// path, so a lock directory the wrapper cannot write still serves tests
/// whose slot is free). `None` also for a queue file this user cannot use
/// (see [`usable`]), without a word: the wrapper warns only once it has to
/// wait ([`create`]).
pub fn open_existing(dir_fd: &OwnedFd, dir: &CStr, queue_file: &[u8]) -> Result<Option<OwnedFd>, Error> {
    usable(lockfile::open_existing(dir_fd, dir, &name(queue_file)), dir, queue_file, &mut true)
}

/// For a wrapper that waits without the queue: whether one can be had
/// now (space freed, permissions repaired).
pub fn can_queue(dir_fd: &OwnedFd, dir: &CStr, queue_file: &[u8]) -> bool {
    matches!(create(dir_fd, dir, queue_file, &mut true), Ok(Ok(_)))
}

fn name(queue_file: &[u8]) -> LockName {
    LockName::from_bytes(queue_file).unwrap_or_default()
}

/// Why there is no queue to wait in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoQueue {
    /// The lock directory does not let this user create it: not writable
    /// (EACCES, EPERM, EROFS), full (ENOSPC) or over a quota (EDQUOT).
    Create(Errno),
    /// It is there, but this user cannot use it (warned about already).
    Unusable,
}

/// Creates (or opens) the queue file for a wrapper that has to wait.
/// `Err` with the reason when there is none to be had; the wrapper then
/// waits without the queue. `warned`: whether an unusable queue file was
/// warned about already.
pub fn create(
    dir_fd: &OwnedFd,
    dir: &CStr,
    queue_file: &[u8],
    warned: &mut bool,
) -> Result<Result<OwnedFd, NoQueue>, Error> {
    let opened = match open_lock_file(dir_fd, dir, &name(queue_file)) {
        Err(Error::LockFileCreate {
            errno: errno @ (Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::NOSPC | Errno::DQUOT),
            ..
        }) => return Ok(Err(NoQueue::Create(errno))),
        other => other.map(Some),
    };
    let Some(fd) = usable(opened, dir, queue_file, warned)? else { return Ok(Err(NoQueue::Unusable)) };
    // Writable by all, so that any user's head can beat in it.
    if let Ok(st) = rustix::fs::fstat(&fd) {
        if st.st_mode & 0o002 == 0 && st.st_uid == rustix::process::geteuid().as_raw() {
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o666));
        }
    }
    Ok(Ok(fd))
}

/// A queue file this user cannot use is passed by, as an unusable lock
/// file is: one that it may not open at all (another user's 0600 file), may
/// not write (so a head could not show that it runs), or that is not a
/// regular file (a link another user planted). One warning names it and
/// the repair; the wrapper then waits without the queue.
fn usable(
    opened: Result<Option<OwnedFd>, Error>,
    dir: &CStr,
    queue_file: &[u8],
    warned: &mut bool,
) -> Result<Option<OwnedFd>, Error> {
    let why: alloc::string::String = match opened {
        Ok(Some(fd)) if rustix::fs::fcntl_getfl(&fd).is_ok_and(|f| f.contains(OFlags::RDWR)) => return Ok(Some(fd)),
        Ok(None) => return Ok(None),
        Ok(Some(_)) => "this user may not write it".into(),
        Err(Error::System { errno: errno @ (Errno::ACCESS | Errno::PERM), .. }) => {
            alloc::format!("this user may not open it: {}", diag::Os(errno))
        }
        Err(Error::UnsafeLockPath { what, .. }) => alloc::format!("it is {what}, not a regular file"),
        Err(e) => return Err(e),
    };
    if !*warned {
        *warned = true;
        diag::report(
            crate::TOOL,
            format_args!(
                "warning: cannot use queue file {p} ({why}): waiting without the queue, so waiters are not served first come, first served; to repair, its owner or root runs: rm -f {p} (or chmod a+rw {p} for a regular file)",
                p = diag::Bytes(&named(dir, queue_file)),
            ),
        );
    }
    Ok(None)
}

/// Says that this wrapper waits and takes part: a shared lock of the lock
/// directory, held until the wrapper execs the test or exits (the
/// directory's descriptor closes on exec). Nothing else locks the
/// directory; where it cannot be locked, the wrapper still waits, only
/// unseen by the others' choice of a stand-in.
fn take_part(dir_fd: &OwnedFd) {
    let _ = rustix::fs::flock(dir_fd, FlockOperation::NonBlockingLockShared);
}

/// The lock directory's `/proc/locks` key, found once a wrapper waits
/// (it reads mountinfo).
fn dir_key(dir_fd: &OwnedFd) -> Option<LockKey> {
    crate::slots::holders::fd_key(dir_fd.as_fd())
}

/// Whether this wrapper is the first of the waiters that take part and
/// run: no other process with a shared lock of the lock directory started
/// before it, unless `/proc` shows that one stopped, traced or dead.
/// Waiters this PID namespace cannot see do not count.
/// `dir`: the `/proc/locks` key of the lock directory ([`dir_key`]).
fn first_running(dir: Option<LockKey>) -> bool {
    let Some(key) = dir else { return true };
    let me = i64::from(rustix::process::getpid().as_raw_nonzero().get());
    let (_, Some(mine)) = state_and_ticks(me) else { return true };
    read_locks().iter().filter(|l| l.held_on(key) && l.pid > 0 && l.pid != me).all(|l| match state_and_ticks(l.pid) {
        (Some(state), Some(t)) => (t, l.pid) > (mine, me) || matches!(state, 'T' | 't' | 'Z' | 'X' | 'x'),
        _ => true,
    })
}

/// Takes a place in the queue: at once when nobody holds it, else by
/// sleeping in `flock(2)`, at most until `deadline`, or as the stand-in
/// for a head that does not run. Returns the place and whether it had to
/// wait.
#[allow(clippy::too_many_arguments)]
pub fn take(
    fd: OwnedFd,
    dir_fd: &OwnedFd,
    dir: &CStr,
    queue_file: &[u8],
    signals: &mut Option<WaitingSignals>,
    deadline: Option<Instant>,
    no_slot: &dyn Fn() -> Error,
    announce: &mut dyn FnMut(Place),
) -> Result<(Queue, bool), Error> {
    if try_flock(&fd, || named(dir, queue_file))? {
        return Ok((Queue::head(fd), false));
    }
    announce(Place::Behind(queued_behind(&fd, dir_fd)));
    take_part(dir_fd);
    let dir_lock = dir_key(dir_fd);
    let s = signals.get_or_insert_with(WaitingSignals::install);
    let next_check = || {
        let check = Instant::now() + CHECK_EVERY;
        deadline.map_or(check, |d| d.min(check))
    };
    let mut pulse = Pulse::new(&fd);
    loop {
        s.arm_timer(next_check());
        match rustix::fs::flock(&fd, FlockOperation::LockExclusive) {
            // The kernel wakes every waiter when the queue is let go, and
            // the first to run takes it: one that started later gives it
            // up to an earlier one that takes part and runs.
            Ok(()) if !first_running(dir_lock) => {
                let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(no_slot());
                }
                crate::sys::clock::sleep(YIELD_FOR);
            }
            Ok(()) => {
                s.disarm_timer();
                let mut queue = Queue::head(fd);
                queue.beat();
                return Ok((queue, true));
            }
            Err(Errno::INTR) if deadline.is_some_and(|d| Instant::now() >= d) => return Err(no_slot()),
            Err(Errno::INTR) if pulse.stale(&fd) && first_running(dir_lock) => {
                s.disarm_timer();
                diag::report(
                    crate::TOOL,
                    format_args!(
                        "the waiter at the head of {} does not run: looking for slots in its stead",
                        diag::Bytes(&named(dir, queue_file))
                    ),
                );
                return Ok((Queue { fd, stand_in: Some(pulse), beats: 0, dir: dir_lock }, true));
            }
            Err(Errno::INTR) => {}
            Err(errno) => {
                return Err(Error::System { what: "cannot flock", path: Some(named(dir, queue_file)), errno });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head that beats with its counter is taken for stopped after
    /// `STALE_AFTER` without a change; one whose queue file holds no counter
    /// (a full disk) beats by its times alone, which may change only once a
    /// second, and gets the longer limit.
    #[test]
    fn a_head_without_its_counter_gets_the_longer_limit() {
        let path = std::env::temp_dir().join(format!("pulse-{}", std::process::id()));
        for (size, stale) in [(0usize, false), (8, true)] {
            std::fs::write(&path, vec![0u8; size]).unwrap();
            let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            let fd =
                rustix::fs::open(c_path.as_c_str(), rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty()).unwrap();
            let mut pulse = Pulse::new(&fd);
            std::thread::sleep(STALE_AFTER + Duration::from_millis(100));
            assert_eq!(pulse.stale(&fd), stale, "a queue file of {size} bytes");
        }
        let _ = std::fs::remove_file(&path);
    }
}
