//! The wait queue (docs/design.md, "The wait queue", is the protocol this
//! implements; `wait_model/` checks it): a waiter's own record in
//! `<lockdir>/gpuqueue/` ([`Place`]: made, beaten, made again when removed,
//! left), and what the records of the waiters ahead of a participant say
//! ([`ahead`]): which of its lock files they want, and which record to
//! sleep on.
//!
//! No head, no lock of the directory, no `/proc`: a record counts when it
//! is earlier, its lock is held, its beat is fresh and it wants one of the
//! same lock files ([`crate::slots::record`] has its format).

use crate::prelude::*;
use crate::slots::lockfile::{DIR_FLAGS, FileId, make_shared_dir, repair_shared_mode};
use crate::slots::record::{
    HEADER, HEARTBEAT, MAX_RECORD, QUEUE_DIR, RECORD_FLAGS, RecordName, Want, beat_bytes, beat_of, fresh, now_ns,
    other_name, record_name, ticket_of, with_name,
};
use crate::slots::request::Pool;
use crate::sys::clock::{Instant, SystemTime, UNIX_EPOCH, host_since_boot as since_boot};
use crate::sys::dirs::for_each_entry;
use crate::sys::random::unguessable;
use core::ffi::CStr;
use core::ops::ControlFlow;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::CBuf;

/// `.<record name>.<unguessable number>.new`, a record while it is made.
type TemporaryName = CBuf<72>;

/// A waiter's own record, held locked for as long as it waits.
pub struct Place {
    /// The lock directory (to remove `gpuqueue/` when this record was its
    /// last), and `gpuqueue/`.
    lock_dir: OwnedFd,
    dir: OwnedFd,
    fd: OwnedFd,
    pub name: RecordName,
    /// (device, inode) of the record, to tell it from one put in its place.
    id: FileId,
    counter: u64,
    /// What it says, to make it again.
    content: Vec<u8>,
}

/// Has a record's beats overwrite it in place where its file system would
/// otherwise copy it on each write (btrfs: `NOCOW`, set while it is
/// empty): a full btrfs refuses the copy, and so the beat.
fn overwrite_in_place(fd: &OwnedFd) {
    if let Ok(flags) = rustix::fs::ioctl_getflags(fd) {
        let _ = rustix::fs::ioctl_setflags(fd, flags | rustix::fs::IFlags::NOCOW);
    }
}

/// Opens `gpuqueue/`, making it (mode 1777) where it is missing
/// ([`make_shared_dir`]). `NOTDIR`: it is there but not a directory (a
/// file, a link).
fn open_queue_dir(lock_dir: &OwnedFd) -> Result<OwnedFd, Errno> {
    let mut made = 0;
    loop {
        match rustix::fs::openat(lock_dir, QUEUE_DIR, DIR_FLAGS, Mode::empty()) {
            Ok(dir) => {
                repair_shared_mode(&dir);
                return Ok(dir);
            }
            // Removed again as soon as made (a cleaner): a few times.
            Err(Errno::NOENT) if made < 4 => make_shared_dir(lock_dir, QUEUE_DIR)?,
            Err(Errno::LOOP) => return Err(Errno::NOTDIR),
            Err(e) => return Err(e),
        }
        made += 1;
    }
}

