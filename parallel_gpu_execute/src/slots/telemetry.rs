//! Wait telemetry: a wrapper that has to wait says so in one line (what it
//! needs, how many slots are busy, its place in the queue), once its record
//! is made, and says how long it waited when it gets its GPUs. A test that
//! did not wait gets no extra line. Both lines go to stderr, so they land
//! in Bazel's `test.log`. Only the waiting path pays for this; the fast
//! path is untouched.
//!
//! Busy slots are counted as `--status` finds them
//! ([`crate::slots::holders`]): matched to `/proc/locks` by the device
//! that it prints (the mount's, not `stat`'s, which differ on btrfs). In
//! the host's PID namespace `/proc/locks` lists every lock, so that is all
//! it reads. In another, where it leaves out a lock whose taker is outside
//! or has exited, the processes of the namespace that hold the files are
//! looked for too (`/proc/<pid>/fd`), until the `--wait` deadline at most.
//! A wrapper that found no free block among all of them has proven them
//! busy, which counts slots it cannot see held. Holders outside this PID
//! namespace are otherwise invisible: the line then says that its count is
//! what this namespace sees.

use crate::prelude::*;
use crate::slots::holders::{LockFile, PidView, key_of, mount_device, openers, pid_view};
use crate::slots::lockers::{Seen, lockers};
use crate::slots::lockfile::{LockName, lock_file_name};
use crate::slots::proclocks::{LockEntry, read_locks};
use crate::slots::request::Pool;
use crate::sys::clock::Instant;
use core::time::Duration;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::AtFlags;
use wrapper_common::diag;

/// Beyond this many lock files, busy slots are not counted one by one.
const MAX_COUNTED: usize = 4096;

/// Where a waiter stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Behind this many earlier waiters that want some of its lock files
    /// (none: first).
    Behind(usize),
    /// Waiting without a record (a lock directory it cannot write).
    NoQueue,
}

/// Whether and since when this wrapper waits: since its first look found
/// no block free (the clock is not read on the free-slot path, where its
/// first read costs two page faults for the vDSO).
#[derive(Default)]
pub struct Telemetry {
    started: Option<Instant>,
}

/// Whether `/proc/locks` lists a lock held on `key`.
fn listed_held(locks: &[LockEntry], key: (u32, u32, u64)) -> bool {
    crate::slots::proclocks::on_file(locks, key).iter().any(|l| l.held_on(key))
}

/// How many of the pool's lock files (at every slot) are held, as far as
/// this process can see; the processes of another PID namespace are looked
/// through until `deadline` at most.
fn busy_slots(dir_fd: &OwnedFd, pool: &Pool, slots: u32, prefix: &[u8], deadline: Option<Instant>) -> Busy {
    if pool.ids.len().checked_mul(slots as usize).is_none_or(|total| total > MAX_COUNTED) {
        return Busy::NotCounted;
    }
    let device = mount_device(dir_fd.as_fd());
    let table = read_locks();
    let readable = table.is_some();
    let locks = table.unwrap_or_default();
    let mut busy = 0;
    let mut unsure: Vec<(LockName, rustix::fs::Stat)> = Vec::new();
    for slot in 0..slots {
        for gpu in 0..pool.ids.len() {
            let name = lock_file_name(prefix, pool.lock_name(gpu), slot);
            if let Ok(st) = rustix::fs::statat(dir_fd, name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW) {
                if listed_held(&locks, key_of(&st, device)) {
                    busy += 1;
                } else {
                    unsure.push((name, st));
                }
            }
        }
    }
    // In the host's PID namespace, a lock that `/proc/locks` does not list
    // is not held: reading every process's descriptors would tell nothing
    // more, at a cost that grows with the host's descriptors.
    // Without the lock table, the holders this process can see are all it
    // can count: at least that many are busy.
    let in_time = deadline.is_none_or(|d| Instant::now() < d);
    let view = pid_view();
    if !unsure.is_empty() && (view != PidView::Host || !readable) && in_time {
        let files: Vec<LockFile> =
            unsure.iter().map(|(name, st)| LockFile::new(name.as_bytes(), st, device, false)).collect();
        let found = openers(&files);
        busy += files.iter().zip(&found).filter(|(file, o)| lockers(file, o, Seen::once(&locks), true).held()).count();
    }
    match (readable, view) {
        (false, _) => Busy::AtLeast(busy),
        (true, PidView::Host) => Busy::Seen(busy, ""),
        (true, PidView::Own) => Busy::Seen(busy, " as seen from this PID namespace"),
        (true, PidView::Hidden) => Busy::Seen(busy, " as far as /proc shows (it shows no pid 2)"),
    }
}

