//! The queue's records as `--status` reads them (`slots::record` has
//! their format): those whose lock is held, and what became of the waiter
//! of one that no process was found holding.

use crate::prelude::*;
use crate::slots::lockfile::DIR_FLAGS;
use crate::slots::record::RECORD_FLAGS;
use crate::slots::record::{QUEUE_DIR, RecordName, Want, beat_of, ticket_of};
use crate::sys::clock::{SystemTime, UNIX_EPOCH};
use crate::sys::dirs::for_each_entry;
use core::ops::ControlFlow;
use core::time::Duration;
use rustix::fs::{AtFlags, FileType, Stat, StatxFlags};

/// A record of the queue, as `--status` lists it.
pub struct Queued {
    pub name: RecordName,
    /// `stat` of the record: its owner (who made it, by the kernel), and
    /// its identity, to find the process that holds it.
    pub st: Stat,
    /// When its waiter began to wait (`CLOCK_BOOTTIME` nanoseconds).
    pub ticket: u64,
    /// Its last beat, when it has a whole one.
    pub beat: Option<u64>,
    pub needed: u64,
    /// The test, as the record says.
    pub test: Vec<u8>,
    /// When the record was made (its birth time, where the file system
    /// keeps one): what bounds a ticket whose holder cannot be seen.
    pub born: Option<SystemTime>,
}

/// What became of a record's waiter since the record was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// Its record is still there, or cannot be told of.
    Here,
    /// It left (served, or died): its record is gone, or is the one read,
    /// its lock free, still at its name.
    Left,
    /// Its record was made again (its waiter's, or another at its name):
    /// what holds it is not known from this look.
    Remade,
}

impl Queued {
    /// What became of its waiter, by `gpuqueue/` as it is now in
    /// `lock_dir` (a cleaner may have made it again).
    pub fn since(&self, lock_dir: &rustix::fd::OwnedFd) -> Since {
        use rustix::fs::{FlockOperation, Mode};
        let gone = |e| if e == rustix::io::Errno::NOENT { Since::Left } else { Since::Here };
        let dir = match rustix::fs::openat(lock_dir, QUEUE_DIR, DIR_FLAGS, Mode::empty()) {
            Ok(dir) => dir,
            Err(e) => return gone(e),
        };
        let id = |st: Stat| (st.st_dev, st.st_ino) == (self.st.st_dev, self.st.st_ino);
        let fd = match rustix::fs::openat(&dir, self.name.as_cstr(), RECORD_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => return gone(e),
        };
        if !rustix::fs::fstat(&fd).is_ok_and(id) {
            return Since::Remade;
        }
        if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared).is_err() {
            return Since::Here;
        }
        // Free: still the file at its name, or made again meanwhile (the
        // new one is put in place before the old one's lock goes).
        match rustix::fs::statat(&dir, self.name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if id(st) => Since::Left,
            Ok(_) => Since::Remade,
            Err(e) => gone(e),
        }
    }
}

/// The records of `gpuqueue/` whose lock is held (a waiter's), earliest
/// first. A record whose lock is free (a dead waiter's) is not listed, nor
/// left locked: the shared lock that shows it free is let go at once.
pub fn queued(lock_dir: &rustix::fd::OwnedFd) -> Vec<Queued> {
    use rustix::fs::{FlockOperation, Mode};
    let mut out = Vec::new();
    let Ok(dir) = rustix::fs::openat(lock_dir, QUEUE_DIR, DIR_FLAGS, Mode::empty()) else { return out };
    let mut names: Vec<RecordName> = Vec::new();
    let _ = for_each_entry(&dir, |name, _| {
        if ticket_of(name.to_bytes()).is_some() {
            names.extend(RecordName::from_bytes(name.to_bytes()));
        }
        ControlFlow::<()>::Continue(())
    });
    let mut buf = vec![0u8; crate::slots::record::MAX_RECORD];
    for name in names {
        let Ok(fd) = rustix::fs::openat(&dir, name.as_cstr(), RECORD_FLAGS, Mode::empty()) else { continue };
        let Ok(st) = rustix::fs::fstat(&fd) else { continue };
        let locked =
            rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) == Err(rustix::io::Errno::WOULDBLOCK);
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || !locked {
            continue;
        }
        let n = rustix::io::pread(&fd, &mut buf, 0).unwrap_or(0);
        // Under the name it says only: a hard link under another is none.
        let Some(want) = Want::parse(&buf[..n]).filter(|w| w.name == name.as_bytes()) else { continue };
        let born = rustix::fs::statx(&fd, c"", AtFlags::EMPTY_PATH, StatxFlags::BTIME)
            .ok()
            .filter(|st| st.stx_mask & StatxFlags::BTIME.bits() != 0)
            .and_then(|st| {
                let (s, ns) = (u64::try_from(st.stx_btime.tv_sec).ok()?, st.stx_btime.tv_nsec);
                UNIX_EPOCH.checked_add(Duration::new(s, ns))
            });
        out.push(Queued {
            born,
            ticket: ticket_of(name.as_bytes()).unwrap_or(0),
            beat: beat_of(&buf[..n]).map(|(_, at)| at),
            needed: want.needed,
            test: want.test.to_vec(),
            name,
            st,
        });
    }
    crate::sys::sort::sort_by(&mut out, &mut |a, b| a.name.as_bytes() < b.name.as_bytes());
    out
}
