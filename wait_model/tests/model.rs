//! The wait protocol checked exhaustively: every interleaving of the
//! participants' steps with the adversary's moves, breadth first, for each
//! scenario below. The protocol the wrapper runs (`Tickets`) keeps every
//! invariant in each; the previous release's (`Previous`) breaks the one
//! each of its scenarios names, which shows that the checker can fail and
//! that those faults (issue 46's points 1-6) were the protocol's, not the
//! code's.
//!
//! Each run prints its size; a failure prints the invariant, the shortest
//! trace that breaks it, and the state it ends in (with `MODEL_DEBUG=1`,
//! every state on the way).

use stateright::{Checker, HasDiscoveries, Model};
use std::collections::BTreeSet;
use wait_model::previous::{self, Previous};
use wait_model::tickets::{self, Tickets};
use wait_model::world::{Advertises, Budget, Protocol, Request, Reread, file};
use wait_model::{COST, LIVENESS, ORDER, Scenario};

/// Lock-file names: XLA's and JAX's.
const XLA: u8 = 0;
const JAX: u8 = 1;
/// Pools: GPU 0, GPU 1, both.
const GPU0: u8 = 0b01;
const GPU1: u8 = 0b10;
const BOTH: u8 = 0b11;

fn ask(profile: u8, pool: u8, needed: u8, slots: u8) -> Request {
    Request::new(profile, pool, needed, slots)
}

fn budget(freezes: u8, stops: u8, kills: u8, replaces: u8, meddles: u8) -> Budget {
    Budget { freezes, stops, kills, replaces, meddles }
}

/// Lock files held by tests outside the model at the start: `(profile, gpu, slot)`.
fn outside(files: &[(u8, usize, usize)]) -> u16 {
    files.iter().fold(0, |m, &(p, g, s)| m | 1 << file(p, g, s))
}

fn trace<P: Protocol>(path: &stateright::Path<wait_model::world::Sys<P>, wait_model::Action<P::Meddle>>) -> String {
    let last = path.last_state();
    // `MODEL_DEBUG=1`: every state of the trace, in short, to stderr.
    if std::env::var_os("MODEL_DEBUG").is_some() {
        for (state, action) in path.clone().into_vec() {
            let who: Vec<String> = state
                .who
                .iter()
                .take(usize::from(state.participants))
                .map(|w| format!("{:?}/{}{}/t{:?}", w.phase, if w.frozen { "F" } else { "" }, w.starved, w.ticket))
                .collect();
            eprintln!(
                "{who:?} {:?} files {:?}\n   -> {action:?}",
                &state.local[..usize::from(state.participants)],
                state.files.iter().map(|f| f.holder()).collect::<Vec<_>>()
            );
        }
    }
    let who: Vec<String> = last.who.iter().take(usize::from(last.participants)).map(|w| format!("    {w:?}")).collect();
    format!(
        "  trace: {:?}\n  ends with (overtaken: {:?}):\n{}\n    {:?}\n    {:?}",
        path.clone().into_actions(),
        last.overtaken,
        who.join("\n"),
        last.local,
        last.shared
    )
}

/// Checks every state `scenario` can reach: no invariant may break, and
/// every participant can be served.
fn holds<P: Protocol>(scenario: Scenario<P>) {
    let (name, budget) = (scenario.name, scenario.budget);
    let started = std::time::Instant::now();
    let checker = scenario.checker().threads(2).spawn_bfs().join();
    println!(
        "{name}: {} states, {} steps deep, {budget:?}, {:.1?}",
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    let mut broken = Vec::new();
    for (property, path) in checker.discoveries() {
        if property != "every participant ran its test" {
            broken.push(format!("{name}: broken: {property}\n{}", trace(&path)));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(
        checker.discovery("every participant ran its test").is_some(),
        "{name}: no run serves every participant (the model is vacuous)"
    );
}

/// Checks that `scenario` breaks `property`, and prints the shortest trace.
fn breaks<P: Protocol>(scenario: Scenario<P>, property: &'static str) {
    let name = scenario.name;
    let checker =
        scenario.checker().threads(2).finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property]))).spawn_bfs().join();
    let path = checker.discovery(property);
    let path = path.unwrap_or_else(|| {
        panic!(
            "{name}: the checker found no state that breaks \"{property}\" ({} states)",
            checker.unique_state_count()
        )
    });
    println!("{name}: breaks \"{property}\" ({} states searched)\n{}", checker.unique_state_count(), trace(&path));
}

