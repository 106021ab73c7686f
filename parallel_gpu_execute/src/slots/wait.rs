//! Waiting for a GPU slot without spinning, with a deadline, and
//! interruptible.
//!
//! - A released slot is noticed through inotify: the kernel releases a flock
//!   exactly when the last descriptor of the lock file is closed, and that
//!   close raises `IN_CLOSE_*` on the lock directory (also when the holder was
//!   SIGKILLed). The waiter looks again at its next beat in any case, which
//!   covers releases inotify cannot see (`flock -u` by a classic script that
//!   then keeps running).
//! - A waiter that may take nothing sleeps in a blocking shared `flock` on
//!   the record of the waiter ahead of it ([`on_record`]), which that one
//!   holds exclusively while it waits: the kernel wakes it when that one
//!   leaves or dies. The sleep is bounded by an interval timer whose SIGALRM
//!   interrupts it (repeating, so a signal that lands just before the call
//!   blocks is not lost).
//! - SIGTERM, SIGINT and SIGHUP while waiting end the wrapper at once with
//!   143/130/129, its record removed, releasing everything it holds
//!   (descriptors close on exit).
//!
//! All of it is undone before the test is exec'd: the signal mask and
//! dispositions as they were, timer cancelled (interval timers survive
//! `execve`).

use crate::prelude::*;
use crate::slots::drain::DRAIN_DIR;
use crate::slots::lockfile::LockName;
use crate::slots::record::QUEUE_DIR;
use crate::sys::clock::Instant;
use alloc::ffi::CString;
use core::ffi::{CStr, c_int};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use core::time::Duration;
use rustix::event::{PollFd, PollFlags};
use rustix::fd::OwnedFd;
use rustix::fd::{AsRawFd, BorrowedFd};
use rustix::fs::inotify::{self, ReadFlags};
use rustix::io::Errno;

/// How often a waiter rescans when inotify cannot be used (at most 10
/// wake-ups a second).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The waiter's record, removed when SIGTERM, SIGINT or SIGHUP ends the wait: the
/// descriptors of the lock directory and of `gpuqueue/` (-1: none) and the
/// record's name.
static LOCK_DIR: AtomicI32 = AtomicI32::new(-1);
static RECORD_DIR: AtomicI32 = AtomicI32::new(-1);
static RECORD_NAME: [AtomicU8; 48] = [const { AtomicU8::new(0) }; 48];

/// Has the signal handlers remove the record `name` of the directory `dir`
/// (and `gpuqueue/` from `lock_dir`, when it is then empty) when SIGTERM,
/// SIGINT or SIGHUP ends the wait (closing its descriptor frees its lock anyway; this
/// leaves nothing behind).
pub fn remove_on_exit(lock_dir: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &[u8]) {
    RECORD_DIR.store(-1, Ordering::SeqCst);
    for (i, slot) in RECORD_NAME.iter().enumerate() {
        slot.store(if i + 1 < RECORD_NAME.len() { name.get(i).copied().unwrap_or(0) } else { 0 }, Ordering::SeqCst);
    }
    LOCK_DIR.store(lock_dir.as_raw_fd(), Ordering::SeqCst);
    RECORD_DIR.store(dir.as_raw_fd(), Ordering::SeqCst);
}

/// The record in `dir` is gone: nothing to remove on exit (unless what is
/// registered is a record made since, through another descriptor).
pub fn keep_on_exit(dir: BorrowedFd<'_>) {
    let _ = RECORD_DIR.compare_exchange(dir.as_raw_fd(), -1, Ordering::SeqCst, Ordering::SeqCst);
}

/// SIGTERM, SIGINT, SIGHUP and SIGALRM held off (blocked) while a record is made,
/// put in place and registered for removal: one that comes meanwhile ends
/// the wrapper once the record is registered, so that no moment leaves it
/// (or a temporary one) behind. Dropping it lets them through again.
pub struct Deferred(libc::sigset_t);

impl Deferred {
    pub fn hold() -> Deferred {
        // SIGALRM too: another process's would end the wrapper (`on_alarm`).
        Deferred(change_mask(libc::SIG_BLOCK, &[ENDING[0], ENDING[1], ENDING[2], libc::SIGALRM]))
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        set_mask(&self.0);
    }
}

