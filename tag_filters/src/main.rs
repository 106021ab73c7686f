//! tag_filters: prints the Bazel tag filter of ROCm CI (see the library,
//! `lib.rs`, for what it does and why).

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args.next();
    let args: Vec<OsString> = args.collect();
    match tag_filters::run(argv0.as_deref(), &args, &mut io::stdout().lock()) {
        Ok(code) => code,
        Err(error) => {
            if !error.is_quiet() {
                // Nothing more to do if stderr is gone too.
                let _ = writeln!(io::stderr().lock(), "tag_filters: {error}");
            }
            error.exit_code()
        }
    }
}
