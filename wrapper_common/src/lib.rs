//! What the GPU-CI wrappers share.
//!
//! `parallel_gpu_execute` and `sanitizer_wrapper` both start from a raw C
//! `main` (so that the Rust runtime changes nothing the test would inherit,
//! such as the SIGPIPE disposition), read their flags and environment without
//! copying them, look files up in Bazel runfiles, and end in `execve`. Their
//! pass-through paths must not touch the heap, so everything here that sits on
//! those paths works in fixed stack buffers; the few pieces that allocate
//! (building a changed environment) say so.

pub mod argv;
pub mod cbuf;
pub mod diag;
pub mod env;
pub mod exec;
pub mod lines;
pub mod numbers;
pub mod paths;
pub mod runfiles;

pub use cbuf::{CBuf, ShortPath, StackPath, TooLong, separator, with_joined};
