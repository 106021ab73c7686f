//! Lock files and their directory: the names (`gpulock<id>_<slot>`), the
//! directory created when missing, each file opened without following a
//! link and refused unless it is a regular file, and the non-blocking
//! exclusive `flock(2)` that takes one.

use crate::error::Error;
use crate::prelude::*;
use core::ffi::CStr;
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::{CBuf, StackPath};

/// `<dir>/<name>` for messages and path-based checks.
pub fn join(dir: &CStr, name: &[u8]) -> StackPath {
    let mut p = StackPath::from_bytes(dir.to_bytes()).unwrap_or_default();
    let _ = p.push_path(name);
    p
}

/// `<dir>/<name>` for an error, on the heap (see [`Error`]'s paths).
#[cold]
#[inline(never)]
pub fn named(dir: &CStr, name: &[u8]) -> Box<[u8]> {
    join(dir, name).as_bytes().into()
}

/// A lock or queue file's name: the longest prefix (21 bytes), an id of at
/// most 128 bytes, `_` and a slot number fit; a 4 KiB buffer would cost a
/// stack page on every run.
pub type LockName = CBuf<192>;

/// `<prefix><id>_<slot>` (`gpulock3_0`): the name of one lock file inside
/// the lock directory.
pub fn lock_file_name(prefix: &[u8], id: &[u8], slot: u32) -> LockName {
    let mut name = LockName::new();
    // Ids are at most 128 bytes of a safe alphabet (checked in `request`),
    // so this always fits.
    let _ = name.push(prefix);
    let _ = name.push(id);
    let _ = name.push(b"_");
    let _ = name.push_u64(u64::from(slot));
    name
}

/// [`lock_file_name`] read back: the id and the slot's digits of `name`
/// under `prefix` (`<prefix><id>_<digits>`, the id not empty; it may hold
/// `_` itself).
pub fn split_lock_file_name<'n>(name: &'n [u8], prefix: &[u8]) -> Option<(&'n [u8], &'n [u8])> {
    let rest = name.strip_prefix(prefix)?;
    let cut = rest.iter().rposition(|&b| b == b'_')?;
    let (id, digits) = (&rest[..cut], &rest[cut + 1..]);
    // One spelling per slot, as the wrappers write it: `_5`, never `_05`.
    let canonical = digits.len() == 1 || digits.first() != Some(&b'0');
    (!id.is_empty() && !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) && canonical).then_some((id, digits))
}

/// Opens the lock directory, creating it (and its parents) when missing.
/// A link on the way that points nowhere (`/var/lock` to `../run/lock`
/// with an empty `/run`) is named, with its repair.
///
/// A lock directory it makes is mode 1777, as `/var/lock` and `/tmp` are:
/// every user of the host may take slots there, and only a file's owner
/// (or root) may remove it; whoever makes it, a test or an operator's
/// `--drain`, others can use it. Its parents get the umask's modes.
pub fn open_lock_dir(dir: &CStr) -> Result<OwnedFd, Error> {
    let flags = LOCK_DIR_FLAGS;
    let fail = |action, errno| lock_dir_error(dir, action, errno);
    match rustix::fs::open(dir, flags, Mode::empty()) {
        Ok(fd) => return Ok(fd),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(fail("open it", e)),
    }
    if let Some(e) = dangling(dir) {
        return Err(e);
    }
    let made = create_dirs(dir.to_bytes()).map_err(|e| fail("create it", e))?;
    let fd =
        rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| dangling(dir).unwrap_or_else(|| fail("open it", e)))?;
    if made {
        let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o1777));
    }
    Ok(fd)
}

const LOCK_DIR_FLAGS: OFlags = OFlags::DIRECTORY.union(OFlags::RDONLY).union(OFlags::CLOEXEC);