impl Place {
    /// Makes the record `name` (`<ticket>.<pid>`) saying `content`:
    /// written under a temporary name, locked, then renamed into place, so
    /// that no record is ever seen unlocked or half written. The error says
    /// why it could not be made (`NOTDIR`: `gpuqueue` is not a directory).
    ///
    /// Where another user's file, or anything but a record of this user's,
    /// is at `name` (the owner of `gpuqueue/` removed the record and put a
    /// file there, or made `gpuqueue/` again after a cleaner and filled
    /// it with such names), it takes another name with the same ticket
    /// ([`other_name`]), and so its place.
    pub fn join(lock_dir: &OwnedFd, name: &RecordName, mut content: Vec<u8>) -> Result<Place, Errno> {
        let mut name = name.clone();
        // Everything that can fail comes before the rename: a record put
        // in place is one its waiter keeps (a failure after it would leave
        // a dead record under the waiter's name, or in place of its live one).
        let lock_dir = rustix::io::fcntl_dupfd_cloexec(lock_dir, 0)?;
        let mut last = Errno::NOENT;
        // `gpuqueue/` can be removed (by the last waiter leaving, or a
        // cleaner) between any two of these calls: then again.
        for _ in 0..8 {
            // A name no other user can guess and take first: in a sticky
            // directory this user could not remove their file.
            let mut temporary = TemporaryName::new();
            let _ = temporary.push_all(&[b".", name.as_bytes(), b"."], Some(unguessable()));
            let _ = temporary.push(b".new");
            // SIGTERM, SIGINT and SIGHUP wait from before anything is made
            // (`gpuqueue/` or the temporary record, which a handled signal
            // would leave) until the record is registered for removal.
            let deferred = crate::slots::wait::Deferred::hold();
            let dir = open_queue_dir(&lock_dir)?;
            // Made 0600, locked, then opened to all: its name shows in
            // `gpuqueue/`, and another user who could open it first would
            // take its lock first (a shared one fails the exclusive one).
            let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = match rustix::fs::openat(&dir, temporary.as_cstr(), flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => fd,
                Err(e @ (Errno::EXIST | Errno::NOENT)) => {
                    last = e;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let written = rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)
                .and_then(|()| rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o644)))
                .inspect(|()| overwrite_in_place(&fd))
                // A new file: written from its start, however many calls
                // that takes.
                .and_then(|()| wrapper_common::diag::write_all(&fd, &content))
                .and_then(|()| rustix::fs::fstat(&fd));
            let renamed = written
                .and_then(|st| rustix::fs::renameat(&dir, temporary.as_cstr(), &dir, name.as_cstr()).map(|()| st));
            match renamed {
                Ok(st) => {
                    crate::slots::wait::remove_on_exit(lock_dir.as_fd(), dir.as_fd(), name.as_bytes());
                    drop(deferred);
                    let id = (st.st_dev, st.st_ino);
                    return Ok(Place { lock_dir, dir, fd, name, id, counter: 0, content });
                }
                Err(e) => {
                    let _ = rustix::fs::unlinkat(&dir, temporary.as_cstr(), AtFlags::empty());
                    match e {
                        Errno::NOENT | Errno::WOULDBLOCK => last = e,
                        // Something it may not replace is at its name.
                        Errno::PERM | Errno::ACCESS | Errno::EXIST | Errno::NOTEMPTY | Errno::ISDIR
                            if rustix::fs::statat(&dir, name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW).is_ok() =>
                        {
                            name = other_name(&name);
                            content = with_name(&content, &name);
                            // Said, where every name tried was taken so,
                            // as names taken.
                            last = Errno::EXIST;
                        }
                        e => return Err(e),
                    }
                }
            }
        }
        Err(last)
    }

    /// Shows that this waiter runs: a new counter and time. The error
    /// says why it could not (a full file system, a quota).
    pub fn beat(&mut self) -> Result<(), Errno> {
        self.counter = self.counter.wrapping_add(1);
        let at = now_ns();
        match rustix::io::pwrite(&self.fd, &beat_bytes(self.counter, at), 8)? {
            24 => Ok(()),
            // Part of it: no room for the rest.
            _ => Err(Errno::NOSPC),
        }
    }

    /// Whether the record is still at its path (three `stat`s): not when
    /// it or `gpuqueue/` was removed, or something was put in its place,
    /// a symbolic link to the directory it is in included (readers do not
    /// follow one, and so would read no record). A hard link to it,
    /// anywhere, changes nothing: readers go by the name the record says.
    pub fn linked(&self, lock_dir: &OwnedFd) -> bool {
        self.queue_dir(lock_dir).is_some() && is_at(&self.dir, self.name.as_cstr(), self.id)
    }

    /// `gpuqueue/` as this waiter holds it open, when it is still the one at
    /// its path (two `stat`s): a look through it closes nothing in the lock
    /// directory, which would wake every waiter that watches it.
    fn queue_dir(&self, lock_dir: &OwnedFd) -> Option<&OwnedFd> {
        let at_path = rustix::fs::statat(lock_dir, QUEUE_DIR, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        let held = rustix::fs::fstat(&self.dir).ok()?;
        ((at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)).then_some(&self.dir)
    }

    /// `gpuqueue/` as this waiter made its record in it: to judge who
    /// else may remove the record ([`crate::slots::exposure::warn_exposed`]).
    pub fn held_dir(&self) -> &OwnedFd {
        &self.dir
    }

    /// Whether the record says `content` after its beat.
    pub fn says(&self, content: &[u8]) -> bool {
        content.get(HEADER..) == self.content.get(HEADER..)
    }
}

