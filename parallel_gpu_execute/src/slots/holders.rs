//! Who holds and who waits for a lock file, found as `lsof` finds it: the
//! processes that have the file open (`/proc/<pid>/fd/*`), and among them
//! those whose open file holds the lock (a `lock:` line in
//! `/proc/<pid>/fdinfo/<fd>`), or who sleep in `flock(2)` on it
//! (`/proc/<pid>/task/*/syscall`), checked against `/proc/locks`. Reads
//! `/proc` only; takes no lock and opens no lock file.
//!
//! Why not `/proc/locks` alone: it names the process that *took* a lock,
//! which may have exited while the lock lives on in another process that
//! shares the open file. The classic scripts lock with `flock -n "$fd"`, a
//! child that exits at once; a test may fork and exit, leaving the lock to
//! its child. That PID is dead, and once reused it names an unrelated
//! process. A `/proc/locks` PID is therefore believed only when that
//! process has the file open and holds the lock through it.
//!
//! And `/proc/locks` leaves out, in a PID namespace other than the host's,
//! every lock whose taker it cannot see (an exited one included) together
//! with everyone blocked on it. What the fd scan finds fills that gap for
//! the processes this namespace can see. A holder that nothing visible
//! proves (held from outside the namespace, with nobody inside waiting for
//! it) cannot be told from a free slot without taking the lock, and is not
//! reported.
//!
//! `stat` and `/proc/locks` name a file's device differently on btrfs (a
//! subvolume's anonymous device against the superblock's) and may on
//! overlayfs: a file is matched to the fd links by `stat`'s device and
//! inode on both sides, and to `/proc/locks` by the device of its mount
//! (`/proc/self/mountinfo`), which is the superblock's, as `/proc/locks`
//! prints it.

use crate::prelude::*;
use crate::slots::proclocks::{LockEntry, parse_line};
use crate::sys::dirs::{for_each_entry, open_dir, open_dir_at, read_file};
use alloc::collections::BTreeMap;
use alloc::ffi::CString;
use core::ffi::CStr;
use core::mem::MaybeUninit;
use core::ops::ControlFlow;
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

/// A file's identity as `/proc/locks` writes it: major, minor, inode.
pub type LockKey = (u32, u32, u64);

/// One lock (or queue) file to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockFile<'a> {
    /// Its name in the lock directory: what the links in `/proc/<pid>/fd`
    /// end with.
    pub name: &'a [u8],
    /// `st_dev` and `st_ino`, as `stat` gives them for the path and for the
    /// fd links alike.
    pub dev: u64,
    pub ino: u64,
    /// As `/proc/locks` names it.
    pub key: LockKey,
    /// A queue file: what a process blocked in `flock(2)` most likely waits
    /// for when it cannot be told on which descriptor.
    pub queue: bool,
    /// A lease on it is being broken and it opens for reading meanwhile (a
    /// read lease, [`lease_lets_in`]): that lease holds no slot.
    pub lets_in: bool,
}

impl LockFile<'_> {
    /// Whether `l` locks this file, held or waited for (no read lease being broken).
    pub(crate) fn locked_by(&self, l: &LockEntry) -> bool {
        l.flock && !(l.breaking && self.lets_in)
    }
}

impl<'a> LockFile<'a> {
    /// `name`, as `stat` found it, in a directory whose mount has the
    /// device `device` ([`mount_device`]; `None`: `stat`'s own).
    pub fn new(name: &'a [u8], st: &Stat, device: Option<(u32, u32)>, queue: bool) -> LockFile<'a> {
        LockFile { name, dev: st.st_dev, ino: st.st_ino, key: key_of(st, device), queue, lets_in: false }
    }
}

/// The `/proc/locks` key of a file that `stat` gave `st`, on a mount with
/// the device `device`.
pub fn key_of(st: &Stat, device: Option<(u32, u32)>) -> LockKey {
    let (major, minor) = device.unwrap_or((libc::major(st.st_dev), libc::minor(st.st_dev)));
    (major, minor, st.st_ino)
}

/// A process that has the file open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opener {
    pub pid: i64,
    /// Its open file holds the lock (it shares it with whoever else has
    /// that open file: a fork, the process that took the lock).
    pub holds: bool,
    /// The PID in that lock's line: the process that took it (0 when it
    /// cannot be seen or has exited, in a PID namespace).
    pub taker: Option<i64>,
    /// It sleeps in `flock(2)` on the file.
    pub blocked: bool,
    /// What it has open is not the file but its twin: a file of the same
    /// name and inode number on another device. Subvolumes of one btrfs
    /// share the superblock's device and number their inodes alike, and
    /// `/proc/locks` names a file by that device and its inode alone, so
    /// the locks of a twin in another subvolume's lock directory look like
    /// the file's own: they are told apart by who holds them.
    pub twin: bool,
}

