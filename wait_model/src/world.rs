//! The world a wait protocol runs in: the lock files, the participants
//! (what each asks for and what the scheduler does to it), the adversary,
//! time, and the invariants every protocol is held to. A protocol
//! ([`Protocol`]) adds its own files and each participant's own state, and
//! says what one step of a participant does.
//!
//! Time is in ticks of one beat (the product's `HEARTBEAT`, 250 ms). A tick
//! can only pass once every participant that runs has done what it was
//! woken for and sleeps again: a process that runs gets the processor
//! within a beat. Everything else is the adversary's choice, in any order:
//! a participant arrives, a test ends, a participant is frozen (the cgroup
//! freezer: `/proc` shows it sleeping) or stopped (SIGSTOP: `/proc` shows
//! `T`) and let go again, killed, a lock file replaced, and what the
//! protocol's own [`Protocol::Meddle`] allows (files removed, other users'
//! locks). Ages are counted up to a cap, so the state space is finite.

use std::fmt::Debug;
use std::hash::Hash;

/// GPUs on the host.
pub const GPUS: usize = 2;
/// Slots per GPU at most.
pub const MAX_SLOTS: usize = 2;
/// Lock-file names: two profiles (`gpulock`, `jax_accelerator_lock_`).
pub const PROFILES: usize = 2;
/// Lock files: every profile's name of every GPU at every slot.
pub const FILES: usize = PROFILES * MAX_SLOTS * GPUS;
/// A participant whose beat is older than this many ticks does not run
/// (the product's `STALE_AFTER` is four beats; two here is the same rule
/// in fewer states).
pub const STALE: u8 = 2;
/// The liveness bound: a waiter that may take a free set is served within
/// this many ticks (it takes `STALE + 1` to tell that an earlier one
/// stopped, or that a dead one's record is kept locked by another user).
pub const SERVED_WITHIN: u8 = STALE + 1;
/// Most steps a participant takes in a row without going back to sleep (a
/// look, its take, a block left to an earlier waiter and the take once
/// more, its record made, a look and a take again). One that loops without
/// sleeping (gives a lock back and takes it again, say) exceeds it.
pub const MAX_STEPS: u8 = 16;
/// The holder of a lock file that is a test outside the model.
pub const OUTSIDE: u8 = u8::MAX;
/// Participants at most.
pub const MAX_PARTICIPANTS: usize = 4;

/// A file's index among [`FILES`].
pub fn file(profile: u8, gpu: usize, slot: usize) -> usize {
    (profile as usize * MAX_SLOTS + slot) * GPUS + gpu
}

/// What a participant asks for: `needed` GPUs in one contiguous block of
/// its pool (a bit mask of GPUs), at one of its first `slots` slots, under
/// its profile's lock-file names; `wait`: its `--wait` limit in ticks.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Request {
    pub profile: u8,
    pub pool: u8,
    pub needed: u8,
    pub slots: u8,
    pub wait: Option<u8>,
    /// Lock files it cannot take (another user's, mode 0600; a GPU it
    /// avoids or finds drained): a mask.
    pub unusable: u16,
    /// What its record names beyond what it can take (the code before
    /// the reviews that found each stalls others).
    pub record: Advertises,
    /// When it reads the records again with a block's locks held.
    pub reread: Reread,
}

/// When a participant reads the records again with a block's locks held,
/// before it runs its test (a block an earlier waiter that counts then
/// wants is left to it).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Reread {
    /// Where its look passed over a stale record, found none, or is older
    /// than a beat.
    StaleEmptyOrOld,
    /// Only where its look passed over a stale record (the code before the
    /// model split each look from its take).
    Stale,
    /// Where its look passed over a stale record or is older than a beat,
    /// and not where it found no record a beat ago or less: the code reads
    /// again where its look found no `gpuqueue/` (it read no clock), and
    /// dates a look that found the directory empty. This is the rule for an
    /// empty directory in every case, the least it may read again.
    StaleOrOld,
}

/// What a record names.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Advertises {
    /// The lock files of the blocks its waiter can take whole.
    Blocks,
    /// Every lock file it can open, those of blocks it cannot take whole
    /// included.
    Openable,
    /// Its whole pool at its slots.
    WholePool,
}

