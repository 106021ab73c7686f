//! GPUs taken out of service (`--drain`, `--undrain`): the state lives in
//! the lock directory, so that every container and user that shares it
//! sees it.
//!
//! `<lockdir>/gpudrain/` holds one file per drained GPU, named as the GPU
//! is in lock file names (`gpudrain/3`, `gpudrain/GPU-4a1b...`), with the
//! reason, the time and the user who drained it, one `key value` line each:
//!
//! ```text
//! reason fan failing, RMA 1234
//! time 1764790000
//! uid 1000
//! user alice
//! ```
//!
//! The directory exists only while some GPU is drained: a test's slot
//! search costs one failed `openat` of it and nothing more on a host with
//! no drained GPU, and one `openat` per GPU of its pool where there is one.
//! Neither name can be taken for a lock file (`<prefix><id>_<digits>`) or
//! the queue (`gpuqueue/`). Only names that can be GPU ids count; anything
//! else another user puts there is ignored.
//!
//! Who drained a GPU is the record's **owner**, as the kernel has it, not
//! the `uid` and `user` its text gives (which any writer chooses); `--status`
//! flags a record whose text names another uid. The directory is made mode
//! 1777 (sticky, made under a temporary name and renamed into place, so it
//! is never seen with another mode), its files 0644: any user of the lock
//! directory may drain a GPU that is not drained and read why; only the
//! user who drained it, or root, may undrain it or replace its record.
//! The sticky bit does not bind `gpudrain/`'s own owner, and any user may
//! make it while no GPU is drained: a drain is written only into one of
//! root's, the lock directory owner's or the drainer's own, and one with
//! the sticky bit (its owner's own is given it), and `--status` flags
//! ([`Doubt`]) a record in any other, or with a second name (a hard
//! link).
//!
//! A file is written under a temporary name in the lock directory itself
//! (`gpudrain.<pid>.<random>.tmp`), then renamed into place: a reader sees
//! the old record or the new one, never half of one; and the lock
//! directory's inotify watch wakes the waiting wrappers. Nothing is opened
//! through a symbolic link. Undrain removes the file, then the directory
//! when it is empty (a drain that finds it removed makes it again), and
//! wakes the waiting wrappers with an empty file made and removed under
//! that temporary name (the watch does not see into `gpudrain/`).

use crate::error::Error;
use crate::prelude::*;
pub use crate::slots::drain_record::{Doubt, Drained, MAX_REASON, is_gpu_name};
use crate::slots::lockfile::{DIR_FLAGS, LockName, make_shared_dir, open_lock_dir, repair_shared_mode};
use crate::slots::request::Pool;
use crate::sys::userns::{ANY_OUTSIDE, Ids, unmapped};
use core::ffi::CStr;
use core::ops::ControlFlow;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::diag::{Bytes, Os};

/// The directory of drained GPUs, in the lock directory.
pub const DRAIN_DIR: &CStr = c"gpudrain";

const FILE_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::CLOEXEC).union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::NOCTTY);

/// Who controls `gpudrain/`: its owner, and the lock directory's (who
/// may put another `gpudrain/` in its place). Root, the lock directory's
/// owner and a record's own owner are trusted with its name; any other
/// owner of `gpudrain/` could have renamed the record.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    dir_owner: u32,
    /// Whether `gpudrain/` has the sticky bit, or no user but its owner may write it.
    sticky: bool,
    lock_dir_owner: u32,
}

impl Place {
    fn of(dir_fd: &OwnedFd, drain_fd: &OwnedFd) -> Option<Place> {
        let st = rustix::fs::fstat(drain_fd).ok()?;
        let sticky = !crate::slots::exposure::unsticky(st.st_mode);
        Some(Place { dir_owner: st.st_uid, sticky, lock_dir_owner: rustix::fs::fstat(dir_fd).ok()?.st_uid })
    }