impl Drop for Place {
    /// Leaves the queue: removes the record where it is still the one at
    /// its path (not when another was put there, or it was made again),
    /// then its descriptor closes, which lets its lock go and wakes whoever
    /// sleeps on it; `gpuqueue/` goes too when it is then empty. Its
    /// removal on exit is cancelled last (where it is still this record's,
    /// not the one made again in its place), so that no signal meanwhile
    /// leaves it behind.
    fn drop(&mut self) {
        if is_at(&self.dir, self.name.as_cstr(), self.id) {
            let _ = rustix::fs::unlinkat(&self.dir, self.name.as_cstr(), AtFlags::empty());
            // The last record gone: `gpuqueue/` too (a later arrival then
            // pays one failed `openat` instead of a directory read).
            let _ = rustix::fs::unlinkat(&self.lock_dir, QUEUE_DIR, AtFlags::REMOVEDIR);
        }
        crate::slots::wait::keep_on_exit(self.dir.as_fd());
    }
}

/// What the waiters ahead of a participant come to.
#[derive(Debug, Default)]
pub struct Ahead {
    /// Per lock file of the pool (`slot * pool + gpu`) that this one can
    /// take: wanted by an earlier waiter that counts. Empty when none
    /// counts.
    pub blocked: Vec<bool>,
    /// The pool's length, the row of `blocked`.
    width: usize,
    /// How many earlier waiters count (all of them with `full`; else up to
    /// the first that wants every lock file this one can take).
    pub count: usize,
    /// The record to sleep on: the latest counting one that wants every
    /// lock file this one can take, else the latest counting one.
    pub sleep_on: Option<OwnedFd>,
    /// Whether that one wants every lock file this one can take.
    pub covered: bool,
    /// Whether some lock file this one can take is left to it.
    pub leaves_some: bool,
    /// Whether it passed over an earlier record whose beat is stale (its
    /// waiter did not run as it looked, and may run again).
    pub passed_stale: bool,
    /// When it began to read `gpuqueue/`; `None` where there was none to
    /// read (the free-slot path reads no clock).
    pub read_at: Option<Instant>,
    /// Whether a record could not be read for want of a descriptor of
    /// this participant's own (`EMFILE`): it then counts, as one that wants
    /// everything, and the participant should give up what it holds for
    /// the wait (its record) before it looks again.
    pub starved: bool,
}

impl Ahead {
    /// Whether a block taken by this look is to be judged by the records
    /// read again with its locks held (docs/design.md, step 1): the look
    /// passed over a stale record, read no `gpuqueue/` (a look the clock
    /// cannot date: a failed `openat` more), or began a beat or more ago
    /// (this participant stopped or frozen since, while an earlier waiter
    /// thawed or made its record again).
    pub fn may_be_older_than_its_take(&self) -> bool {
        self.passed_stale || self.read_at.is_none_or(|at| at.elapsed() >= HEARTBEAT)
    }

    /// Whether the lock file of pool GPU `gpu` at `slot` is left to this participant.
    pub fn allows(&self, gpu: usize, slot: u32) -> bool {
        !self.blocked.get(slot as usize * self.width + gpu).is_some_and(|&b| b)
    }
}

/// Whether a name in `gpuqueue/` that cannot be opened for `e` is no
/// record: gone, not a file, not this user's to read, leased; or no
/// descriptor left to a reader without a record (docs/design.md, after
/// "A record counts"). Any other error counts, as a record that wants
/// everything.
fn not_a_record(e: Errno, has_record: bool) -> bool {
    let gone = matches!(
        e,
        Errno::NOENT
            | Errno::LOOP
            | Errno::NXIO
            | Errno::NOTDIR
            | Errno::ISDIR
            | Errno::ACCESS
            | Errno::PERM
            | Errno::WOULDBLOCK
    );
    gone || e == Errno::MFILE && !has_record
}