/// The lock directory `dir` could not be opened or made (`action`): the
/// error, with its cause and repair.
#[cold]
fn lock_dir_error(dir: &CStr, action: &'static str, errno: Errno) -> Error {
    let near = nearest_dir(dir.to_bytes());
    // Missing: the repair makes it, never opens up a parent (`/`).
    let make = (near != dir.to_bytes()).then_some(dir.to_bytes());
    Error::LockDir { dir: dir.to_bytes().into(), action, errno, hint: hint_at(near, make, errno, false) }
}

/// Makes the directory `name` (`gpuqueue`, `gpudrain`) in the lock
/// directory `dir_fd`, mode 1777: anyone may add a file there, only its
/// owner (or root) remove it. Made under a temporary name of this process
/// alone (`.<name>.<pid>.<boot-clock ns>.new`: PIDs repeat across the PID
/// namespaces that share a directory), given its mode, then renamed into
/// place, so that a maker killed half way never leaves one other users
/// cannot add to (what it leaves, the next maker removes a minute on:
/// [`remove_leftovers`]). `Ok` also where another made it meanwhile (renameat
/// refuses a non-empty one with ENOTEMPTY or EEXIST, and replaces an empty
/// one).
pub fn make_shared_dir(dir_fd: &OwnedFd, name: &CStr) -> Result<(), Errno> {
    let nanos = crate::sys::clock::host_since_boot().as_nanos();
    let mut temporary = CBuf::<80>::from_bytes(b".").unwrap_or_default();
    let _ = temporary.push(name.to_bytes());
    let _ = temporary.push(b".");
    let _ = temporary.push_u64(u64::from(rustix::process::getpid().as_raw_nonzero().get().unsigned_abs()));
    let _ = temporary.push(b".");
    let _ = temporary.push_u64(u64::try_from(nanos).unwrap_or(u64::MAX));
    temporary.push(b".new").map_err(|_| Errno::NAMETOOLONG)?;
    rustix::fs::mkdirat(dir_fd, temporary.as_cstr(), Mode::from_raw_mode(0o700))?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let made = rustix::fs::openat(dir_fd, temporary.as_cstr(), flags, Mode::empty())
        .and_then(|d| rustix::fs::fchmod(&d, Mode::from_raw_mode(0o1777)))
        .and_then(|()| rustix::fs::renameat(dir_fd, temporary.as_cstr(), dir_fd, name));
    if made.is_err() {
        let _ = rustix::fs::unlinkat(dir_fd, temporary.as_cstr(), rustix::fs::AtFlags::REMOVEDIR);
    }
    match made {
        Ok(()) => {
            remove_leftovers(dir_fd, name);
            Ok(())
        }
        Err(Errno::EXIST | Errno::NOTEMPTY) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the temporary directories of `name` (`.<name>.<pid>.<ns>.new`)
/// that makers killed between making and renaming them left in `dir_fd`,
/// once they are a minute old (by their modification time, which only
/// their owner can set): a younger one may be another maker's, about to be
/// renamed, and `rmdir` takes only an empty one (another user's, in a
/// sticky directory, stays). Run by whoever has just made `name`, so
/// once each time it was missing, never on the way to a free slot.
#[cold]
fn remove_leftovers(dir_fd: &OwnedFd, name: &CStr) {
    use crate::sys::clock::{SystemTime, UNIX_EPOCH};
    use rustix::fs::AtFlags;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(dir) = rustix::fs::openat(dir_fd, c".", flags, Mode::empty()) else { return };
    let stem = name.to_bytes();
    let mut left: Vec<CBuf<80>> = Vec::new();
    let _ = crate::sys::dirs::for_each_entry(&dir, |entry, kind| {
        let e = entry.to_bytes();
        let ours = e.strip_prefix(b".").and_then(|e| e.strip_prefix(stem)).is_some_and(|e| e.starts_with(b"."));
        if ours && e.ends_with(b".new") && matches!(kind, FileType::Directory | FileType::Unknown) {
            left.extend(CBuf::<80>::from_bytes(e));
        }
        core::ops::ControlFlow::<()>::Continue(())
    });
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    for t in &left {
        let Ok(st) = rustix::fs::statat(&dir, t.as_cstr(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        let age = now.saturating_sub(u64::try_from(st.st_mtime).unwrap_or(u64::MAX));
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory && age > 60 {
            let _ = rustix::fs::unlinkat(&dir, t.as_cstr(), AtFlags::REMOVEDIR);
        }
    }
}

/// What a file of mode `mode` is, for a message: `regular file`,
/// `symbolic link`, ...
pub fn kind_of(mode: u32) -> &'static str {
    match FileType::from_raw_mode(mode) {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice | FileType::BlockDevice => "device",
        FileType::Unknown => "file of unknown type",
    }
}

/// A directory made by [`make_shared_dir`] that is this user's own with
/// another mode (an older release made `gpudrain/` 0777) is given 1777.
pub fn repair_shared_mode(fd: &OwnedFd) {
    if let Ok(st) = rustix::fs::fstat(fd) {
        if st.st_mode & 0o7777 != 0o1777 && st.st_uid == rustix::process::geteuid().as_raw() {
            let _ = rustix::fs::fchmod(fd, Mode::from_raw_mode(0o1777));
        }
    }
}

/// The nearest of `path` and its parents that exists, for a message.
#[cold]
fn nearest_dir(path: &[u8]) -> &[u8] {
    let mut p = path;
    loop {
        if wrapper_common::with_joined(&[p], None, |c| rustix::fs::stat(c).is_ok()) == Some(true) {
            return p;
        }
        match p.iter().rposition(|&b| b == b'/') {
            Some(0) => return b"/",
            Some(cut) => p = &p[..cut],
            None => return b".",
        }
    }
}

/// Whether this process runs in Bazel's sandbox (linux-sandbox's PID 1,
/// or a `TEST_SRCDIR` in its sandbox tree), where a read-only lock
/// directory is the sandbox's doing.
fn in_bazel_sandbox() -> bool {
    let srcdir = wrapper_common::env::var_nonempty(b"TEST_SRCDIR").unwrap_or_default();
    srcdir.windows(9).any(|w| w == b"/sandbox/") || crate::slots::privacy::in_linux_sandbox()
}

/// Why files cannot be made in the directory `dir` (`errno`), and what
/// repairs it, in parentheses: the file system full or over a quota; the
/// directory's owner and mode where this user may not write there; Bazel's
/// `--sandbox_writable_path` only where the sandbox made it read-only.
/// `lock_files`: the failure was at a lock file (else at the directory).
#[cold]
pub fn hint(dir: &[u8], errno: Errno, lock_files: bool) -> Box<str> {
    hint_at(dir, None, errno, lock_files)
}

/// The repair where the host's root is refused too (`EPERM` and the like:
/// an immutable directory, a file system without Unix modes), and so
/// every user ([`refused_to_root`]).
pub const REFUSED_TO_ROOT: &str =
    "give a lock directory root may write: not immutable (lsattr -d), on a local file system with Unix modes (not FAT)";

/// Whether `errno` refused the initial user namespace's root: no user
/// could do better (a namespace's root, or an `EACCES` that a missing
/// capability or NFS's `root_squash` may explain, is told the owner's
/// repair instead).
pub fn refused_to_root(errno: Errno) -> bool {
    matches!(errno, Errno::PERM | Errno::NOSYS | Errno::OPNOTSUPP)
        && rustix::process::geteuid().is_root()
        && crate::sys::userns::initial(crate::sys::userns::Ids::User)
}

/// [`hint`], where `make` is the missing directory that was to be made in
/// `dir` (its nearest existing parent): root makes it, mode 1777.
#[cold]
fn hint_at(dir: &[u8], make: Option<&[u8]>, errno: Errno, lock_files: bool) -> Box<str> {
    let d = wrapper_common::diag::Excerpt(dir);
    let beforehand = if lock_files { ", or make the lock files beforehand" } else { "" };
    let text = match errno {
        Errno::NOSPC => " (its file system is full: free space or inodes there)".to_string(),
        Errno::DQUOT => " (a disk quota is reached: free some or raise it)".to_string(),
        Errno::ROFS if in_bazel_sandbox() => {
            format!(
                " (Bazel's sandbox makes it read-only: make {d} writable with --sandbox_writable_path={d}{beforehand})"
            )
        }
        Errno::ROFS => format!(" ({d} is on a read-only file system: mount it read-write{beforehand})"),
        Errno::ACCESS | Errno::PERM => {
            let me = rustix::process::geteuid().as_raw();
            let repair = match make {
                Some(m) => {
                    let m = wrapper_common::diag::Excerpt(m);
                    format!("root runs mkdir -p {m} && chmod 1777 {m}")
                }
                None => format!("its owner or root runs chmod 1777 {d}{beforehand}"),
            };
            match wrapper_common::with_joined(&[dir], None, |c| rustix::fs::stat(c).ok()).flatten() {
                Some(st) if crate::sys::userns::unmapped(st.st_uid, crate::sys::userns::Ids::User) => {
                    format!(" ({d} is uid {}'s, {}: on the host, {repair})", st.st_uid, crate::sys::userns::ANY_OUTSIDE)
                }
                Some(st) => format!(
                    " ({d} is uid {}'s, mode {:04o}, and this user is uid {me}: {repair})",
                    st.st_uid,
                    st.st_mode & 0o7777
                ),
                None => format!(" (this user, uid {me}, may not write in {d}{beforehand})"),
            }
        }
        Errno::NOTDIR => " (a part of its path is a file, not a directory)".to_string(),
        _ if in_bazel_sandbox() => {
            format!(" (under Bazel's sandbox, make {d} writable with --sandbox_writable_path={d})")
        }
        _ => String::new(),
    };
    text.into_boxed_str()
}

/// The first component of `dir` that is a symbolic link to nothing, as
/// an error that names it and its target.
#[cold]
pub fn dangling(dir: &CStr) -> Option<Error> {
    let path = dir.to_bytes();
    let mut end = 0;
    while end < path.len() {
        end = path[end + 1..].iter().position(|&b| b == b'/').map_or(path.len(), |p| end + 1 + p);
        let prefix = alloc::ffi::CString::new(&path[..end]).ok()?;
        let Ok(st) = rustix::fs::lstat(&prefix) else { return None };
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink && rustix::fs::stat(&prefix).is_err() {
            let target = rustix::fs::readlink(&prefix, Vec::new()).map(|t| t.into_bytes()).unwrap_or_default();
            return Some(Error::DanglingLockDir {
                dir: path.into(),
                link: path[..end].into(),
                target: target.into_boxed_slice(),
            });
        }
    }
    None
}

/// `mkdir -p`: each missing component, mode 0777 less the umask; whether
/// it made the last component.
fn create_dirs(path: &[u8]) -> Result<bool, Errno> {
    let mut prefix = StackPath::new();
    let mut made = false;
    for (i, &b) in path.iter().enumerate() {
        let end_of_component = b == b'/' && i > 0 || i + 1 == path.len();
        if end_of_component {
            let upto = if b == b'/' { i } else { i + 1 };
            prefix.truncate(0);
            prefix.push(&path[..upto]).map_err(|_| Errno::NAMETOOLONG)?;
            made = match rustix::fs::mkdir(prefix.as_cstr(), Mode::from_raw_mode(0o777)) {
                Ok(()) => true,
                Err(Errno::EXIST) => false,
                Err(e) => return Err(e),
            };
        }
    }
    Ok(made)
}

/// The error every test would meet opening or making the lock directory
/// `dir`, judged without making anything (for `--list`): `None` where it
/// opens, or where it is missing and its nearest existing parent takes a
/// new directory from this user; a link on its way that points nowhere is
/// [`dangling`]'s error.
pub fn unusable_dir(dir: &CStr) -> Option<Error> {
    let (action, errno) = match rustix::fs::open(dir, LOCK_DIR_FLAGS, Mode::empty()) {
        Ok(_) => return unsearchable(dir),
        Err(Errno::NOENT) => {
            if let Some(e) = dangling(dir) {
                return Some(e);
            }
            let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
            let near = StackPath::from_bytes(nearest_dir(dir.to_bytes())).ok()?;
            // Only a refusal: `ENOSYS` (no `faccessat2` for a set-id
            // process before Linux 5.8) says nothing.
            match rustix::fs::accessat(rustix::fs::CWD, near.as_cstr(), access, rustix::fs::AtFlags::EACCESS) {
                Err(e @ (Errno::ACCESS | Errno::PERM | Errno::ROFS)) => ("create it", e),
                _ => return None,
            }
        }
        Err(e) => ("open it", e),
    };
    Some(lock_dir_error(dir, action, errno))
}

/// The error every step in the lock directory `dir` meets where this user
/// may not search it (`chmod 000` while a test waits, or a mode that lets
/// it read the directory only), named as the start names a directory it
/// may not open: its owner, its mode and the repair. Only a refusal counts.
#[cold]
pub fn unsearchable(dir: &CStr) -> Option<Error> {
    match rustix::fs::access(dir, rustix::fs::Access::EXEC_OK) {
        Err(e @ (Errno::ACCESS | Errno::PERM)) => Some(lock_dir_error(dir, "open it", e)),
        _ => None,
    }
}

/// What an opened lock path is instead of a regular file. A directory, a
/// socket and a symbolic link never open, so are named by their errors in
/// `open_existing`: `EISDIR` and `ELOOP` come before any permission check
/// (also for the read-only retry); a socket gives `ENXIO`, or `EACCES`
/// where this user may not open it at all (an unusable slot, skipped).
fn describe(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Fifo => "a FIFO, not a regular file",
        FileType::CharacterDevice => "a character device, not a regular file",
        FileType::BlockDevice => "a block device, not a regular file",
        _ => "not a regular file",
    }
}

/// The refusal of the lock path `name` in `dir` that `st` (from `lstat`)
/// describes, where it is anything but a regular file, or, where `linked`
/// says what that is (not empty), one with another name: told without
/// opening it (its close would wake every waiter watching it).
pub fn refused(dir: &CStr, name: &LockName, st: &rustix::fs::Stat, linked: &'static str) -> Option<Error> {
    let what = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile if st.st_nlink > 1 && !linked.is_empty() => linked,
        FileType::RegularFile => return None,
        FileType::Symlink => "a symbolic link, not a regular file",
        FileType::Socket => "a socket, not a regular file",
        FileType::Directory => "a directory, not a regular file",
        other => describe(other),
    };
    Some(Error::UnsafeLockPath { path: named(dir, name.as_bytes()), what })
}

/// Opens (creating when missing) one lock file, refusing anything that is
/// not a regular file. For reading and writing where this user may, as the
/// classic `exec {fd}>file` does (NFS emulates `flock` with a write lock,
/// which needs a descriptor open for writing), but never truncating; read
/// only where not (a file another user created, a read-only file system),
/// which serves a local `flock` as well. Nothing is ever written to it.
///
/// With the descriptor, the file's identity (device, inode), to tell later
/// whether it is still the file at its path.
pub fn open_lock_file(dir_fd: &OwnedFd, dir: &CStr, name: &LockName) -> Result<(OwnedFd, FileId), Error> {
    // A file that appears between the two opens is simply opened again.
    for _ in 0..8 {
        if let Some(found) = open_existing(dir_fd, dir, name)? {
            return Ok(found);
        }
        // O_EXCL also fails on a (dangling) symlink, which the next open
        // then refuses.
        match rustix::fs::openat(
            dir_fd,
            name.as_cstr(),
            OPEN_FLAGS | OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
            // As bash's `exec {fd}>file` creates it (0666 less the umask), so
            // that a classic script run later by another user can open it.
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => {
                let st = stat_lock_file(&fd, dir, name)?;
                return Ok((fd, (st.st_dev, st.st_ino)));
            }
            Err(Errno::EXIST) => {}
            Err(errno) => {
                let hint = hint(dir.to_bytes(), errno, true);
                return Err(Error::LockFileCreate { path: named(dir, name.as_bytes()), errno, hint });
            }
        }
    }
    Err(Error::System {
        what: "lock file keeps changing",
        path: Some(named(dir, name.as_bytes())),
        errno: Errno::AGAIN,
    })
}

fn stat_lock_file(fd: &OwnedFd, dir: &CStr, name: &LockName) -> Result<rustix::fs::Stat, Error> {
    rustix::fs::fstat(fd).map_err(|errno| Error::System {
        what: "cannot stat lock file",
        path: Some(named(dir, name.as_bytes())),
        errno,
    })
}

/// How `gpuqueue/` and `gpudrain/` are opened: never through a link.
pub const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

const OPEN_FLAGS: OFlags = OFlags::NOFOLLOW.union(OFlags::NONBLOCK).union(OFlags::CLOEXEC).union(OFlags::NOCTTY);

/// A file's identity: its device and inode, as `stat` gives them.
pub type FileId = (u64, u64);

/// Opens a lock (or queue) file that exists, as [`open_lock_file`] does;
/// `None` when there is none.
pub fn open_existing(dir_fd: &OwnedFd, dir: &CStr, name: &LockName) -> Result<Option<(OwnedFd, FileId)>, Error> {
    let refuse = |what| Error::UnsafeLockPath { path: named(dir, name.as_bytes()), what };
    let opened = match rustix::fs::openat(dir_fd, name.as_cstr(), OPEN_FLAGS | OFlags::RDWR, Mode::empty()) {
        // WOULDBLOCK: another user's read lease, which only opens for
        // writing break.
        Err(Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::TXTBSY | Errno::WOULDBLOCK) => {
            rustix::fs::openat(dir_fd, name.as_cstr(), OPEN_FLAGS | OFlags::RDONLY, Mode::empty())
        }
        other => other,
    };
    match opened {
        Ok(fd) => {
            let st = stat_lock_file(&fd, dir, name)?;
            let file_type = FileType::from_raw_mode(st.st_mode);
            if file_type != FileType::RegularFile {
                return Err(refuse(describe(file_type)));
            }
            Ok(Some((fd, (st.st_dev, st.st_ino))))
        }
        Err(Errno::LOOP) => Err(refuse("a symbolic link, not a regular file")),
        Err(Errno::NXIO) => Err(refuse("a socket, not a regular file")),
        Err(Errno::ISDIR) => Err(refuse("a directory, not a regular file")),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => {
            Err(Error::System { what: "cannot open lock file", path: Some(named(dir, name.as_bytes())), errno })
        }
    }
}

/// What is said of a lock file this user may not use (`error`): the
/// error, what follows for the test (`then`), and the repair; as a whole
/// warning line (`warning`), or an error's text.
#[cold]
pub fn unusable(error: &Error, then: &str, warning: bool) -> String {
    let (tool, w, nl) = if warning { (crate::TOOL, ": warning: ", "\n") } else { ("", "", "") };
    match error {
        Error::System { path: Some(path), errno, .. } => format!(
            "{tool}{w}cannot open lock file {p} ({}): {then}; to repair, its owner or root runs: chmod a+rw {p} (or removes it while no test runs){nl}",
            wrapper_common::diag::Os(*errno),
            p = wrapper_common::diag::Bytes(path),
        ),
        Error::UnsafeLockPath { path, what } => format!(
            "{tool}{w}{error}: {then}; to repair, its owner or root runs: {} {} (while no test runs){nl}",
            if what.starts_with("a directory") { "rmdir" } else { "rm" },
            wrapper_common::diag::Bytes(path),
        ),
        // Its repair is in the error's own words.
        _ => format!("{tool}{w}{error}: {then}{nl}"),
    }
}

/// Sets a held lock file's times to now, so that cleaners that remove old
/// files from `/tmp` (systemd-tmpfiles, tmpreaper, `find -mtime`) see it
/// in use, as the classic script's truncation at every take did, and its
/// change time says when it was taken. Needs write access or ownership;
/// where neither is had, the times stay (`false`).
pub fn keep_young(fd: &OwnedFd) -> bool {
    let now = rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_NOW };
    rustix::fs::futimens(fd, &rustix::fs::Timestamps { last_access: now, last_modification: now }).is_ok()
}