    /// Whether `gpudrain/`'s owner may be trusted with the names of
    /// `uid`'s records: never one outside this user namespace, shown as
    /// the overflow id whoever it is (root, or a user who renames drains).
    fn trusted_for(self, uid: u32) -> bool {
        let owner = self.dir_owner;
        (owner == 0 || owner == self.lock_dir_owner || owner == uid) && !unmapped(owner, Ids::User)
    }

    /// Why `uid`'s record in it cannot be trusted: its owner, or any
    /// user where it is not sticky, could have renamed it.
    fn doubt_for(self, uid: u32) -> Option<Doubt> {
        if !self.trusted_for(uid) {
            Some(Doubt::DirOwner(self.dir_owner))
        } else if !self.sticky {
            Some(Doubt::Unsticky)
        } else {
            None
        }
    }
}

/// The drained-GPU directory of an open lock directory; `Ok(None)` when no
/// GPU is drained (one failed `openat`, no allocation), the error where
/// the drain state cannot be read (this user may not).
pub fn open(dir_fd: impl AsFd) -> Result<Option<OwnedFd>, Errno> {
    match rustix::fs::openat(dir_fd, DRAIN_DIR, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The record of the GPU named `name` in lock file names, when drained,
/// with what makes its name doubtful in `place`.
fn read_one(drain_fd: &OwnedFd, place: Option<Place>, name: &[u8]) -> Option<Drained> {
    if !is_gpu_name(name) {
        return None;
    }
    let mut c = LockName::new();
    c.push(name).ok()?;
    let fd = match rustix::fs::openat(drain_fd, c.as_cstr(), FILE_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        // A record this user may not read (made 0600 by hand): drained all
        // the same, its reason unknown, rather than a GPU given unsaid.
        Err(Errno::ACCESS | Errno::PERM) => {
            let st = rustix::fs::statat(drain_fd, c.as_cstr(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
            let unread = Drained::parse(name, b"reason (its record cannot be read by this user)");
            let doubt = place.and_then(|p| p.doubt_for(st.st_uid));
            return (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then_some(Drained {
                owner: Some(st.st_uid),
                doubt,
                ..unread
            });
        }
        Err(_) => return None,
    };
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut text = Vec::new();
    let mut chunk = [0u8; 1024];
    while text.len() < 4 * MAX_REASON {
        match rustix::io::read(&fd, &mut chunk) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(Errno::INTR) => {}
            Err(_) => break,
        }
    }
    #[allow(clippy::useless_conversion)] // st_nlink is u32 on some targets
    let links = u64::from(st.st_nlink);
    let doubt = place.and_then(|p| p.doubt_for(st.st_uid)).or((links != 1).then_some(Doubt::Links(links)));
    Some(Drained { owner: Some(st.st_uid), doubt, ..Drained::parse(name, &text) })
}

/// The drained GPUs of `pool`, as (index in the pool, record); `None`, at
/// the cost of one failed `openat`, when no GPU of the directory is drained.
pub fn of_pool(dir_fd: &OwnedFd, dir: &CStr, pool: &Pool) -> Option<Vec<(usize, Drained)>> {
    let drain_fd = open(dir_fd).unwrap_or_else(|e| unreadable_state(dir, e))?;
    Some((0..pool.ids.len()).filter_map(|i| read_one(&drain_fd, None, pool.lock_name(i)).map(|d| (i, d))).collect())
}

/// A drain state this user may not read: no GPU known drained, said once
/// (a drained GPU may be given).
#[cold]
fn unreadable_state(dir: &CStr, e: Errno) -> Option<OwnedFd> {
    static SAID: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, core::sync::atomic::Ordering::Relaxed) {
        let d = Bytes(dir.to_bytes());
        wrapper_common::diag::report(
            crate::TOOL,
            format_args!(
                "warning: cannot read {d}/gpudrain/ ({}): a drained GPU may be given; to repair, root runs: chown root:root {d}/gpudrain && chmod 1777 {d}/gpudrain",
                Os(e)
            ),
        );
    }
    None
}

/// Every drained GPU of the lock directory `dir` (for `--status`); the
/// error where its drain state cannot be read.
pub fn all(dir: &CStr) -> Result<Vec<Drained>, Errno> {
    let Ok(dir_fd) = crate::sys::dirs::open_dir(dir) else { return Ok(Vec::new()) };
    let Some(drain_fd) = open(&dir_fd)? else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    let _ = crate::sys::dirs::for_each_entry(&drain_fd, |name, _| {
        if is_gpu_name(name.to_bytes()) {
            names.push(name.to_bytes().to_vec());
        }
        ControlFlow::<()>::Continue(())
    });
    let place = Place::of(&dir_fd, &drain_fd);
    let mut out: Vec<Drained> = names.iter().filter_map(|n| read_one(&drain_fd, place, n)).collect();
    crate::sys::sort::sort_by(&mut out, &mut |a, b| a.gpu < b.gpu);
    Ok(out)
}

/// `--drain` or `--undrain` could not `action` in `dir`, with the cause's
/// repair: the file system's where it is its (no user could), the user's
/// where it is theirs.
#[cold]
fn failed(dir: &CStr, action: &str, errno: Errno) -> Error {
    let (cause, repair) = match errno {
        Errno::ROFS => ("", "its file system is read-only: mount it read-write"),
        Errno::NOSPC => ("", "its file system is full: free space or inodes there"),
        Errno::DQUOT => ("", "a disk quota is reached: free some or raise it"),
        e if crate::slots::lockfile::refused_to_root(e) => {
            ("root is refused too: ", crate::slots::lockfile::REFUSED_TO_ROOT)
        }
        Errno::ACCESS | Errno::PERM => ("", "--drain and --undrain write there; run them as a user who may"),
        _ => ("", "--drain and --undrain write there"),
    };
    let dir = Bytes(dir.to_bytes());
    Error::Drain(format!("cannot {action} in the lock directory {dir}: {} ({cause}{repair})", Os(errno)))
}

/// Writes `record` for its GPU into the lock directory `dir` (created
/// when missing), replacing any earlier record of that GPU.
pub fn drain(dir: &CStr, record: &Drained) -> Result<(), Error> {
    let dir_fd = open_lock_dir(dir)?;
    let tmp_name = tmp_name();
    let mut gpu = LockName::new();
    gpu.push(&record.gpu).map_err(|_| Error::Drain("GPU name too long".to_string()))?;
    for _ in 0..8 {
        let drain_fd = match rustix::fs::openat(&dir_fd, DRAIN_DIR, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                make_shared_dir(&dir_fd, DRAIN_DIR).map_err(|e| failed(dir, "create gpudrain/", e))?;
                continue;
            }
            Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                return Err(match planted(&dir_fd, DRAIN_DIR) {
                    Some((kind, owner)) => Error::Drain(format!(
                        "cannot drain GPU {}: {}/gpudrain is a {kind} of uid {owner}, not the drain directory; root or uid {owner} removes it (rm {}/gpudrain), then drain again",
                        Bytes(&record.gpu),
                        Bytes(dir.to_bytes()),
                        Bytes(dir.to_bytes())
                    )),
                    None => failed(dir, "use gpudrain (not a directory)", e),
                });
            }
            Err(e) => return Err(failed(dir, "open gpudrain/", e)),
        };
        // Its owner's own, with another mode, made 1777 first.
        repair_shared_mode(&drain_fd);
        if let Some(doubt) =
            Place::of(&dir_fd, &drain_fd).and_then(|p| p.doubt_for(rustix::process::geteuid().as_raw()))
        {
            return Err(foreign_dir(dir, &record.gpu, doubt));
        }
        let _ = rustix::fs::unlinkat(&dir_fd, tmp_name.as_cstr(), AtFlags::empty());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir_fd, tmp_name.as_cstr(), flags, Mode::from_raw_mode(0o644))
            .map_err(|e| failed(dir, "write a file", e))?;
        let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o644));
        let written = wrapper_common::diag::write_all(&fd, &record.record());
        drop(fd);
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir_fd, tmp_name.as_cstr(), AtFlags::empty());
            return Err(failed(dir, "write a file", e));
        }
        let renamed = rustix::fs::renameat(&dir_fd, tmp_name.as_cstr(), &drain_fd, gpu.as_cstr());
        if renamed.is_err() {
            if let Some((kind, owner)) = planted(&drain_fd, gpu.as_cstr()) {
                let _ = rustix::fs::unlinkat(&dir_fd, tmp_name.as_cstr(), AtFlags::empty());
                let path = format!("{}/gpudrain/{}", Bytes(dir.to_bytes()), Bytes(&record.gpu));
                return Err(Error::Drain(format!(
                    "cannot drain GPU {}: {path} is a {kind} of uid {owner}, not a drain record; root or uid {owner} removes it (rm -r {path}), then drain again",
                    Bytes(&record.gpu)
                )));
            }
        }
        match renamed {
            Ok(()) => return Ok(()),
            // Another user's record in the sticky directory.
            Err(e @ (Errno::PERM | Errno::ACCESS)) if read_one(&drain_fd, None, &record.gpu).is_some() => {
                let _ = rustix::fs::unlinkat(&dir_fd, tmp_name.as_cstr(), AtFlags::empty());
                return Err(not_yours(&drain_fd, &record.gpu, "replace the drain of", e));
            }
            // Removed by an undrain since it was opened: make it again.
            Err(Errno::NOENT) => {
                let _ = rustix::fs::unlinkat(&dir_fd, tmp_name.as_cstr(), AtFlags::empty());
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(&dir_fd, tmp_name.as_cstr(), AtFlags::empty());
                return Err(failed(dir, "rename a file into gpudrain/", e));
            }
        }
    }
    Err(failed(dir, "write gpudrain/", Errno::AGAIN))
}

