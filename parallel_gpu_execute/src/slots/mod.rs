//! Handing out GPU slots: how many GPUs a test needs and from which pool
//! (`request`), the lock files and how a slot is taken (`lockfile`,
//! `locks`), who else can move them (`exposure`), one naming per lock directory (`naming`), the GPUs taken out of service (`drain`, and its records: `drain_record`), whether the lock
//! directory coordinates anything beyond this action (`privacy`), waiting
//! for one in arrival order (`take`: the steps; `queue` and `record`: the
//! waiters' records; `wait`: the sleeps), what a waiter tells the log
//! (`telemetry`), and who holds a
//! lock according to the kernel (`proclocks`: `/proc/locks` and what
//! `/proc` tells of a process; `holders`: the processes that have a lock
//! file open and hold or wait for its lock; `lockers`: both together, with
//! `/proc/locks` read until it can be believed).
//!
//! Below the settings, above the hardware: it is given a pool of GPU ids
//! and a lock directory, and knows nothing of how the GPUs were counted.

pub mod drain;
pub mod drain_record;
pub mod exposure;
pub mod holders;
pub mod lockers;
pub mod lockfile;
pub mod locks;
pub mod naming;
pub mod outsiders;
pub mod privacy;
pub mod proclocks;
pub mod queue;
pub mod record;
pub mod request;
pub mod take;
pub mod telemetry;
pub mod wait;
