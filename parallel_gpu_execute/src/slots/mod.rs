//! Handing out GPU slots: how many GPUs a test needs and from which pool
//! (`request`), the lock files and how a slot is taken (`lockfile`,
//! `locks`), waiting for one in arrival order (`wait`, the queue in
//! `locks`), what a waiter tells the log (`telemetry`), and who holds a
//! lock according to the kernel (`proclocks`).
//!
//! Below the settings, above the hardware: it is given a pool of GPU ids
//! and a lock directory, and knows nothing of how the GPUs were counted.

pub mod lockfile;
pub mod locks;
pub mod proclocks;
pub mod queue;
pub mod request;
pub mod telemetry;
pub mod wait;
