//! Entry point. A C `main` instead of Rust's: the Rust runtime would set
//! SIGPIPE to "ignore" before `main`, and the test would inherit that through
//! `execve`; it would also allocate before the first line of `run`, which the
//! pass-through promises not to do. Everything else is in the library (`run`).

#![no_main]

use std::ffi::{c_char, c_int};
use wrapper_common::argv::Argv;
use wrapper_common::diag;

#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: these are the C runtime's own argc/argv.
    let argv = unsafe { Argv::from_main(argc, argv) };
    match sanitizer_wrapper::run(argv) {
        Ok(_) => 0,
        Err(e) => {
            diag::report(sanitizer_wrapper::TOOL, format_args!("{e}"));
            c_int::from(e.exit_code())
        }
    }
}
