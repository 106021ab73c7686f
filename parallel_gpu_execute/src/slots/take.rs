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
use crate::slots::lockfile::{FileId, dir_still_there, join, keep_young, open_lock_dir};
use crate::slots::locks::{Ask, Grant, Slots};
use crate::slots::privacy::{self, private_lock_dir};
use crate::slots::queue::{self, Ahead, Place};
use crate::slots::record::{HEARTBEAT, QUEUE_DIR, RecordName, Want, files_line, now_ns, record_name};
use crate::slots::request::Pool;
use crate::slots::telemetry::{Place as Standing, Telemetry};
use crate::slots::wait::{self, SlotWatch, WaitingSignals};
use crate::sys::clock::Instant;
use core::ffi::CStr;
use core::time::Duration;
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use wrapper_common::diag;

/// Takes a block of `ask.needed` GPUs from `pool` in the lock directory
/// `dir`. `test` describes the test for messages. The held lock files'
/// times are set to the take ([`keep_young`]).
pub fn acquire(dir: &CStr, pool: &Pool, ask: &Ask<'_>, test: &dyn Fn() -> String) -> Result<Grant, Error> {
    let grant = take_block(dir, pool, ask, test)?;
    if let Some((gpu, uid)) = grant.exposed {
        crate::slots::exposure::say_lock_file_exposed(
            dir,
            (ask.profile.lock_prefix(), pool.lock_name(gpu), grant.slot),
            uid,
        );
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
    // The directory last left as gone (device, inode): met again at its
    // path, removed, it is a removed directory the path still leads to.
    let mut left: Option<FileId> = None;
    loop {
        let dir_fd = open_lock_dir(dir)?;
        if let Some(left) = left {
            removed_yet_reached(dir, &dir_fd, left)?;
        }
        // Physical names announce themselves before any lock file is
        // taken, in each directory the wait meets (`slots::naming`).
        if pool.physical {
            crate::slots::naming::announce_physical(dir, &dir_fd, prefix)?;
        }
        let mut table = Slots::new(dir, &dir_fd, pool, ask.slots, prefix);
        table.out_of_service(ask.needed, ask.avoid)?;
        match wait.in_directory(&mut table)? {
            Some(grant) => {
                drop(table);
                crate::slots::exposure::warn_exposed(dir, &dir_fd, false);
                if !pool.physical {
                    crate::slots::naming::check_index(dir, &dir_fd, prefix)?;
                }
                // Closed by the exec that follows (it is close-on-exec):
                // a close here would be one system call more on the way.
                core::mem::forget(dir_fd);
                return Ok(grant);
            }
            // The lock directory went away or was replaced: start over in the new one.
            None => left = rustix::fs::fstat(&dir_fd).ok().map(|st| (st.st_dev, st.st_ino)),
        }
    }
}

/// Fails where the lock directory opened at `dir` is the one just left
/// (`left`) and removed: its path still leads to it (a bind mount of a
/// directory removed on the host, a working directory removed), nothing
/// can be made in it, and starting over would find it again without end.
#[cold]
fn removed_yet_reached(dir: &CStr, dir_fd: &OwnedFd, left: FileId) -> Result<(), Error> {
    match rustix::fs::fstat(dir_fd) {
        Ok(st) if st.st_nlink == 0 && (st.st_dev, st.st_ino) == left => Err(Error::LockDir {
            dir: dir.to_bytes().into(),
            action: "use it",
            errno: Errno::NOENT,
            hint: " (it was removed, yet its path still leads to it: a bind mount of a directory removed where it was mounted from, or a removed working directory; mount the lock directory there again, or give one that exists)".into(),
        }),
        _ => Ok(()),
    }
}

/// How long a waiter's line waits for stderr to take it (a pipe nobody
/// reads) before it is dropped: well within a beat, so that its record
/// stays fresh, and a block freed meanwhile is taken.
const STDERR_PATIENCE: Duration = Duration::from_millis(50);

/// What a wrapper keeps while it looks for a block, across lock
/// directories (one removed and made again: it starts over there, with its
/// place).
struct Waiting<'a> {
    ask: &'a Ask<'a>,
    test: &'a dyn Fn() -> String,
    deadline: Option<Instant>,
    /// Its record, while it has one (dropped before the signals are
    /// restored, so that SIGTERM meanwhile still removes it).
    place: Option<Place>,
    signals: Option<WaitingSignals>,
    telemetry: Telemetry,
    /// Its place in the queue: its record's name, `<ticket>.<pid>`, the
    /// ticket when it began to wait (`CLOCK_BOOTTIME` ns).
    name: Option<RecordName>,
    /// Whether it said it waits without a place (again after it had one).
    said_no_place: bool,
    /// Whether a beat it could not write was said (once a wait).
    said_renew: bool,
    /// Whether `gpuqueue/` was judged (whether any user may remove its record), once a wait.
    judged_queue: bool,
    /// Whether it ran out of descriptors while it waited, and so waits
    /// without a record from then on (`shed`).
    shed_record: bool,
    /// The test, as its record says it: made once.
    described: core::cell::OnceCell<String>,
    /// The lock files its record names (`slot * pool + gpu`), as it was
    /// last made.
    advertised: Vec<bool>,
}