/// Blocks or unblocks (`how`) `signals`; returns the mask before.
fn change_mask(how: c_int, signals: &[c_int]) -> libc::sigset_t {
    // SAFETY: sigprocmask with a valid set built here; the old mask is
    // written into a zeroed one and returned.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
        }
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigprocmask(how, &set, &mut old);
        old
    }
}

/// Whether SIGALRM is pending (for this thread or the process).
fn alarm_pending() -> bool {
    // SAFETY: sigpending writes into a zeroed set; sigismember reads it.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, libc::SIGALRM) == 1
    }
}

/// Restores a mask that [`change_mask`] returned.
fn set_mask(mask: &libc::sigset_t) {
    // SAFETY: restoring a mask that sigprocmask itself reported.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, mask, core::ptr::null_mut()) };
}

/// The signals whose default action would end a waiter with its record
/// left behind: they remove it first.
const ENDING: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

extern "C" fn exit_on_signal(sig: c_int) {
    leave(sig)
}

/// Removes the record (and `gpuqueue/`, when it is then empty) and exits
/// with 128 + `sig`. Async-signal-safe.
fn leave(sig: c_int) -> ! {
    let dir = RECORD_DIR.load(Ordering::SeqCst);
    if dir >= 0 {
        let mut name = [0u8; 48];
        for (b, slot) in name.iter_mut().zip(&RECORD_NAME) {
            *b = slot.load(Ordering::SeqCst);
        }
        // SAFETY: unlinkat is async-signal-safe; `name` is NUL-terminated
        // (its last byte is never set), as is the literal.
        unsafe {
            libc::unlinkat(dir, name.as_ptr().cast(), 0);
            let lock_dir = LOCK_DIR.load(Ordering::SeqCst);
            if lock_dir >= 0 {
                libc::unlinkat(lock_dir, QUEUE_DIR.as_ptr(), libc::AT_REMOVEDIR);
            }
        }
    }
    // SAFETY: _exit is async-signal-safe; it closes every descriptor, which
    // releases every lock this process holds.
    unsafe { libc::_exit(128 + sig) }
}

/// What a SIGALRM that another process sends (`kill`, `timeout -s ALRM`)
/// does to a waiter, as it would have done without the wait: end it
/// ([`ALARM_ENDS`]), be ignored ([`ALARM_IGNORED`]), or stay pending for
/// the test, its inherited mask blocking it ([`ALARM_PENDING`]).
static OTHERS_ALARM: AtomicU8 = AtomicU8::new(ALARM_ENDS);
const ALARM_ENDS: u8 = 0;
const ALARM_IGNORED: u8 = 1;
const ALARM_PENDING: u8 = 2;
/// Set where such a SIGALRM came while its inherited mask blocks it: it is
/// raised again once that mask is back, and so the test inherits it pending.
static ALARM_CAME: AtomicU8 = AtomicU8::new(0);

/// SIGALRM while waiting: the wait's own timer (the kernel sends it,
/// `SI_KERNEL`) only interrupts the sleep; one from another process does
/// what it would have done to the wrapper without the wait.
extern "C" fn on_alarm(sig: c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let code = unsafe { info.as_ref() }.map_or(libc::SI_KERNEL, |i| i.si_code);
    if code == libc::SI_KERNEL {
        return;
    }
    match OTHERS_ALARM.load(Ordering::SeqCst) {
        ALARM_ENDS => leave(sig),
        ALARM_PENDING => ALARM_CAME.store(1, Ordering::SeqCst),
        _ => {}
    }
}

/// Signal handling and the timer for the waiting phase; dropping it restores
/// what was there before.
pub struct WaitingSignals {
    /// SIGTERM, SIGINT, SIGHUP, then SIGALRM.
    saved: [(c_int, libc::sigaction); 4],
    /// The signal mask inherited, restored before the test runs.
    mask: libc::sigset_t,
    /// The interval timer inherited (`alarm`, `setitimer`; it survives
    /// `execve`) and when it was due to fire: put back, with what is left
    /// of it, when the wait ends.
    inherited: Option<(libc::itimerval, Instant)>,
}

