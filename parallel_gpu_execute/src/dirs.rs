//! Directory reading with `getdents64` into a stack buffer (no `opendir`,
//! which allocates its buffer on the heap).

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, RawDir};
use rustix::io::Errno;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ops::ControlFlow;
use wrapper_common::StackPath;

const DIR_FLAGS: OFlags = OFlags::DIRECTORY.union(OFlags::RDONLY).union(OFlags::CLOEXEC);

pub fn open_dir(path: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, DIR_FLAGS, Mode::empty())
}

pub fn open_dir_at(dir: impl AsFd, name: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
}

/// Calls `f` with the name and type of each entry of `dir` except `.` and
/// `..`, until `f` breaks. The type is `Unknown` on file systems that do not
/// report it.
pub fn for_each_entry<T>(
    dir: impl AsFd,
    mut f: impl FnMut(&CStr, FileType) -> ControlFlow<T>,
) -> Result<Option<T>, Errno> {
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = RawDir::new(dir.as_fd(), &mut buf);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        if let ControlFlow::Break(t) = f(name, entry.file_type()) {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// Counts the entries of `dir` whose names satisfy `keep`; `None` when the
/// directory cannot be read.
pub fn count_entries(path: &CStr, mut keep: impl FnMut(&[u8]) -> bool) -> Option<u32> {
    let dir = open_dir(path).ok()?;
    let mut n = 0u32;
    for_each_entry(&dir, |name, _| {
        if keep(name.to_bytes()) {
            n = n.saturating_add(1);
        }
        ControlFlow::<()>::Continue(())
    })
    .ok()?;
    Some(n)
}

/// `<sysroot><absolute>`: a host path under the fake-hardware prefix (the
/// real root when `sysroot` is empty).
pub fn host_path(sysroot: &[u8], absolute: &[u8]) -> Option<StackPath> {
    let mut p = StackPath::from_bytes(sysroot).ok()?;
    p.push(absolute).ok()?;
    Some(p)
}
