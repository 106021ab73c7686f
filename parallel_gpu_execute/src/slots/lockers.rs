//! Who holds a lock file and who waits for it, from the processes that
//! have it open (`holders::openers`) and from `/proc/locks`, read as
//! often as it takes to be believed.
//!
//! `/proc/locks` is not a snapshot. The kernel fills a `read` with at most
//! a page of it (some 60 lines) under its lock, and starts the next `read`
//! at the same line *number* in the table as it is then: a lock let go
//! meanwhile anywhere before that line makes the next `read` skip a line
//! (or end the file early, where the table has shrunk below that number),
//! and one taken there shows a line twice (hundreds of times, where locks
//! are taken as fast as it is read). On a host with more than a page of
//! locks whose table changes (any process that takes and lets go locks), a
//! held lock can be missing from a reading, and one holder listed many
//! times. Two readings in a row that agree line for line were made while
//! nothing changed: each is the table as it was.
//!
//! So `--status` reads it before the processes are scanned, until two
//! readings in a row agree ([`Readings::before_the_scan`], at most
//! [`BEFORE_READS`]), and after ([`read_after_the_scan`]), a millisecond
//! apart, while either of these holds:
//!
//! - a lock listed before the scan that no visible process accounts for
//!   is missing from the last readings after it, but fewer of them than
//!   it takes to be let go: one where no two readings in a row disagreed,
//!   else [`GONE_AFTER_CHANGING`] in a row;
//! - such a lock was listed by the first reading after the scan: a process
//!   that exits closes its descriptors a moment before the kernel lets its
//!   locks go, and its lock, listed then, has no holder to be found.
//!
//! Readings beyond those always made stop [`READ_BUDGET`] after the first
//! began (a table of 100,000 locks takes seconds a reading).
//!
//! A lock listed before the scan and not let go by those rules is held
//! (one taken after the scan is not counted: its taker, if visible, was
//! not looked for); after [`MAX_READS`] readings, one still in doubt
//! counts as held: a held slot is not shown free for readings that
//! skipped its line, but where the table changes so fast that each of
//! some thirty readings in a row skips it. Each holder is counted once,
//! however many times the readings list it.

use crate::prelude::*;
use crate::slots::holders::{LockFile, Opener};
use crate::slots::proclocks::{LockEntry, on_file, read_locks};
use crate::sys::clock::Instant;
use core::time::Duration;

/// Readings after the scan, in a row, that must leave out a lock for it to
/// be let go where two readings in a row disagreed.
pub const GONE_AFTER_CHANGING: usize = 32;
/// Readings before the scan at most.
const BEFORE_READS: usize = 32;
/// Readings at most.
const MAX_READS: usize = 96;
/// The time, from the first reading, after which no reading is made but
/// the two (three where a lock no visible process accounts for was listed
/// after the scan) that always are: another user who holds 100,000 locks
/// makes each take seconds (the kernel walks the table from its start for
/// each page).
const READ_BUDGET: Duration = Duration::from_secs(1);

/// What the readings of `/proc/locks` were: each sorted by file, as
/// `read_locks` gives it; the first `before` of them made before the scan
/// of the processes.
#[derive(Debug, Default)]
pub struct Readings {
    pub reads: Vec<Vec<LockEntry>>,
    pub before: usize,
    /// Whether two readings in a row disagreed (or there was no time for
    /// a second): the table changed as it was read, and a reading may
    /// have skipped a line.
    changing: bool,
    /// When the readings beyond those always made stop (`None`: the first
    /// could not be made).
    until: Option<Instant>,
}

/// The readings as [`lockers`] judges a file by.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub reads: &'a [Vec<LockEntry>],
    /// How many of them were made before the scan of the processes.
    pub before: usize,
    /// Readings in a row, after the scan, that let a lock go.
    pub gone_after: usize,
}

impl<'a> Seen<'a> {
    /// One reading, with no scan after it: what it lists is held.
    pub fn once(locks: &'a Vec<LockEntry>) -> Seen<'a> {
        Seen { reads: core::slice::from_ref(locks), before: 1, gone_after: 1 }
    }
}

impl Readings {
    /// The readings before the scan; `None` when `/proc/locks` cannot be
    /// read (then nothing is known of the locks, which is not "none is
    /// held").
    pub fn before_the_scan() -> Option<Readings> {
        let until = Instant::now() + READ_BUDGET;
        let mut readings = Readings { reads: vec![read_locks()?], before: 1, changing: false, until: Some(until) };
        while Instant::now() < until && readings.reads.len() < BEFORE_READS && !readings.read() {}
        readings.changing |= readings.reads.len() == 1;
        readings.before = readings.reads.len();
        Some(readings)
    }