/// Tries an exclusive lock without blocking: `Ok(true)` when taken.
pub fn try_flock(fd: &OwnedFd, path: impl Fn() -> Box<[u8]>) -> Result<bool, Error> {
    loop {
        match rustix::fs::flock(fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(Errno::WOULDBLOCK) => return Ok(false),
            Err(Errno::INTR) => {}
            Err(errno) => return Err(Error::System { what: "cannot flock", path: Some(path()), errno }),
        }
    }
}

/// Is `dir_fd` still the directory at `dir`? No once it was removed
/// (`rm -rf`), renamed or replaced. Checked on every wake-up of a waiter:
/// inotify cannot say it, since the kernel reports a directory's deletion
/// only when its last reference goes, and the waiter's own open lock files
/// in it are references.
pub fn dir_still_there(dir: &CStr, dir_fd: &OwnedFd) -> bool {
    match (rustix::fs::fstat(dir_fd), rustix::fs::stat(dir)) {
        (Ok(open), Ok(named)) => open.st_nlink > 0 && open.st_dev == named.st_dev && open.st_ino == named.st_ino,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_file_names() {
        assert_eq!(lock_file_name(b"gpulock", b"3", 0).as_bytes(), b"gpulock3_0");
        assert_eq!(lock_file_name(b"gpulock", b"GPU-ab-12", 7).as_bytes(), b"gpulockGPU-ab-12_7");
        assert_eq!(lock_file_name(b"jax_accelerator_lock_", b"2", 5).as_bytes(), b"jax_accelerator_lock_2_5");
    }

    #[test]
    fn a_removed_renamed_or_replaced_lock_directory_is_noticed() {
        // A waiter used to sleep forever after `rm -rf` of its lock
        // directory: inotify never reported the removal (the waiter's own
        // open lock files keep the directory alive), and its cached lock
        // files were the deleted ones. It now checks the directory itself.
        let base = std::env::temp_dir().join(format!("pge-dir-gone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let path = base.join("locks");
        let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        std::fs::create_dir_all(&path).unwrap();
        let fd = open_lock_dir(&cpath).unwrap();
        let (inside, _) = open_lock_file(&fd, &cpath, &lock_file_name(b"gpulock", b"0", 0)).unwrap();
        assert!(dir_still_there(&cpath, &fd));
        std::fs::remove_dir_all(&path).unwrap();
        assert!(!dir_still_there(&cpath, &fd), "removed, though a file in it is still open");
        std::fs::create_dir_all(&path).unwrap();
        assert!(!dir_still_there(&cpath, &fd), "replaced by a new directory");
        let fd = open_lock_dir(&cpath).unwrap();
        std::fs::rename(&path, base.join("moved")).unwrap();
        assert!(!dir_still_there(&cpath, &fd), "renamed away");
        drop(inside);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_impossibly_long_lock_directory_is_named_in_its_error() {
        // It used to be reported as "lock directory : cannot open it", naming nothing.
        let mut dir = vec![b'/'];
        dir.extend(std::iter::repeat_n(b'd', 4999));
        let dir = std::ffi::CString::new(dir).unwrap();
        let err = open_lock_dir(&dir).unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("lock directory /dddd"), "{message}");
        assert!(message.contains("File name too long"), "{message}");
    }

    #[test]
    fn join_paths() {
        assert_eq!(join(c"/var/lock", b"gpulock0_0").as_bytes(), b"/var/lock/gpulock0_0");
        assert_eq!(join(c"/var/lock/", b"x").as_bytes(), b"/var/lock/x");
    }
}