impl<'a> Waiting<'a> {
    fn new(ask: &'a Ask<'a>, test: &'a dyn Fn() -> String) -> Waiting<'a> {
        Waiting {
            ask,
            test,
            // Set at the first look that finds no block: the free-slot
            // path reads no clock.
            deadline: None,
            place: None,
            signals: None,
            telemetry: Telemetry::default(),
            name: None,
            said_no_place: false,
            said_renew: false,
            judged_queue: false,
            shed_record: false,
            described: core::cell::OnceCell::new(),
            advertised: Vec::new(),
        }
    }

    /// No block for it, and no more waiting. Where its scan left lock
    /// files to waiters in the queue (`queued`: GPUs may be free, yet
    /// theirs), the line says how many come first.
    #[cold]
    fn no_slot(&self, table: &Slots<'_>, queued: bool) -> Error {
        Error::NoFreeSlot {
            needed: self.ask.needed as u64,
            wait_ms: self.ask.wait.map_or(0, |w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            test: (self.test)(),
            profile: self.ask.profile,
            earlier: if queued { self.look(table, true).count } else { 0 },
        }
    }

    /// Looks for a block in the lock directory `dir_fd`, and waits for one;
    /// `None` when the directory went away meanwhile (start over).
    fn in_directory(&mut self, table: &mut Slots<'_>) -> Result<Option<Grant>, Error> {
        let (dir, dir_fd) = (table.dir(), table.dir_fd());
        let (needed, slots, prefix) = (self.ask.needed, self.ask.slots, self.ask.profile.lock_prefix());
        // A waiter that starts over in a new directory keeps its ticket,
        // and makes its record there at its first look.
        self.place = None;
        let mut watch: Option<SlotWatch> = None;
        // Whether time passed since the directory was opened, in which it
        // may have been removed; and whether this is the look at the
        // deadline (a waiter that starts over past it looks once more).
        let (mut waited, mut last_look) = (false, self.deadline.is_some_and(|d| Instant::now() >= d));
        // The last look, where it still stands: this waiter, in its
        // record, slept on a record that wants every lock file it can take
        // until its timer, and that record's waiter still waits and beats.
        // Nothing but a drain or a change to its own record can then change
        // what it may take, and the records are not read again (a line of
        // waiters would each read the queue at each beat).
        let mut stands: Option<Ahead> = None;
        // The records as read again with a block's locks held, where they
        // left that block to an earlier waiter: the next scan's, at once.
        let mut read_again: Option<Ahead> = None;
        loop {
            if waited && !dir_still_there(dir, dir_fd) {
                return Ok(None);
            }
            // Made unsearchable meanwhile: said as the start says it, not as
            // a fault of each file in it.
            if let Some(e) = waited.then(|| crate::slots::lockfile::unsearchable(dir)).flatten() {
                return Err(e);
            }
            let kept = self.keep_place(table);
            let again = read_again.take();
            let second = again.is_some();
            let ahead = match (again, stands.take()) {
                (Some(ahead), _) => ahead,
                (None, Some(ahead)) if kept => ahead,
                _ => self.look(table, false),
            };
            // No descriptor left to read the records ahead with: what the
            // wait holds goes first, then it looks again.
            if ahead.starved && self.shed(&mut watch) {
                continue;
            }
            // Whether the scan found a block and left it to an earlier
            // waiter: no proof then that every block is busy.
            let mut left = false;
            match table.scan(needed, &ahead) {
                Ok(Some(mut grant)) => {
                    // Its times set now: the change time of its first lock
                    // file says when it was taken, where it could be set.
                    // Every lock file's, not only up to one it cannot set.
                    #[allow(clippy::unnecessary_fold)]
                    let dated = grant.fds.iter().fold(true, |dated, fd| keep_young(fd) && dated);
                    // After a wait the drains are read with the block's
                    // locks held: a drain read before the scan could be
                    // older than the release that freed the block.
                    if waited && table.out_of_service(needed, self.ask.avoid)? && table.holds_out_of_service(&grant) {
                        table.give_back_block(grant.slot, grant.start, grant.fds, grant.ids);
                        continue;
                    }
                    if !table.still_linked(&mut grant) {
                        // A lock file replaced under its holder: its stale
                        // descriptor goes (the next scan opens the file at
                        // the path) and the record stays, with its place.
                        // The directory itself replaced: start over there.
                        drop(grant);
                        if !dir_still_there(dir, dir_fd) {
                            return Ok(None);
                        }
                        continue;
                    }
                    // A look that may be older than the block's locks (it
                    // passed over a waiter that did not run, a stale beat;
                    // it is a beat old; or it read no `gpuqueue/`, and so no
                    // clock): this process may have been stopped or frozen
                    // between the two while such a waiter thawed, or an
                    // earlier one made its record. The records are read
                    // again with the locks held, and a block that an
                    // earlier waiter that counts now wants is left to it.
                    // The scan is made once more by that reading (another
                    // block may be free and wanted by nobody); a block left
                    // again is as if none was free: this one sleeps until a
                    // release or its next beat (looks again and again would
                    // take blocks from such waiters in a loop where the
                    // host is too loaded for beats to stay fresh, and hold
                    // up every other one). Else the scan already left each
                    // one counting its lock files; where the block's
                    // descriptors leave none to read a record with, the
                    // look stands. Without a place of its own, this one
                    // counts only the waiters that began to wait before
                    // its take (dated by the change time that `keep_young`
                    // just set): one that joined as this one held the block
                    // came later.
                    let taken = self.place.is_none().then_some((&grant.fds[0], dated));
                    let now = ahead.may_be_older_than_its_take().then(|| self.look_before(table, false, taken));
                    let (start, slot) = (grant.start, grant.slot);
                    let wanted = now.as_ref().is_some_and(|now| {
                        !now.starved && !(start..start + grant.fds.len()).all(|g| now.allows(g, slot))
                    });
                    if !wanted {
                        let grant = self.granted(grant);
                        if let Some(w) = watch {
                            w.done();
                        }
                        return Ok(Some(grant));
                    }
                    // Closed, not only unlocked: the close wakes the waiters
                    // that watch the lock files (this one's own watch too,
                    // whose events of it go).
                    drop(grant);
                    if let Some(w) = &mut watch {
                        w.discard();
                    }
                    // The next scan by the records as read with the locks
                    // held; without a place, by all of them (those after
                    // the take left out judged only the block it held).
                    if !second {
                        read_again = if self.place.is_none() { Some(self.look(table, false)) } else { now };
                        continue;
                    }
                    left = true;
                }
                // Drained while it waited: fail now rather than wait
                // forever; a GPU back in service is looked at at once.
                Ok(None) if waited && table.out_of_service(needed, self.ask.avoid)? => continue,
                Ok(None) => {}
                Err(e) if e.errno() == Some(Errno::MFILE) && self.shed(&mut watch) => continue,
                Err(_) if !dir_still_there(dir, dir_fd) => return Ok(None),
                Err(e) => return Err(e),
            }
            // The lock files passed over are said before it fails or waits.
            table.say_unusable(None);
            if last_look || self.ask.wait == Some(Duration::ZERO) {
                return Err(self.no_slot(table, left || !ahead.blocked.is_empty()));
            }
            if self.name.is_none() {
                // No block for it: it waits from now, and looks again once
                // its record is there (a release meanwhile is not missed).
                // SIGTERM from now on removes the record.
                self.signals.get_or_insert_with(WaitingSignals::install);
                self.deadline = self.ask.wait.map(|w| Instant::now() + w);
                // A line stderr cannot take (a pipe nobody reads) is
                // dropped after STDERR_PATIENCE: the waiter keeps beating
                // and looking, and takes its block when it frees up (and
                // then execs the test, its lines dropped as well).
                diag::stderr_patience(Some(STDERR_PATIENCE));
                let ticket = now_ns();
                let pid = rustix::process::getpid().as_raw_nonzero().get().unsigned_abs();
                self.name = Some(record_name(ticket, pid));
                self.keep_place(table);
                self.announce(table, &ahead, left);
                // Time passed: a drain, or the directory's removal, may
                // have come meanwhile.
                waited = true;
                continue;
            }
            if self.shed_record && !core::mem::replace(&mut self.said_no_place, true) {
                self.warn_no_place(table.dir(), Errno::MFILE, "keep its record");
            }
            let signals = self.signals.get_or_insert_with(WaitingSignals::install);
            let alarm = signals.alarm_due();
            waited = true;
            let beat_due = Instant::now() + HEARTBEAT;
            let until = [self.deadline, alarm].into_iter().flatten().fold(beat_due, Instant::min);
            match &ahead.sleep_on {
                // Nothing left to it: until the record ahead goes, or the beat.
                Some(record) if !ahead.leaves_some => {
                    let released = wait::on_record(signals, record, until);
                    if !released && ahead.covered && self.place.is_some() && queue::beats(record) {
                        stands = Some(ahead);
                    }
                }
                Some(_) | None => match &mut watch {
                    Some(w) => w.wait(until),
                    // Watch before the next look, so that a release between
                    // the look and the wait is not missed.
                    // Polling where its scans close lock files, which
                    // would wake it itself.
                    None if !table.cached() => watch = Some(SlotWatch::Polling),
                    None => {
                        let each = table.pool().ids.len() * slots as usize <= wait::MAX_FILE_WATCHES;
                        let names = if each { table.lock_names() } else { Vec::new() };
                        watch = Some(SlotWatch::new(dir, prefix, names));
                    }
                },
            }
            if alarm.is_some_and(|at| Instant::now() >= at) {
                // The caller's own alarm: it ends the wrapper, its record
                // removed first, as it would have without the wait.
                self.place = None;
                self.signals = None;
                wait::alarm_now();
            }
            last_look = self.deadline.is_some_and(|d| Instant::now() >= d);
        }
    }

    /// What the records ahead of it come to, every one of them with
    /// `full` (else down to the first that wants all it can take).
    fn look(&self, table: &Slots<'_>, full: bool) -> Ahead {
        self.look_before(table, full, None)
    }

    /// [`Self::look`] at the records of waiters that began to wait before
    /// the lock file `taken` was taken (`queue::ahead`).
    fn look_before(&self, table: &Slots<'_>, full: bool, taken: Option<(&OwnedFd, bool)>) -> Ahead {
        let takes = || table.takeable(self.ask.needed);
        let (pool, prefix) = (table.pool(), self.ask.profile.lock_prefix());
        queue::ahead(table.dir_fd(), self.place.as_ref(), taken, pool, prefix, &takes, full)
    }

    /// What its record says: the lock files of the blocks it can take
    /// (none of a GPU out of service, or a lock file it may not open), and
    /// the test.
    fn content(&self, name: &RecordName, table: &Slots<'_>, takes: &[bool]) -> Vec<u8> {
        let files = files_line(self.ask.profile.lock_prefix(), table.pool(), self.ask.slots, |i| takes[i]);
        let test = self.described.get_or_init(|| (self.test)());
        // The name its record has (another than the first where that was
        // taken: [`Place::join`]).
        let name = self.place.as_ref().map_or(name, |p| &p.name).as_bytes();
        let want = Want { name, needed: self.ask.needed as u64, files: &files, test: test.as_bytes() };
        want.content(now_ns())
    }

    /// At each wake of a waiter: makes its record (with its ticket) where
    /// it has none, beats it, and makes it again where it was removed or
    /// what it can take changed. Where it cannot, it keeps the record it
    /// had while that is still at its path, or else waits without a place
    /// and says why once, and tries again at the next wake. Returns
    /// whether it had its record, and kept it as it was.
    fn keep_place(&mut self, table: &mut Slots<'_>) -> bool {
        let dir_fd = table.dir_fd();
        let Some(name) = self.name.clone().filter(|_| !self.shed_record) else { return false };
        table.open_all();
        let takes = table.takeable(self.ask.needed);
        let content = self.content(&name, table, &takes);
        let made = match &mut self.place {
            Some(place) => {
                let beat = place.beat();
                if place.says(&content) && place.linked(dir_fd) {
                    // A beat not written: its record counts for nobody
                    // from a second on, as if it had none. Said once a
                    // wait (a file system near full may refuse every other
                    // one); its place is its again at the next beat written.
                    let Err(why) = beat else {
                        self.said_no_place = false;
                        return true;
                    };
                    if !core::mem::replace(&mut self.said_renew, true) {
                        self.warn_no_place(table.dir(), why, "renew its record");
                    }
                    return false;
                }
                // Made again with the same ticket (removed from its path,
                // or what this waiter can take changed): the old one's
                // lock goes with its descriptor, which wakes whoever slept
                // on it; its `Drop` removes nothing that is not its own.
                // Where it cannot be, the old one stays.
                Place::join(dir_fd, &place.name, content).map(|new| *place = new)
            }
            None => Place::join(dir_fd, &name, content).map(|place| {
                // A `gpuqueue/` any user may write without the sticky bit
                // (not its own, which it made 1777): said once.
                if !core::mem::replace(&mut self.judged_queue, true) {
                    crate::slots::exposure::warn_exposed(table.dir(), place.held_dir(), true);
                }
                self.place = Some(place);
            }),
        };
        match made {
            Ok(()) => {
                self.said_no_place = false;
                self.advertised = takes;
            }
            // A record still at its path that could not be made again
            // (with what it can take now) keeps this waiter's place as it
            // was, and is made again at the next wake, where it names no
            // lock file this waiter can no longer take (it would hold up
            // those who can take it): else it goes.
            Err(_)
                if self.place.as_ref().is_some_and(|p| p.linked(dir_fd))
                    && !self.advertised.iter().zip(&takes).any(|(&was, &now)| was && !now) => {}
            Err(why) => {
                self.place = None;
                if !core::mem::replace(&mut self.said_no_place, true) {
                    self.warn_no_place(table.dir(), why, "make a record");
                }
            }
        }
        false
    }

    /// Out of descriptors (`EMFILE`) while it waits: gives up what the wait
    /// added, its inotify watch (it polls instead), then its record (it
    /// waits without a place, said once it sleeps so), so that a wait never needs more
    /// descriptors than taking a free block does, and a record it could no
    /// longer judge the others by holds nobody up. Whether it gave up
    /// anything: if not, the error stands.
    #[cold]
    fn shed(&mut self, watch: &mut Option<SlotWatch>) -> bool {
        // Polling from now on; an inotify instance given up frees a descriptor.
        if matches!(watch.replace(SlotWatch::Polling), Some(SlotWatch::Inotify(_))) {
            return true;
        }
        if self.place.take().is_none() {
            return false;
        }
        // Said once it sleeps without it (not where the look that follows
        // takes a block).
        self.shed_record = true;
        self.said_no_place = false;
        true
    }

    /// The warning that it waits without a place: what it cannot do
    /// (`cannot`), why, and the repair. Said the first time it finds no
    /// place (and again after it had one), and for beats it cannot write,
    /// once a wait.
    #[cold]
    fn warn_no_place(&self, dir: &CStr, why: Errno, cannot: &str) {
        let queue = join(dir, QUEUE_DIR.to_bytes());
        let q = diag::Bytes(queue.as_bytes());
        let (what, repair) = match why {
            Errno::NOTDIR => (format!("{q} is not a directory"), format!("its owner or root runs: rm -f {q}")),
            e => {
                let (cause, repair) = match e {
                    Errno::NOSPC => {
                        ("its file system is out of space or inodes", "free space or inodes on its file system")
                    }
                    Errno::DQUOT => ("a disk quota is reached", "raise this user's quota there"),
                    Errno::ROFS => ("its file system is read-only", "mount the lock directory read-write"),
                    Errno::MFILE | Errno::NFILE => {
                        ("no file descriptor is left", "raise the open-files limit (ulimit -n)")
                    }
                    e if crate::slots::lockfile::refused_to_root(e) => {
                        ("root is refused too", crate::slots::lockfile::REFUSED_TO_ROOT)
                    }
                    // Listed first (a record is read through it), then added
                    // to; where it does not exist, it could not be made.
                    Errno::ACCESS | Errno::PERM
                        if rustix::fs::access(queue.as_cstr(), rustix::fs::Access::READ_OK) == Err(Errno::ACCESS) =>
                    {
                        ("this user may not list it", "")
                    }
                    Errno::ACCESS | Errno::PERM => ("this user may not add to it", ""),
                    Errno::NOENT | Errno::WOULDBLOCK => (
                        "what it made there was removed or locked by another process, eight times",
                        "stop whatever removes or locks files in it while tests wait",
                    ),
                    Errno::EXIST => (
                        "the names it tried were taken",
                        "its owner or root removes the files in it that are not records",
                    ),
                    _ => ("it cannot be written", ""),
                };
                let repair = if repair.is_empty() {
                    format!("root runs: mkdir -p {q} && chmod 1777 {q}")
                } else {
                    repair.into()
                };
                (format!("cannot {cannot} in {q} ({cause}: {})", diag::Os(e)), repair)
            }
        };
        diag::report(
            crate::TOOL,
            format_args!(
                "warning: {what}: waiting without a place in the queue, so later tests may be served first; to repair, {repair}"
            ),
        );
    }

    /// The waiting line: what it waits for, the busy slots, its place.
    fn announce(&mut self, table: &Slots<'_>, ahead: &Ahead, left: bool) {
        let (pool, slots, prefix) = (table.pool(), self.ask.slots, self.ask.profile.lock_prefix());
        let standing = match self.place {
            Some(_) => Standing::Behind(self.look(table, true).count),
            None => Standing::NoQueue,
        };
        // No free block was found among all of them: proof of busy GPUs,
        // unless a lock file this user may not open was passed over, or
        // earlier waiters' lock files were left to them (a block found,
        // then left to one: `left`).
        let proof = (table.warned.is_empty() && ahead.blocked.is_empty() && !left).then_some(table.out.as_slice());
        let test = self.described.get_or_init(|| (self.test)());
        let (dir_fd, needed) = (table.dir_fd(), self.ask.needed);
        self.telemetry.waiting(dir_fd, pool, slots, prefix, needed, test, standing, proof, self.deadline);
    }

    /// Leaves the queue (its record removed, which wakes the one behind)
    /// and restores the signals, before the test is exec'd.
    fn granted(&mut self, mut grant: Grant) -> Grant {
        self.place = None;
        self.signals = None;
        grant.waited = self.telemetry.waited();
        grant
    }
}
