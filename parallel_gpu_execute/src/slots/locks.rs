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
//! Waiting, when every block is busy, is first come, first served across
//! every profile and pool that shares the lock directory (`take`, the
//! records in `queue`): a wrapper takes only a block whose lock files no
//! earlier waiter that runs wants, so a request for a block of several
//! GPUs is never overtaken by later single-GPU requests. A lock directory
//! it cannot write, with pre-created lock files, serves a free slot as it
//! served the classic script; `--wait=0` fails at once instead of waiting.
//!
//! A block that holds a drained GPU (`drain`) is passed over, as is one
//! that holds a GPU the caller avoids (`PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid`);
//! where no block is left, the wrapper fails at once instead of waiting,
//! and a waiter fails when that comes to pass while it waits. Tests that
//! hold a drained GPU keep it until they end.

use crate::error::Error;
use crate::prelude::*;
use crate::profile::Profile;
use crate::slots::drain;
use crate::slots::lockfile::{FileId, LockName, dir_still_there, lock_file_name, named, open_lock_file, try_flock};
use crate::slots::queue::Ahead;
use crate::slots::request::Pool;
use core::ffi::CStr;
use core::time::Duration;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FlockOperation};
use rustix::io::Errno;
use wrapper_common::{separator, with_joined};

mod judge;

/// Most lock descriptors a waiter keeps open; beyond that it closes them
/// after each try and polls instead of watching (its own closes would wake it).
const MAX_CACHED_FDS: usize = 4096;

/// Locks held for the test, one per GPU of its block.
#[derive(Debug)]
pub struct Grant {
    pub fds: Vec<OwnedFd>,
    /// Each one's file, as it was opened.
    pub ids: Vec<FileId>,
    /// Index into the pool of the block's first GPU.
    pub start: usize,
    pub slot: u32,
    /// How long the wrapper waited for it (`None`: it did not wait).
    pub waited: Option<Duration>,
    /// A held lock file that a user other than root and this one owns
    /// (its GPU, and that user), who may rename it away (found by
    /// [`Slots::still_linked`]).
    pub exposed: Option<(usize, u32)>,
}

/// The lock files of one attempt, opened lazily and (when few enough) kept
/// open, so that rescans neither reopen nor close them.
pub struct Slots<'a> {
    dir: &'a CStr,
    dir_fd: &'a OwnedFd,
    pool: &'a Pool,
    slots: u32,
    prefix: &'static [u8],
    /// The descriptors kept open, by slot x GPU index: decided at the first
    /// busy lock file (a free slot taken at once costs no limit query and
    /// no allocation); `None` while undecided.
    cached: Option<Cache>,
    /// The unusable files warned about (slot x GPU indices): one warning
    /// each, however often the wrapper rescans.
    pub warned: Vec<usize>,
    /// Those of `warned` found to be the same file as another of their
    /// block (a hard link between two lock files).
    linked: Vec<usize>,
    /// The warnings of `warned` not said yet ([`Slots::say_unusable`]):
    /// said once the wrapper takes a block or waits, and left out where
    /// it fails with that file's own error, which would say it twice. With
    /// each, for a lock file it could not make, why (one line says them
    /// all: the cause is the directory's).
    unsaid: Vec<(usize, Option<Errno>, String)>,
    /// Why lock files could not be made, once said (or to be).
    create_said: Option<Errno>,
    /// The lock directory's modification time at the last pass of
    /// [`Slots::open_all`], and its passes (see there).
    dir_stamp: (Option<(i64, u64)>, u32),
    /// The pool's GPUs out of service (drained or avoided), by pool index;
    /// empty when none is.
    pub out: Vec<bool>,
}

/// Whether busy lock files are kept open.
enum Cache {
    Kept(Vec<Option<(OwnedFd, FileId)>>),
    /// Too many for the descriptor limit: closed after each try.
    Closed,
}

/// What one GPU's lock at one slot gave.
enum Try {
    Taken(OwnedFd, FileId),
    Busy,
    /// This user may not open the file (EACCES, EPERM), it is no regular
    /// file, or it is the same file as another of the block: skipped.
    Unusable,
}

