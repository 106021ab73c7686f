//! sanitizer_wrapper: the `bazel test --run_under` wrapper that sets up
//! ASan, LSan and TSan for a test from files in the runfiles.
//!
//! ```text
//! sanitizer_wrapper [--asan-options=OPTS] [--lsan-options=OPTS] [--tsan-options=OPTS]
//!                   [--asan-suppressions=PATH] [--lsan-suppressions=PATH] [--tsan-suppressions=PATH]
//!                   [--symbolizer=PATH] [--run-under=PATH] [--] TEST [ARGS...]
//! ```
//!
//! Reads its options from the command line and from
//! `<argv[0]>.sanitizer_wrapper.conf` (which the Bazel macro writes, since
//! Bazel ignores the `args` of a `--run_under` target), resolves the
//! suppression lists, `llvm-symbolizer` and a chained wrapper in the runfiles
//! to absolute paths, builds `ASAN_OPTIONS`/`LSAN_OPTIONS`/`TSAN_OPTIONS`
//! (the test's own values last, so they win) and execs the test, or the
//! chained wrapper with the test: no parent process is left behind, and the
//! exit status and signals are the test's own.
//!
//! Design goals: a drop-in for the shell template (same options, same
//! runfiles, no `find` over the tree, no shell); nothing needed on the
//! machine but the kernel; with nothing configured, no heap allocation from
//! process start to exec, and no file read (the runfiles are read only for
//! a test not found as given, as Bazel names it where they are a manifest
//! only); a configured file that is
//! missing stops the run with one line that says where it was looked for,
//! instead of a sanitizer run without its suppressions; so does a suppression
//! list that is a directory, a FIFO or a device.

pub mod cli;
pub mod config;
pub mod environment;
pub mod error;
pub mod locate;
pub mod opt;

use cli::{Invocation, Options};
use environment::{Files, Sanitizer};
use error::Error;
use opt::Opt;
use std::ffi::{CStr, c_char};
use wrapper_common::argv::Argv;
use wrapper_common::runfiles::{self, Runfiles};
use wrapper_common::{diag, env, exec};

/// The name every message starts with.
pub const TOOL: &str = "sanitizer_wrapper";

/// `--help` or `--version` was answered; the process exits 0.
pub struct Answered;

/// Runs the wrapper; returns only when it did not exec the test.
pub fn run(argv: Argv) -> Result<Answered, Error> {
    let (command_line, command) = match cli::parse(&argv)? {
        Invocation::Help => return print(cli::USAGE.as_bytes()),
        Invocation::Version => {
            return print(concat!("sanitizer_wrapper ", env!("CARGO_PKG_VERSION"), "\n").as_bytes());
        }
        Invocation::Run { options, command } => (options, command),
    };
    let test = argv.get(command).ok_or(Error::NoCommand)?;
    let argv0 = argv.get(0).map_or(&b""[..], CStr::to_bytes);

    let config = config::load(argv0)?;
    let options = match &config {
        Some(config) => config.options().overridden_by(&command_line),
        None => command_line,
    };
    if options.is_empty() {
        return Err(runfiles::exec_test(test, &argv, command, env::environ_ptr()).into());
    }
    run_with_options(&argv, test, command, argv0, &options)
}

/// The options path: resolve the files, set the variables, exec. Never
/// inlined, so that its runfiles paths (`locate::discover`'s two 4 KiB
/// buffers) are not in `run`'s frame, which the pass-through would
/// otherwise probe and fault in.
#[inline(never)]
fn run_with_options(
    argv: &Argv,
    test: &CStr,
    command: usize,
    argv0: &[u8],
    options: &Options<'_>,
) -> Result<Answered, Error> {
    let files = resolve_files(&locate::discover(argv0), options)?;
    let mut environment = environment::test_environment(options, &files)?;
    let envp = match environment.as_mut() {
        Some(changed) => changed.as_envp(),
        None => env::environ_ptr(),
    };
    let failure = match &files.run_under {
        Some(wrapper) => exec_chained(wrapper, argv, command, envp),
        None => runfiles::exec_test(test, argv, command, envp),
    };
    Err(failure.into())
}

/// Resolves every configured file, in a fixed order, so that the first one
/// missing (or, for a suppression list or the symbolizer, not a regular
/// file this user may read or run) is the one reported.
fn resolve_files(runfiles: &Runfiles, options: &Options<'_>) -> Result<Files, Error> {
    use rustix::fs::Access;
    let usable = |opt: Opt, access: Access| {
        options.get(opt).map(|value| locate::resolve_usable_file(runfiles, opt, value, access)).transpose()
    };
    let mut files = Files::default();
    for sanitizer in Sanitizer::ALL {
        files.suppressions[sanitizer as usize] = usable(sanitizer.suppressions(), Access::READ_OK)?;
    }
    files.symbolizer = usable(Opt::Symbolizer, Access::EXEC_OK)?;
    files.run_under =
        options.get(Opt::RunUnder).map(|value| locate::resolve(runfiles, Opt::RunUnder, value)).transpose()?;
    Ok(files)
}

/// Execs `wrapper TEST ARGS...`. Returns only on failure.
fn exec_chained(wrapper: &CStr, argv: &Argv, command: usize, envp: *const *const c_char) -> exec::ExecFailure {
    let mut chained: Vec<*const c_char> = Vec::with_capacity(argv.len() - command + 2);
    chained.push(wrapper.as_ptr());
    chained.extend(argv.iter_from(command).map(CStr::as_ptr));
    chained.push(std::ptr::null());
    exec::exec(wrapper, chained.as_ptr(), envp)
}

fn print(text: &[u8]) -> Result<Answered, Error> {
    diag::write_stdout(text).map_err(|errno| Error::System { what: "cannot write to stdout", errno })?;
    Ok(Answered)
}