impl Request {
    pub const fn new(profile: u8, pool: u8, needed: u8, slots: u8) -> Request {
        Request {
            profile,
            pool,
            needed,
            slots,
            wait: None,
            unusable: 0,
            record: Advertises::Blocks,
            reread: Reread::StaleEmptyOrOld,
        }
    }

    pub const fn waiting_at_most(self, ticks: u8) -> Request {
        Request { wait: Some(ticks), ..self }
    }

    pub const fn cannot_take(self, files: u16) -> Request {
        Request { unusable: files, ..self }
    }

    pub const fn recording(self, record: Advertises) -> Request {
        Request { record, ..self }
    }

    pub const fn rereading(self, reread: Reread) -> Request {
        Request { reread, ..self }
    }

    /// The lock files it can take: those of the blocks it can take whole.
    pub fn takes(&self) -> u16 {
        self.blocks().fold(0, |m, b| m | b)
    }

    /// The lock files its record names.
    pub fn advertised(&self) -> u16 {
        match self.record {
            Advertises::Blocks => self.takes(),
            Advertises::Openable => self.wants() & !self.unusable,
            Advertises::WholePool => self.wants(),
        }
    }

    /// The pool's GPUs, in order.
    fn gpus(&self) -> impl Iterator<Item = usize> + '_ {
        (0..GPUS).filter(|g| self.pool & (1 << g) != 0)
    }

    /// Every lock file it may take: its pool at its slots (a mask).
    pub fn wants(&self) -> u16 {
        let mut mask = 0;
        for slot in 0..self.slots as usize {
            for g in self.gpus() {
                mask |= 1 << file(self.profile, g, slot);
            }
        }
        mask
    }

    /// Its blocks in the classic order (slot by slot, then by the first GPU),
    /// each a mask of lock files.
    pub fn blocks(&self) -> impl Iterator<Item = u16> + '_ {
        let needed = usize::from(self.needed);
        let gpus = self.gpus().count();
        (0..usize::from(self.slots))
            .flat_map(move |slot| {
                (0..(gpus + 1).saturating_sub(needed)).map(move |start| {
                    self.gpus().skip(start).take(needed).fold(0, |m, g| m | 1 << file(self.profile, g, slot))
                })
            })
            .filter(|b| b & self.unusable == 0)
    }

    /// Whether `other`'s record names every lock file this one can take
    /// (then nothing but that record's end can leave it one).
    pub fn covered_by(&self, other: &Request) -> bool {
        self.takes() & !other.advertised() == 0
    }
}

/// Nobody.
pub const NOBODY: u8 = u8::MAX - 1;

/// One lock file: the generation of the file at its path (it is replaced
/// by a new one when removed and made again) and who holds a lock on the
/// file of each of the last two generations (a lock on a replaced file
/// stays with its holder).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct LockFile {
    pub generation: u8,
    pub holders: [u8; 2],
}

impl Default for LockFile {
    fn default() -> Self {
        LockFile { generation: 0, holders: [NOBODY; 2] }
    }
}

impl LockFile {
    /// Who holds the file at the path now.
    pub fn holder(&self) -> u8 {
        self.holders[usize::from(self.generation & 1)]
    }

    pub fn free(&self) -> bool {
        self.holder() == NOBODY
    }

    /// Whether `who` holds it, on any generation.
    pub fn held_by(&self, who: u8) -> bool {
        self.holders.contains(&who)
    }

    /// Removed and made again: the new file is free, the old one's lock
    /// stays with its holder.
    pub fn replace(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.holders[usize::from(self.generation & 1)] = NOBODY;
    }
}

/// Locks held for a test: the files and the generation of each when taken,
/// and the earlier waiter, settled in the queue, that wanted them then (an
/// overtaking where its test runs: the block may yet be left to it).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Grant {
    pub files: u16,
    pub generations: u16,
    pub overtakes: Option<u8>,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet.
    Idle,
    /// The protocol's: looking for a slot, or waiting for one.
    Active,
    /// Holds its block's locks, not yet checked that they are the files at
    /// their paths.
    Granted(Grant),
    /// Its test runs.
    Running(Grant),
    Done,
    /// Gave up at its `--wait` limit.
    GaveUp,
    Killed,
}

