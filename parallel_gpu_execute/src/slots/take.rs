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
use crate::slots::locks::{Ask, Grant, Slots, private_lock_dir};
use crate::slots::privacy;
use crate::slots::queue::{self, Ahead, NoPlace, Place};
use crate::slots::record::{HEADER, HEARTBEAT, QUEUE_DIR, Want, except_names, pool_names};
use crate::slots::request::Pool;
use crate::slots::telemetry::{Place as Standing, Telemetry};
use crate::slots::wait::{self, RecordWake, SlotWatch, WaitingSignals};
use crate::sys::clock::{Instant, host_since_boot as since_boot};
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
    // Judged before the directory is opened or made: a missing one is
    // judged by the mount it would be made on, and one that would
    // coordinate nothing is refused before anything is written there.
    if let Some(why) = privacy::judge(dir) {
        private_lock_dir(dir, why, pool, ask.private)?;
    }
    let prefix = ask.profile.lock_prefix();
    let mut wait = Waiting::new(ask, test);
    loop {
        let dir_fd = open_lock_dir(dir)?;
        // Physical names announce themselves before any lock file is
        // taken, in each directory the wait meets (`slots::naming`).
        if pool.physical {
            crate::slots::naming::announce_physical(dir, &dir_fd, prefix)?;
        }
        let mut table = Slots::new(dir, &dir_fd, pool, ask.slots, prefix);
        table.out_of_service(ask.needed, ask.avoid)?;
        match wait.in_directory(dir, &dir_fd, &mut table)? {
            Some(grant) => {
                drop(table);
                if !pool.physical {
                    crate::slots::naming::check_index(dir, &dir_fd, prefix)?;
                }
                // Closed by the exec that follows (it is close-on-exec):
                // a close here would be one system call more on the way.
                core::mem::forget(dir_fd);
                return Ok(grant);
            }
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
    /// The test, as its record says it: made once.
    described: core::cell::OnceCell<String>,
}

impl<'a> Waiting<'a> {
    pub fn new(ask: &'a Ask<'a>, test: &'a dyn Fn() -> String) -> Waiting<'a> {
        Waiting {
            ask,
            test,
            // Set at the first look that finds no block: the free-slot
            // path reads no clock.
            deadline: None,
            signals: None,
            telemetry: Telemetry::default(),
            ticket: None,
            place: None,
            no_place: None,
            described: core::cell::OnceCell::new(),
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
            let held = self.place.as_ref().and_then(|p| p.queue_dir(dir_fd));
            let ahead = queue::ahead(dir_fd, held, self.place.as_ref(), table_pool(table), prefix, slots, false);
            match table.scan(needed, &ahead) {
                Ok(Some(grant)) => {
                    // After a wait the drains are read with the block's
                    // locks held: a drain read before the scan could be
                    // older than the release that freed the block.
                    if waited && table.out_of_service(needed, self.ask.avoid)? && table.holds_out_of_service(&grant) {
                        let Grant { fds, ids, start, slot, .. } = grant;
                        table.give_back_block(slot, start, fds, ids);
                        continue;
                    }
                    if !table.still_linked(&grant) {
                        return Ok(None);
                    }
                    let grant = self.granted(grant);
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
                // SIGTERM from now on removes the record.
                self.signals.get_or_insert_with(WaitingSignals::install);
                self.deadline = self.ask.wait.map(|w| Instant::now() + w);
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
                    // A drain can change what it may take: looked at each beat.
                    let avoid = self.ask.avoid;
                    let mut drained = || table.out_of_service(needed, avoid).unwrap_or(true);
                    let behind = Behind { record, covers: *covers, deadline: self.deadline };
                    sleep_behind(signals, &mut self.place, dir_fd, &behind, until, &mut drained);
                }
                _ => match &mut watch {
                    Some(w) => w.wait(until),
                    // Watch before the next look, so that a release between
                    // the look and the wait is not missed.
                    None => {
                        let each = table_pool(table).ids.len() * slots as usize <= wait::MAX_FILE_WATCHES;
                        let names = each.then(|| table.lock_names());
                        let cached = table.cached();
                        watch = Some(SlotWatch::new(dir, prefix, names.as_deref(), cached));
                    }
                },
            }
            last_look = self.deadline.is_some_and(|d| Instant::now() >= d);
        }
    }

    /// What its record says: the lock files it can take (not those of GPUs
    /// out of service, nor those it may not open), and the test.
    fn content(&self, table: &Slots<'_>) -> Vec<u8> {
        let pool = table_pool(table);
        let width = pool.ids.len();
        let in_service = |gpu: usize| !table.out.get(gpu).is_some_and(|&o| o);
        let names = pool_names(pool, in_service);
        let unusable = table.warned.iter().map(|&i| (i % width.max(1), (i / width.max(1)) as u32));
        let except = except_names(pool, unusable.filter(|&(gpu, _)| in_service(gpu)));
        let test = self.described.get_or_init(|| (self.test)());
        let want = Want {
            pid: u64::from(rustix::process::getpid().as_raw_nonzero().get().unsigned_abs()),
            prefix: self.ask.profile.lock_prefix(),
            slots: self.ask.slots,
            needed: self.ask.needed as u64,
            names: names.as_deref(),
            except: &except,
            test: test.as_bytes(),
        };
        want.content(u64::try_from(since_boot().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Makes its record (with its ticket), or says once why it cannot:
    /// then it waits without a place, and tries again at each wake.
    fn join(&mut self, dir_fd: &OwnedFd, table: &Slots<'_>) {
        let Some(ticket) = self.ticket else { return };
        let content = self.content(table);
        match Place::join(dir_fd, ticket, content) {
            Ok(place) => {
                self.place = Some(place);
                self.no_place = None;
            }
            Err(why) => self.say_no_place(table.dir(), why),
        }
    }

    /// At each wake: beats, and makes the record again where it was
    /// removed, or where what it can take changed; without one, tries to
    /// make it.
    fn keep_place(&mut self, dir_fd: &OwnedFd, table: &Slots<'_>) {
        let content = self.place.as_ref().map(|_| self.content(table));
        match (&mut self.place, content) {
            (Some(place), Some(content)) => {
                place.beat();
                let changed = content.get(HEADER..) != Some(place.text());
                let made = if changed {
                    place.rewrite(dir_fd, content)
                } else if !place.linked(dir_fd) {
                    place.remake(dir_fd)
                } else {
                    Ok(())
                };
                if let Err(why) = made {
                    self.place = None;
                    self.say_no_place(table.dir(), why);
                }
            }
            _ if self.ticket.is_some() => self.join(dir_fd, table),
            _ => {}
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
                use rustix::io::Errno;
                let (cause, repair) = match errno {
                    Errno::NOSPC => ("the file system is full", "free space on its file system"),
                    Errno::DQUOT => ("a disk quota is reached", "raise this user's quota there"),
                    Errno::ROFS => ("its file system is read-only", "mount the lock directory read-write"),
                    Errno::MFILE | Errno::NFILE => {
                        ("no file descriptor is left", "raise the open-files limit (ulimit -n)")
                    }
                    Errno::ACCESS | Errno::PERM => ("this user may not add to it", ""),
                    _ => ("it cannot be written", ""),
                };
                if repair.is_empty() {
                    diag::report(
                        crate::TOOL,
                        format_args!(
                            "warning: cannot make a record in {q} ({cause}: {}): waiting without a place in the queue, so later tests may be served first; to repair, root runs: mkdir -p {q} && chmod 1777 {q}",
                            diag::Os(errno)
                        ),
                    );
                } else {
                    diag::report(
                        crate::TOOL,
                        format_args!(
                            "warning: cannot make a record in {q} ({cause}: {}): waiting without a place in the queue, so later tests may be served first; to repair, {repair}",
                            diag::Os(errno)
                        ),
                    );
                }
            }
        }
    }

    /// The waiting line: what it waits for, the busy slots, its place.
    fn announce(&mut self, dir_fd: &OwnedFd, table: &Slots<'_>, ahead: &Ahead) {
        let (pool, slots, prefix) = (table_pool(table), self.ask.slots, self.ask.profile.lock_prefix());
        let standing = match &self.place {
            Some(place) => {
                match queue::ahead(dir_fd, place.queue_dir(dir_fd), Some(place), pool, prefix, slots, true).count {
                    0 => Standing::First,
                    n => Standing::Behind(n),
                }
            }
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
    fn granted(&mut self, mut grant: Grant) -> Grant {
        if let Some(place) = self.place.take() {
            place.leave();
        }
        self.signals = None;
        grant.waited = self.telemetry.waited();
        grant
    }
}

fn table_pool<'t>(table: &'t Slots<'_>) -> &'t Pool {
    table.pool()
}

/// The record a waiter sleeps on: whether it wants everything this one
/// wants, and this one's deadline.
struct Behind<'r> {
    record: &'r OwnedFd,
    covers: bool,
    deadline: Option<Instant>,
}

/// Sleeps on the record of the waiter ahead until it leaves or dies, until
/// `until`. While that record wants everything this waiter wants
/// (`covers`) and beats, nothing but a drain can change what this waiter
/// may take: at each beat it beats too, looks whether `drained` says the
/// GPUs out of service changed, and sleeps on, up to the deadline.
fn sleep_behind(
    signals: &mut WaitingSignals,
    place: &mut Option<Place>,
    dir_fd: &OwnedFd,
    behind: &Behind<'_>,
    mut until: Instant,
    drained: &mut dyn FnMut() -> bool,
) {
    let Behind { record, covers, deadline } = *behind;
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
        if drained() {
            return;
        }
        let beat_due = now + HEARTBEAT;
        until = deadline.map_or(beat_due, |d| d.min(beat_due));
    }
}