/// Reads the records of `gpuqueue/` earlier than `mine` (for a participant
/// without a record, every one, or with `taken` those that began to wait
/// before it took the lock file `taken` names: [`taken_at`]), latest
/// first, and counts those that are
/// locked, fresh and want some of the lock files of `prefix` and `pool`
/// that `takes` says the participant can take (by index, `slot * pool +
/// gpu`, over its slots; asked only where there are records). Records
/// whose lock is free are removed, as are temporary records left by a
/// waiter killed while it made one. Stops at the first that wants every
/// one of them, unless `full`. Where `gpuqueue/` does not exist: one
/// failed `openat`. A participant with a record reads `gpuqueue/` as it
/// holds it open ([`Place::queue_dir`]).
pub fn ahead(
    lock_dir: &OwnedFd,
    mine: Option<&Place>,
    taken: Option<(&OwnedFd, bool)>,
    pool: &Pool,
    prefix: &[u8],
    takes: &dyn Fn() -> Vec<bool>,
    full: bool,
) -> Ahead {
    let mut out = Ahead { width: pool.ids.len(), ..Ahead::default() };
    let opened;
    let dir = match mine.and_then(|m| m.queue_dir(lock_dir)) {
        Some(dir) if rustix::fs::seek(dir, rustix::fs::SeekFrom::Start(0)).is_ok() => dir,
        _ => match rustix::fs::openat(lock_dir, QUEUE_DIR, DIR_FLAGS, Mode::empty()) {
            Ok(dir) => {
                opened = dir;
                &opened
            }
            Err(e) if not_a_record(e, mine.is_some()) => return out,
            Err(e) => {
                // Cannot tell who waits: as if someone earlier wanted all.
                out.starved = e == Errno::MFILE;
                out.count = 1;
                out.blocked = vec![true; takes().len()];
                return out;
            }
        },
    };
    out.read_at = Some(Instant::now());
    let bound = match (mine, taken) {
        (Some(m), _) => Some(m.name.clone()),
        (None, Some((fd, dated))) => Some(record_name(taken_at(fd, dated), 0)),
        (None, None) => None,
    };
    // `<ticket>.0` sorts after every name with an earlier ticket, before
    // every one with this or a later one (no process has PID 0).
    let mut earlier = earlier_records(dir, bound.as_ref().map(RecordName::as_bytes));
    if earlier.is_empty() {
        return out;
    }
    // Latest first: the one to sleep on is found first, and reading stops
    // at one that wants everything this participant can take.
    crate::sys::sort::sort_by(&mut earlier, &mut |a, b| a.as_bytes() > b.as_bytes());
    let own = mine.map(|m| m.id);
    let mut buf = vec![0u8; MAX_RECORD];
    let takes = takes();
    let (files, reach) = (takes.len(), takes.iter().filter(|&&t| t).count());
    let slots = (files / out.width.max(1)) as u32;
    out.blocked = vec![false; files];
    // The lock files one record wants.
    let mut wants = vec![false; files];
    let mut removed = false;
    let by_name = crate::slots::record::by_name(pool);
    for name in earlier {
        let live = read_live(dir, &name, &mut buf, own);
        let fd = match live {
            Live::Record(fd, n) => {
                // Under the name it says, or none (a hard link elsewhere
                // in `gpuqueue/` would put its waiter earlier).
                let Some(want) = Want::parse(&buf[..n]).filter(|w| w.name == name.as_bytes()) else { continue };
                wants.fill(false);
                want.wanted(prefix, pool, &by_name, slots, |i| wants[i] = true);
                Some(fd)
            }
            Live::Unknown | Live::Starved => {
                out.starved |= matches!(live, Live::Starved);
                wants.fill(true);
                None
            }
            Live::No => continue,
            Live::Stale => {
                out.passed_stale = true;
                continue;
            }
            Live::Dead => {
                removed = true;
                continue;
            }
        };
        // By the lock files this one can take, the only ones its scans try.
        wants.iter_mut().zip(&takes).for_each(|(w, &t)| *w &= t);
        let shared = wants.iter().filter(|&&w| w).count();
        if shared == 0 {
            continue;
        }
        out.count += 1;
        out.blocked.iter_mut().zip(&wants).for_each(|(b, &w)| *b |= w);
        let covers = shared == reach;
        // One that could not be read is waited for, not slept on.
        if let Some(fd) = fd.filter(|_| out.sleep_on.is_none() || covers && !out.covered) {
            out.sleep_on = Some(fd);
            out.covered = covers;
        }
        // Nothing earlier changes what it may take.
        if covers && !full {
            break;
        }
    }
    out.leaves_some = takes.iter().zip(&out.blocked).any(|(&t, &b)| t && !b);
    if out.count == 0 {
        out.blocked = Vec::new();
        // Dead records removed, by a reader with none of its own: where
        // they were the last (their waiters were killed with SIGKILL),
        // `gpuqueue/` goes too, as their waiters would have removed it.
        if removed && mine.is_none() {
            let _ = rustix::fs::unlinkat(lock_dir, QUEUE_DIR, AtFlags::REMOVEDIR);
        }
    }
    out
}