/// Whether this process sees every process and may read every one's
/// descriptors: root in the host's PID namespace. Even then a holder may
/// be out of sight (no `CAP_SYS_PTRACE` to read another user's
/// descriptors, a lock in flight over a unix socket): [`lockers`] decides
/// from `/proc/locks`, not from this.
pub fn sees_everyone() -> bool {
    rustix::process::geteuid().is_root() && host_pid_namespace()
}

fn pid_of(name: &[u8]) -> Option<i64> {
    i64::try_from(wrapper_common::numbers::parse_u64(name)?).ok()
}

fn cstring(text: String) -> CString {
    CString::new(text).unwrap_or_default()
}

/// The first value of a `key:\tvalue` line of a `/proc` file.
fn field<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|l| l.strip_prefix(key)).map(str::trim)
}

/// The device of the mount that `fd` is on, as `/proc/self/mountinfo`
/// writes it: the superblock's, which `/proc/locks` prints.
pub fn mount_device(fd: BorrowedFd) -> Option<(u32, u32)> {
    let info = read_file(&cstring(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())))?;
    let info = String::from_utf8(info).ok()?;
    let mount = field(&info, "mnt_id:")?;
    let mountinfo = String::from_utf8(read_file(c"/proc/self/mountinfo")?).ok()?;
    let line = mountinfo.lines().find(|l| l.split(' ').next() == Some(mount))?;
    let (major, minor) = line.split(' ').nth(2)?.split_once(':')?;
    let number = |n: &str| u32::try_from(wrapper_common::numbers::parse_u64(n.as_bytes())?).ok();
    Some((number(major)?, number(minor)?))
}

/// The `/proc/locks` key of an open file of this process.
pub fn fd_key(fd: BorrowedFd) -> Option<LockKey> {
    let st = rustix::fs::fstat(fd).ok()?;
    Some(key_of(&st, mount_device(fd)))
}

/// Whether this process sees the host's PID namespace (and so every lock
/// in `/proc/locks`): pid 2 is the kernel's `kthreadd`, a kernel thread
/// (`PF_KTHREAD` in its flags) whose parent is 0. In a PID namespace of its
/// own, no process is a kernel thread, though one entered from outside
/// (`docker exec`, `nsenter`) has its parent outside, shown as 0 too.
pub fn host_pid_namespace() -> bool {
    pid_view() == PidView::Host
}

/// What `/proc` shows of its PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidView {
    /// The host's: pid 2 is `kthreadd`.
    Host,
    /// One of its own: no kernel threads.
    Own,
    /// Cannot be told: pid 2 cannot be read (`/proc` mounted with
    /// `hidepid`, none mounted, or a PID namespace of one process).
    Hidden,
}

/// [`PidView`] of this `/proc`.
pub fn pid_view() -> PidView {
    if let Some(stat) = read_file(c"/proc/2/stat") {
        return if kernel_thread_of_none(&stat) { PidView::Host } else { PidView::Own };
    }
    // Pid 2 cannot be read: hidden (`hidepid`, `subset=pid`), no `/proc`,
    // or a PID namespace of its own with one process: the last where
    // `/proc` hides nothing.
    match read_file(c"/proc/self/mountinfo") {
        Some(m) if proc_hides_nothing(&m) => PidView::Own,
        _ => PidView::Hidden,
    }
}

