//! One naming per lock directory. Jobs that name GPUs by index
//! (`gpulock1_0`, the default and the classic scripts') and jobs that name
//! them physically (`--lock-names=physical`: `gpulockuid-1002_0`) take
//! different lock files for one GPU, so they must never share a lock
//! directory unseen. Each side leaves evidence the other looks for:
//!
//! - a job with physical names makes the marker `<prefix>.physical` in the
//!   directory, then refuses when the directory holds any lock file named
//!   by index;
//! - a job with index names, once it holds its locks, refuses when the
//!   marker exists.
//!
//! Whichever comes second sees the first: an index job that looked before
//! the marker was made had made its lock file before that, and the
//! physical job looks for lock files after making the marker. The refusal
//! stays until an operator settles the directory (the message says how),
//! so a mixed directory fails every time rather than now and then. A
//! physical job refused so leaves the marker, also one it made itself:
//! another physical job may have seen it and be running, relying on it to
//! keep index jobs out.
//!
//! The index side costs one `fstatat(2)` per run, after the slot is taken;
//! the physical side, which surveys the hardware anyway, a directory read.
//! The classic scripts know nothing of the marker: a physical job refuses
//! their lock files, but one of them started after a physical job is not
//! refused (docs/differences.md).

use crate::error::Error;
use crate::slots::lockfile::{LockName, named, split_lock_file_name};
use crate::sys::dirs::for_each_entry;
use core::ffi::CStr;
use core::ops::ControlFlow;
use rustix::fs::{Access, Mode, OFlags};

/// The marker's name: `<prefix>.physical` (no lock file ends so).
fn marker(prefix: &[u8]) -> LockName {
    let mut name = LockName::new();
    let _ = name.push(prefix);
    let _ = name.push(b".physical");
    name
}

/// Whether `name` is a lock file named by index: `<prefix><digits>_<digits>`.
fn index_named(name: &[u8], prefix: &[u8]) -> bool {
    split_lock_file_name(name, prefix).is_some_and(|(id, _)| id.iter().all(u8::is_ascii_digit))
}

/// Index names: once the locks are taken, refuses when jobs with physical
/// names share the directory (`dir`, open as `dir_fd`). One `fstatat(2)`
/// in the open directory (cheaper than `access(2)`, which takes on the
/// real uid's credentials for the look, and than a walk of the whole path).
pub fn check_index(dir: &CStr, dir_fd: &rustix::fd::OwnedFd, prefix: &[u8]) -> Result<(), Error> {
    let name = marker(prefix);
    if rustix::fs::statat(dir_fd, name.as_cstr(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        let found = named(dir, name.as_bytes());
        return Err(Error::MixedLockNames { dir: dir.to_bytes().into(), physical: false, found });
    }
    Ok(())
}

/// Physical names: makes the marker (where missing), then refuses when the
/// directory holds a lock file named by index. Before any lock is taken.
pub fn announce_physical(dir: &CStr, dir_fd: &rustix::fd::OwnedFd, prefix: &[u8]) -> Result<(), Error> {
    let name = marker(prefix);
    let flags = OFlags::RDONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    match rustix::fs::openat(dir_fd, name.as_cstr(), flags, Mode::from_raw_mode(0o666)) {
        Ok(_) => {}
        // Someone else's marker, or a read-only directory that has one.
        Err(_)
            if rustix::fs::accessat(dir_fd, name.as_cstr(), Access::EXISTS, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok() => {}
        Err(errno) => {
            let hint = crate::slots::lockfile::hint(dir.to_bytes(), errno, true);
            return Err(Error::LockFileCreate { path: named(dir, name.as_bytes()), errno, hint });
        }
    }
    let found = for_each_entry(dir_fd, |entry, _| {
        if index_named(entry.to_bytes(), prefix) {
            ControlFlow::Break(named(dir, entry.to_bytes()))
        } else {
            ControlFlow::Continue(())
        }
    });
    match found {
        Ok(Some(found)) => Err(Error::MixedLockNames { dir: dir.to_bytes().into(), physical: true, found }),
        Ok(None) => Ok(()),
        Err(errno) => {
            Err(Error::System { what: "cannot read lock directory", path: Some(dir.to_bytes().into()), errno })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_are_told_from_others() {
        for yes in [&b"gpulock0_0"[..], b"gpulock12_3"] {
            assert!(index_named(yes, b"gpulock"), "{yes:?}");
        }
        for no in [
            &b"gpulockuid-1002_0"[..],
            b"gpulockGPU-8932f937_0",
            b"gpulock.physical",
            b"gpulock.queue",
            b"gpulock1_",
            b"gpulock_0",
            b"gpulockMIG-GPU-1+1+0_0",
            b"jax_accelerator_lock_0_0",
        ] {
            assert!(!index_named(no, b"gpulock"), "{no:?}");
        }
        assert!(index_named(b"jax_accelerator_lock_0_0", b"jax_accelerator_lock_"));
        assert_eq!(marker(b"gpulock").as_bytes(), b"gpulock.physical");
    }
}