/// What is true of a participant, whatever the protocol believes.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Who {
    pub phase: Phase,
    /// Frozen by the cgroup freezer (`docker pause`): takes no step, and
    /// `/proc` shows it sleeping.
    pub frozen: bool,
    /// Stopped by SIGSTOP: takes no step, and `/proc` shows `T`.
    pub stopped: bool,
    /// Ticks since it was last frozen or stopped, or since it was last let
    /// go (whichever it is now), up to `STALE + 1`.
    pub for_ticks: u8,
    /// A waiter: it found no slot it may take, and waits.
    pub waiting: bool,
    /// Its place among the waiters, in the order they began to wait.
    pub ticket: Option<u8>,
    /// Ticks it has waited, up to 2.
    pub waited: u8,
    /// Ticks since the adversary last removed what showed it waiting, up to 2.
    pub undisturbed: u8,
    /// Woken: it has something to do at its next step.
    pub awake: bool,
    /// Steps taken in a row without sleeping, up to `MAX_STEPS + 1`.
    pub steps: u8,
    /// Ticks in a row at which it waited while a set it may take was free.
    pub starved: u8,
    /// Ticks left of its `--wait` limit.
    pub wait_left: Option<u8>,
    /// Ticks it stayed, running, past its `--wait` limit.
    pub overdue: u8,
}

impl Who {
    fn new(wait: Option<u8>) -> Who {
        Who {
            phase: Phase::Idle,
            frozen: false,
            stopped: false,
            for_ticks: STALE + 1,
            waiting: false,
            ticket: None,
            waited: 0,
            undisturbed: 2,
            awake: false,
            steps: 0,
            starved: 0,
            wait_left: wait,
            overdue: 0,
        }
    }

    /// Whether it can take a step now.
    pub fn runnable(&self) -> bool {
        !self.frozen && !self.stopped && matches!(self.phase, Phase::Active | Phase::Granted(_)) && self.awake
    }

    /// Running (not frozen, not stopped).
    pub fn runs(&self) -> bool {
        !self.frozen && !self.stopped
    }

    /// Makes progress, as its beats show: it runs, or ran within the last
    /// `STALE` ticks.
    pub fn progressing(&self) -> bool {
        self.phase == Phase::Active && (self.runs() || self.for_ticks <= STALE)
    }

    /// Settled in the queue: it has waited, run and been left alone for a
    /// while, so every other participant had a beat to see it.
    pub fn steady(&self) -> bool {
        self.phase == Phase::Active
            && self.waiting
            && self.runs()
            && self.for_ticks >= 2
            && self.waited >= 1
            && self.undisturbed >= 2
    }
}

/// How many of each adversary action a run may take.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub struct Budget {
    pub freezes: u8,
    pub stops: u8,
    pub kills: u8,
    pub replaces: u8,
    /// The protocol's own (`Protocol::Meddle`).
    pub meddles: u8,
}

/// A wait protocol: the state it adds and what a participant's step does.
pub trait Protocol: Clone + Debug + Hash + Eq + Send + Sync + 'static {
    /// Each participant's own state.
    type Local: Clone + Copy + Debug + Hash + Eq + Send + Sync;
    /// The files of the protocol (queue files, records) and other users' locks on them.
    type Shared: Clone + Debug + Hash + Eq + Send + Sync;
    /// What the adversary can do to them.
    type Meddle: Clone + Copy + Debug + Hash + Eq + Send + Sync;

    fn init(requests: &[Request]) -> (Self::Local, Self::Shared);
    /// One step of participant `me` (runnable: `Active` or `Granted`, awake).
    fn step(sys: &mut Sys<Self>, requests: &[Request], me: usize);
    /// The meddles possible now.
    fn meddles(sys: &Sys<Self>, out: &mut Vec<Self::Meddle>);
    fn meddle(sys: &mut Sys<Self>, meddle: Self::Meddle);
    /// A lock file in the lock directory was released (a close there).
    fn on_release(sys: &mut Sys<Self>);
    /// `me` was killed: its locks on the protocol's files are released.
    fn on_kill(sys: &mut Sys<Self>, me: usize);
    /// A tick passed.
    fn on_tick(sys: &mut Sys<Self>);
}