/// A `gpudrain/` of a user who could rename or remove this drain.
#[cold]
fn foreign_dir(dir: &CStr, gpu: &[u8], doubt: Doubt) -> Error {
    let dir = Bytes(dir.to_bytes());
    let gpu = Bytes(gpu);
    Error::Drain(match doubt {
        Doubt::DirOwner(owner) if unmapped(owner, Ids::User) => format!(
            "cannot drain GPU {gpu}: {dir}/gpudrain/ belongs to uid {owner}, {ANY_OUTSIDE}, and a user who could rename or remove the drain cannot be told from root; drain it from the host's user namespace"
        ),
        Doubt::DirOwner(owner) => format!(
            "cannot drain GPU {gpu}: {dir}/gpudrain/ belongs to uid {owner}, who could rename or remove the drain (only root's, the lock directory owner's or your own is used); root runs: chown root {dir}/gpudrain"
        ),
        _ => format!(
            "cannot drain GPU {gpu}: {dir}/gpudrain/ may be written by every user and has no sticky bit, so any user could rename or remove the drain; root runs: chmod 1777 {dir}/gpudrain"
        ),
    })
}

/// What `name` in `dir_fd` is, and whose, when it is there but is neither
/// a directory (`gpudrain`) nor a regular file (a record): another
/// user's entry, in the way.
fn planted(dir_fd: &OwnedFd, name: &CStr) -> Option<(&'static str, u32)> {
    let st = rustix::fs::statat(dir_fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile if name != DRAIN_DIR => None,
        FileType::Directory if name == DRAIN_DIR => None,
        _ => Some((crate::slots::lockfile::kind_of(st.st_mode), st.st_uid)),
    }
}

