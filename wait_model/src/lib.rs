//! parallel_gpu_execute's wait protocol as a state machine, checked with
//! [stateright](https://docs.rs/stateright) against an adversarial
//! scheduler (docs/design.md, "The wait queue", writes the protocol and its
//! invariants down; this is that text as code).
//!
//! - [`world`]: lock files, participants, time, the adversary and the
//!   invariants, the same for every protocol;
//! - [`tickets`]: the protocol the wrapper runs (a record per waiter in
//!   `gpuqueue/`, each waiter watching the earlier ones' beats);
//! - [`previous`]: the protocol of the release before (`gpulock.queue`, a
//!   head chosen by `flock`, stand-ins chosen by `/proc` state), kept so that
//!   the checker shows it can fail: it finds the stalls that protocol had.
//!
//! A [`Scenario`] is a [`stateright::Model`]: the participants' requests,
//! the lock files held by tests outside the model at the start, and how
//! many of each adversary action a run may take.

pub mod previous;
pub mod tickets;
pub mod world;

use stateright::{Model, Property};
use std::marker::PhantomData;
use world::{Budget, MAX_PARTICIPANTS, OUTSIDE, Phase, Protocol, Request, Sys};

/// What happens next: a participant's step, or the adversary's move.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Action<M> {
    /// A participant starts (a new test).
    Arrive(u8),
    /// A participant that is awake and runs takes its next step.
    Step(u8),
    Freeze(u8),
    Thaw(u8),
    Stop(u8),
    Continue(u8),
    Kill(u8),
    /// A participant's test ends, and its locks are released.
    TestEnds(u8),
    /// A test outside the model ends: its lock file is released.
    OutsideEnds(u8),
    /// A lock file nobody runs a test on is removed and made again.
    Replace(u8),
    /// The protocol's files are meddled with.
    Meddle(M),
    /// A beat of time passes (only once every running participant sleeps).
    Tick,
}

/// One configuration to check: participants, lock files held from outside
/// at the start, the adversary's budget.
pub struct Scenario<P: Protocol> {
    pub name: &'static str,
    pub requests: Vec<Request>,
    pub outside: u16,
    pub budget: Budget,
    /// Which of the protocol's meddles the adversary may use.
    pub meddles: fn(&P::Meddle) -> bool,
    _protocol: PhantomData<P>,
}

impl<P: Protocol> Scenario<P> {
    pub fn new(name: &'static str, requests: &[Request], outside: u16, budget: Budget) -> Scenario<P> {
        Scenario { name, requests: requests.to_vec(), outside, budget, meddles: |_| true, _protocol: PhantomData }
    }

    /// Only these meddles.
    pub fn meddling(self, meddles: fn(&P::Meddle) -> bool) -> Scenario<P> {
        Scenario { meddles, ..self }
    }
}

/// The invariants, by name.
pub const SAFETY: &str = "no slot is ever held by two tests";
pub const LIVENESS: &str = "no waiter waits while a set it may take is free, but behind an earlier one that runs";
pub const ORDER: &str = "first come, first served among waiters that run";
pub const COST: &str = "wake-ups stay bounded";
pub const LIMIT: &str = "--wait is kept";

impl<P: Protocol> Model for Scenario<P> {
    type State = Sys<P>;
    type Action = Action<P::Meddle>;

    fn init_states(&self) -> Vec<Sys<P>> {
        vec![Sys::new(&self.requests, self.outside)]
    }

