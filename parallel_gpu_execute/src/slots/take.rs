//! Taking a block, and waiting for one in arrival order: the steps of the
//! wait protocol (docs/design.md, "The wait queue", "Steps"), over the lock
//! files (`locks`), the records (`queue`) and the sleeps (`wait`).
//!
//! 1. Arrive: take the first free block whose lock files no earlier waiter
//!    that counts wants.
//! 2. Join: none: make a record, say the waiting line, look again.
//! 3. Wait: at each wake, beat, make the record again where it was
//!    removed, look at the records ahead and take what they leave; sleep
//!    on releases in the lock directory where some lock file is left to
//!    this waiter, else on the record of the waiter ahead, until the next
//!    beat at most.

use crate::error::Error;
use crate::prelude::*;
use crate::slots::lockfile::{dir_still_there, join, keep_young, open_lock_dir};
use crate::slots::locks::{Ask, Grant, Slots, fd_budget, private_lock_dir};
use crate::slots::privacy;
use crate::slots::queue::{self, Ahead, NoPlace, Place};
use crate::slots::record::{HEARTBEAT, QUEUE_DIR, Want, pool_names};
use crate::slots::request::Pool;
use crate::slots::telemetry::{Place as Standing, Telemetry};
use crate::slots::wait::{self, RecordWake, SlotWatch, WaitingSignals};
use crate::sys::clock::{Instant, since_boot};
use core::ffi::CStr;
use core::time::Duration;
use rustix::fd::OwnedFd;
use wrapper_common::diag;

/// Takes a block of `ask.needed` GPUs from `pool` in the lock directory
/// `dir`. `test` describes the test for messages. The held lock files'
/// times are set to the grant ([`keep_young`]).
pub fn acquire(dir: &CStr, pool: &Pool, ask: &Ask<'_>, test: &dyn Fn() -> String) -> Result<Grant, Error> {
    let grant = take_block(dir, pool, ask, test)?;
    for fd in &grant.fds {
        keep_young(fd);
    }
    Ok(grant)
}

fn take_block(dir: &CStr, pool: &Pool, ask: &Ask<'_>, test: &dyn Fn() -> String) -> Result<Grant, Error> {
    let mut judged = false;
    let mut wait = Waiting::new(ask, test);
    loop {
        let dir_fd = match open_lock_dir(dir) {
            Ok(fd) => fd,
            Err(e) => {
                // Missing and not to be made: where it would coordinate
                // nothing anyway, both are said.
                if !judged && let Some(why) = privacy::judge(dir) {
                    private_lock_dir(dir, why, pool, ask.private)?;
                }
                return Err(e);
            }
        };
        if !judged {
            judged = true;
            if let Some(why) = privacy::judge(dir) {
                private_lock_dir(dir, why, pool, ask.private)?;
            }
        }
        let cache = pool.ids.len().saturating_mul(ask.slots as usize) <= fd_budget();
        let mut table = Slots::new(dir, &dir_fd, pool, ask.slots, ask.profile.lock_prefix(), cache);
        table.out_of_service(ask.needed, ask.avoid)?;
        match wait.in_directory(dir, &dir_fd, &mut table)? {
            Some(grant) => return Ok(grant),
            // The lock directory went away or was replaced: start over in the new one.
            None => continue,
        }
    }
}

/// What a wrapper keeps while it looks for a block, across lock
/// directories (one removed and made again: it starts over there, with its
/// place).
pub struct Waiting<'a> {
    ask: &'a Ask<'a>,
    test: &'a dyn Fn() -> String,
    deadline: Option<Instant>,
    signals: Option<WaitingSignals>,
    telemetry: Telemetry,
    /// Its place in the queue: when it began to wait (`CLOCK_BOOTTIME` ns).
    ticket: Option<u64>,
    /// Its record, while it has one.
    place: Option<Place>,
    /// Why it has none, once said.
    no_place: Option<NoPlace>,
}