/// The names of the records of `gpuqueue/` (`dir`) that sort before `bound`
/// (every one, without a bound), after removing the temporary records
/// left by waiters killed while they made one. Out of line: its directory
/// buffer would otherwise sit in the frame of every look, where `gpuqueue/`
/// does not exist too, and cost the free-slot path a page of stack.
#[inline(never)]
fn earlier_records(dir: &OwnedFd, bound: Option<&[u8]>) -> Vec<RecordName> {
    let mut earlier: Vec<RecordName> = Vec::new();
    let mut leftovers: Vec<TemporaryName> = Vec::new();
    let _ = for_each_entry(dir, |name, _| {
        let name = name.to_bytes();
        if ticket_of(name).is_some() && bound.is_none_or(|b| name < b) {
            earlier.extend(RecordName::from_bytes(name));
        } else if name.starts_with(b".") && name.ends_with(b".new") && name.len() > 5 {
            leftovers.extend(TemporaryName::from_bytes(name));
        }
        ControlFlow::<()>::Continue(())
    });
    for name in &leftovers {
        remove_if_unlocked(dir, name.as_cstr());
    }
    earlier
}

/// When the lock file open at `fd` was taken, as a ticket says a time
/// (`CLOCK_BOOTTIME` ns): the change time its take set (`dated`), else
/// now. A file system that keeps whole seconds (ext4 made with 128-byte
/// inodes, ext3, FAT, some file servers) cuts its fraction off: dated that
/// early, a waiter that joined just before the take would pass for a later
/// one, and be overtaken, so such a stamp counts as
/// [`WHOLE_SECONDS_SLACK`] later, at most now. (The kernel stamps from its
/// coarse clock, a tick behind, and vfat in 10 ms steps: those few
/// milliseconds are left, for a waiter that joins a moment after a take is
/// as likely, and an arrival that left it the block with `--wait=0` would
/// fail.)
#[cold]
fn taken_at(fd: &OwnedFd, dated: bool) -> u64 {
    let now = now_ns();
    let Some(st) = dated.then(|| rustix::fs::fstat(fd).ok()).flatten() else { return now };
    // The nanoseconds are unsigned in the kernel's `stat`, signed in libc's.
    #[allow(clippy::unnecessary_cast)]
    let changed = (st.st_ctime as u64).wrapping_mul(1_000_000_000).wrapping_add(st.st_ctime_nsec as u64);
    let real = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let real = real.as_secs().wrapping_mul(1_000_000_000).wrapping_add(u64::from(real.subsec_nanos()));
    let slack = if st.st_ctime_nsec == 0 { WHOLE_SECONDS_SLACK } else { 0 };
    now.saturating_sub(real.saturating_sub(changed)).saturating_add(slack).min(now)
}

/// How far behind a take a change time in whole seconds may be, in
/// nanoseconds: FAT's two.
const WHOLE_SECONDS_SLACK: u64 = 2_000_000_000;

