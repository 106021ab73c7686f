//! The protocol the wrapper runs (docs/design.md, "The wait queue").
//!
//! A waiter has a record in `gpuqueue/`: its place (the time it began to
//! wait), what it asks for, and a beat it renews at every tick, under an
//! exclusive `flock` held for its whole wait. A participant counts another
//! one's record when it is earlier, its lock is held, its beat is fresh and
//! it wants some of the same lock files. It takes a free block among the
//! lock files that no counted record wants; when there is none, it sleeps
//! until a lock file in the lock directory is released (when it may take
//! some files) or until the latest counted record's lock is released (when
//! it may take none), and at its next beat in any case.
//!
//! The look at the records and the take are steps of their own: between
//! them the participant may be frozen, stopped or killed, and anything
//! else may happen. Where the look may be older than the locks it took
//! (it passed over a stale record, found none, or a beat passed since), it
//! reads the records again with the locks held and leaves a block that a
//! counted record now wants, to take once more by that reading; a block
//! left a second time is as if none was free.
//!
//! Nothing else: no head, no `/proc`, no lock of the directory. A record
//! removed is made again by its owner at its next beat, with its place;
//! a record whose lock is free belongs to a dead participant and is
//! removed by whoever sees it.

use crate::world::{MAX_PARTICIPANTS, Phase, Protocol, Request, Reread, STALE, Sys};

/// A participant's own state.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Local {
    pub stage: Stage,
    pub sleep: Sleep,
    /// What its last look found, kept for the take that follows it: the
    /// two are steps of their own, and the adversary may freeze, stop or
    /// kill the participant, end tests and meddle between them.
    pub look: Option<Look>,
}

/// A look at the records, as the take after it uses it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Look {
    /// The lock files no counted record wants.
    pub allowed: u16,
    /// Where to sleep when no block is free among them.
    pub sleep: Sleep,
    /// It passed over an earlier record whose beat was stale.
    pub stale: bool,
    /// It may be a beat old: a tick passed since it was made, or it found
    /// no record, its own neither (the wrapper: no `gpuqueue/`, where it
    /// reads no clock, and so cannot tell).
    pub old: bool,
    /// It is the reading made with a block's locks held, after that block
    /// was left to an earlier waiter: a block left again is as if none was
    /// free.
    pub second: bool,
    /// For one without a record, once it took a block: the next ticket
    /// then. Its reading with the locks held counts only the waiters that
    /// began to wait before (one that joined as it held the block came
    /// later).
    pub taken: u8,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Stage {
    /// Looking for a slot before it waits (the fast path).
    Arriving,
    /// Found none: makes its record at its next step.
    Joining,
    /// Has its record.
    Waiting,
}

/// What wakes a sleeping waiter besides its timer.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Sleep {
    Nothing,
    /// A release in the lock directory (inotify).
    Releases,
    /// The release of participant `j`'s record lock (a blocking `flock`).
    RecordOf(u8),
    /// The same, where `j`'s record wants every lock file this one can take:
    /// woken by its timer while `j` still holds its lock and beats, and its
    /// own record as it was, its count stands and it sleeps on (design.md,
    /// step 3.6).
    Behind(u8),
}

/// A participant's record in `gpuqueue/`.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub struct Record {
    /// Linked in the directory.
    pub present: bool,
    /// Its owner holds its lock (on the file as made last).
    pub owner_locks: bool,
    /// Another user holds an exclusive lock on it (possible once its owner
    /// let go).
    pub other_locks: bool,
    /// Ticks since its owner last beat, up to `STALE + 1`.
    pub beat_age: u8,
    /// Its place.
    pub ticket: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Shared {
    pub records: [Record; MAX_PARTICIPANTS],
}

/// What the adversary may do to the queue.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Meddle {
    /// A cleaner removes one record.
    RemoveRecord(u8),
    /// `rm -rf gpuqueue`.
    RemoveQueue,
    /// Another user takes an exclusive lock on a dead participant's record.
    LockDeadRecord(u8),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Tickets;

/// The records `me` counts: earlier than its own place (every one, for a
/// participant without a record), locked, fresh, and wanting some of the
/// same lock files. Records whose lock is free are removed on the way.
fn counted(sys: &mut Sys<Tickets>, requests: &[Request], me: usize, mine: Option<u8>) -> Counted {
    let empty = sys.shared.records.iter().take(requests.len()).all(|r| !r.present);
    let mut out = Counted { empty, ..Counted::default() };
    for j in 0..requests.len() {
        let r = &mut sys.shared.records[j];
        if j == me || !r.present {
            continue;
        }
        if !r.owner_locks && !r.other_locks {
            r.present = false;
            continue;
        }
        let (ticket, earlier) = (r.ticket, mine.is_none_or(|m| r.ticket < m));
        out.stale |= earlier && r.beat_age > STALE;
        if earlier && r.beat_age <= STALE && requests[j].advertised() & requests[me].takes() != 0 {
            out.wanted |= requests[j].advertised();
            let ticket_of = |k: Option<usize>| k.map(|k| sys.shared.records[k].ticket);
            if ticket_of(out.latest).is_none_or(|t| t < ticket) {
                out.latest = Some(j);
            }
            if requests[me].covered_by(&requests[j]) && ticket_of(out.covering).is_none_or(|t| t < ticket) {
                out.covering = Some(j);
            }
        }
    }
    out
}