impl<'a> Waiting<'a> {
    pub fn new(ask: &'a Ask<'a>, test: &'a dyn Fn() -> String) -> Waiting<'a> {
        Waiting {
            ask,
            test,
            deadline: ask.wait.map(|w| Instant::now() + w),
            signals: None,
            telemetry: Telemetry::default(),
            ticket: None,
            place: None,
            no_place: None,
        }
    }

    fn no_slot(&self) -> Error {
        Error::NoFreeSlot {
            needed: self.ask.needed as u64,
            wait_ms: self.ask.wait.map_or(0, |w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            test: (self.test)(),
            profile: self.ask.profile,
        }
    }

    /// Looks for a block in the lock directory `dir_fd`, and waits for one;
    /// `None` when the directory went away meanwhile (start over).
    pub fn in_directory(
        &mut self,
        dir: &CStr,
        dir_fd: &OwnedFd,
        table: &mut Slots<'_>,
    ) -> Result<Option<Grant>, Error> {
        let (needed, slots, prefix) = (self.ask.needed, self.ask.slots, self.ask.profile.lock_prefix());
        // A waiter that starts over in a new directory keeps its ticket.
        if self.place.take().is_some() {
            self.join(dir_fd, table);
        }
        let mut watch: Option<SlotWatch> = None;
        // Whether time passed since the directory was opened, in which it
        // may have been removed; and whether this is the look at the deadline.
        let (mut waited, mut last_look) = (false, false);
        loop {
            if waited && !dir_still_there(dir, dir_fd) {
                return Ok(None);
            }
            self.keep_place(dir_fd, table);
            let mine = self.place.as_ref().map(|p| &p.name);
            let ahead = queue::ahead(dir_fd, mine, table_pool(table), prefix, slots, false);
            match table.scan(needed, &ahead) {
                Ok(Some(grant)) => {
                    // After a wait the drains are read with the block's
                    // locks held: a drain read before the scan could be
                    // older than the release that freed the block.
                    if waited && table.out_of_service(needed, self.ask.avoid)? && table.holds_out_of_service(&grant) {
                        let Grant { fds, start, slot, .. } = grant;
                        table.give_back_block(slot, start, fds);
                        continue;
                    }
                    if !table.still_linked(&grant) {
                        return Ok(None);
                    }
                    let grant = self.granted(dir_fd, grant);
                    if let Some(w) = watch {
                        w.done();
                    }
                    return Ok(Some(grant));
                }
                // Drained while it waited: fail now rather than wait
                // forever; a GPU back in service is looked at at once.
                Ok(None) if waited && table.out_of_service(needed, self.ask.avoid)? => continue,
                Ok(None) => {}
                Err(_) if !dir_still_there(dir, dir_fd) => return Ok(None),
                Err(e) => return Err(e),
            }
            if last_look || self.ask.wait == Some(Duration::ZERO) {
                return Err(self.no_slot());
            }
            if self.ticket.is_none() {
                // No block for it: it waits from now, and looks again once
                // its record is there (a release meanwhile is not missed).
                self.ticket = Some(u64::try_from(since_boot().as_nanos()).unwrap_or(u64::MAX));
                self.join(dir_fd, table);
                self.announce(dir_fd, table, &ahead);
                // Time passed: a drain, or the directory's removal, may
                // have come meanwhile.
                waited = true;
                continue;
            }
            let signals = self.signals.get_or_insert_with(WaitingSignals::install);
            waited = true;
            let beat_due = Instant::now() + HEARTBEAT;
            let until = self.deadline.map_or(beat_due, |d| d.min(beat_due));
            let left_to_it = (0..slots).any(|s| (0..table_pool(table).ids.len()).any(|g| ahead.allows(g, s)));
            match &ahead.sleep_on {
                Some((record, covers)) if !left_to_it => {
                    sleep_behind(signals, &mut self.place, dir_fd, record, *covers, until, self.deadline);
                }
                _ => match &mut watch {
                    Some(w) => {
                        w.wait(until, self.deadline);
                    }
                    // Watch before the next look, so that a release between
                    // the look and the wait is not missed.
                    None => watch = Some(SlotWatch::new(dir, table.cached())),
                },
            }
            last_look = self.deadline.is_some_and(|d| Instant::now() >= d);
        }
    }

    /// Makes its record (with its ticket), or says once why it cannot:
    /// then it waits without a place, and tries again at each wake.
    fn join(&mut self, dir_fd: &OwnedFd, table: &Slots<'_>) {
        let Some(ticket) = self.ticket else { return };
        let pool = table_pool(table);
        let names = pool_names(pool);
        let test = (self.test)();
        let want = Want {
            pid: u64::from(rustix::process::getpid().as_raw_nonzero().get().unsigned_abs()),
            prefix: self.ask.profile.lock_prefix(),
            slots: self.ask.slots,
            needed: self.ask.needed as u64,
            names: names.as_deref(),
            test: test.as_bytes(),
        };
        let content = want.content(u64::try_from(since_boot().as_nanos()).unwrap_or(u64::MAX));
        match Place::join(dir_fd, ticket, content) {
            Ok(place) => {
                self.place = Some(place);
                self.no_place = None;
            }
            Err(why) => self.say_no_place(table.dir(), why),
        }
    }

    /// At each wake: beats, and makes the record again where it was
    /// removed; without one, tries to make it.
    fn keep_place(&mut self, dir_fd: &OwnedFd, table: &Slots<'_>) {
        match &mut self.place {
            Some(place) => {
                place.beat();
                if !place.linked(dir_fd) {
                    if let Err(why) = place.remake(dir_fd) {
                        self.place = None;
                        self.say_no_place(table.dir(), why);
                    }
                }
            }
            None if self.ticket.is_some() => self.join(dir_fd, table),
            None => {}
        }
    }

    /// One warning, the first time it finds no place (and again after it had one).
    #[cold]
    fn say_no_place(&mut self, dir: &CStr, why: NoPlace) {
        if self.no_place.replace(why).is_some() {
            return;
        }
        let queue = join(dir, QUEUE_DIR.to_bytes());
        let q = diag::Bytes(queue.as_bytes());
        match why {
            NoPlace::NotADirectory => diag::report(
                crate::TOOL,
                format_args!(
                    "warning: {q} is not a directory: waiting without a place in the queue, so later tests may be served first; to repair, its owner or root runs: rm -f {q}"
                ),
            ),
            NoPlace::Create(errno) => {
                let cause = match errno {
                    rustix::io::Errno::NOSPC => "the file system is full",
                    rustix::io::Errno::DQUOT => "a disk quota is reached",
                    rustix::io::Errno::ACCESS | rustix::io::Errno::PERM | rustix::io::Errno::ROFS => {
                        "this user may not add to it"
                    }
                    _ => "it cannot be written",
                };
                diag::report(
                    crate::TOOL,
                    format_args!(
                        "warning: cannot make a record in {q} ({cause}: {}): waiting without a place in the queue, so later tests may be served first; to repair, root runs: mkdir -p {q} && chmod 1777 {q}",
                        diag::Os(errno)
                    ),
                );
            }
        }
    }

    /// The waiting line: what it waits for, the busy slots, its place.
    fn announce(&mut self, dir_fd: &OwnedFd, table: &Slots<'_>, ahead: &Ahead) {
        let (pool, slots, prefix) = (table_pool(table), self.ask.slots, self.ask.profile.lock_prefix());
        let standing = match &self.place {
            Some(place) => match queue::ahead(dir_fd, Some(&place.name), pool, prefix, slots, true).count {
                0 => Standing::First,
                n => Standing::Behind(n),
            },
            None => Standing::NoQueue,
        };
        // No free block was found among all of them: proof of busy GPUs,
        // unless a lock file this user may not open was passed over, or
        // earlier waiters' lock files were left to them.
        let proof = (table.warned.is_empty() && ahead.blocked.is_empty()).then_some(table.out.as_slice());
        let (needed, test) = (self.ask.needed, (self.test)());
        self.telemetry.waiting(dir_fd, pool, slots, prefix, needed, &test, standing, proof, self.deadline);
    }

    /// Leaves the queue (its record removed, which wakes the one behind)
    /// and restores the signals, before the test is exec'd.
    fn granted(&mut self, dir_fd: &OwnedFd, mut grant: Grant) -> Grant {
        if let Some(place) = self.place.take() {
            place.leave(dir_fd);
        }
        self.signals = None;
        grant.waited = self.telemetry.waited();
        grant
    }
}

fn table_pool<'t>(table: &'t Slots<'_>) -> &'t Pool {
    table.pool()
}

/// Sleeps on the record of the waiter ahead until it leaves or dies, until
/// `until`. While that record wants everything this waiter wants
/// (`covers`) and beats, nothing else can change what this waiter may
/// take: at each beat it only beats too, and sleeps on, up to the deadline.
fn sleep_behind(
    signals: &mut WaitingSignals,
    place: &mut Option<Place>,
    dir_fd: &OwnedFd,
    record: &OwnedFd,
    covers: bool,
    mut until: Instant,
    deadline: Option<Instant>,
) {
    loop {
        if wait::on_record(signals, record, until) == RecordWake::Released {
            return;
        }
        let now = Instant::now();
        if now < until || deadline.is_some_and(|d| now >= d) || !covers || !queue::beats(record) {
            return;
        }
        match place {
            Some(p) => {
                p.beat();
                if !p.linked(dir_fd) {
                    return;
                }
            }
            None => return,
        }
        let beat_due = now + HEARTBEAT;
        until = deadline.map_or(beat_due, |d| d.min(beat_due));
    }
}