/// Another user's drain, which this one may not replace or remove.
#[cold]
fn not_yours(drain_fd: &OwnedFd, gpu: &[u8], action: &str, errno: Errno) -> Error {
    let owner = read_one(drain_fd, None, gpu).and_then(|d| d.owner);
    let (who, outer) = match owner {
        Some(o) if unmapped(o, Ids::User) => (format!("uid {o}, {ANY_OUTSIDE}"), " on the host"),
        Some(o) => (format!("uid {o}"), ""),
        None => ("uid ?".to_string(), ""),
    };
    Error::Drain(format!(
        "cannot {action} GPU {}: it was drained by {who} ({}), and only that user or root{outer} may undrain it or replace its record",
        Bytes(gpu),
        Os(errno)
    ))
}

/// A temporary name in the lock directory, `gpudrain.<pid>.<64 random
/// bits>.tmp`: in a sticky lock directory another user could take a name
/// it can guess first, and this one could not remove it.
fn tmp_name() -> LockName {
    let mut name = LockName::new();
    let pid = rustix::process::getpid().as_raw_nonzero();
    let _ = name.push(format!("gpudrain.{pid}.{}.tmp", crate::sys::random::unguessable()).as_bytes());
    name
}

/// Whether `name`, in the lock directory, is one [`tmp_name`] makes: a
/// drain's record on its way into `gpudrain/`, or an undrain's wake file.
/// Either means the drains changed: a waiter that sees one looks again.
pub fn is_tmp_name(name: &[u8]) -> bool {
    name.starts_with(b"gpudrain.") && name.ends_with(b".tmp")
}

