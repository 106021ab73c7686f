//! What the GPU-CI wrappers share.
//!
//! `parallel_gpu_execute` and `sanitizer_wrapper` both start from a raw C
//! `main` (so that the Rust runtime changes nothing the test would inherit,
//! such as the SIGPIPE disposition), read their flags and environment without
//! copying them, look files up in Bazel runfiles, and end in `execve`. Their
//! pass-through paths must not touch the heap, so everything here that sits on
//! those paths works in fixed stack buffers; the few pieces that allocate
//! (building a changed environment) say so.
//!
//! `no_std` (with `alloc`), so that parallel_gpu_execute can be a `no_std`
//! binary: std's panic machinery would otherwise link its backtrace
//! symboliser into every static binary (see that crate's `main.rs`).
//! sanitizer_wrapper and tag_filters use it from std binaries as any crate.

#![no_std]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

pub mod argv;
pub mod cbuf;
pub mod diag;
pub mod env;
pub mod exec;
#[cfg(all(target_env = "gnu", target_feature = "crt-static"))]
pub mod glibc;
pub mod lines;
pub mod numbers;
pub mod paths;
pub mod runfiles;

pub use cbuf::{CBuf, ShortPath, StackPath, TooLong, separator, with_joined};

/// The calling thread's `errno`, read right after a libc call that failed.
pub fn last_errno() -> rustix::io::Errno {
    // SAFETY: `__errno_location` (glibc and musl) returns the calling
    // thread's errno slot, valid for as long as the thread lives.
    rustix::io::Errno::from_raw_os_error(unsafe { *libc::__errno_location() })
}