// The protocol the wrapper runs, in each layout, against each kind of
// fault (freezes stand for SIGSTOP too: this protocol never reads `/proc`),
// four participants unless said.

/// One pool of two GPUs, one slot each; 2-, 1-, 1- and 2-GPU requests; GPU 0
/// held by an outside test at the start.
fn one_pool() -> Vec<Request> {
    vec![ask(XLA, BOTH, 2, 1), ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 2, 1)]
}

#[test]
fn one_pool_with_a_frozen_participant() {
    holds(Scenario::<Tickets>::new("one pool, frozen", &one_pool(), outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0)));
}

#[test]
fn one_pool_with_a_killed_participant() {
    holds(Scenario::<Tickets>::new("one pool, killed", &one_pool(), outside(&[(XLA, 0, 0)]), budget(0, 0, 1, 0, 0)));
}

#[test]
fn one_pool_with_queue_files_removed_or_locked_by_another_user() {
    holds(Scenario::<Tickets>::new("one pool, meddled", &one_pool(), outside(&[(XLA, 0, 0)]), budget(0, 0, 0, 0, 1)));
}

#[test]
fn one_pool_with_a_lock_file_replaced() {
    holds(Scenario::<Tickets>::new("one pool, replaced", &one_pool(), outside(&[(XLA, 0, 0)]), budget(0, 0, 0, 1, 0)));
}

/// Two slots per GPU, four participants (2-, 1-, 1- and 2-GPU requests),
/// one of them frozen at any step: about 29 million states.
#[test]
fn four_participants_on_two_slots_with_a_frozen_participant() {
    let slots = [ask(XLA, BOTH, 2, 2), ask(XLA, BOTH, 1, 2), ask(XLA, BOTH, 1, 2), ask(XLA, BOTH, 2, 2)];
    let held = outside(&[(XLA, 0, 0), (XLA, 1, 1)]);
    holds(Scenario::<Tickets>::new("two slots x4, frozen", &slots, held, budget(1, 0, 0, 0, 0)));
}

/// Two slots per GPU, three participants with two kinds of fault (four:
/// `--ignored`).
#[test]
fn two_slots_with_a_frozen_and_a_killed_participant() {
    let requests = [ask(XLA, BOTH, 2, 2), ask(XLA, BOTH, 1, 2), ask(XLA, BOTH, 1, 2)];
    let held = outside(&[(XLA, 0, 0), (XLA, 1, 1)]);
    holds(Scenario::<Tickets>::new("two slots, frozen and killed", &requests, held, budget(1, 0, 1, 0, 0)));
}

#[test]
fn two_slots_with_files_replaced_and_removed() {
    let requests = [ask(XLA, BOTH, 2, 2), ask(XLA, BOTH, 1, 2), ask(XLA, BOTH, 1, 2)];
    let held = outside(&[(XLA, 0, 0), (XLA, 1, 1)]);
    holds(Scenario::<Tickets>::new("two slots, replaced and meddled", &requests, held, budget(0, 0, 0, 1, 1)));
}

/// Two pools that overlap (GPU 0; both; GPU 1; both).
#[test]
fn two_pools_with_a_frozen_participant() {
    let requests = [ask(XLA, GPU0, 1, 1), ask(XLA, BOTH, 2, 1), ask(XLA, GPU1, 1, 1), ask(XLA, BOTH, 1, 1)];
    holds(Scenario::<Tickets>::new("two pools, frozen", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0)));
}

