//! GPU slots: `flock(2)` on `<lockdir>/gpulock<id>_<slot>`.
//!
//! Slot search follows the classic script: slot 0 across every contiguous
//! block of the pool, then slot 1, and so on; a block is taken only when
//! every GPU in it is locked at that slot. The same files and the same
//! exclusive flocks as the classic script, so both exclude each other during
//! a migration.
//!
//! Lock files are opened read-only (flock needs no write access): never
//! truncated, never written, usable when another user created them.
//! `O_NOFOLLOW` plus a regular-file check refuses symlinks, FIFOs and
//! devices at a lock path.
//!
//! Waiting, when every block is busy, is first come, first served: waiters
//! queue on an exclusive flock of `<lockdir>/gpulock.queue`, which the first
//! wrapper that has to wait creates. Only its holder, the head of the queue,
//! looks for slots; everyone else sleeps in the kernel. A wrapper that finds
//! the queue absent or empty and a block free takes it at once (so a lock
//! directory it cannot write, with pre-created lock files, serves it as it
//! served the classic script); one that finds the queue busy joins it, so a request for a block of
//! several GPUs at the head is never overtaken by later single-GPU requests:
//! while it waits, they wait behind it. `--wait=0` skips the queue entirely
//! (the classic fail-fast behaviour).

use crate::error::Error;
use crate::prelude::*;
use crate::profile::Profile;
use crate::slots::lockfile::{
    LockName, dir_still_there, join, lock_file_name, named, open_lock_dir, open_lock_file, try_flock,
};
use crate::slots::request::Pool;
use crate::slots::telemetry::{Place, Telemetry, queued_behind};
use crate::slots::wait::{SlotWatch, WaitingSignals, Wake};
use crate::sys::clock::Instant;
use core::ffi::CStr;
use core::time::Duration;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::{diag, separator, with_joined};

/// Most lock descriptors a waiter keeps open; beyond that it closes them
/// after each try and polls instead of watching (its own closes would wake it).
const MAX_CACHED_FDS: usize = 4096;

/// Locks held for the test, one per GPU of its block.
#[derive(Debug)]
pub struct Grant {
    pub fds: Vec<OwnedFd>,
    /// Index into the pool of the block's first GPU.
    pub start: usize,
    pub slot: u32,
    /// How long the wrapper waited for it (`None`: it did not wait).
    pub waited: Option<Duration>,
}

/// The lock files of one attempt, opened lazily and (when few enough) kept
/// open, so that rescans neither reopen nor close them.
struct Slots<'a> {
    dir: &'a CStr,
    dir_fd: &'a OwnedFd,
    pool: &'a Pool,
    slots: u32,
    prefix: &'static [u8],
    cached: Option<Vec<Option<OwnedFd>>>,
}

impl<'a> Slots<'a> {
    fn new(
        dir: &'a CStr,
        dir_fd: &'a OwnedFd,
        pool: &'a Pool,
        slots: u32,
        prefix: &'static [u8],
        cache: bool,
    ) -> Slots<'a> {
        let cached = cache.then(|| (0..pool.ids.len() * slots as usize).map(|_| None).collect());
        Slots { dir, dir_fd, pool, slots, prefix, cached }
    }

    fn name(&self, slot: u32, gpu: usize) -> LockName {
        lock_file_name(self.prefix, self.pool.lock_name(gpu), slot)
    }

    /// Locks GPU `gpu` at `slot`; `None` when someone else holds it.
    fn try_lock(&mut self, slot: u32, gpu: usize) -> Result<Option<OwnedFd>, Error> {
        let index = slot as usize * self.pool.ids.len() + gpu;
        let fd = match self.cached.as_mut().and_then(|c| c[index].take()) {
            Some(fd) => fd,
            None => open_lock_file(self.dir_fd, self.dir, &self.name(slot, gpu))?,
        };
        if try_flock(&fd, || named(self.dir, self.name(slot, gpu).as_bytes()))? {
            return Ok(Some(fd));
        }
        if let Some(c) = self.cached.as_mut() {
            c[index] = Some(fd);
        }
        Ok(None)
    }

    /// Releases a lock taken by `try_lock` that is not wanted after all.
    fn give_back(&mut self, slot: u32, gpu: usize, fd: OwnedFd) {
        let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
        let index = slot as usize * self.pool.ids.len() + gpu;
        if let Some(c) = self.cached.as_mut() {
            c[index] = Some(fd);
        }
    }

    /// One pass over every block at every slot, in the classic order.
    fn scan(&mut self, needed: usize) -> Result<Option<Grant>, Error> {
        let pool_len = self.pool.ids.len();
        for slot in 0..self.slots {
            let mut start = 0;
            while start + needed <= pool_len {
                let mut got = Vec::with_capacity(needed);
                let mut busy_at = None;
                for gpu in start..start + needed {
                    match self.try_lock(slot, gpu)? {
                        Some(fd) => got.push(fd),
                        None => {
                            busy_at = Some(gpu);
                            break;
                        }
                    }
                }
                let Some(busy) = busy_at else {
                    return Ok(Some(Grant { fds: got, start, slot, waited: None }));
                };
                for (k, fd) in got.into_iter().enumerate() {
                    self.give_back(slot, start + k, fd);
                }
                // Every block that contains the busy GPU is busy too.
                start = busy + 1;
            }
        }
        Ok(None)
    }

    /// Is every lock of `grant` still the file at its path? A lock directory
    /// removed and re-created (or a file unlinked) under a holder would
    /// otherwise let two tests "hold" the same slot.
    fn still_linked(&self, grant: &Grant) -> bool {
        grant.fds.iter().enumerate().all(|(k, fd)| {
            let name = self.name(grant.slot, grant.start + k);
            let dir = self.dir.to_bytes();
            let at_path = with_joined(&[dir, separator(dir), name.as_bytes()], None, |path| {
                rustix::fs::statat(rustix::fs::CWD, path, AtFlags::SYMLINK_NOFOLLOW)
            });
            match (rustix::fs::fstat(fd), at_path) {
                (Ok(a), Some(Ok(b))) => a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_nlink > 0,
                _ => false,
            }
        })
    }
}

