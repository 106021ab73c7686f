//! Who besides the caller can move or remove its files in a lock
//! directory (or its `gpuqueue/`): a user other than root and the caller
//! who owns it, or every user where it has no sticky bit. Said by the
//! wrapper where it takes a slot (or makes its record), and by `--status`
//! and `--list`, in the words of [`Exposed`].

use crate::sys::userns::{Ids, unmapped};
use core::ffi::CStr;
use rustix::fd::OwnedFd;

/// The owner of a lock directory (or of its `gpuqueue/`) whose uid is
/// `uid`, where that is a user other than root and this one. The owner of
/// a directory is exempt from its sticky bit: it may rename another
/// user's held lock file away, and the slot then looks free and is given
/// to the next test while the first still runs.
///
/// An owner this process's user namespace does not map is shown as the
/// overflow id (65534) and cannot be told: inside Bazel's `linux-sandbox`
/// (a user namespace that maps the caller alone) or a rootless container,
/// root's own `/var/lock` looks like that. It is not called another
/// owner, which would be a false alarm at every test.
pub fn other_owner(uid: u32) -> Option<u32> {
    (uid != 0 && uid != rustix::process::geteuid().as_raw() && !unmapped(uid, Ids::User)).then_some(uid)
}

/// Whether a directory of mode `mode` lets users other than its owner
/// rename or remove the files of others: writable by every user, without
/// the sticky bit (a `chmod 777` where 1777 was meant).
pub fn unsticky(mode: u32) -> bool {
    mode & 0o1002 == 0o002
}

/// Warns, in one line, where the lock directory `dir` that `fd` opens is
/// owned by another user than root and this one ([`other_owner`]), or
/// where it (or its `gpuqueue/`, which `fd` then opens: `queue`) may be
/// written by every user without the sticky bit ([`unsticky`]): that
/// user, or any, can give this test's GPU to another test (or push its
/// wait back). `gpuqueue/` is made by whichever user's waiter comes
/// first, so another owner is routine there and not said (`--status` says
/// it). One `fstat(2)`, no allocation; the test runs all the same.
pub fn warn_exposed(dir: &CStr, fd: &OwnedFd, queue: bool) {
    let Ok(st) = rustix::fs::fstat(fd) else { return };
    let owner = other_owner(st.st_uid).filter(|_| !queue);
    if owner.is_some() || unsticky(st.st_mode) {
        say_exposed(dir, owner, queue);
    }
}

/// Out of line, as is the path it builds (a page of stack).
#[cold]
#[inline(never)]
fn say_exposed(dir: &CStr, owner: Option<u32>, queue: bool) {
    let queue_path;
    let (what, path) = if queue {
        queue_path = crate::slots::lockfile::join(dir, crate::slots::record::QUEUE_DIR.to_bytes());
        ("queue directory", queue_path.as_bytes())
    } else {
        ("lock directory", dir.to_bytes())
    };
    let exposed = Exposed { dir: path, owner, queue };
    wrapper_common::diag::report(crate::TOOL, format_args!("warning: {what} {exposed}"));
}

/// Warns, in one line, that the held lock file in `dir` named by `name`
/// (its prefix, GPU and slot) is owned by `uid`,
/// a user other than root and this one: that user made it (its first
/// test), and may rename it away while this test holds it, as a
/// directory's owner may. Only where other users than its owner may write
/// the lock directory `dir` (world- or group-writable): else that user
/// cannot rename anything there (or is its owner, said already).
#[cold]
#[inline(never)]
pub fn say_lock_file_exposed(dir: &CStr, name: (&[u8], &[u8], u32), uid: u32) {
    if rustix::fs::stat(dir).is_ok_and(|st| st.st_mode & 0o022 == 0 || st.st_uid == uid) {
        return;
    }
    let name = crate::slots::lockfile::lock_file_name(name.0, name.1, name.2);
    let path = crate::slots::lockfile::join(dir, name.as_bytes());
    let p = wrapper_common::diag::Bytes(path.as_bytes());
    wrapper_common::diag::report(
        crate::TOOL,
        format_args!(
            "warning: lock file {p} is uid {uid}'s, who can rename it away while this test holds it (its GPU then given again); as root: chown root:root {p}"
        ),
    );
}

/// A directory in which a user other than the caller can move or remove
/// the caller's files: one owned by a user other than root and the caller
/// ([`other_owner`]), or one every user may write without the sticky bit
/// ([`unsticky`]). What it means and the repair, said alike by the
/// wrapper's warning and by the notes of `--status` and `--list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed<'a> {
    pub dir: &'a [u8],
    /// The other owner; `None`: every user, for want of the sticky bit.
    pub owner: Option<u32>,
    /// `gpuqueue/` (records at stake), not the lock directory (lock files).
    pub queue: bool,
}

impl<'a> Exposed<'a> {
    /// The exposure of the lock directory `dir`, as `stat` finds it.
    pub fn of_dir(dir: &'a CStr) -> Option<Exposed<'a>> {
        let st = rustix::fs::stat(dir).ok()?;
        Exposed::of(dir.to_bytes(), st.st_uid, st.st_mode, false)
    }

    /// The exposure of the directory `dir`, owned by `uid` with `mode`.
    pub fn of(dir: &'a [u8], uid: u32, mode: u32, queue: bool) -> Option<Exposed<'a>> {
        match other_owner(uid) {
            Some(uid) => Some(Exposed { dir, owner: Some(uid), queue }),
            None => unsticky(mode).then_some(Exposed { dir, owner: None, queue }),
        }
    }
}

impl core::fmt::Display for Exposed<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let dir = wrapper_common::diag::Bytes(self.dir);
        match self.owner {
            Some(uid) => write!(f, "{dir} is owned by uid {uid}, neither root nor this user: uid {uid} can ")?,
            None => write!(f, "{dir} may be written by every user and has no sticky bit: any user can ")?,
        }
        f.write_str(if self.queue {
            "remove a waiting test's record, so that later tests are served first"
        } else {
            "rename a held lock file away, so that its slot shows free and its GPU is given to another test"
        })?;
        match self.owner {
            Some(_) => write!(f, "; as root: chown root:root {dir} && chmod 1777 {dir}"),
            None => write!(f, "; as root: chmod 1777 {dir}"),
        }
    }
}