/// What the counted records come to.
#[derive(Default)]
struct Counted {
    /// The lock files they want.
    wanted: u16,
    /// The latest of them.
    latest: Option<usize>,
    /// The latest of them that wants every lock file `me` can take.
    covering: Option<usize>,
    /// An earlier record whose lock is held and whose beat is stale was
    /// passed over.
    stale: bool,
    /// No record was there, its own neither (the wrapper: no `gpuqueue/`,
    /// and so no time the look can be judged by).
    empty: bool,
}

/// Wakes whoever sleeps on `me`'s record lock (it was released): their
/// `flock` returns, so no count of theirs stands.
fn wake_on_record(sys: &mut Sys<Tickets>, me: usize) {
    let n = usize::from(sys.participants);
    for (l, who) in sys.local.iter_mut().zip(sys.who.iter_mut()).take(n) {
        let on_me = l.sleep == Sleep::RecordOf(me as u8) || l.sleep == Sleep::Behind(me as u8);
        if on_me && who.phase == Phase::Active {
            who.awake = true;
            l.sleep = Sleep::Nothing;
        }
    }
}

/// Removes `me`'s record and lets its lock go.
fn leave(sys: &mut Sys<Tickets>, me: usize) {
    let r = &mut sys.shared.records[me];
    let had = r.owner_locks;
    r.present = false;
    r.owner_locks = false;
    if had {
        wake_on_record(sys, me);
    }
}

/// Reads the records (`mine`: its own place, `None` without a record) and
/// keeps what they leave it for the take, its next step.
fn look(sys: &mut Sys<Tickets>, requests: &[Request], me: usize, mine: Option<u8>) {
    let c = counted(sys, requests, me, mine);
    keep_look(sys, requests, me, c, false);
}

/// Takes a free block among the files its look left it; where there is
/// none, sleeps as the look said (one without a record makes it first).
fn take(sys: &mut Sys<Tickets>, requests: &[Request], me: usize, look: Look) {
    if sys.try_take(requests, me, look.allowed) {
        let taken = if sys.local[me].stage == Stage::Arriving { sys.next_ticket } else { 0 };
        sys.local[me].look = Some(Look { taken, ..look });
        return;
    }
    sys.local[me].look = None;
    nothing_free(sys, me, look.sleep);
}

/// Whether a record's lock is held, by its owner or another user.
fn locked(r: &Record) -> bool {
    r.owner_locks || r.other_locks
}

/// No block for it: one without a record makes it at its next step, one
/// with sleeps; on a record whose lock was let go since the look (its
/// waiter left), the `flock` returns at once.
fn nothing_free(sys: &mut Sys<Tickets>, me: usize, sleep: Sleep) {
    if sys.local[me].stage == Stage::Arriving {
        sys.local[me].stage = Stage::Joining;
        sys.who[me].awake = true;
        return;
    }
    match sleep {
        Sleep::RecordOf(j) | Sleep::Behind(j) if !locked(&sys.shared.records[usize::from(j)]) => {
            sys.who[me].awake = true;
        }
        _ => sys.local[me].sleep = sleep,
    }
}

/// With a block's locks held: where its look passed over a stale record,
/// found none, or is older than a beat, the records are read again, and a
/// block that an earlier waiter that counts now wants is left to it (its
/// look may be older than the locks: it was frozen between the two while
/// that waiter thawed, or made its record), to take the step once more by
/// that reading; a block left a second time is as if none was free. One
/// without a record counts only the waiters that began to wait before its
/// take. Whether it keeps the block.
fn keeps(sys: &mut Sys<Tickets>, requests: &[Request], me: usize, files: u16, look: Look) -> bool {
    let again = match requests[me].reread {
        Reread::StaleEmptyOrOld | Reread::StaleOrOld => look.stale || look.old,
        Reread::Stale => look.stale,
    };
    if !again {
        return true;
    }
    let arriving = sys.local[me].stage == Stage::Arriving;
    let mine = if arriving { look.taken } else { sys.shared.records[me].ticket };
    let now = counted(sys, requests, me, Some(mine));
    if now.wanted & files == 0 {
        return true;
    }
    sys.release(me);
    sys.who[me].phase = Phase::Active;
    if look.second {
        sys.local[me].look = None;
        nothing_free(sys, me, Sleep::Releases);
    } else {
        // Its next take by every record earlier than its place (all of
        // them, without one): those left out judged only the block it held.
        let again = if arriving { counted(sys, requests, me, None) } else { now };
        keep_look(sys, requests, me, again, true);
    }
    false
}