/// A signal handler: `sa_sigaction`'s address, and its flags.
type Handler = (usize, c_int);

/// Sets `sig`'s handler (`None`: only asks) and returns its action before.
fn sigaction(sig: c_int, handler: Option<Handler>) -> libc::sigaction {
    // SAFETY: sigaction with valid, zero-initialised structs (or a NULL new
    // action, to ask); the handlers only call async-signal-safe functions.
    // No SA_RESTART, so a blocking flock or poll returns EINTR.
    unsafe {
        let mut new: libc::sigaction = core::mem::zeroed();
        let new_ptr = match handler {
            Some((handler, flags)) => {
                new.sa_sigaction = handler;
                new.sa_flags = flags;
                libc::sigemptyset(&mut new.sa_mask);
                &new as *const libc::sigaction
            }
            None => core::ptr::null(),
        };
        let mut old: libc::sigaction = core::mem::zeroed();
        libc::sigaction(sig, new_ptr, &mut old);
        old
    }
}

/// Sets the real-time interval timer to fire in `first`, then every
/// `interval` (both zero: disarmed).
fn set_timer(first: Duration, interval: Duration) {
    let timeval = |d: Duration| libc::timeval { tv_sec: d.as_secs() as _, tv_usec: d.subsec_micros() as _ };
    let value = libc::itimerval { it_interval: timeval(interval), it_value: timeval(first) };
    // SAFETY: setitimer with a valid itimerval and a NULL old value.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &value, core::ptr::null_mut()) };
}

impl WaitingSignals {
    /// Exits with 128+signal on SIGTERM, SIGINT and SIGHUP, unless the
    /// caller chose to ignore or handle them (then they are left alone).
    pub fn install() -> WaitingSignals {
        let ending = ENDING.map(|sig| {
            let old = sigaction(sig, None);
            if old.sa_sigaction == libc::SIG_DFL {
                sigaction(sig, Some((exit_on_signal as *const () as usize, 0)));
            }
            (sig, old)
        });
        let inherited = sigaction(libc::SIGALRM, None);
        // The inherited timer first: one that runs out after this look is
        // found pending below (where blocked), not lost between the two.
        // SAFETY: getitimer writes one itimerval into `timer`.
        let timer = unsafe {
            let mut timer: libc::itimerval = core::mem::zeroed();
            libc::getitimer(libc::ITIMER_REAL, &mut timer);
            timer
        };
        let value = timer.it_value;
        let timer_left = (value.tv_sec > 0 || value.tv_usec > 0).then(|| {
            let left = Duration::new(value.tv_sec as u64, (value.tv_usec as u32).saturating_mul(1000));
            (timer, Instant::now() + left)
        });
        // The mask as inherited (an empty set blocked changes nothing).
        let current = change_mask(libc::SIG_BLOCK, &[]);
        // SAFETY: sigismember reads the mask sigprocmask reported.
        let blocked = unsafe { libc::sigismember(&current, libc::SIGALRM) } == 1;
        let others = if blocked {
            ALARM_PENDING
        } else if inherited.sa_sigaction == libc::SIG_IGN {
            ALARM_IGNORED
        } else {
            ALARM_ENDS
        };
        OTHERS_ALARM.store(others, Ordering::SeqCst);
        // One already pending under the inherited mask (sent, or a timer
        // that ran out, before the exec) is the test's: taken by the wait's
        // handler once unblocked, and raised again for the test.
        if blocked && alarm_pending() {
            ALARM_CAME.store(1, Ordering::SeqCst);
        }
        let alarm = (libc::SIGALRM, sigaction(libc::SIGALRM, Some((on_alarm as *const () as usize, libc::SA_SIGINFO))));
        let saved = [ending[0], ending[1], ending[2], alarm];
        // A wrapper started with SIGALRM blocked (a parent's mask is
        // inherited across execve) would never be interrupted by its timer
        // and so never look up from a `flock`: unblocked while it waits,
        // once its handler is in place.
        let mask = change_mask(libc::SIG_UNBLOCK, &[libc::SIGALRM]);
        WaitingSignals { saved, mask, inherited: timer_left }
    }

