//! tag_filters: prints the Bazel tag filter of ROCm CI (see the library,
//! `lib.rs`, for what it does and why).
//!
//! A C `main`, as in the other two binaries: Rust's runtime start-up
//! (`lang_start`) calls `pthread_getattr_np` for its stack guard, which
//! links glibc's `sscanf` and its float parsers into a static binary, about
//! 120 KB of it. What that start-up did that matters here is done below:
//! SIGPIPE is ignored, so a closed pipe is a write error (exit 3, no
//! message) rather than a signal.
//!
//! The output goes to descriptor 1 through [`Fd1`], not std's `Stdout`,
//! which takes a stdout that is not open at all for a sink (its `EBADF`
//! counts as written) and would exit 0 having printed nothing. Here that is
//! a failed write, exit 3 with one line, as in the other two binaries.

#![no_main]

use std::ffi::{OsStr, OsString, c_char, c_int};
use std::io::{self, Write};
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
    match tag_filters::run(argv0, &args, &mut Fd1) {
        Ok(code) => c_int::from(code),
        Err(error) => {
            if !error.is_quiet() {
                diag::report("tag_filters", format_args!("{error}"));
            }
            c_int::from(error.exit_code())
        }
    }
}

/// Descriptor 1, unbuffered: `run` writes its whole output in one call.
struct Fd1;

impl Write for Fd1 {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        diag::write_stdout(bytes)
            .map(|()| bytes.len())
            .map_err(|errno| io::Error::from_raw_os_error(errno.raw_os_error()))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