/// Wakes the wrappers waiting on the lock directory (its inotify watch
/// sees a file there closed after writing), so that they look at the
/// drains again: a file inside `gpudrain/` raises nothing there. Best
/// effort: where the lock directory is not writable, they look at their
/// next wake.
fn wake_waiters(dir_fd: &OwnedFd) {
    let name = tmp_name();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if let Ok(fd) = rustix::fs::openat(dir_fd, name.as_cstr(), flags, Mode::from_raw_mode(0o600)) {
        drop(fd);
        let _ = rustix::fs::unlinkat(dir_fd, name.as_cstr(), AtFlags::empty());
    }
}

/// What an undrain found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undrained {
    /// The record was removed: the GPU is back in service.
    Removed,
    /// No record: it was not drained.
    NotDrained,
    /// Another entry in the record's place (its kind and owner), left
    /// alone: it drains nothing.
    NotARecord(&'static str, u32),
}

/// Removes the record of the GPU named `gpu` (as lock file names have it).
pub fn undrain(dir: &CStr, gpu: &[u8]) -> Result<Undrained, Error> {
    // Nothing there is nothing drained; a directory this user may not read
    // says nothing, and is no "not drained".
    let dir_fd = match crate::sys::dirs::open_dir(dir) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(Undrained::NotDrained),
        Err(e) => return Err(failed(dir, "read the drain state", e)),
    };
    let drain_fd = match open(&dir_fd) {
        Ok(Some(fd)) => fd,
        Ok(None) => return Ok(Undrained::NotDrained),
        Err(e) => return Err(failed(dir, "read gpudrain/", e)),
    };
    let mut name = LockName::new();
    name.push(gpu).map_err(|_| Error::Drain("GPU name too long".to_string()))?;
    if let Some((kind, owner)) = planted(&drain_fd, name.as_cstr()) {
        return Ok(Undrained::NotARecord(kind, owner));
    }
    match rustix::fs::unlinkat(&drain_fd, name.as_cstr(), AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(Undrained::NotDrained),
        Err(e @ (Errno::PERM | Errno::ACCESS)) if read_one(&drain_fd, None, gpu).is_some() => {
            return Err(not_yours(&drain_fd, gpu, "undrain", e));
        }
        Err(e) => return Err(failed(dir, "remove a file from gpudrain/", e)),
    }
    // The last one: no drained GPU left, and the slot search back to one
    // failed openat. Fails (ENOTEMPTY) while another GPU is drained.
    let _ = rustix::fs::unlinkat(&dir_fd, DRAIN_DIR, AtFlags::REMOVEDIR);
    wake_waiters(&dir_fd);
    Ok(Undrained::Removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_names_it_makes_are_the_ones_it_recognizes() {
        for _ in 0..3 {
            assert!(is_tmp_name(tmp_name().as_bytes()));
        }
        for other in [&b"gpudrain"[..], b"gpulock0_0", b"gpudrain.1.new", b".gpudrain.1.2.new", b"x.tmp"] {
            assert!(!is_tmp_name(other), "{:?}", core::str::from_utf8(other));
        }
    }
}