    /// When the inherited timer ends this process (SIGALRM's action is the
    /// default, to terminate, and it is not blocked): the wait, which uses
    /// that timer itself, must end it then, as it would have ended.
    pub fn alarm_due(&self) -> Option<Instant> {
        let (_, at) = self.inherited?;
        // SAFETY: sigismember reads the mask sigprocmask reported.
        let blocked = unsafe { libc::sigismember(&self.mask, libc::SIGALRM) } == 1;
        (self.saved[3].1.sa_sigaction == libc::SIG_DFL && !blocked).then_some(at)
    }
}

impl Drop for WaitingSignals {
    fn drop(&mut self) {
        // The inherited mask first: a last SIGALRM still pending then stays
        // pending (blocked, as the test inherits it) instead of meeting
        // the default action. (The wait's own timer is disarmed: each
        // sleep that arms it disarms it.)
        set_mask(&self.mask);
        for (sig, old) in &self.saved {
            // SAFETY: restoring a disposition that sigaction itself reported.
            unsafe { libc::sigaction(*sig, old, core::ptr::null_mut()) };
        }
        // Another process's SIGALRM, which the inherited mask blocks: pending
        // again, for the test, as it would have been.
        if ALARM_CAME.swap(0, Ordering::SeqCst) == 1 {
            // SAFETY: raise only queues SIGALRM, which is blocked now.
            unsafe { libc::raise(libc::SIGALRM) };
        }
        if let Some((timer, at)) = self.inherited {
            // What is left of it; one due already fires at once.
            let left = at.saturating_duration_since(Instant::now()).max(Duration::from_micros(1));
            let interval = Duration::new(timer.it_interval.tv_sec as u64, timer.it_interval.tv_usec as u32 * 1000);
            set_timer(left, interval);
        }
    }
}

/// Ends this process as its inherited timer's SIGALRM does, once the
/// waiting signals are dropped (the default action restored, unblocked).
pub fn alarm_now() -> ! {
    // SAFETY: raise delivers SIGALRM to this thread; its default action
    // terminates the process, so it does not return.
    unsafe { libc::raise(libc::SIGALRM) };
    // SAFETY: _exit is always safe to call; reached only if it did not.
    unsafe { libc::_exit(128 + libc::SIGALRM) }
}

/// Most lock files watched one by one; a pool with more is watched through
/// its directory.
pub const MAX_FILE_WATCHES: usize = 1024;

/// Wakes that events start, beyond the beats: [`LOOK_BURST`] at once,
/// then one each [`LOOK_EVERY`]. Any user who may read a lock file can
/// open and close it as often as it likes, and each close raises the
/// event a release does; any program may make and remove its files in the
/// lock directory: without a bound, each would be a wake (and a look).
const LOOK_EVERY: Duration = Duration::from_millis(125);
const LOOK_BURST: u32 = 32;

/// Watches the lock files of a pool for releases.
pub enum SlotWatch {
    Inotify(Watch),
    /// inotify unavailable (or not safe to use): rescan periodically.
    Polling,
}

/// The lock files are watched one by one where they can be, so that
/// nothing else closed in the directory (another program's files in
/// `/var/lock` or `/tmp`, each waiter's look at `gpuqueue/`) wakes the
/// waiter; the directory is watched for removals and for its own, and for
/// lock files made (or put in place) after the watch began.
pub struct Watch {
    fd: OwnedFd,
    /// The lock directory's watch.
    dir: i32,
    prefix: &'static [u8],
    lock_dir: CString,
    /// The lock files watched one by one; empty: the directory's closes.
    names: Vec<LockName>,
    /// When the wakes that events started would have come, at one each
    /// [`LOOK_EVERY`] (a rate bound by its virtual schedule): events wake
    /// it at once while this is at most [`LOOK_BURST`] wakes ahead.
    looks: Instant,
}

impl SlotWatch {
    /// Done with: the inotify instance is closed without its last close's
    /// wait before the exec that follows (`sys::child::close_after_exec`).
    pub fn done(self) {
        if let SlotWatch::Inotify(w) = self {
            crate::sys::child::close_after_exec(w.fd);
        }
    }

