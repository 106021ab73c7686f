//! What a user may not use among the lock files of its pool, judged once
//! each and said once (`Slots`' judgement, beside its scans in `locks`):
//! every lock file judged at a waiter's wake ([`Slots::open_all`]), the
//! warnings for those passed over, said when the wrapper takes a block or
//! waits, and the one line that ends a run where only such files are left.

use super::{Cache, Grant, SAME_FILE, Slots, Try};
use crate::error::Error;
use crate::slots::lockfile::{self, named, open_lock_file, refused};
use rustix::fs::{Access, AtFlags, FileType};
use rustix::io::Errno;
use wrapper_common::diag;

impl Slots<'_> {
    /// Lock file `index` may not be used (`error` says why): passed over
    /// from now on, and its warning kept to be said (one for all those it
    /// may not make, for one reason).
    #[cold]
    pub(super) fn warn_unusable(&mut self, index: usize, error: &Error) {
        if self.warned.contains(&index) {
            return;
        }
        self.warned.push(index);
        let create = not_made(error);
        if create.is_some() {
            // One line says them all: the cause is the directory's.
            if self.create_said == create {
                return;
            }
            self.create_said = create;
        }
        self.unsaid.push((index, create, lockfile::unusable(error, "skipping that slot", true)));
    }

    /// Says the warnings of lock files found unusable and not said yet,
    /// but that of `except` (the file whose own error ends the run, and
    /// why it could not be made, where that is its error).
    pub fn say_unusable(&mut self, except: Option<(usize, Option<Errno>)>) {
        self.unsaid.retain(|(index, create, line)| {
            if !except.is_some_and(|(i, why)| i == *index || create.is_some() && *create == why) {
                diag::say_line(line.as_bytes());
            }
            false
        });
    }

    /// Judges every lock file of the pool, those a scan does not reach
    /// too, at the first pass, where the directory changed since the last,
    /// and every eighth pass: by `access(2)`, which opens nothing, where it
    /// is not known to be unusable; by an open (or a make) where it is
    /// (docs/design.md, "Participants and files", says why).
    pub fn open_all(&mut self) {
        let width = self.pool.ids.len();
        // The nanoseconds are unsigned in the kernel's `stat`, signed in
        // libc's (rustix's libc backend, under Miri): one type for both.
        #[allow(clippy::unnecessary_cast)]
        let stamp = rustix::fs::fstat(self.dir_fd).ok().map(|st| (st.st_mtime as i64, st.st_mtime_nsec as u64));
        let (last, passes) = self.dir_stamp;
        // Nothing made, removed or renamed in the directory since the last
        // pass: only every eighth pass looks (a `chmod` changes no entry).
        let recheck = stamp.is_none() || stamp != last || passes % 8 == 7;
        self.dir_stamp = (stamp, passes.wrapping_add(1));
        if !recheck {
            return;
        }
        for index in 0..width * self.slots as usize {
            let held = match &self.cached {
                Some(Cache::Kept(kept)) => kept[index].as_ref().map(|&(_, id)| id),
                _ => None,
            };
            let unusable = self.warned.contains(&index);
            let name = self.name((index / width) as u32, index % width);
            // A missing one is judged by the directory: may it be made?
            let (at, access) = match rustix::fs::statat(self.dir_fd, name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if held == Some((st.st_dev, st.st_ino)) => continue,
                // Only a regular file: anything else (a FIFO, a link) is
                // said by the scan that meets it.
                Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => continue,
                Ok(_) if self.linked.contains(&index) => continue,
                Ok(_) => (name.as_cstr(), Access::READ_OK),
                Err(Errno::NOENT) => (c".", Access::WRITE_OK | Access::EXEC_OK),
                Err(_) => continue,
            };
            if unusable {
                // Closed at once where it is not kept: it was repaired.
                if let Ok((fd, id)) = open_lock_file(self.dir_fd, self.dir, &name) {
                    self.opened(index);
                    if let Some(kept) = self.cache().filter(|_| held.is_none()) {
                        kept[index] = Some((fd, id));
                    }
                }
                continue;
            }
            let judged = rustix::fs::accessat(self.dir_fd, at, access, AtFlags::EACCESS);
            if let Err(errno @ (Errno::ACCESS | Errno::PERM | Errno::ROFS)) = judged {
                let path = named(self.dir, name.as_bytes());
                let e = if access == Access::READ_OK {
                    Error::System { what: "cannot open lock file", path: Some(path), errno }
                } else {
                    Error::LockFileCreate { path, errno, hint: lockfile::hint(self.dir.to_bytes(), errno, true) }
                };
                self.warn_unusable(index, &e);
            }
        }
    }

    /// No block is free, none is held or left to an earlier waiter, and
    /// some were passed over for a lock file this user may not open (those
    /// in `warned`): `Ok(None)` (wait) where a wait can still end, because
    /// such a file opens now (repaired), or another GPU of a block with it
    /// (and no GPU out of service) is busy, on either side of it: the file
    /// may be repaired meanwhile. Else the first such file's error.
    #[cold]
    pub(super) fn wait_or_fail(&mut self, needed: usize) -> Result<Option<Grant>, Error> {
        let width = self.pool.ids.len();
        let mut first = None;
        for index in self.warned.clone() {
            let (slot, gpu) = ((index / width) as u32, index % width);
            let name = self.name(slot, gpu);
            // Anything but a regular file (or, for one found to be another
            // lock file too, one that still has another name) is told by its
            // `lstat`, not opened again: each close would wake the waiters
            // that watch it, this one too.
            let linked = if self.linked.contains(&index) { SAME_FILE } else { "" };
            let still = rustix::fs::statat(self.dir_fd, name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .and_then(|st| refused(self.dir, &name, &st, linked));
            match still.map_or_else(|| open_lock_file(self.dir_fd, self.dir, &name), Err) {
                Ok(held) => {
                    self.opened(index);
                    if let Some(kept) = self.cache() {
                        kept[index] = Some(held);
                    }
                    return Ok(None);
                }
                Err(Error::System { errno: Errno::WOULDBLOCK, .. }) => return Ok(None),
                Err(e) => {
                    first.get_or_insert((index, e));
                }
            }
            for start in (gpu + 1).saturating_sub(needed)..=gpu.min(width.saturating_sub(needed)) {
                let in_service = !(start..start + needed).any(|g| self.is_out(g));
                if in_service && self.busy_beside(slot, start, needed, gpu)? {
                    return Ok(None);
                }
            }
        }
        // The others are said; this one is the error, with its repair.
        let Some((index, e)) = first else { return Ok(None) };
        self.say_unusable(Some((index, not_made(&e))));
        Err(match e {
            Error::System { errno: Errno::ACCESS | Errno::PERM, .. }
            | Error::UnsafeLockPath { .. }
            | Error::LockFileCreate { .. } => {
                Error::NoUsableSlot(lockfile::unusable(&e, "no slot this test could take is left", false))
            }
            e => e,
        })
    }

    /// Whether a GPU of the block of `needed` from `start` at `slot`, other
    /// than `skip` (a lock file this user may not open), is busy: each is
    /// tried, and one taken is given back at once.
    #[cold]
    fn busy_beside(&mut self, slot: u32, start: usize, needed: usize, skip: usize) -> Result<bool, Error> {
        let width = self.pool.ids.len();
        for gpu in start..start + needed {
            // Not one known to be unusable (`warned`): it would be opened,
            // and closed again, at each look.
            if gpu == skip || self.warned.contains(&(slot as usize * width + gpu)) {
                continue;
            }
            match self.try_lock(slot, gpu, &[])? {
                Try::Taken(fd, id) => self.give_back(slot, gpu, fd, id),
                Try::Busy => return Ok(true),
                Try::Unusable => {}
            }
        }
        Ok(false)
    }
}

/// Why a lock file could not be made, where that is `error`.
fn not_made(error: &Error) -> Option<Errno> {
    match error {
        Error::LockFileCreate { errno, .. } => Some(*errno),
        _ => None,
    }
}

impl Drop for Slots<'_> {
    /// What was found and not said yet is said, however the look ends (a
    /// drain that fails the test, an error of another file).
    fn drop(&mut self) {
        self.say_unusable(None);
    }
}