impl<'a> Slots<'a> {
    pub fn new(dir: &'a CStr, dir_fd: &'a OwnedFd, pool: &'a Pool, slots: u32, prefix: &'static [u8]) -> Slots<'a> {
        Slots {
            dir,
            dir_fd,
            pool,
            slots,
            prefix,
            cached: None,
            warned: Vec::new(),
            linked: Vec::new(),
            unsaid: Vec::new(),
            create_said: None,
            dir_stamp: (None, 0),
            out: Vec::new(),
        }
    }

    /// The kept descriptors, deciding (once) whether to keep them: when
    /// every lock file of the pool fits the descriptor budget.
    fn cache(&mut self) -> Option<&mut Vec<Option<(OwnedFd, FileId)>>> {
        if self.cached.is_none() {
            let files = self.pool.ids.len().saturating_mul(self.slots as usize);
            self.cached = Some(if files <= fd_budget() {
                Cache::Kept((0..files).map(|_| None).collect())
            } else {
                Cache::Closed
            });
        }
        match self.cached.as_mut() {
            Some(Cache::Kept(v)) => Some(v),
            _ => None,
        }
    }

    pub fn pool(&self) -> &'a Pool {
        self.pool
    }

    pub fn dir(&self) -> &'a CStr {
        self.dir
    }

    pub fn dir_fd(&self) -> &'a OwnedFd {
        self.dir_fd
    }

    /// Whether it keeps its lock files open (so a waiter may watch the
    /// directory: it closes none of them itself).
    pub fn cached(&mut self) -> bool {
        self.cache().is_some()
    }

    fn name(&self, slot: u32, gpu: usize) -> LockName {
        lock_file_name(self.prefix, self.pool.lock_name(gpu), slot)
    }

    /// The names of every lock file of the pool at every slot.
    pub fn lock_names(&self) -> Vec<LockName> {
        (0..self.slots).flat_map(|s| (0..self.pool.ids.len()).map(move |g| self.name(s, g))).collect()
    }

    /// Locks GPU `gpu` at `slot`; `taken`: the files taken so far for the
    /// block it is part of.
    fn try_lock(&mut self, slot: u32, gpu: usize, taken: &[FileId]) -> Result<Try, Error> {
        let index = slot as usize * self.pool.ids.len() + gpu;
        let kept = match self.cached.as_mut() {
            Some(Cache::Kept(v)) => v[index].take(),
            _ => None,
        };
        let (fd, id) = match kept {
            Some(held) => held,
            None => match open_lock_file(self.dir_fd, self.dir, &self.name(slot, gpu)) {
                Ok(held) => {
                    self.opened(index);
                    held
                }
                // One this user may not open, or anything but a regular
                // file (a FIFO, a symbolic link another user put there):
                // the slot is skipped, as the classic script's would be
                // where it could not lock it.
                // One missing that this user cannot make (a directory it
                // may not write, a full or read-only file system) too.
                Err(
                    e @ (Error::System { errno: Errno::ACCESS | Errno::PERM, .. }
                    | Error::UnsafeLockPath { .. }
                    | Error::LockFileCreate {
                        errno: Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::NOSPC | Errno::DQUOT,
                        ..
                    }),
                ) => {
                    self.warn_unusable(index, &e);
                    return Ok(Try::Unusable);
                }
                // A lease on it (`F_SETLEASE`, its owner's): busy until
                // it is let go, as a `flock` on it would be.
                Err(Error::System { errno: Errno::WOULDBLOCK, .. }) => return Ok(Try::Busy),
                Err(e) => return Err(e),
            },
        };
        // The same file as one taken for this block (a hard link between
        // two lock files): its lock is this test's own, and would never be
        // free to it. The block is passed over, said once.
        if taken.contains(&id) {
            let e = Error::UnsafeLockPath { path: named(self.dir, self.name(slot, gpu).as_bytes()), what: SAME_FILE };
            self.linked.push(index);
            self.warn_unusable(index, &e);
            return Ok(Try::Unusable);
        }
        if try_flock(&fd, || named(self.dir, self.name(slot, gpu).as_bytes()))? {
            return Ok(Try::Taken(fd, id));
        }
        if let Some(c) = self.cache() {
            c[index] = Some((fd, id));
        }
        Ok(Try::Busy)
    }

    /// Lock file `index` opens (or may be made): one warned about is
    /// repaired since, this user's again.
    fn opened(&mut self, index: usize) {
        if !self.warned.is_empty() {
            self.warned.retain(|&w| w != index);
            self.linked.retain(|&w| w != index);
        }
    }

    /// Releases a lock taken by `try_lock` that is not wanted after all.
    fn give_back(&mut self, slot: u32, gpu: usize, fd: OwnedFd, id: FileId) {
        let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
        let index = slot as usize * self.pool.ids.len() + gpu;
        if let Some(c) = self.cache() {
            c[index] = Some((fd, id));
        }
    }

    /// Reads which GPUs of the pool are drained (one failed `openat` when
    /// none is) and adds `avoided` (pool index, description); fails when
    /// no block of `needed` GPUs is left. Whether that changed since the
    /// last read.
    pub fn out_of_service(&mut self, needed: usize, avoided: &[(usize, String)]) -> Result<bool, Error> {
        let drained = drain::of_pool(self.dir_fd, self.dir, self.pool);
        if drained.is_none() && avoided.is_empty() {
            let changed = !self.out.is_empty();
            self.out.clear();
            return Ok(changed);
        }
        let len = self.pool.ids.len();
        let mut out = vec![false; len];
        let mut why: Vec<(usize, String)> = Vec::new();
        let some_drained = drained.as_ref().is_some_and(|d| !d.is_empty());
        let mut some_avoided = false;
        for (i, d) in drained.into_iter().flatten() {
            out[i] = true;
            why.push((i, d.describe()));
        }
        for (i, what) in avoided {
            if *i < len && !out[*i] {
                out[*i] = true;
                some_avoided = true;
                why.push((*i, what.clone()));
            }
        }
        let usable = (0..len).any(|s| s + needed <= len && !out[s..s + needed].contains(&true));
        if !usable {
            crate::sys::sort::sort_by(&mut why, &mut |a, b| a < b);
            let gpus: Vec<String> = why.into_iter().map(|(_, w)| w).collect();
            return Err(Error::AllDrained { gpus: gpus.join(", "), drained: some_drained, avoided: some_avoided });
        }
        let out = if why.is_empty() { Vec::new() } else { out };
        let changed = out != self.out;
        self.out = out;
        Ok(changed)
    }

    /// Whether pool GPU `g` was out of service at the last read.
    fn is_out(&self, g: usize) -> bool {
        self.out.get(g).is_some_and(|&o| o)
    }

    /// Whether `grant`'s block holds a GPU out of service at the last read.
    pub fn holds_out_of_service(&self, grant: &Grant) -> bool {
        (grant.start..grant.start + grant.fds.len()).any(|g| self.is_out(g))
    }

    /// Which lock files (`slot * pool + gpu`) are in a block of `needed`
    /// GPUs that this user can take whole: of GPUs in service, every lock
    /// file one it may open. A waiter's record names these and no other.
    pub fn takeable(&self, needed: usize) -> Vec<bool> {
        let width = self.pool.ids.len();
        let mut usable: Vec<bool> = (0..width * self.slots as usize).map(|i| !self.is_out(i % width)).collect();
        for &i in &self.warned {
            usable[i] = false;
        }
        let mut takes = vec![false; usable.len()];
        for slot in 0..self.slots as usize {
            for start in (slot * width..).take((width + 1).saturating_sub(needed)) {
                if usable[start..start + needed].iter().all(|&u| u) {
                    takes[start..start + needed].fill(true);
                }
            }
        }
        takes
    }

    /// Releases the locks of a block from `start` at `slot`.
    pub fn give_back_block(&mut self, slot: u32, start: usize, fds: Vec<OwnedFd>, ids: Vec<FileId>) {
        for (k, (fd, id)) in fds.into_iter().zip(ids).enumerate() {
            self.give_back(slot, start + k, fd, id);
        }
    }

    /// One pass over every block at every slot, in the classic order, but
    /// those with a lock file that an earlier waiter wants (`ahead`), or
    /// that an earlier pass found this user may not open. When no block is
    /// free and none is held by anyone or left to an earlier waiter (every
    /// one has a lock file this user may not open, and no block with such
    /// a file has another GPU busy), the first such file's error.
    pub fn scan(&mut self, needed: usize, ahead: &Ahead) -> Result<Option<Grant>, Error> {
        let pool_len = self.pool.ids.len();
        let mut held_elsewhere = false;
        // Whether a block was passed over for a lock file this user may
        // not open (each is in `warned`).
        let mut met_unusable = false;
        for slot in 0..self.slots {
            let mut start = 0;
            while start + needed <= pool_len {
                // Out of service, left to an earlier waiter, or known to be
                // one this user may not open: a block with such a file is
                // passed over whole, so that none of its lock files is held
                // a moment in vain (a waiter looking then would take it for
                // busy, and no close tells it when it is let go).
                let unusable =
                    |g: usize| !self.warned.is_empty() && self.warned.contains(&(slot as usize * pool_len + g));
                let passed = |g: usize| self.is_out(g) || !ahead.allows(g, slot) || unusable(g);
                if let Some(k) = (start..start + needed).rev().find(|&g| passed(g)) {
                    // Left to an earlier waiter: as good as held, so that
                    // a lock file this user may not open elsewhere is no
                    // reason to give up.
                    held_elsewhere |= (start..start + needed).any(|g| !ahead.allows(g, slot));
                    met_unusable |= (start..start + needed).any(unusable);
                    start = k + 1;
                    continue;
                }
                let mut got = Vec::with_capacity(needed);
                let mut ids = Vec::with_capacity(needed);
                let mut busy_at = None;
                for gpu in start..start + needed {
                    match self.try_lock(slot, gpu, &ids)? {
                        Try::Taken(fd, id) => {
                            got.push(fd);
                            ids.push(id);
                        }
                        Try::Busy => {
                            held_elsewhere = true;
                            busy_at = Some(gpu);
                            break;
                        }
                        Try::Unusable => {
                            met_unusable = true;
                            busy_at = Some(gpu);
                            break;
                        }
                    }
                }
                let Some(busy) = busy_at else {
                    return Ok(Some(Grant { fds: got, ids, start, slot, waited: None, exposed: None }));
                };
                self.give_back_block(slot, start, got, ids);
                // Every block that contains the busy GPU is busy too.
                start = busy + 1;
            }
        }
        if held_elsewhere || !met_unusable {
            return Ok(None);
        }
        self.wait_or_fail(needed)
    }

    /// Is every lock of `grant` still the file at its path? A lock directory
    /// removed and re-created (or a file unlinked) under a holder would
    /// otherwise let two tests "hold" the same slot. The same `stat` tells
    /// a lock file another user owns ([`Grant::exposed`]).
    pub fn still_linked(&self, grant: &mut Grant) -> bool {
        (0..grant.fds.len()).all(|k| {
            let name = self.name(grant.slot, grant.start + k);
            let dir = self.dir.to_bytes();
            let by_path = with_joined(&[dir, separator(dir), name.as_bytes()], None, |path| {
                rustix::fs::statat(rustix::fs::CWD, path, AtFlags::SYMLINK_NOFOLLOW)
            });
            let at_path = match by_path {
                Some(Err(Errno::NAMETOOLONG)) | None => {
                    // A directory path near PATH_MAX: the name in the
                    // directory as opened, and that directory at its path
                    // (else it never counted as linked, and the wrapper
                    // took and let go of the slot without end).
                    if !dir_still_there(self.dir, self.dir_fd) {
                        return false;
                    }
                    rustix::fs::statat(self.dir_fd, name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW)
                }
                Some(found) => found,
            };
            // The file as opened (its descriptor keeps its inode from being
            // used again) against the one at its path now.
            let Ok(b) = at_path else { return false };
            if b.st_uid != 0 && grant.exposed.is_none() {
                grant.exposed = crate::slots::exposure::other_owner(b.st_uid).map(|uid| (grant.start + k, uid));
            }
            grant.ids.get(k) == Some(&(b.st_dev, b.st_ino))
        })
    }
}

/// What a lock file that is the same file as another of its block is.
const SAME_FILE: &str = "a hard link to another lock file of its block";

/// How many lock descriptors this process may keep open while waiting.
fn fd_budget() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(limit.saturating_sub(64)).unwrap_or(usize::MAX).min(MAX_CACHED_FDS)
}

/// What a test asks of the slots.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// Slots per GPU.
    pub slots: u32,
    /// GPUs, in one contiguous block of the pool.
    pub needed: usize,
    /// How long to wait (`None`: no limit; zero: fail at once).
    pub wait: Option<Duration>,
    /// Whose lock and queue names.
    pub profile: Profile,
    /// What to do with a lock directory that coordinates nothing.
    pub private: crate::slots::privacy::PrivatePolicy,
    /// GPUs to pass over as if drained (pool index, `GPU <id> (why)`):
    /// the unhealthy ones under `PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid`.
    pub avoid: &'a [(usize, String)],
}