/// Two profiles on one lock directory (their lock files differ).
#[test]
fn two_profiles_with_a_frozen_participant() {
    let requests = [ask(XLA, BOTH, 2, 1), ask(JAX, BOTH, 1, 1), ask(XLA, GPU0, 1, 1), ask(JAX, BOTH, 2, 1)];
    let held = outside(&[(XLA, 0, 0), (JAX, 1, 0)]);
    holds(Scenario::<Tickets>::new("two profiles, frozen", &requests, held, budget(1, 0, 0, 0, 0)));
}

/// `--wait` limits, three participants.
/// A waiter that cannot take one of its lock files (another user's, mode
/// 0600; a GPU it avoids), ahead of one that can, with a freeze: its
/// record names only what it can take, so the later waiter takes that file
/// at once while the first waits for the other.
#[test]
fn a_lock_file_one_waiter_cannot_take_holds_nobody_up() {
    let requests =
        [ask(XLA, BOTH, 1, 1).cannot_take(outside(&[(XLA, 0, 0)])), ask(XLA, BOTH, 1, 1), ask(XLA, GPU0, 1, 1)];
    let held = outside(&[(XLA, 1, 0)]);
    holds(Scenario::<Tickets>::new("a file one cannot take", &requests, held, budget(1, 0, 0, 0, 0)));
}

/// The same with records that name the whole pool, as the code did before
/// a review found it: the later waiter waits while the file is free.
#[test]
fn a_record_naming_the_whole_pool_stalls_the_waiters_behind_it() {
    let first = ask(XLA, BOTH, 1, 1).cannot_take(outside(&[(XLA, 0, 0)])).recording(Advertises::WholePool);
    let requests = [first, ask(XLA, GPU0, 1, 1)];
    let held = outside(&[(XLA, 1, 0)]);
    breaks(Scenario::<Tickets>::new("whole-pool records", &requests, held, budget(0, 0, 0, 0, 0)), LIVENESS);
}

/// A 2-GPU waiter that cannot take one lock file at slot 0 (another
/// user's) can take no block at that slot: its record names the lock files
/// of its block at slot 1 alone, and a later 1-GPU waiter takes GPU 1 at
/// slot 0 while the first waits.
#[test]
fn a_lock_file_of_a_block_one_waiter_cannot_take_holds_nobody_up() {
    let first = ask(XLA, BOTH, 2, 2).cannot_take(outside(&[(XLA, 0, 0)]));
    let requests = [first, ask(XLA, GPU1, 1, 1), ask(XLA, BOTH, 1, 2)];
    let held = outside(&[(XLA, 0, 1)]);
    holds(Scenario::<Tickets>::new("a block one cannot take", &requests, held, budget(1, 0, 0, 0, 0)));
}

/// The same with records that name every lock file their waiter can open,
/// as the code did before a review found it: the later waiter waits while
/// GPU 1's lock file at slot 0 is free, which the first can never take.
#[test]
fn a_record_naming_files_of_blocks_it_cannot_take_stalls_the_waiters_behind_it() {
    let first = ask(XLA, BOTH, 2, 2).cannot_take(outside(&[(XLA, 0, 0)])).recording(Advertises::Openable);
    let requests = [first, ask(XLA, GPU1, 1, 1)];
    let held = outside(&[(XLA, 0, 1)]);
    breaks(Scenario::<Tickets>::new("openable-file records", &requests, held, budget(0, 0, 0, 0, 0)), LIVENESS);
}

/// A test frozen between its look and its take (the two are steps of
/// their own) while a 2-GPU waiter joins and waits for the GPU that is
/// busy: thawed, it takes the other GPU, which that waiter wants. With the
/// locks held it reads the records again and leaves the GPU to it.
#[test]
fn a_take_older_than_its_look_leaves_the_block_to_an_earlier_waiter() {
    let requests = [ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 2, 1)];
    holds(Scenario::<Tickets>::new("old look", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0)));
}