    /// One reading more (an unreadable one lists nothing); whether it
    /// agrees with the one before.
    fn read(&mut self) -> bool {
        let locks = read_locks().unwrap_or_default();
        let agrees = self.reads.last().is_some_and(|last| *last == locks);
        self.changing |= !agrees;
        self.reads.push(locks);
        agrees
    }

    pub fn seen(&self) -> Seen<'_> {
        let gone_after = if self.changing { GONE_AFTER_CHANGING } else { 1 };
        Seen { reads: &self.reads, before: self.before, gone_after }
    }
}

/// Reads `/proc/locks` again after the scan of the processes (`open`, for
/// each of `files`), and then a millisecond apart until what it says of
/// every file is settled (the module's rules).
pub fn read_after_the_scan(readings: &mut Readings, files: &[LockFile], open: &[Vec<Opener>], partial: bool) {
    readings.read();
    while readings.reads.len() < MAX_READS {
        let first = readings.reads.len() == readings.before + 1;
        // Past the budget, a lock in doubt counts as held.
        if !first && readings.until.is_none_or(|until| Instant::now() >= until) {
            return;
        }
        let unsettled = files.iter().zip(open).any(|(file, open)| {
            let l = lockers(file, open, readings.seen(), partial);
            l.in_doubt || (first && l.hidden_holders > 0)
        });
        if !unsettled {
            return;
        }
        crate::sys::clock::sleep(Duration::from_millis(1));
        readings.read();
    }
}

/// Who holds a file's lock and who waits for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lockers {
    /// The processes that hold it: the one that took it first when it still
    /// does, then the others, as found.
    pub holders: Vec<i64>,
    /// The first of `holders` is the process that took the lock.
    pub taker_holds: bool,
    /// Holders that cannot be seen (another user's processes when not
    /// root, another PID namespace): one for each process whose lock no
    /// visible holder accounts for.
    pub hidden_holders: usize,
    /// The processes blocked on it; 0 for one that cannot be seen.
    pub waiters: Vec<i64>,
    /// A hidden holder's lock was left out by the last readings after the
    /// scan, fewer than let it go: let go, or skipped by a reading. It
    /// counts as held.
    pub in_doubt: bool,
}

impl Lockers {
    /// Whether anything shows that the lock is held.
    pub fn held(&self) -> bool {
        !self.holders.is_empty() || self.hidden_holders > 0
    }
}