    fn actions(&self, s: &Sys<P>, out: &mut Vec<Self::Action>) {
        let mut anyone_runnable = false;
        for (i, w) in s.who.iter().enumerate().take(usize::from(s.participants)) {
            let i = i as u8;
            if w.runnable() {
                anyone_runnable = true;
                out.push(Action::Step(i));
            }
            let live = matches!(w.phase, Phase::Active | Phase::Granted(_));
            // Participants start in the order of their index (a scenario
            // orders its requests as it wants them to arrive).
            let next = s.started == i;
            match w.phase {
                Phase::Idle if next => out.push(Action::Arrive(i)),
                Phase::Running(_) => out.push(Action::TestEnds(i)),
                _ => {}
            }
            if live && w.runs() && s.used.freezes < self.budget.freezes {
                out.push(Action::Freeze(i));
            }
            if w.frozen {
                out.push(Action::Thaw(i));
            }
            if live && w.runs() && s.used.stops < self.budget.stops {
                out.push(Action::Stop(i));
            }
            if w.stopped {
                out.push(Action::Continue(i));
            }
            if (live || matches!(w.phase, Phase::Running(_))) && s.used.kills < self.budget.kills {
                out.push(Action::Kill(i));
            }
        }
        for (f, lock) in s.files.iter().enumerate() {
            if lock.held_by(OUTSIDE) {
                out.push(Action::OutsideEnds(f as u8));
            }
            let holder = lock.holder();
            let runs_a_test = holder == OUTSIDE
                || usize::from(holder) < MAX_PARTICIPANTS
                    && matches!(s.who[usize::from(holder)].phase, Phase::Running(_));
            // A file replaced once at most: a lock on the file of two
            // generations before would otherwise be lost.
            let replaced = lock.generation > 0;
            let named = self.requests.iter().any(|r| r.wants() & (1 << f) != 0);
            if named && !runs_a_test && !replaced && s.used.replaces < self.budget.replaces {
                out.push(Action::Replace(f as u8));
            }
        }
        if s.used.meddles < self.budget.meddles {
            let mut meddles = Vec::new();
            P::meddles(s, &mut meddles);
            out.extend(meddles.into_iter().filter(self.meddles).map(Action::Meddle));
        }
        if !anyone_runnable {
            out.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &Sys<P>, action: Self::Action) -> Option<Sys<P>> {
        let mut s = s.clone();
        match action {
            Action::Arrive(i) => {
                let i = i as usize;
                s.who[i].phase = Phase::Active;
                s.who[i].awake = true;
                s.started += 1;
            }
            Action::Step(i) => {
                let i = i as usize;
                P::step(&mut s, &self.requests, i);
                let w = &mut s.who[i];
                w.steps = if w.awake { (w.steps + 1).min(world::MAX_STEPS + 1) } else { 0 };
            }
            Action::Freeze(i) => {
                s.used.freezes += 1;
                s.who[i as usize].frozen = true;
                s.who[i as usize].for_ticks = 0;
            }
            Action::Thaw(i) => {
                s.who[i as usize].frozen = false;
                s.who[i as usize].for_ticks = 0;
            }
            Action::Stop(i) => {
                s.used.stops += 1;
                s.who[i as usize].stopped = true;
                s.who[i as usize].for_ticks = 0;
            }
            Action::Continue(i) => {
                s.who[i as usize].stopped = false;
                s.who[i as usize].for_ticks = 0;
            }
            Action::Kill(i) => {
                let i = i as usize;
                s.used.kills += 1;
                s.who[i].phase = Phase::Killed;
                s.who[i].waiting = false;
                s.release(i);
                P::on_kill(&mut s, i);
            }
            Action::TestEnds(i) => {
                let i = i as usize;
                s.who[i].phase = Phase::Done;
                s.release(i);
            }
            Action::OutsideEnds(f) => {
                for h in &mut s.files[f as usize].holders {
                    if *h == OUTSIDE {
                        *h = world::NOBODY;
                    }
                }
                P::on_release(&mut s);
            }
            Action::Replace(f) => {
                s.used.replaces += 1;
                s.files[f as usize].replace();
            }
            Action::Meddle(m) => {
                s.used.meddles += 1;
                P::meddle(&mut s, m);
            }
            Action::Tick => s.tick(&self.requests),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(SAFETY, |_, s: &Sys<P>| {
                (0..s.files.len()).all(|f| {
                    let running = |w: &&world::Who| matches!(w.phase, Phase::Running(g) if g.files & (1 << f) != 0);
                    s.who.iter().filter(running).count() <= 1
                })
            }),
            Property::always(LIVENESS, |_, s: &Sys<P>| s.who.iter().all(|w| w.starved <= world::SERVED_WITHIN)),
            Property::always(ORDER, |_, s: &Sys<P>| s.overtaken.is_none()),
            Property::always(COST, |_, s: &Sys<P>| s.who.iter().all(|w| w.steps <= world::MAX_STEPS)),
            Property::always(LIMIT, |_, s: &Sys<P>| s.who.iter().all(|w| w.overdue <= 1)),
            // Not vacuous: every participant can be served.
            Property::sometimes("every participant ran its test", |_, s: &Sys<P>| {
                s.who.iter().take(usize::from(s.participants)).all(|w| w.phase == Phase::Done)
            }),
        ]
    }
}
