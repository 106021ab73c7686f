//! What `no_std` needs and std would have given, and nothing of GPUs:
//! a child with its output on a pipe (`child`),
//! the heap (`heap`), monotonic and wall-clock time (`clock`), the standard
//! descriptors held open (`stdfds`), directory and file reading without
//! allocation (`dirs`), and the bounded tail of a child's output
//! (`output_tail`), one stable sort for every list (`sort`), names other
//! users cannot guess (`random`), ids across user namespaces (`userns`). Imports nothing from the rest of the crate.

pub mod child;
pub mod clock;
pub mod dirs;
pub mod heap;
pub mod output_tail;
pub mod random;
pub mod sort;
pub mod stdfds;
pub mod userns;
