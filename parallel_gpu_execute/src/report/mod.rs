//! What the wrapper tells the people who run the hosts, then exits without
//! running a test: `--list` (what it sees and would do) and `--status`
//! (who holds and who waits for the slots; `queued`: the queue's records
//! as it reads them), as text or JSON; and
//! `--list=bazelrc` (`sizing`), the test jobs this host can take;
//! `--status=openmetrics` (`openmetrics`); and the operators' actions on
//! the lock directory, `--drain` and `--undrain` (`service`).
//!
//! Above the slots and the hardware, whose findings it prints; takes no
//! lock.

pub mod gpus;
pub mod json;
pub mod list;
pub mod openmetrics;
pub mod queued;
pub mod service;
pub mod sizing;
pub mod status;
pub mod status_format;
