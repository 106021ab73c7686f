//! tag_filters: prints the Bazel tag filter of ROCm CI (see the library,
//! `lib.rs`, for what it does and why).
//!
//! A C `main`, as in the other two binaries: Rust's runtime start-up
//! (`lang_start`) calls `pthread_getattr_np` for its stack guard, which
//! links glibc's `sscanf` and its float parsers into a static binary, about
//! 120 KB of it. What that start-up did that matters here is done below:
//! SIGPIPE is ignored, so a closed pipe is a write error (exit 3, no
//! message) rather than a signal. A stdout that is not open at all is a sink
//! to std's `Stdout` either way (its EBADF counts as written).

#![no_main]

use std::ffi::{OsStr, OsString, c_char, c_int};
use std::io;
use std::os::unix::ffi::OsStrExt;
use wrapper_common::argv::Argv;
use wrapper_common::diag;

#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: sets the SIGPIPE disposition to "ignore" (no handler runs),
    // before anything is written and while this is the only thread. Nothing
    // is exec'd from here, so no other program inherits it.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // SAFETY: these are the C runtime's own argc/argv.
    let argv = unsafe { Argv::from_main(argc, argv) };
    let argv0 = argv.get(0).map(|a| OsStr::from_bytes(a.to_bytes()));
    let args: Vec<OsString> = argv.iter_from(1).map(|a| OsStr::from_bytes(a.to_bytes()).to_os_string()).collect();
    match tag_filters::run(argv0, &args, &mut io::stdout().lock()) {
        Ok(code) => c_int::from(code),
        Err(error) => {
            if !error.is_quiet() {
                diag::report("tag_filters", format_args!("{error}"));
            }
            c_int::from(error.exit_code())
        }
    }
}