/// How many lock descriptors this process may keep open while waiting.
fn fd_budget() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(limit.saturating_sub(64)).unwrap_or(usize::MAX).min(MAX_CACHED_FDS)
}

/// Opens `gpulock.queue` if it exists (it is never created on the fast
/// path, so a lock directory the wrapper cannot write still serves tests
/// whose slot is free); refuses anything but a regular file there.
fn open_existing_queue(dir_fd: &OwnedFd, dir: &CStr, queue_file: &[u8]) -> Result<Option<OwnedFd>, Error> {
    let name = LockName::from_bytes(queue_file).unwrap_or_default();
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::openat(dir_fd, name.as_cstr(), flags, Mode::empty()) {
        Err(Errno::NOENT) => Ok(None),
        // Anything else (a symlink, a FIFO, an error) gets the same checks
        // and messages as a lock file.
        _ => open_lock_file(dir_fd, dir, &name).map(Some),
    }
}

/// Creates (or opens) the queue file for a wrapper that has to wait; `None`
/// when the lock directory does not let it create files.
fn create_queue(dir_fd: &OwnedFd, dir: &CStr, queue_file: &[u8]) -> Result<Option<OwnedFd>, Error> {
    match open_lock_file(dir_fd, dir, &LockName::from_bytes(queue_file).unwrap_or_default()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Error::LockFileCreate { errno: Errno::ACCESS | Errno::PERM | Errno::ROFS, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Takes the queue: at once when nobody holds it, else by sleeping in
/// `flock(2)` until the wrapper ahead leaves, at most until `deadline`.
/// Returns whether it had to wait.
fn take_queue(
    queue: &OwnedFd,
    dir: &CStr,
    queue_file: &[u8],
    signals: &mut Option<WaitingSignals>,
    deadline: Option<Instant>,
    no_slot: &dyn Fn() -> Error,
    announce: &mut dyn FnMut(Place),
) -> Result<bool, Error> {
    if try_flock(queue, || named(dir, queue_file))? {
        return Ok(false);
    }
    announce(Place::Behind(queued_behind(queue)));
    let s = signals.get_or_insert_with(WaitingSignals::install);
    if let Some(d) = deadline {
        s.arm_timer(d);
    }
    loop {
        match rustix::fs::flock(queue, FlockOperation::LockExclusive) {
            Ok(()) => break,
            Err(Errno::INTR) if deadline.is_some_and(|d| Instant::now() >= d) => return Err(no_slot()),
            Err(Errno::INTR) => {}
            Err(errno) => {
                return Err(Error::System { what: "cannot flock", path: Some(named(dir, queue_file)), errno });
            }
        }
    }
    s.disarm_timer();
    Ok(true)
}

/// Takes a block of `needed` GPUs from `pool`, waiting up to `wait` (`None`:
/// no limit; zero: fail at once), with the lock and queue names of
/// `profile`. `test` describes the test for messages.
pub fn acquire(
    dir: &CStr,
    pool: &Pool,
    slots: u32,
    needed: usize,
    wait: Option<Duration>,
    profile: Profile,
    test: &dyn Fn() -> String,
) -> Result<Grant, Error> {
    let (prefix, queue_file) = (profile.lock_prefix(), profile.queue_file());
    let started = Instant::now();
    let deadline = wait.map(|w| started + w);
    let no_slot = || Error::NoFreeSlot {
        needed: needed as u64,
        wait_ms: wait.map_or(0, |w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        test: test(),
        profile,
    };
    let cache = pool.ids.len().saturating_mul(slots as usize) <= fd_budget();
    let mut signals: Option<WaitingSignals> = None;
    let mut said_no_queue = false;
    let mut telemetry = Telemetry::default();
    loop {
        let dir_fd = open_lock_dir(dir)?;
        let mut announce = |place| telemetry.waiting(&dir_fd, pool, slots, prefix, needed, &test(), place);
        let mut table = Slots::new(dir, &dir_fd, pool, slots, prefix, cache);
        if wait == Some(Duration::ZERO) {
            return match table.scan(needed) {
                Ok(Some(grant)) if table.still_linked(&grant) => Ok(grant),
                Ok(Some(_)) => continue,
                // The directory went away under the scan: start over.
                Err(_) if !dir_still_there(dir, &dir_fd) => continue,
                Err(e) => Err(e),
                Ok(None) => Err(no_slot()),
            };
        }

        // Waiters queue on gpulock.queue. It exists only once someone had to
        // wait; a wrapper that finds it absent, or finds it free, looks for
        // a block at once.
        let mut queue = open_existing_queue(&dir_fd, dir, queue_file)?;
        // Whether time passed since the directory was opened, in which it
        // may have been removed: after waiting in the queue, and after each
        // wait for a slot.
        let mut waited = match &queue {
            Some(q) => take_queue(q, dir, queue_file, &mut signals, deadline, &no_slot, &mut announce)?,
            None => false,
        };
        if queue.is_none() {
            match table.scan(needed) {
                Ok(Some(mut grant)) if table.still_linked(&grant) => {
                    // Not waited now, but maybe before a lock directory
                    // went away under this wrapper.
                    grant.waited = telemetry.waited();
                    return Ok(grant);
                }
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(_) if !dir_still_there(dir, &dir_fd) => continue,
                Err(e) => return Err(e),
            }
            // Every block is busy: take a place in the queue, creating it.
            queue = create_queue(&dir_fd, dir, queue_file)?;
            match &queue {
                Some(q) => waited |= take_queue(q, dir, queue_file, &mut signals, deadline, &no_slot, &mut announce)?,
                None if !said_no_queue => {
                    said_no_queue = true;
                    diag::report(
                        crate::TOOL,
                        format_args!(
                            "warning: cannot create {} (the lock directory is not writable): waiting without the queue, so waiters are not served first come, first served",
                            diag::Bytes(join(dir, queue_file).as_bytes())
                        ),
                    );
                }
                None => {}
            }
        }

        // At the head of the queue (or queueless): take a block, or wait.
        let mut watch: Option<SlotWatch> = None;
        let outcome = loop {
            if waited && !dir_still_there(dir, &dir_fd) {
                break None;
            }
            match table.scan(needed) {
                Ok(Some(grant)) => break Some(grant),
                Ok(None) => {}
                Err(_) if !dir_still_there(dir, &dir_fd) => break None,
                Err(e) => return Err(e),
            }
            signals.get_or_insert_with(WaitingSignals::install);
            // Watch before the next scan, so that a release between the scan
            // and the wait is not missed.
            let w = match &mut watch {
                Some(w) => w,
                None => {
                    watch = Some(SlotWatch::new(dir, cache));
                    continue;
                }
            };
            waited = true;
            announce(if queue.is_some() { Place::Head } else { Place::NoQueue });
            match w.wait(deadline) {
                Wake::Rescan => {}
                Wake::DirectoryGone => break None,
                Wake::TimedOut => {
                    // One last look: a slot freed at the deadline still counts.
                    match table.scan(needed)? {
                        Some(grant) => break Some(grant),
                        None => return Err(no_slot()),
                    }
                }
            }
        };
        match outcome {
            Some(mut grant) if table.still_linked(&grant) => {
                drop(queue);
                drop(signals);
                grant.waited = telemetry.waited();
                return Ok(grant);
            }
            // The directory changed under us: start over with the new one.
            _ => continue,
        }
    }
}