/// The whole state: the world and the protocol's part of it.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Sys<P: Protocol> {
    pub files: [LockFile; FILES],
    /// Participants, in the order they start (`/proc`'s start time); the
    /// first `participants` are used.
    pub who: [Who; MAX_PARTICIPANTS],
    pub local: [P::Local; MAX_PARTICIPANTS],
    pub participants: u8,
    pub shared: P::Shared,
    /// Adversary actions used so far.
    pub used: Budget,
    /// The next waiter's place.
    pub next_ticket: u8,
    /// How many have started.
    pub started: u8,
    /// First come, first served broken: (who took a set, the earlier waiter that wanted it).
    pub overtaken: Option<(u8, u8)>,
}

impl<P: Protocol> Sys<P> {
    pub fn new(requests: &[Request], external: u16) -> Sys<P> {
        assert!(requests.len() <= MAX_PARTICIPANTS);
        let (local, shared) = P::init(requests);
        let mut files = [LockFile::default(); FILES];
        for (f, lock) in files.iter_mut().enumerate() {
            if external & (1 << f) != 0 {
                lock.holders[0] = OUTSIDE;
            }
        }
        let mut who = [Who::new(None); MAX_PARTICIPANTS];
        for (w, r) in who.iter_mut().zip(requests) {
            *w = Who::new(r.wait);
        }
        Sys {
            files,
            who,
            local: [local; MAX_PARTICIPANTS],
            participants: requests.len() as u8,
            shared,
            used: Budget::default(),
            next_ticket: 0,
            started: 0,
            overtaken: None,
        }
    }

    /// The free lock files (a mask).
    pub fn free(&self) -> u16 {
        self.files.iter().enumerate().filter(|(_, l)| l.free()).fold(0, |m, (f, _)| m | 1 << f)
    }

    /// Takes the first block of `me`'s request, in the classic order, whose
    /// files are all in `allowed` and free: its locks, on the files at their
    /// paths now. Whether it found one.
    pub fn try_take(&mut self, requests: &[Request], me: usize, allowed: u16) -> bool {
        let free = self.free();
        let Some(block) = requests[me].blocks().find(|b| b & allowed == *b && b & free == *b) else {
            return false;
        };
        let mut generations = 0;
        for f in 0..FILES {
            if block & (1 << f) != 0 {
                let g = self.files[f].generation & 1;
                self.files[f].holders[usize::from(g)] = me as u8;
                generations |= u16::from(g) << f;
            }
        }
        let overtakes = self.overtakes(requests, me, block);
        self.who[me].phase = Phase::Granted(Grant { files: block, generations, overtakes });
        self.who[me].awake = true;
        true
    }

    /// First come, first served: nobody takes a set that an earlier waiter,
    /// settled in the queue, wants. Judged as the locks are taken, and
    /// counted where the test runs while that waiter still waits, settled
    /// (a block left to it is no overtaking, nor one taken from a waiter
    /// served, frozen or meddled with meanwhile).
    fn overtakes(&self, requests: &[Request], me: usize, block: u16) -> Option<u8> {
        let mine = if self.who[me].waiting { self.who[me].ticket } else { None };
        for (e, w) in self.who.iter().enumerate().take(usize::from(self.participants)) {
            let earlier = match (w.ticket, mine) {
                (Some(t), Some(m)) => t < m,
                (Some(_), None) => true,
                _ => false,
            };
            if e != me && earlier && w.steady() && requests[e].takes() & block != 0 {
                return Some(e as u8);
            }
        }
        None
    }

    /// Whether a `Granted` participant's locks are on the files at their
    /// paths (none replaced since it took them).
    pub fn locks_current(&self, me: usize) -> bool {
        let Phase::Granted(grant) = self.who[me].phase else { return false };
        (0..FILES)
            .filter(|f| grant.files & (1 << f) != 0)
            .all(|f| u16::from(self.files[f].generation & 1) == (grant.generations >> f) & 1)
    }

