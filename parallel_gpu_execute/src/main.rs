//! Entry point. A C `main` instead of Rust's: the Rust runtime would set
//! SIGPIPE to "ignore" before `main`, and the test would inherit that through
//! `execve`; it would also cost start-up work on every test. Everything else
//! is in the library (`run`).

#![no_main]

use std::ffi::{c_char, c_int};
use wrapper_common::argv::Argv;
use wrapper_common::diag;

#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: these are the C runtime's own argc/argv.
    let argv = unsafe { Argv::from_main(argc, argv) };
    match parallel_gpu_execute::run(argv) {
        Ok(_) => 0,
        Err(e) => {
            diag::report(parallel_gpu_execute::TOOL, format_args!("{e}"));
            c_int::from(e.exit_code())
        }
    }
}