/// What the readings of `/proc/locks` (`seen`) and the processes that
/// have `file` open say about it.
///
/// A lock listed before the scan that no visible holder accounts for is
/// held by a hidden holder: the kernel says it is held, whoever holds it
/// (a process this one may not look into, one in another PID namespace, a
/// descriptor in flight between two processes), unless the last
/// `seen.gone_after` readings after the scan leave it out: then it was let
/// go (the module's rules; with no reading after the scan, it is held).
/// `partial`: this `/proc/locks` leaves out locks taken outside this PID
/// namespace (`!host_pid_namespace()`), so a visible waiter proves a
/// hidden holder.
pub fn lockers(file: &LockFile, openers: &[Opener], seen: Seen<'_>, partial: bool) -> Lockers {
    // A lock taken, held or waited for through a twin, and not the file.
    let through = |l: &LockEntry, twin: bool| {
        openers.iter().any(|o| o.twin == twin && (o.taker == Some(l.pid) || o.pid == l.pid))
    };
    let on_file = |locks: &[LockEntry]| -> Vec<LockEntry> {
        let on = on_file(locks, file.key);
        let on = on.iter().filter(|l| file.locked_by(l));
        on.filter(|l| through(l, false) || !through(l, true)).cloned().collect()
    };
    let openers: Vec<Opener> = openers.iter().filter(|o| !o.twin).copied().collect();
    let openers = openers.as_slice();
    let reads: Vec<Vec<LockEntry>> = seen.reads.iter().map(|r| on_file(r)).collect();
    let mut holders: Vec<i64> = Vec::new();
    let mut taker_holds = false;
    for o in openers.iter().filter(|o| o.holds) {
        if o.taker == Some(o.pid) && !taker_holds {
            taker_holds = true;
            holders.insert(0, o.pid);
        } else {
            holders.push(o.pid);
        }
    }
    // The takers of the locks no visible holder accounts for, each once,
    // unless the readings after the scan have left it out long enough.
    let listed = |read: &[LockEntry], pid: i64| read.iter().any(|l| !l.blocked && l.pid == pid);
    let before = seen.before.min(reads.len());
    let (mut takers, mut hidden_holders, mut in_doubt) = (Vec::new(), 0, false);
    for l in reads[..before].iter().flatten().filter(|l| !l.blocked) {
        if openers.iter().any(|o| o.holds && o.taker == Some(l.pid)) || takers.contains(&l.pid) {
            continue;
        }
        takers.push(l.pid);
        let missing = reads[before..].iter().rev().take_while(|r| !listed(r, l.pid)).count();
        if missing < seen.gone_after {
            hidden_holders += 1;
            in_doubt |= missing > 0;
        }
    }
    if partial && hidden_holders == 0 && holders.is_empty() && openers.iter().any(|o| o.blocked) {
        // Someone waits, so someone holds it, unseen (from another PID
        // namespace, /proc/locks leaves out the locks taken outside).
        hidden_holders = 1;
    }
    // The waiters the first reading lists (those unseen as 0), and the
    // visible ones found blocked; each seen one once.
    let mut waiters: Vec<i64> = Vec::new();
    let blocked = reads.first().into_iter().flatten().filter(|l| l.blocked).map(|l| l.pid.max(0));
    for pid in blocked.chain(openers.iter().filter(|o| o.blocked).map(|o| o.pid)) {
        if pid <= 0 || !waiters.contains(&pid) {
            waiters.push(pid);
        }
    }
    Lockers { holders, taker_holds, hidden_holders, waiters, in_doubt }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64, blocked: bool) -> LockEntry {
        LockEntry { blocked, flock: true, breaking: false, pid, major: 0, minor: 40, inode: 258 }
    }

    const FILE: LockFile =
        LockFile { name: b"gpulock0_0", dev: 42, ino: 258, key: (0, 40, 258), queue: false, lets_in: false };

    fn opener(pid: i64, holds: bool, taker: Option<i64>, blocked: bool) -> Opener {
        Opener { pid, holds, taker, blocked, twin: false }
    }

    /// `lockers` with the same `/proc/locks` before and after the scan.
    fn lockers_of(openers: &[Opener], locks: &[LockEntry], partial: bool) -> Lockers {
        let reads = [locks.to_vec(), locks.to_vec()];
        lockers(&FILE, openers, Seen { reads: &reads, before: 1, gone_after: 1 }, partial)
    }

    #[test]
    fn a_twins_locks_are_not_the_files() {
        let twin = |pid: i64, holds: bool, taker: Option<i64>, blocked: bool| Opener {
            twin: true,
            ..opener(pid, holds, taker, blocked)
        };
        // A classic script holds the twin (its flock child, 100, exited), and
        // 70 waits for it: nobody holds or waits for the file.
        let openers = [twin(90, true, Some(100), false), twin(70, false, None, true)];
        let l = lockers_of(&openers, &[entry(100, false), entry(70, true)], false);
        assert_eq!(l, Lockers::default());
        // Its own holder beside a twin's: that one alone; and a lock no
        // process accounts for stays held, unseen.
        let openers = [twin(90, true, Some(90), false), opener(80, true, Some(80), false)];
        let l = lockers_of(&openers, &[entry(90, false), entry(80, false), entry(60, false)], false);
        assert_eq!((l.holders, l.hidden_holders), (vec![80], 1));
    }

    #[test]
    fn a_dead_taker_is_not_named_and_the_processes_that_hold_the_lock_are() {
        // The classic script: the flock child (100) has exited, the shell
        // (90) holds the lock, its `sleep` (95) shares it.
        let openers = [opener(95, true, Some(100), false), opener(90, true, Some(100), false)];
        let l = lockers_of(&openers, &[entry(100, false)], false);
        assert_eq!(
            l,
            Lockers { holders: vec![95, 90], taker_holds: false, hidden_holders: 0, waiters: vec![], in_doubt: false }
        );
        // The taker still holding it comes first.
        let openers = [opener(95, true, Some(90), false), opener(90, true, Some(90), false)];
        let l = lockers_of(&openers, &[entry(90, false)], false);
        assert_eq!((l.holders, l.taker_holds), (vec![90, 95], true));
    }

    #[test]
    fn what_cannot_be_seen_is_hidden_never_dropped() {
        // Listed before and after, but nobody visible holds it (another
        // user's process without CAP_SYS_PTRACE, a descriptor in flight
        // over a unix socket): held, whoever sees it, root included.
        for partial in [false, true] {
            let l = lockers_of(&[], &[entry(77, false), entry(78, true), entry(0, true)], partial);
            assert_eq!(
                l,
                Lockers {
                    holders: vec![],
                    taker_holds: false,
                    hidden_holders: 1,
                    waiters: vec![78, 0],
                    in_doubt: false
                }
            );
            assert!(l.held());
        }
        // Not listed (its taker is outside this PID namespace), but a
        // visible process sleeps in flock on it.
        let l = lockers_of(&[opener(5, false, None, true), opener(6, false, None, false)], &[], true);
        assert_eq!(
            l,
            Lockers { holders: vec![], taker_holds: false, hidden_holders: 1, waiters: vec![5], in_doubt: false }
        );
        // In the host's PID namespace /proc/locks lists every lock: a
        // waiter there whose holder is not listed saw it let go.
        let l = lockers_of(&[opener(5, false, None, true)], &[], false);
        assert_eq!((l.hidden_holders, l.waiters), (0, vec![5]));
        // Open, neither held nor waited for: free.
        let l = lockers_of(&[opener(6, false, None, false)], &[], true);
        assert!(!l.held() && l.waiters.is_empty());
        // Two shared locks listed, one taken by a visible holder: the
        // other's holder is hidden.
        let l = lockers_of(&[opener(90, true, Some(90), false)], &[entry(90, false), entry(77, false)], false);
        assert_eq!((l.holders, l.hidden_holders), (vec![90], 1));
        // Entries of other files do not count.
        let other = LockEntry { inode: 259, ..entry(7, false) };
        assert!(!lockers_of(&[], &[other], false).held());
    }

    /// `lockers` of `FILE` with no opener, by `reads`, the first `before`
    /// of them before the scan, let go after `gone_after` missing.
    fn judged(reads: &[Vec<LockEntry>], before: usize, gone_after: usize) -> Lockers {
        lockers(&FILE, &[], Seen { reads, before, gone_after }, false)
    }

    #[test]
    fn a_lock_let_go_during_the_scan_is_free_once_enough_readings_leave_it_out() {
        let (with, without) = (vec![entry(77, false)], Vec::new());
        // Readings that were whole are snapshots: gone from one, let go.
        let l = judged(&[with.clone(), without.clone()], 1, 1);
        assert!(!l.held() && !l.in_doubt, "{l:?}");
        // Torn ones: listed before the scan, gone after it: let go in
        // between, or skipped by that reading. In doubt, and held, until
        // enough readings in a row leave it out.
        for missing in 1..3 {
            let reads: Vec<_> = core::iter::once(with.clone()).chain(vec![without.clone(); missing]).collect();
            let l = judged(&reads, 1, 3);
            assert!(l.held() && l.in_doubt, "{missing} reading(s) without it: {l:?}");
        }
        let l = judged(&[with.clone(), without.clone(), without.clone(), without.clone()], 1, 3);
        assert!(!l.held() && !l.in_doubt, "{l:?}");
        // Skipped by one reading, listed by the next: held, no doubt.
        let l = judged(&[with.clone(), without.clone(), with.clone()], 1, 3);
        assert!(l.held() && !l.in_doubt, "{l:?}");
        // Taken again by another process after the scan: that process was
        // not looked for, and the lock listed before is gone.
        let l = judged(&[with.clone(), vec![entry(78, false)], vec![entry(78, false)], vec![entry(78, false)]], 1, 3);
        assert!(!l.held() && !l.in_doubt, "{l:?}");
        // Skipped by one reading before the scan, listed by another.
        let l = judged(&[without.clone(), with.clone(), with.clone()], 2, 3);
        assert_eq!((l.hidden_holders, l.in_doubt), (1, false), "{l:?}");
        // With no reading after the scan (the waiting line's count): held.
        assert!(lockers(&FILE, &[], Seen::once(&with), false).held());
        // What it does see, it names.
        let l = lockers_of(&[opener(90, true, Some(90), false)], &[entry(90, false)], false);
        assert_eq!((l.holders, l.hidden_holders), (vec![90], 0));
    }

    #[test]
    fn a_holder_a_reading_lists_twice_is_one_holder() {
        // A lock taken before the line being read shows a line twice.
        let twice = vec![entry(77, false), entry(77, false), entry(78, true), entry(78, true)];
        let l = judged(&[twice.clone(), vec![entry(77, false), entry(78, true)]], 1, 3);
        assert_eq!((l.hidden_holders, l.waiters.as_slice()), (1, &[78][..]), "{l:?}");
        // Unseen waiters (0): as many as the first reading lists.
        let unseen = vec![entry(77, false), entry(0, true), entry(0, true)];
        let l = judged(&[unseen.clone(), vec![entry(77, false), entry(0, true)]], 1, 3);
        assert_eq!(l.waiters, [0, 0], "{l:?}");
    }
}
