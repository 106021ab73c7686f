//! Wait telemetry: a wrapper that has to wait says so in one line (what it
//! needs, how many slots are busy, its place in the queue when it knows
//! it), and says how long it waited when it gets its GPUs. A test that did
//! not wait gets no extra line. Both lines go to stderr, so they land in
//! Bazel's `test.log`. Only the waiting path pays for this (it reads
//! `/proc/locks`); the fast path is untouched.

use crate::prelude::*;
use crate::slots::lockfile::lock_file_name;
use crate::slots::proclocks::{file_key, read_locks};
use crate::slots::request::Pool;
use crate::sys::clock::Instant;
use core::time::Duration;
use rustix::fd::OwnedFd;
use rustix::fs::AtFlags;
use wrapper_common::diag;

/// Beyond this many lock files, busy slots are not counted one by one.
const MAX_COUNTED: usize = 4096;

/// Where a waiter stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// At the head of the queue: the next block that frees is its.
    Head,
    /// Behind the head and this many other waiters.
    Behind(usize),
    /// Waiting without a queue file (a lock directory it cannot write).
    NoQueue,
}

/// Whether and since when this wrapper waits.
pub struct Telemetry {
    started: Instant,
    announced: bool,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry { started: Instant::now(), announced: false }
    }
}

/// How many of the pool's lock files (at every slot) some process holds.
fn busy_slots(dir_fd: &OwnedFd, pool: &Pool, slots: u32, prefix: &[u8]) -> Option<usize> {
    let total = pool.ids.len().checked_mul(slots as usize)?;
    if total > MAX_COUNTED {
        return None;
    }
    let held: Vec<(u32, u32, u64)> = read_locks().iter().filter(|l| l.flock && !l.blocked).map(|l| l.key()).collect();
    let mut busy = 0;
    for slot in 0..slots {
        for gpu in 0..pool.ids.len() {
            let name = lock_file_name(prefix, pool.lock_name(gpu), slot);
            if let Ok(st) = rustix::fs::statat(dir_fd, name.as_cstr(), AtFlags::SYMLINK_NOFOLLOW) {
                if held.contains(&file_key(st.st_dev, st.st_ino)) {
                    busy += 1;
                }
            }
        }
    }
    Some(busy)
}

/// How many processes wait in `flock(2)` on the queue file `queue`.
pub fn queued_behind(queue: &OwnedFd) -> usize {
    let Ok(st) = rustix::fs::fstat(queue) else { return 0 };
    let key = file_key(st.st_dev, st.st_ino);
    read_locks().iter().filter(|l| l.flock && l.blocked && l.key() == key).count()
}

impl Telemetry {
    /// The first time the wrapper has to wait: one line.
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
    ) {
        if self.announced {
            return;
        }
        self.announced = true;
        let total = pool.ids.len().saturating_mul(slots as usize);
        let busy = match busy_slots(dir_fd, pool, slots, prefix) {
            Some(n) => format!("{n} of {total} slots busy"),
            None => format!("{total} slots, busy ones not counted"),
        };
        let place = match place {
            Place::Head => "first in the queue".to_string(),
            Place::Behind(0) => "second in the queue".to_string(),
            Place::Behind(n) => format!("in the queue behind {} others", n + 1),
            Place::NoQueue => "waiting without the queue".to_string(),
        };
        diag::report(
            crate::TOOL,
            format_args!("waiting for {needed} GPU(s) for {}: {busy}, {place}", diag::Excerpt(test.as_bytes())),
        );
    }

    /// How long it waited, or `None` when it did not.
    pub fn waited(&self) -> Option<Duration> {
        self.announced.then(|| self.started.elapsed())
    }
}

/// `12.3 s`.
pub fn seconds(d: Duration) -> String {
    format!("{}.{} s", d.as_secs(), d.subsec_millis() / 100)
}