/// How many slots are busy, and how far that count can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    /// From `/proc/locks`: exactly where the host's PID namespace is seen
    /// (no qualifier), else as far as this `/proc` shows (what it says).
    Seen(usize, &'static str),
    /// `/proc/locks` cannot be read: only the holders in sight counted.
    AtLeast(usize),
    /// Too many lock files to count.
    NotCounted,
}

impl Busy {
    fn map(self, f: impl Fn(usize) -> usize) -> Busy {
        match self {
            Busy::Seen(n, how) => Busy::Seen(f(n), how),
            Busy::AtLeast(n) => Busy::AtLeast(f(n)),
            Busy::NotCounted => Busy::NotCounted,
        }
    }
}

/// What the line says of the busy slots.
fn busy_text(busy: Busy, total: usize) -> String {
    let (n, how) = match busy {
        Busy::NotCounted => return format!("{total} slots, busy ones not counted"),
        Busy::AtLeast(0) if total > 0 => {
            return format!("{total} slots, busy ones not known (/proc/locks cannot be read)");
        }
        Busy::AtLeast(n) if n < total => (n, " at least (/proc/locks cannot be read: the others are not known)"),
        Busy::AtLeast(n) => (n, ""),
        Busy::Seen(n, how) => (n, if n < total { how } else { "" }),
    };
    format!("{n} of {total} slots busy{how}")
}

impl Telemetry {
    /// The first time the wrapper has to wait: one line. `proof`: when the
    /// wrapper has just found no free block of `needed` GPUs among all of
    /// them, the pool's GPUs out of service (drained or avoided; by index,
    /// empty when none is); `None` where nothing is proven (some were left
    /// to earlier waiters, or a lock file this user may not open made a
    /// block look busy). `deadline`: the `--wait` limit, which the count
    /// does not pass.
    #[allow(clippy::too_many_arguments)]
    pub fn waiting(
        &mut self,
        dir_fd: &OwnedFd,
        pool: &Pool,
        slots: u32,
        prefix: &[u8],
        needed: usize,
        test: &str,
        place: Place,
        proof: Option<&[bool]>,
        deadline: Option<Instant>,
    ) {
        if self.started.is_some() {
            return;
        }
        self.started = Some(Instant::now());
        let total = pool.ids.len().saturating_mul(slots as usize);
        let mut busy = busy_slots(dir_fd, pool, slots, prefix, deadline);
        if let Some(out_of_service) = proof {
            // At each slot, every run of `needed` GPUs in service has a
            // busy one.
            let needed = needed.max(1);
            let blocks: usize = if out_of_service.is_empty() {
                pool.ids.len() / needed
            } else {
                out_of_service.split(|&out| out).map(|run| run.len() / needed).sum()
            };
            let proven = (slots as usize).saturating_mul(blocks);
            busy = busy.map(|n| n.max(proven));
        }
        let busy = busy_text(busy, total);
        let place = match place {
            Place::Behind(0) => "first in the queue".to_string(),
            Place::Behind(1) => "second in the queue".to_string(),
            Place::Behind(n) => format!("in the queue behind {n} others"),
            Place::NoQueue => "waiting without a place in the queue".to_string(),
        };
        diag::report(
            crate::TOOL,
            format_args!("waiting for {needed} GPU(s) for {}: {busy}, {place}", diag::Excerpt(test.as_bytes())),
        );
    }

    /// How long it waited, or `None` when it did not.
    pub fn waited(&self) -> Option<Duration> {
        self.started.map(|t| t.elapsed())
    }
}

/// `12.3 s`.
pub fn seconds(d: Duration) -> String {
    format!("{}.{} s", d.as_secs(), d.subsec_millis() / 100)
}
