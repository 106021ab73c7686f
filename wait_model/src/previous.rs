//! The protocol of the release before this one (its `slots/queue.rs`),
//! kept as a model so that the checker shows what it finds: the stalls,
//! spins and overtaking that protocol had under frozen processes, other
//! users' locks, several profiles or pools on one lock directory, and a
//! removed queue file.
//!
//! Waiters line up on an exclusive `flock` of one queue file per profile
//! (`gpulock.queue`); its holder, the head, is the only one that looks for
//! slots, and beats in the file. A waiter behind takes part by holding a
//! shared lock of the lock directory. The kernel wakes every waiter when
//! the head lets the queue go; the one that wins gives it back (and tries
//! again 20 ms later) while another holder of the directory lock that
//! started earlier is not shown stopped by `/proc`. A waiter that sees the
//! head's beat stale stands in for it (looks for slots without the lock)
//! if it is the first such holder that `/proc` does not show stopped.

use crate::world::{MAX_PARTICIPANTS, NOBODY, PROFILES, Phase, Protocol, Request, STALE, Sys};

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Stage {
    Arriving,
    /// Blocked in `flock` on the queue file it opened.
    Blocked,
    /// Gave the queue back to an earlier waiter; tries again in 20 ms.
    Yielding,
    /// Holds the queue: looks for slots.
    Head,
    /// Looks for slots in a stopped head's stead.
    StandIn,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Local {
    pub stage: Stage,
    /// The generation of the queue file its descriptor is open on.
    pub generation: u8,
    /// Holds the shared lock of the lock directory (takes part).
    pub part: bool,
    /// Sleeps on releases in the lock directory (inotify) rather than in `flock`.
    pub on_releases: bool,
}

/// One profile's queue file.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Queue {
    pub exists: bool,
    /// The file at the path (made anew after a removal).
    pub generation: u8,
    /// Who holds the lock of each of the last two generations.
    pub holder: [u8; 2],
    /// Ticks since its head last beat in it, up to `STALE + 1`.
    pub beat_age: [u8; 2],
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Shared {
    pub queues: [Queue; PROFILES],
    /// Another user holds a shared lock of the lock directory (`flock -s
    /// /var/lock sleep 300`).
    pub other_locks_dir: bool,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Meddle {
    /// The queue file of a profile is removed (the repair hint's `rm -f`).
    RemoveQueue(u8),
    /// Another user locks the lock directory.
    LockDir,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Previous;

fn queue_of<'a>(sys: &'a mut Sys<Previous>, requests: &[Request], me: usize) -> &'a mut Queue {
    &mut sys.shared.queues[usize::from(requests[me].profile)]
}

/// Whether `me` is the first of the waiters taking part that `/proc` does
/// not show stopped (a frozen one shows as sleeping, so counts).
fn first_running(sys: &Sys<Previous>, me: usize) -> bool {
    if sys.shared.other_locks_dir {
        return false;
    }
    (0..me).all(|j| !(sys.local[j].part && sys.who[j].phase == Phase::Active) || sys.proc_shows_stopped(j))
}

/// Wakes whoever is blocked on queue file generation `g` of `me`'s profile.
fn wake_queue(sys: &mut Sys<Previous>, requests: &[Request], me: usize, g: u8) {
    for j in 0..usize::from(sys.participants) {
        let l = sys.local[j];
        if requests[j].profile == requests[me].profile
            && l.generation == g
            && l.stage == Stage::Blocked
            && sys.who[j].phase == Phase::Active
        {
            sys.who[j].awake = true;
        }
    }
}

/// Lets the queue lock go, if `me` holds it.
fn unlock_queue(sys: &mut Sys<Previous>, requests: &[Request], me: usize) {
    let g = sys.local[me].generation;
    let q = queue_of(sys, requests, me);
    if q.holder[usize::from(g & 1)] == me as u8 {
        q.holder[usize::from(g & 1)] = NOBODY;
        wake_queue(sys, requests, me, g);
    }
}

/// The head (or a stand-in) looks for a block; sleeps on releases when
/// there is none.
fn look(sys: &mut Sys<Previous>, requests: &[Request], me: usize) {
    if !sys.try_take(requests, me, u16::MAX) {
        sys.begin_waiting(me);
        sys.local[me].on_releases = true;
    }
}

/// A waiter behind tries the queue lock (woken, or at its check).
fn try_queue(sys: &mut Sys<Previous>, requests: &[Request], me: usize) {
    let g = sys.local[me].generation;
    let q = queue_of(sys, requests, me);
    let slot = usize::from(g & 1);
    if q.holder[slot] == NOBODY {
        q.holder[slot] = me as u8;
        if !first_running(sys, me) {
            unlock_queue(sys, requests, me);
            sys.local[me].stage = Stage::Yielding;
            sys.who[me].awake = true;
            return;
        }
        queue_of(sys, requests, me).beat_age[slot] = 0;
        sys.local[me].stage = Stage::Head;
        look(sys, requests, me);
        return;
    }
    let stale = q.beat_age[slot] > STALE;
    if stale && first_running(sys, me) {
        sys.local[me].stage = Stage::StandIn;
        look(sys, requests, me);
    } else {
        sys.local[me].stage = Stage::Blocked;
        sys.local[me].on_releases = false;
    }
}

/// Joins the queue behind its head: takes part, sleeps in `flock`.
fn queue_behind(sys: &mut Sys<Previous>, me: usize, generation: u8) {
    sys.begin_waiting(me);
    sys.local[me] = Local { stage: Stage::Blocked, generation, part: true, on_releases: false };
}

impl Protocol for Previous {
    type Local = Local;
    type Shared = Shared;
    type Meddle = Meddle;

    fn init(_: &[Request]) -> (Local, Shared) {
        let local = Local { stage: Stage::Arriving, generation: 0, part: false, on_releases: false };
        let queue = Queue { exists: false, generation: 0, holder: [NOBODY; 2], beat_age: [0; 2] };
        (local, Shared { queues: [queue; PROFILES], other_locks_dir: false })
    }

    fn step(sys: &mut Sys<Previous>, requests: &[Request], me: usize) {
        sys.who[me].awake = false;
        if let Phase::Granted(_) = sys.who[me].phase {
            if sys.validate(me) {
                unlock_queue(sys, requests, me);
                sys.local[me].part = false;
            }
            return;
        }
        if sys.local[me].stage != Stage::Arriving && sys.out_of_time(me) {
            unlock_queue(sys, requests, me);
            sys.local[me].part = false;
            sys.give_up(me);
            return;
        }
        match sys.local[me].stage {
            Stage::Arriving => {
                let q = *queue_of(sys, requests, me);
                let slot = usize::from(q.generation & 1);
                if q.exists && q.holder[slot] != NOBODY {
                    queue_behind(sys, me, q.generation);
                    return;
                }
                sys.local[me].generation = q.generation;
                if q.exists || !sys.try_take(requests, me, u16::MAX) {
                    // Made where missing, then taken: the head.
                    let q = queue_of(sys, requests, me);
                    q.exists = true;
                    q.holder[slot] = me as u8;
                    q.beat_age[slot] = 0;
                    sys.local[me].stage = Stage::Head;
                    look(sys, requests, me);
                }
            }
            Stage::Blocked | Stage::Yielding => try_queue(sys, requests, me),
            Stage::Head => {
                let g = usize::from(sys.local[me].generation & 1);
                queue_of(sys, requests, me).beat_age[g] = 0;
                look(sys, requests, me);
            }
            Stage::StandIn => {
                let g = sys.local[me].generation;
                let q = queue_of(sys, requests, me);
                let slot = usize::from(g & 1);
                if q.holder[slot] == NOBODY {
                    q.holder[slot] = me as u8;
                    q.beat_age[slot] = 0;
                    sys.local[me].stage = Stage::Head;
                    look(sys, requests, me);
                } else if q.beat_age[slot] > STALE && first_running(sys, me) {
                    look(sys, requests, me);
                } else {
                    // Back into the queue: the file at the path now.
                    let now = queue_of(sys, requests, me).generation;
                    queue_behind(sys, me, now);
                    try_queue(sys, requests, me);
                }
            }
        }
    }

    fn meddles(sys: &Sys<Previous>, out: &mut Vec<Meddle>) {
        for (p, q) in sys.shared.queues.iter().enumerate() {
            if q.exists && q.generation == 0 {
                out.push(Meddle::RemoveQueue(p as u8));
            }
        }
        if !sys.shared.other_locks_dir {
            out.push(Meddle::LockDir);
        }
    }

    fn meddle(sys: &mut Sys<Previous>, meddle: Meddle) {
        match meddle {
            Meddle::RemoveQueue(p) => {
                let q = &mut sys.shared.queues[usize::from(p)];
                q.exists = false;
                q.generation += 1;
                let slot = usize::from(q.generation & 1);
                q.holder[slot] = NOBODY;
                q.beat_age[slot] = 0;
                for w in sys.who.iter_mut().take(usize::from(sys.participants)) {
                    if w.waiting {
                        w.undisturbed = 0;
                    }
                }
            }
            Meddle::LockDir => sys.shared.other_locks_dir = true,
        }
    }

    fn on_release(sys: &mut Sys<Previous>) {
        for j in 0..usize::from(sys.participants) {
            let l = sys.local[j];
            if l.on_releases && matches!(l.stage, Stage::Head | Stage::StandIn) && sys.who[j].phase == Phase::Active {
                sys.who[j].awake = true;
            }
        }
    }

    fn on_kill(sys: &mut Sys<Previous>, me: usize) {
        // The kernel lets its locks go; nothing else knows it died.
        let profile = (0..PROFILES).find(|&p| sys.shared.queues[p].holder.contains(&(me as u8)));
        if let Some(p) = profile {
            let q = &mut sys.shared.queues[p];
            for (slot, h) in q.holder.iter_mut().enumerate() {
                if *h == me as u8 {
                    *h = NOBODY;
                    let g = slot as u8;
                    for j in 0..MAX_PARTICIPANTS.min(usize::from(sys.participants)) {
                        let l = sys.local[j];
                        if l.stage == Stage::Blocked && l.generation & 1 == g && sys.who[j].phase == Phase::Active {
                            sys.who[j].awake = true;
                        }
                    }
                }
            }
        }
        sys.local[me].part = false;
    }

    fn on_tick(sys: &mut Sys<Previous>) {
        for q in &mut sys.shared.queues {
            for age in &mut q.beat_age {
                *age = (*age + 1).min(STALE + 1);
            }
        }
    }
}