/// Whether the `/proc` of the `mountinfo` text is a procfs mounted without
/// `hidepid` or `subset`, so that every process of its namespace shows.
fn proc_hides_nothing(mountinfo: &[u8]) -> bool {
    fn word(line: &[u8], n: usize) -> &[u8] {
        line.split(|&b| b == b' ').nth(n).unwrap_or(b"")
    }
    // The last mount at /proc is the one on top, the one seen.
    let Some(line) = mountinfo.split(|&b| b == b'\n').rev().find(|l| word(l, 4) == b"/proc") else { return false };
    // After the optional fields and `-`: the type, the source, the options.
    let Some(dash) = line.windows(3).position(|w| w == b" - ") else { return false };
    let after = &line[dash + 3..];
    word(after, 0) == b"proc"
        && word(after, 2).split(|&b| b == b',').all(|o| {
            !o.starts_with(b"subset=") && (!o.starts_with(b"hidepid=") || o == b"hidepid=0" || o == b"hidepid=off")
        })
}

/// Whether the `/proc/<pid>/stat` line `stat` is a kernel thread's
/// (`PF_KTHREAD`, the 7th field after the name) with no parent (0).
fn kernel_thread_of_none(stat: &[u8]) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let rest = stat.iter().rposition(|&b| b == b')').map_or(&b""[..], |at| &stat[at + 1..]);
    // ` S 0 0 0 0 -1 <flags>`: the state, the parent, ..., the flags.
    let mut fields = rest.split(|&b| b == b' ');
    fields.nth(2) == Some(b"0")
        && fields.nth(4).and_then(wrapper_common::numbers::parse_u64).is_some_and(|f| f & PF_KTHREAD != 0)
}

/// The descriptor of a `syscall` line that says `flock(fd, ...)` without
/// `LOCK_NB`: a thread asleep waiting for that lock.
fn flock_fd(line: &str) -> Option<i64> {
    let mut words = line.split_ascii_whitespace();
    let hex = |w: Option<&str>| w.and_then(|w| w.strip_prefix("0x")).and_then(|h| i64::from_str_radix(h, 16).ok());
    let nr: libc::c_long = words.next()?.parse().ok()?;
    let (fd, op) = (hex(words.next())?, hex(words.next())?);
    (nr == libc::SYS_flock && op & i64::from(libc::LOCK_NB) == 0).then_some(fd)
}

/// How a process sleeps, per thread: in `flock(2)` on which descriptor,
/// or (where `syscall` cannot be read, its wait channel can) in a lock
/// wait on one not known.
#[derive(Default)]
struct Sleep {
    fds: Vec<i64>,
    in_lock_wait: bool,
}

fn sleep_of(proc_dir: BorrowedFd, pid: i64) -> Sleep {
    let mut sleep = Sleep::default();
    let Ok(tasks) = open_dir_at(proc_dir, &cstring(format!("{pid}/task"))) else { return sleep };
    let _ = for_each_entry(&tasks, |tid, _| {
        let Some(tid) = pid_of(tid.to_bytes()) else { return ControlFlow::<()>::Continue(()) };
        let text = |file: &str| {
            read_file(&cstring(format!("/proc/{pid}/task/{tid}/{file}"))).and_then(|t| String::from_utf8(t).ok())
        };
        match text("syscall") {
            Some(line) => sleep.fds.extend(flock_fd(&line)),
            None => {
                // Readable where `syscall` is not (`syscall` needs the
                // right to attach with ptrace, which Yama's ptrace_scope
                // 1 refuses a user for its own processes but its children).
                let wchan = text("wchan").unwrap_or_default();
                sleep.in_lock_wait |= wchan.contains("lock_inode_wait") || wchan.contains("lock_file_wait");
            }
        }
        ControlFlow::Continue(())
    });
    sleep
}

/// A descriptor of one process that refers to one of the files.
struct Found {
    file: usize,
    fd: i64,
    holds: bool,
    taker: Option<i64>,
    /// A twin of the file ([`Opener::twin`]).
    twin: bool,
}

/// The held lock of `file` that `/proc/<pid>/fdinfo/<fd>` shows, and its PID.
fn held_through(pid: i64, fd: &CStr, file: &LockFile) -> Option<i64> {
    let info = read_file(&cstring(format!("/proc/{pid}/fdinfo/{}", fd.to_str().ok()?)))?;
    let info = String::from_utf8(info).ok()?;
    info.lines()
        .filter_map(|l| l.strip_prefix("lock:"))
        .filter_map(|l| parse_line(l.trim_start()))
        .find(|l| file.locked_by(l) && !l.blocked && l.inode == file.key.2)
        .map(|l| l.pid)
}