    /// For a `Granted` participant: its locks are on the files at their
    /// paths, so its test runs (true); or one was replaced meanwhile, and it
    /// gives them all back and goes on looking (false).
    pub fn validate(&mut self, me: usize) -> bool {
        let Phase::Granted(grant) = self.who[me].phase else { return false };
        if self.locks_current(me) {
            // Where that waiter still waits, settled (not served, nor
            // frozen or meddled with, meanwhile).
            if let Some(e) = grant.overtakes.filter(|&e| self.who[usize::from(e)].steady()) {
                self.overtaken.get_or_insert((me as u8, e));
            }
            self.who[me].phase = Phase::Running(grant);
            self.who[me].waiting = false;
            return true;
        }
        self.release(me);
        self.who[me].phase = Phase::Active;
        self.who[me].awake = true;
        false
    }

    /// Gives back every lock file `me` holds, which wakes whoever watches
    /// the lock directory.
    pub fn release(&mut self, me: usize) {
        let mut any = false;
        for lock in &mut self.files {
            for h in &mut lock.holders {
                if *h == me as u8 {
                    *h = NOBODY;
                    any = true;
                }
            }
        }
        if any {
            P::on_release(self);
        }
    }

    /// `me` begins to wait: it gets its place.
    pub fn begin_waiting(&mut self, me: usize) {
        let who = &mut self.who[me];
        who.waiting = true;
        if who.ticket.is_none() {
            who.ticket = Some(self.next_ticket);
            self.next_ticket += 1;
        }
    }

    /// Whether `me`'s `--wait` limit has passed.
    pub fn out_of_time(&self, me: usize) -> bool {
        self.who[me].wait_left == Some(0)
    }

    pub fn give_up(&mut self, me: usize) {
        self.who[me].phase = Phase::GaveUp;
        self.who[me].waiting = false;
    }

    /// Whether `/proc` shows `pid` stopped (`T`) or gone; a frozen process
    /// shows as sleeping.
    pub fn proc_shows_stopped(&self, pid: usize) -> bool {
        self.who[pid].stopped || matches!(self.who[pid].phase, Phase::Killed | Phase::Done | Phase::GaveUp)
    }

    /// Whether `me` waits while a set it may take is free: a block of its
    /// request whose files are all free and wanted, and takable, by no
    /// earlier waiter that makes progress.
    pub fn may_take_a_free_set(&self, requests: &[Request], me: usize) -> bool {
        let w = &self.who[me];
        if !(w.phase == Phase::Active && w.waiting && w.runs()) {
            return false;
        }
        let mut taken = !self.free();
        for (e, other) in self.who.iter().enumerate().take(usize::from(self.participants)) {
            let earlier = matches!((other.ticket, w.ticket), (Some(t), Some(m)) if t < m);
            if e != me && other.waiting && earlier && other.progressing() {
                taken |= requests[e].takes();
            }
        }
        requests[me].blocks().any(|b| b & taken == 0)
    }

    /// A tick: ages, starvation, `--wait` limits, and every waiter's timer.
    pub fn tick(&mut self, requests: &[Request]) {
        let n = usize::from(self.participants);
        let mut starving = [false; MAX_PARTICIPANTS];
        for (me, s) in starving.iter_mut().enumerate().take(n) {
            *s = self.may_take_a_free_set(requests, me);
        }
        for (me, starving) in starving.into_iter().enumerate().take(n) {
            let w = &mut self.who[me];
            w.starved = if starving { (w.starved + 1).min(SERVED_WITHIN + 1) } else { 0 };
            w.for_ticks = (w.for_ticks + 1).min(STALE + 1);
            w.undisturbed = (w.undisturbed + 1).min(2);
            if w.phase == Phase::Active {
                if w.waiting {
                    w.waited = (w.waited + 1).min(2);
                }
                match w.wait_left {
                    Some(0) if w.runs() => w.overdue += 1,
                    Some(n) if n > 0 => w.wait_left = Some(n - 1),
                    _ => {}
                }
                w.awake = true;
            }
        }
        P::on_tick(self);
    }
}