    /// Watches the lock files `names` of `lock_dir` (none: more than
    /// [`MAX_FILE_WATCHES`], the directory's closes instead).
    #[inline(never)]
    pub fn new(lock_dir: &CStr, prefix: &'static [u8], names: Vec<LockName>) -> SlotWatch {
        let Ok(fd) = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK) else {
            return SlotWatch::Polling;
        };
        let looks = Instant::now();
        let mut w = Watch { fd, dir: -1, prefix, lock_dir: lock_dir.into(), names, looks };
        // A lock file not made yet is watched once it is (`CREATE`).
        if !w.names.iter().all(|name| w.add(name.as_bytes())) {
            w.names = Vec::new();
        }
        // DELETE and MOVED_FROM: lock files removed (as `rm -rf` of the
        // directory does first) wake the waiter, which then checks that the
        // directory itself is still there.
        let mut mask = inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::DELETE_SELF
            | inotify::WatchFlags::MOVE_SELF
            | inotify::WatchFlags::ONLYDIR;
        mask |= if w.names.is_empty() {
            inotify::WatchFlags::CLOSE_WRITE | inotify::WatchFlags::CLOSE_NOWRITE
        } else {
            inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO
        };
        match inotify::add_watch(&w.fd, lock_dir, mask) {
            Ok(dir) => SlotWatch::Inotify(Watch { dir, ..w }),
            Err(_) => SlotWatch::Polling,
        }
    }

    /// Reads the events pending now and lets them go, but for the lock files
    /// made meanwhile, which are watched from now on: what this waiter's
    /// own closes raised (a block it left to an earlier waiter), which
    /// would wake it at once. A release among them is seen by its next look
    /// or, where that is a sleep, at its next beat.
    pub fn discard(&mut self) {
        if let SlotWatch::Inotify(w) = self {
            w.drain();
        }
    }

    /// Blocks until a slot may have been released, the directory went away,
    /// or `until` passed (the next beat, or the deadline). Whatever woke
    /// it, the caller rescans, and first looks whether the directory is
    /// still there (a removal or rename raises DELETE_SELF or MOVE_SELF
    /// here).
    #[inline(never)]
    pub fn wait(&mut self, until: Instant) {
        let w = match self {
            SlotWatch::Inotify(w) => w,
            SlotWatch::Polling => {
                return crate::sys::clock::sleep(until.saturating_duration_since(Instant::now()).min(POLL_INTERVAL));
            }
        };
        loop {
            // Past its bound: sleep until the next wake is due, events kept
            // for it by the kernel meanwhile (a release in them is seen then).
            let early = w.looks.saturating_duration_since(Instant::now()).saturating_sub(LOOK_EVERY * (LOOK_BURST - 1));
            if !early.is_zero() {
                crate::sys::clock::sleep(early.min(until.saturating_duration_since(Instant::now())));
                if Instant::now() >= until {
                    return;
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            let ts = rustix::event::Timespec { tv_sec: left.as_secs() as _, tv_nsec: left.subsec_nanos() as _ };
            let mut fds = [PollFd::new(&w.fd, PollFlags::IN)];
            if !matches!(rustix::event::poll(&mut fds, Some(&ts)), Ok(n) if n > 0) {
                return;
            }
            // Every wake counts against the bound, one that concerns nobody
            // too (another program's files made and removed in the
            // directory, a directory closed).
            let release = w.drain();
            w.looks = core::cmp::max(w.looks, Instant::now()) + LOOK_EVERY;
            if release {
                return;
            }
        }
    }
}

impl Watch {
    /// Watches the lock file `name` for closes (one missing is not yet).
    fn add(&self, name: &[u8]) -> bool {
        let d = self.lock_dir.to_bytes();
        let added = wrapper_common::with_joined(&[d, wrapper_common::separator(d), name], None, |p| {
            // Not through a link put at its name: lock files are none.
            let closes = inotify::WatchFlags::CLOSE_WRITE | inotify::WatchFlags::CLOSE_NOWRITE;
            inotify::add_watch(&self.fd, p, closes | inotify::WatchFlags::DONT_FOLLOW)
        });
        matches!(added, Some(Ok(_) | Err(Errno::NOENT)))
    }

    /// Out of line (as are the other waits): its event buffer would
    /// otherwise sit in the frame of the slot search, a page of stack the
    /// free-slot path would touch.
    ///
    /// Reads every pending event, so that the next poll blocks until a new
    /// one; whether any may mean a released slot or a directory gone: a
    /// lock file closed or removed (one watched by itself, or in the
    /// directory a name with the prefix), one of its lock files made or put
    /// in place (then watched), `gpuqueue/` or `gpudrain/` removed, a drain
    /// or an undrain's wake file, the directory itself removed or moved,
    /// or events lost. Other files'
    /// events, and subdirectories closed (each look of a waiter closes
    /// `gpuqueue/`), are not.
    #[inline(never)]
    fn drain(&mut self) -> bool {
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut release = false;
        let mut made: Vec<LockName> = Vec::new();
        loop {
            match reader.next() {
                Ok(event) => {
                    // Each event has one event bit (a close, a deletion, the
                    // directory's own removal, ...) and maybe `ISDIR`.
                    let e = event.events();
                    let closed = e.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::CLOSE_NOWRITE);
                    let name = event.file_name().map_or(&b""[..], |n| n.to_bytes());
                    let ours = || self.names.iter().find(|n| n.as_bytes() == name);
                    release |= match () {
                        // A lock file's own watch, or events lost.
                        _ if event.wd() != self.dir => true,
                        _ if name.is_empty() => true,
                        // A drain or an undrain: look again.
                        _ if crate::slots::drain::is_tmp_name(name) => true,
                        // One of its lock files made, or put in place
                        // (no other file, nor a directory): looked at
                        // again, and watched from now on.
                        _ if e.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) => {
                            made.extend(ours().cloned());
                            ours().is_some()
                        }
                        _ if e.contains(ReadFlags::ISDIR) => {
                            !closed && [QUEUE_DIR, DRAIN_DIR].iter().any(|d| d.to_bytes() == name)
                        }
                        _ => name.starts_with(self.prefix),
                    };
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break,
                // Unreadable events: rescan, to be safe.
                Err(_) => return true,
            }
        }
        for name in &made {
            self.add(name.as_bytes());
        }
        release
    }
}