/// The descriptors of `pid` that refer to `files`.
fn descriptors(
    proc_dir: BorrowedFd,
    pid: i64,
    files: &[LockFile],
    by_name: &BTreeMap<&[u8], Vec<usize>>,
) -> Vec<Found> {
    let mut found = Vec::new();
    let Ok(fd_dir) = open_dir_at(proc_dir, &cstring(format!("{pid}/fd"))) else { return found };
    let _ = for_each_entry(&fd_dir, |fd_name, _| {
        let mut buf = [MaybeUninit::<u8>::uninit(); 512];
        let Ok((link, _)) = rustix::fs::readlinkat_raw(&fd_dir, fd_name, &mut buf[..]) else {
            return ControlFlow::<()>::Continue(());
        };
        // Pipes, sockets and the like have no '/' in their links.
        let Some(at) = link.iter().rposition(|&b| b == b'/') else { return ControlFlow::Continue(()) };
        let Some(candidates) = by_name.get(&link[at + 1..]) else { return ControlFlow::Continue(()) };
        // Through the link, stat gives the device and inode that stat of
        // the path gives, on every file system.
        let Ok(st) = rustix::fs::statat(&fd_dir, fd_name, AtFlags::empty()) else { return ControlFlow::Continue(()) };
        let Some(fd) = pid_of(fd_name.to_bytes()) else { return ControlFlow::Continue(()) };
        for &i in candidates {
            if files[i].ino == st.st_ino && FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                let twin = files[i].dev != st.st_dev;
                let taker = held_through(pid, fd_name, &files[i]);
                found.push(Found { file: i, fd, holds: taker.is_some(), taker, twin });
            }
        }
        ControlFlow::Continue(())
    });
    found
}

/// Marks the lock files of `files` (in the lock directory `dir_fd`) that
/// a reader can open while a lease on them is being broken toward none
/// (`locks` lists one): read leases, whose break a wrapper's open for
/// writing starts and which its open for reading then passes, taking the
/// slot ([`LockFile::lets_in`]). A write lease being broken keeps that open
/// out, and stays a holder. Tried only where such a lease is listed (the
/// close of the look wakes the waiters that watch the file).
pub fn lease_lets_in(files: &mut [LockFile], locks: &[LockEntry], dir_fd: &OwnedFd) {
    for f in files.iter_mut().filter(|f| !f.queue) {
        if !crate::slots::proclocks::on_file(locks, f.key).iter().any(|l| l.breaking && !l.blocked) {
            continue;
        }
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
        let opened =
            wrapper_common::with_joined(&[f.name], None, |c| rustix::fs::openat(dir_fd, c, flags, Mode::empty()));
        f.lets_in = matches!(opened, Some(Ok(_)));
    }
}