/// The same where the records are read again only where the look passed
/// over a stale one, as the code did before the model split each look
/// from its take: the thawed test runs on the GPU the waiter wants.
#[test]
fn a_take_older_than_its_look_read_again_only_after_a_stale_record_overtakes() {
    let requests = [ask(XLA, BOTH, 1, 1).rereading(Reread::Stale), ask(XLA, BOTH, 2, 1)];
    breaks(
        Scenario::<Tickets>::new("old look, stale only", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0)),
        ORDER,
    );
}

/// A look that found `gpuqueue/` there but empty is dated, as the code
/// dates it, and read again only once a beat has passed (one that found no
/// directory is read again at once: more readings, which only leave blocks
/// to earlier waiters that count). Order and liveness hold for the least
/// reading again, with a test frozen between its look and its take, and
/// with two pools.
#[test]
fn a_look_at_an_empty_queue_read_again_only_a_beat_later_keeps_order() {
    let old_look = [ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 2, 1)].map(|r| r.rereading(Reread::StaleOrOld));
    holds(Scenario::<Tickets>::new("old look, empty dated", &old_look, outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0)));
    let pools = [ask(XLA, GPU0, 1, 1), ask(XLA, BOTH, 2, 1), ask(XLA, GPU1, 1, 1), ask(XLA, BOTH, 1, 1)];
    let pools = pools.map(|r| r.rereading(Reread::StaleOrOld));
    holds(Scenario::<Tickets>::new(
        "two pools, frozen, empty dated",
        &pools,
        outside(&[(XLA, 0, 0)]),
        budget(1, 0, 0, 0, 0),
    ));
}

#[test]
fn wait_limits_with_a_frozen_and_a_killed_participant() {
    let requests =
        [ask(XLA, BOTH, 2, 1).waiting_at_most(2), ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 1, 1).waiting_at_most(1)];
    holds(Scenario::<Tickets>::new(
        "--wait, frozen and killed",
        &requests,
        outside(&[(XLA, 0, 0)]),
        budget(1, 0, 1, 0, 0),
    ));
}

/// Every kind of fault in one run, three participants.
#[test]
fn every_fault_at_once() {
    let requests = [ask(XLA, BOTH, 2, 1), ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 1, 1)];
    holds(Scenario::<Tickets>::new("every fault", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 1, 0, 1)));
}

/// A dead participant's record kept locked by another user, with a frozen
/// and a killed participant.
#[test]
fn a_dead_record_locked_by_another_user() {
    let requests = [ask(XLA, BOTH, 2, 1), ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 1, 1)];
    let scenario =
        Scenario::<Tickets>::new("dead record locked", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 1, 0, 1))
            .meddling(|m| matches!(m, tickets::Meddle::LockDeadRecord(_)));
    holds(scenario);
}

/// Larger runs: four participants with several kinds of fault at once, in
/// each layout (`cargo test --release --manifest-path
/// wait_model/Cargo.toml -- --ignored`; with each look and take steps of
/// their own, more than 17 GB of memory and more than six minutes for the
/// first: docs/design.md, "The model check").
#[test]
#[ignore = "tens of GB: the larger scenarios"]
fn larger_scenarios() {
    let slots = [ask(XLA, BOTH, 2, 2), ask(XLA, BOTH, 1, 2), ask(XLA, BOTH, 1, 2), ask(XLA, BOTH, 2, 2)];
    let held = outside(&[(XLA, 0, 0), (XLA, 1, 1)]);
    holds(Scenario::<Tickets>::new("two slots x4, killed and meddled", &slots, held, budget(0, 0, 1, 0, 1)));
    let pools = [ask(XLA, GPU0, 1, 1), ask(XLA, BOTH, 2, 1), ask(XLA, GPU1, 1, 1), ask(XLA, BOTH, 1, 1)];
    holds(Scenario::<Tickets>::new(
        "two pools x4, killed and meddled",
        &pools,
        outside(&[(XLA, 0, 0)]),
        budget(0, 0, 1, 0, 1),
    ));
    let waits = [
        ask(XLA, BOTH, 2, 1).waiting_at_most(2),
        ask(XLA, BOTH, 1, 1),
        ask(XLA, BOTH, 1, 1).waiting_at_most(1),
        ask(XLA, BOTH, 2, 1),
    ];
    holds(Scenario::<Tickets>::new(
        "--wait x4, frozen and killed",
        &waits,
        outside(&[(XLA, 0, 0)]),
        budget(1, 0, 1, 0, 0),
    ));
}