/// Sleeps in a blocking shared `flock` on `record`, the record of an
/// earlier waiter, which holds it exclusively while it waits, until that
/// waiter lets it go (it left or died: `true`) or `until` (or another
/// signal). The shared lock, when taken, is let go at once.
#[inline(never)]
pub fn on_record(_signals: &WaitingSignals, record: &OwnedFd, until: Instant) -> bool {
    // At `until`, then every 20 ms (a SIGALRM that lands just before the
    // `flock` blocks is not lost).
    set_timer(until.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)), Duration::from_millis(20));
    let released = rustix::fs::flock(record, rustix::fs::FlockOperation::LockShared).is_ok();
    if released {
        let _ = rustix::fs::flock(record, rustix::fs::FlockOperation::Unlock);
    }
    set_timer(Duration::ZERO, Duration::ZERO);
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiters_own_close_wakes_it_unless_let_go() {
        let base = std::env::temp_dir().join(format!("pge-own-close-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let file = base.join("gpulock0_0");
        std::fs::write(&file, "").unwrap();
        let dir = std::ffi::CString::new(base.to_str().unwrap()).unwrap();
        let names = vec![crate::slots::lockfile::lock_file_name(b"gpulock", b"0", 0)];
        let woken = |discard: bool| {
            let mut watch = SlotWatch::new(&dir, b"gpulock", names.clone());
            assert!(matches!(watch, SlotWatch::Inotify(_)));
            drop(std::fs::File::open(&file).unwrap());
            if discard {
                watch.discard();
            }
            let at = Instant::now();
            watch.wait(at + Duration::from_millis(1500));
            at.elapsed() < Duration::from_millis(1000)
        };
        assert!(woken(false), "the close did not wake the watch");
        assert!(!woken(true), "a close let go still woke it");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