/// What the counted records `c` leave `me`, kept for its take (`second`:
/// the reading made with a block's locks held).
fn keep_look(sys: &mut Sys<Tickets>, requests: &[Request], me: usize, c: Counted, second: bool) {
    let allowed = requests[me].takes() & !c.wanted;
    let sleep = match (allowed, c.covering, c.latest) {
        (0, Some(j), _) => Sleep::Behind(j as u8),
        (0, None, Some(j)) => Sleep::RecordOf(j as u8),
        _ => Sleep::Releases,
    };
    // A look that found no record counts as old but where the directory
    // is dated empty (`Reread::StaleOrOld`): then only a tick makes it old.
    let old = c.empty && requests[me].reread != Reread::StaleOrOld;
    sys.local[me].look = Some(Look { allowed, sleep, stale: c.stale, old, second, taken: 0 });
    sys.who[me].awake = true;
}

impl Protocol for Tickets {
    type Local = Local;
    type Shared = Shared;
    type Meddle = Meddle;

    fn init(_: &[Request]) -> (Local, Shared) {
        (
            Local { stage: Stage::Arriving, sleep: Sleep::Nothing, look: None },
            Shared { records: [Record::default(); MAX_PARTICIPANTS] },
        )
    }

    fn step(sys: &mut Sys<Tickets>, requests: &[Request], me: usize) {
        sys.who[me].awake = false;
        if let Phase::Granted(grant) = sys.who[me].phase {
            let look = sys.local[me].look.take();
            // The locks checked first, as the code does: a lock file
            // replaced under its holder gives the block back, and the
            // next take follows a look of its own.
            if sys.locks_current(me) && look.is_some_and(|l| !keeps(sys, requests, me, grant.files, l)) {
                return;
            }
            if sys.validate(me) {
                leave(sys, me);
            }
            return;
        }
        // The take that follows a look.
        if let Some(look) = sys.local[me].look {
            return take(sys, requests, me, look);
        }
        match sys.local[me].stage {
            Stage::Arriving => look(sys, requests, me, None),
            Stage::Joining => {
                sys.begin_waiting(me);
                let ticket = sys.who[me].ticket.unwrap_or_default();
                sys.shared.records[me] =
                    Record { present: true, owner_locks: true, other_locks: false, beat_age: 0, ticket };
                sys.local[me].stage = Stage::Waiting;
                look(sys, requests, me, Some(ticket));
            }
            Stage::Waiting => {
                if sys.out_of_time(me) {
                    leave(sys, me);
                    sys.give_up(me);
                    return;
                }
                let r = &mut sys.shared.records[me];
                r.beat_age = 0;
                let ticket = r.ticket;
                if !r.present {
                    // Made again, with its place; the old file's lock goes
                    // with the old descriptor.
                    r.present = true;
                    wake_on_record(sys, me);
                } else if let Sleep::Behind(j) = sys.local[me].sleep {
                    // Its timer woke it (a release would have ended the
                    // sleep): while the record ahead is held and beats,
                    // its count stands.
                    let ahead = &sys.shared.records[usize::from(j)];
                    if ahead.owner_locks && ahead.beat_age <= STALE {
                        return;
                    }
                }
                sys.local[me].sleep = Sleep::Nothing;
                look(sys, requests, me, Some(ticket));
            }
        }
    }

    fn meddles(sys: &Sys<Tickets>, out: &mut Vec<Meddle>) {
        for (j, r) in sys.shared.records.iter().enumerate() {
            if r.present {
                out.push(Meddle::RemoveRecord(j as u8));
                if !r.owner_locks && !r.other_locks {
                    out.push(Meddle::LockDeadRecord(j as u8));
                }
            }
        }
        if sys.shared.records.iter().filter(|r| r.present).count() > 1 {
            out.push(Meddle::RemoveQueue);
        }
    }

    fn meddle(sys: &mut Sys<Tickets>, meddle: Meddle) {
        match meddle {
            Meddle::RemoveRecord(j) => {
                sys.shared.records[j as usize].present = false;
                sys.who[j as usize].undisturbed = 0;
            }
            Meddle::RemoveQueue => {
                for (j, r) in sys.shared.records.iter_mut().enumerate() {
                    if r.present {
                        r.present = false;
                        sys.who[j].undisturbed = 0;
                    }
                }
            }
            Meddle::LockDeadRecord(j) => sys.shared.records[j as usize].other_locks = true,
        }
    }

    fn on_release(sys: &mut Sys<Tickets>) {
        for (j, l) in sys.local.iter().enumerate().take(usize::from(sys.participants)) {
            if l.sleep == Sleep::Releases && sys.who[j].phase == Phase::Active {
                sys.who[j].awake = true;
            }
        }
    }

    fn on_kill(sys: &mut Sys<Tickets>, me: usize) {
        sys.local[me].look = None;
        if sys.shared.records[me].owner_locks {
            sys.shared.records[me].owner_locks = false;
            wake_on_record(sys, me);
        }
    }

    fn on_tick(sys: &mut Sys<Tickets>) {
        for l in &mut sys.local {
            if let Some(look) = &mut l.look {
                look.old = true;
            }
        }
        for r in &mut sys.shared.records {
            if r.owner_locks || r.present {
                r.beat_age = (r.beat_age + 1).min(STALE + 1);
            }
        }
    }
}