// The previous release's protocol: each of issue 46's points 1-6 as the
// invariant it breaks.

/// Point 1: a head frozen by the cgroup freezer looks like one sleeping in
/// `/proc`, so nobody stands in for it and the free slot waits.
#[test]
fn previous_a_frozen_head_stalls_the_queue() {
    let requests = [ask(XLA, GPU0, 1, 1); 3];
    let scenario =
        Scenario::<Previous>::new("previous: frozen head", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0));
    breaks(scenario, LIVENESS);
}

/// Point 2: a frozen waiter earlier in line makes the later ones give the
/// queue back again and again.
#[test]
fn previous_a_frozen_waiter_earlier_in_line_makes_the_others_spin() {
    let requests = [ask(XLA, GPU0, 1, 1); 4];
    let scenario =
        Scenario::<Previous>::new("previous: frozen waiter", &requests, outside(&[(XLA, 0, 0)]), budget(1, 0, 0, 0, 0));
    breaks(scenario, COST);
}

/// Point 3: another user's lock of the lock directory counts as an earlier
/// waiter that runs.
#[test]
fn previous_another_users_lock_of_the_directory_makes_the_queue_spin() {
    let requests = [ask(XLA, GPU0, 1, 1); 3];
    let scenario = Scenario::<Previous>::new(
        "previous: directory locked",
        &requests,
        outside(&[(XLA, 0, 0)]),
        budget(0, 0, 0, 0, 1),
    )
    .meddling(|m| *m == previous::Meddle::LockDir);
    breaks(scenario, COST);
}

/// Point 4: two profiles share the lock directory's lock, so a JAX waiter
/// gives its own queue back to an XLA waiter that waits on the other.
#[test]
fn previous_two_profiles_hand_their_queues_to_each_other() {
    let requests = [ask(XLA, GPU0, 1, 1), ask(XLA, GPU0, 1, 1), ask(JAX, GPU0, 1, 1), ask(JAX, GPU0, 1, 1)];
    let held = outside(&[(XLA, 0, 0), (JAX, 0, 0)]);
    breaks(Scenario::<Previous>::new("previous: two profiles", &requests, held, budget(0, 0, 0, 0, 0)), COST);
}

/// Point 5: one queue for disjoint pools: a waiter whose own GPU is free
/// waits behind the head of another pool.
#[test]
fn previous_disjoint_pools_wait_on_each_other() {
    let requests = [ask(XLA, GPU0, 1, 1), ask(XLA, GPU0, 1, 1), ask(XLA, GPU1, 1, 1)];
    breaks(
        Scenario::<Previous>::new("previous: two pools", &requests, outside(&[(XLA, 0, 0)]), budget(0, 0, 0, 0, 0)),
        LIVENESS,
    );
}

/// Point 6: the queue file removed: the waiters on the old file and the new
/// arrivals form two queues, and a later 1-GPU test overtakes a 2-GPU head.
#[test]
fn previous_a_removed_queue_file_splits_the_queue() {
    let requests = [ask(XLA, BOTH, 2, 1), ask(XLA, BOTH, 1, 1), ask(XLA, BOTH, 1, 1)];
    let held = outside(&[(XLA, 0, 0), (XLA, 1, 0)]);
    let scenario = Scenario::<Previous>::new("previous: queue removed", &requests, held, budget(0, 0, 0, 0, 1))
        .meddling(|m| matches!(m, previous::Meddle::RemoveQueue(_)));
    breaks(scenario, ORDER);
}