/// For each of `files`, the processes that have it open, as far as this
/// process may read their descriptors (its own user's, or everyone's as
/// root).
pub fn openers(files: &[LockFile]) -> Vec<Vec<Opener>> {
    let mut out: Vec<Vec<Opener>> = files.iter().map(|_| Vec::new()).collect();
    let mut by_name: BTreeMap<&[u8], Vec<usize>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        by_name.entry(f.name).or_default().push(i);
    }
    if by_name.is_empty() {
        return out;
    }
    let Ok(proc_dir) = open_dir(c"/proc") else { return out };
    let _ = for_each_entry(&proc_dir, |entry, _| {
        let Some(pid) = pid_of(entry.to_bytes()) else { return ControlFlow::<()>::Continue(()) };
        let found = descriptors(proc_dir.as_fd(), pid, files, &by_name);
        if found.is_empty() {
            return ControlFlow::Continue(());
        }
        let sleep = sleep_of(proc_dir.as_fd(), pid);
        // Without `syscall`, a lock wait is put on the one file it can be:
        // the only one not held (through however many descriptors), or
        // else the only queue file.
        let mut waiting: Vec<usize> = found.iter().filter(|f| !f.holds && !f.twin).map(|f| f.file).collect();
        crate::sys::sort::sort_by(&mut waiting, &mut |a, b| a < b);
        waiting.dedup();
        let guess = match waiting.as_slice() {
            [one] => Some(*one),
            many => {
                let queues: Vec<&usize> = many.iter().filter(|&&i| files[i].queue).collect();
                if let [one] = queues.as_slice() { Some(**one) } else { None }
            }
        };
        for f in &found {
            // A twin's: blocked where it sleeps on that descriptor.
            let guessed = !f.twin && sleep.in_lock_wait && guess == Some(f.file);
            let blocked = !f.holds && (sleep.fds.contains(&f.fd) || guessed);
            let list = &mut out[f.file];
            match list.iter_mut().find(|o| o.pid == pid && o.twin == f.twin) {
                Some(o) => {
                    o.holds |= f.holds;
                    o.taker = o.taker.or(f.taker);
                    o.blocked |= blocked;
                }
                None => list.push(Opener { pid, holds: f.holds, taker: f.taker, blocked, twin: f.twin }),
            }
        }
        ControlFlow::Continue(())
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flock_system_calls() {
        let nr = libc::SYS_flock;
        assert_eq!(flock_fd(&format!("{nr} 0x3 0x2 0x0 0x1b6 0x7ffe 0x0 0x7ffe 0x7f3a")), Some(3));
        assert_eq!(flock_fd(&format!("{nr} 0xa 0x1 0x0")), Some(10), "LOCK_SH");
        assert_eq!(flock_fd(&format!("{nr} 0x3 0x6 0x0 0x1b6 0x7ffe 0x0 0x7ffe 0x7f3a")), None, "LOCK_NB");
        assert_eq!(flock_fd("running"), None);
        assert_eq!(flock_fd("-1 0x7ffe 0x7f3a"), None, "blocked, not in a system call");
        assert_eq!(flock_fd("7 0x3 0x2 0x0"), None, "another system call");
    }

    #[test]
    fn a_proc_that_hides_pids_is_told() {
        let line = |opts: &str| format!("22 27 0:21 / /proc rw,relatime shared:12 - proc proc {opts}\n");
        assert!(proc_hides_nothing(line("rw").as_bytes()));
        assert!(proc_hides_nothing(line("rw,hidepid=off").as_bytes()));
        assert!(!proc_hides_nothing(line("rw,hidepid=invisible").as_bytes()));
        assert!(!proc_hides_nothing(line("rw,hidepid=2").as_bytes()));
        assert!(!proc_hides_nothing(line("rw,subset=pid").as_bytes()));
        assert!(!proc_hides_nothing(b"23 27 0:22 / /sys rw - sysfs sysfs rw\n"), "no /proc");
        let stacked = line("rw") + &line("rw,hidepid=invisible");
        assert!(!proc_hides_nothing(stacked.as_bytes()), "the mount on top counts");
    }

    #[test]
    fn only_a_kernel_thread_without_a_parent_is_the_hosts_pid_2() {
        let kthreadd = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0";
        assert!(kernel_thread_of_none(kthreadd.as_bytes()));
        // `docker exec` or `nsenter` into a PID namespace: pid 2 with its
        // parent outside, shown as 0, but no kernel thread.
        assert!(!kernel_thread_of_none(b"2 (sleep) S 0 2 1 0 -1 4194304 87 0 0 0 0 0 0 0 20 0 1 0 9 0 0"));
        assert!(!kernel_thread_of_none(b"2 (a) b) S 1 0 0 0 -1 2129984 0"), "a kernel thread's child? no parent 0");
        assert!(!kernel_thread_of_none(b"2 (x) S 0"), "cut short");
    }

    #[test]
    fn this_process_is_in_the_host_namespace_or_not_and_its_descriptors_have_keys() {
        let dir = rustix::fs::open(c"/proc", rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY, 0.into());
        let dir = dir.unwrap();
        let (major, minor, _) = fd_key(dir.as_fd()).unwrap();
        let st = rustix::fs::fstat(&dir).unwrap();
        // /proc is not btrfs: both views agree.
        assert_eq!((major, minor), (libc::major(st.st_dev), libc::minor(st.st_dev)));
        let _ = host_pid_namespace();
    }
}