/// Removes the temporary record `name` when nobody holds its lock: its
/// maker was killed before it renamed it into place. Its maker locks it
/// before it writes it, so one still empty may be one made a moment ago
/// and not locked yet: left alone for a minute (by its change time), and
/// not locked meanwhile, which would fail its maker's lock.
fn remove_if_unlocked(dir: &OwnedFd, name: &CStr) {
    let Ok(fd) = rustix::fs::openat(dir, name, RECORD_FLAGS, Mode::empty()) else { return };
    let Ok(st) = rustix::fs::fstat(&fd) else { return };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let age = now.saturating_sub(u64::try_from(st.st_ctime).unwrap_or(u64::MAX));
    if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
        && (st.st_size >= HEADER as i64 || age > 60)
        && rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared).is_ok()
        && is_at(dir, name, (st.st_dev, st.st_ino))
    {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
}

/// What a name in `gpuqueue/` is to a reader.
enum Live {
    /// A live record: its descriptor and length read.
    Record(OwnedFd, usize),
    /// It could not be read, for a reason that says nothing of its waiter.
    Unknown,
    /// It could not be opened: the reader, which has a record, has no
    /// descriptor left.
    Starved,
    /// No live record.
    No,
    /// A record whose lock is held and whose beat is stale: its waiter does
    /// not run now.
    Stale,
    /// A dead record, removed.
    Dead,
}

/// Opens the record `name` and reads it into `buf` when it is a regular
/// file, not the reader's own (`own`), whose lock is
/// held and whose beat is fresh. A record whose lock is free is removed:
/// its waiter is dead.
fn read_live(dir: &OwnedFd, name: &RecordName, buf: &mut [u8], own: Option<(u64, u64)>) -> Live {
    // A record found free may have been made again by its owner since it
    // was opened (the new one is renamed over it before the old one's lock
    // goes): then the new one is read. Made again each time: as if unread.
    for _ in 0..3 {
        let fd = match rustix::fs::openat(dir, name.as_cstr(), RECORD_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if not_a_record(e, own.is_some()) => return Live::No,
            Err(Errno::MFILE) => return Live::Starved,
            Err(_) => return Live::Unknown,
        };
        let Ok(st) = rustix::fs::fstat(&fd) else { return Live::Unknown };
        // Its own record (a hard link to it under an earlier name) is none:
        // it would wait behind itself. Other links are passed over by the
        // name their record says.
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || own == Some((st.st_dev, st.st_ino)) {
            return Live::No;
        }
        // Too short to hold a beat: not a record, and not worth a lock (a
        // record is renamed into place whole, so a waiter's never is).
        if st.st_size < HEADER as i64 {
            return Live::No;
        }
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) {
            Ok(()) if !is_at(dir, name.as_cstr(), (st.st_dev, st.st_ino)) => continue,
            // Removed, or (another user's, in a sticky `gpuqueue/`) left.
            Ok(()) => {
                let removed = rustix::fs::unlinkat(dir, name.as_cstr(), AtFlags::empty()).is_ok();
                return if removed { Live::Dead } else { Live::No };
            }
            Err(Errno::WOULDBLOCK) => {}
            Err(_) => return Live::Unknown,
        }
        // A beat read while it was written fails its check: read once more.
        for _ in 0..2 {
            let Ok(n) = rustix::io::pread(&fd, &mut *buf, 0) else { return Live::Unknown };
            if let Some((_, at)) = beat_of(&buf[..n]) {
                // Judged by the clock as it was read (a reader preempted or
                // frozen in its look would take the beats after for stale).
                return match (fresh(at, since_boot()), n < buf.len()) {
                    (true, true) => Live::Record(fd, n),
                    (false, true) => Live::Stale,
                    _ => Live::No,
                };
            }
        }
        return Live::No;
    }
    Live::Unknown
}

/// Whether the file `id` (device, inode) is still the one at `name` in `dir`.
fn is_at(dir: &OwnedFd, name: &CStr, id: FileId) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|now| (now.st_dev, now.st_ino) == id)
}

/// Whether the record open at `fd` shows a fresh beat now.
pub fn beats(fd: &OwnedFd) -> bool {
    let mut header = [0u8; HEADER];
    matches!(rustix::io::pread(fd, &mut header, 0), Ok(HEADER))
        && beat_of(&header).is_some_and(|(_, at)| fresh(at, since_boot()))
}
