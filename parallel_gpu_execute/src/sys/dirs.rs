//! Directory reading with `getdents64` into a stack buffer (no `opendir`,
//! which allocates its buffer on the heap).

use core::ffi::CStr;
use core::mem::MaybeUninit;
use core::ops::ControlFlow;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags, RawDir};
use rustix::io::Errno;
use wrapper_common::lines::{Line, for_each_line_of_attribute};
use wrapper_common::{CBuf, StackPath, with_joined};

/// `<entry>/<file>` below a directory: an entry name is at most 255 bytes
/// (`NAME_MAX`) and the file names joined to it are short words, so this
/// small buffer holds any such path that can exist.
pub type EntryPath = CBuf<320>;

const DIR_FLAGS: OFlags = OFlags::DIRECTORY.union(OFlags::RDONLY).union(OFlags::CLOEXEC);

pub fn open_dir(path: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, DIR_FLAGS, Mode::empty())
}

pub fn open_dir_at(dir: impl AsFd, name: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
}

/// The whole of a (small) file, such as `/proc/locks` or `/proc/<pid>/stat`,
/// on the heap; `None` when it cannot be opened or read. For `--status`
/// only, which allocates anyway.
pub fn read_file(path: &CStr) -> Option<alloc::vec::Vec<u8>> {
    let fd = wrapper_common::lines::open_for_reading(path).ok()?;
    let mut data = alloc::vec::Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match rustix::io::read(&fd, &mut chunk) {
            Ok(0) => return Some(data),
            Ok(n) => data.extend_from_slice(&chunk[..n]),
            Err(Errno::INTR) => {}
            Err(_) => return None,
        }
    }
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

/// Opens `<entry>/<file>` below the directory `dir` for reading
/// (`ENAMETOOLONG` when the two do not fit a path).
pub fn open_at(dir: impl AsFd, entry: &[u8], file: &[u8]) -> Result<OwnedFd, Errno> {
    let mut rel = EntryPath::from_bytes(entry).map_err(|_| Errno::NAMETOOLONG)?;
    rel.push_path(file).map_err(|_| Errno::NAMETOOLONG)?;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    rustix::fs::openat(dir, rel.as_cstr(), flags, Mode::empty())
}

/// Calls `f` with each complete line of `<entry>/<file>` below `dir`, read
/// through a stack buffer of `N` bytes (longer lines are skipped) as a
/// kernel attribute file, usually in one `read`; the error when the file
/// cannot be opened or read (a sysfs attribute may refuse the `read` after
/// the open succeeded).
pub fn for_each_line_at<const N: usize>(
    dir: impl AsFd,
    entry: &[u8],
    file: &[u8],
    mut f: impl FnMut(&[u8]),
) -> Result<(), Errno> {
    let fd = open_at(dir, entry, file)?;
    let mut buf = [0u8; N];
    for_each_line_of_attribute(&fd, &mut buf, |Line { bytes, complete }| {
        if complete {
            f(bytes);
        }
        ControlFlow::Continue(())
    })
}

/// Calls `f` with the host path `<sysroot><absolute>`, followed by `number`
/// in decimal when given (`/dev/nvidia` and 3: `/dev/nvidia3`); `None`
/// when no such path can be built. Built in a short buffer
/// ([`with_joined`]): the counting paths carry no 4 KiB path buffer.
pub fn with_host_path<R>(
    sysroot: &[u8],
    absolute: &[u8],
    number: Option<u64>,
    f: impl FnOnce(&CStr) -> R,
) -> Option<R> {
    with_joined(&[sysroot, absolute], number, f)
}

/// Whether the host path `<sysroot><absolute>` exists (one `access(2)`).
pub fn host_exists(sysroot: &[u8], absolute: &[u8]) -> bool {
    with_host_path(sysroot, absolute, None, wrapper_common::runfiles::exists_cstr).unwrap_or(false)
}

/// `<sysroot><absolute>`, followed by `number` when given, as a `StackPath`
/// to keep (messages). The counting paths use [`with_host_path`] instead.
///
/// Built in place (not through `StackPath::from_bytes(..).ok()`, whose
/// `Result` to `Option` conversion copies the 4 KiB buffer through a second
/// one on the stack).
pub fn host_path(sysroot: &[u8], absolute: &[u8], number: Option<u64>) -> Option<StackPath> {
    let mut p = StackPath::new();
    p.push_all(&[sysroot, absolute], number).ok()?;
    Some(p)
}
