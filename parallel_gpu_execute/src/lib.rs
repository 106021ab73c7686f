//! parallel_gpu_execute: the `bazel test --run_under` wrapper that gives each
//! GPU test a GPU slot of its own.
//!
//! ```text
//! parallel_gpu_execute [--lock-dir=DIR] [--vendor=rocm|cuda|classic] [--wait=SECONDS] [--] TEST [ARGS...]
//! parallel_gpu_execute [flags] --list[=text|json|count|gfx-targets]
//! parallel_gpu_execute [flags] --status[=text|json|openmetrics]
//! parallel_gpu_execute [flags] --drain=GPU --reason=TEXT | --undrain=GPU
//! ```
//!
//! Counts the host's GPUs, takes a slot with `flock` on
//! `<lockdir>/gpulock<gpu>_<slot>`, sets `ROCR_/HIP_/CUDA_VISIBLE_DEVICES`
//! and execs the test, which then holds the lock itself: no parent process is
//! left behind, the exit status and signals are the test's own, and the slot
//! is released when the test (and whatever inherited the descriptor) is gone,
//! even after SIGKILL.
//!
//! Design goals: a drop-in for the classic bash script (same lock files, same
//! output lines, same search order); nothing needed on the machine but the
//! kernel; no heap allocation from process start to exec when the count comes
//! from `TF_GPU_COUNT` or sysfs and no GPU is found; waiting instead of
//! failing when every slot is busy, first come first served.
//!
//! `no_std` (with `alloc`): see `main.rs` for why.

#![no_std]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

/// What std's prelude gives and `no_std` does not.
mod prelude {
    pub use alloc::boxed::Box;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec::Vec;
    pub use alloc::{format, vec};
}

// The modules, from the entry point down; each imports only from those
// below it (tests/layout.rs checks it):
//   run (here) -> launch, jax, report -> cli, settings -> slots -> hardware
//   -> error -> profile -> sys
pub mod cli;
pub mod error;
pub mod hardware;
pub mod jax;
pub mod launch;
pub mod profile;
pub mod report;
pub mod settings;
pub mod slots;
pub mod sys;

use cli::Invocation;
use core::time::Duration;
use error::Error;
use hardware::gpu_count;
use profile::CUDA_POOL_VARIABLE;
use report::{list, service, status};
use settings::Settings;
use slots::{locks, request, take};
use wrapper_common::argv::Argv;
use wrapper_common::{diag, env, runfiles};

/// The name every message starts with.
pub const TOOL: &str = "parallel_gpu_execute";

/// `--help` or `--version` was answered; the process exits 0.
pub struct Answered;

/// Runs the wrapper; returns only when it did not exec the test.
pub fn run(argv: Argv) -> Result<Answered, Error> {
    let (flags, command) = match cli::parse(&argv)? {
        Invocation::Help => return print(cli::USAGE.as_bytes()),
        Invocation::Version => {
            return print(concat!("parallel_gpu_execute ", env!("CARGO_PKG_VERSION"), "\n").as_bytes());
        }
        Invocation::List { flags, format } => {
            let settings = Settings::load(&flags, argv0(&argv))?;
            return print(list::render(&settings, format)?.as_bytes());
        }
        Invocation::Status { flags, format } => {
            let settings = Settings::load(&flags, argv0(&argv))?;
            return print(status::render(&settings, format)?.as_bytes());
        }
        Invocation::Drain { flags, gpu, reason } => {
            let settings = Settings::load(&flags, argv0(&argv))?;
            return done(service::drain(&settings, gpu, reason)?.as_bytes());
        }
        Invocation::Undrain { flags, gpu } => {
            let settings = Settings::load(&flags, argv0(&argv))?;
            return done(service::undrain(&settings, gpu)?.as_bytes());
        }
        Invocation::Run { flags, command } => (flags, command),
    };
    let settings = Settings::load(&flags, argv0(&argv))?;
    let test = argv.get(command).ok_or(Error::NoCommand)?;

    let (count, source) = gpu_count::count(&settings.probe());
    let no_gpu: &[u8] = match source.filter(|_| count > 0) {
        None => b"Execute with no GPU support\n",
        Some(source) => {
            let vendor = settings.vendor.unwrap_or(source.default_vendor());
            let preset = request::Preset::of(vendor, || settings.rocr_kept(vendor));
            match preset.filter(request::Preset::hides_every_gpu) {
                // The runtime would show the test no GPU: run it as without one.
                Some(hidden) => hidden_line(hidden.variable),
                None => return run_on_gpus(&argv, command, &settings, count, source, vendor, preset),
            }
        }
    };
    diag::say_line(no_gpu);
    Err(runfiles::exec_test(test, &argv, command, env::environ_ptr()).into())
}

/// The no-GPU line when the pool variable hides every GPU: the classic
/// line, and why.
fn hidden_line(var: &str) -> &'static [u8] {
    if var == CUDA_POOL_VARIABLE {
        b"Execute with no GPU support (CUDA_VISIBLE_DEVICES hides every GPU)\n"
    } else {
        b"Execute with no GPU support (ROCR_VISIBLE_DEVICES hides every GPU)\n"
    }
}

/// The GPU path: resolve the test, take a slot, exec. Never inlined, so
/// that its buffers (the test's path, the pool, the lock search) are not
/// in `run`'s frame, which the pass-through would otherwise probe and fault
/// in on every test run without a GPU.
#[inline(never)]
fn run_on_gpus(
    argv: &Argv,
    command: usize,
    settings: &Settings,
    count: u32,
    source: gpu_count::Source,
    vendor: profile::Vendor,
    preset: Option<request::Preset>,
) -> Result<Answered, Error> {
    let test = argv.get(command).ok_or(Error::NoCommand)?;
    // Before anything is opened that the test inherits or that is written.
    sys::stdfds::hold_closed();
    let test_path = launch::resolve_test(test)?;
    let needed = request::gpus_needed(argv.iter_from(command + 1).map(|a| a.to_bytes()));
    let mut pool = request::Pool::for_vendor(preset, count)?;
    match settings.lock_names {
        profile::LockNames::Physical => pool.name_physically(&settings.probe(), source)?,
        profile::LockNames::Index => pool.name_by_index(&settings.probe())?,
    }
    if needed > pool.ids.len() as u64 {
        return Err(Error::PoolTooSmall { needed, pool: pool.ids.len(), variable: pool.variable });
    }
    let wait = settings.wait_ms.map(Duration::from_millis);
    let describe = || launch::describe_test(test_path.as_bytes(), argv, command);
    let lock_dir = settings.lock_dir.path();
    let avoid = match (settings.unhealthy, source) {
        (profile::Unhealthy::Avoid, gpu_count::Source::Kfd) => service::unhealthy_in_pool(settings, &pool),
        _ => prelude::Vec::new(),
    };
    let ask = locks::Ask {
        slots: settings.slots_per_gpu(source),
        needed: needed as usize,
        wait,
        profile: settings.profile,
        private: settings.private_lock_dir,
        avoid: &avoid,
    };
    let prefix = settings.profile.lock_prefix();
    // Jobs with physical names leave their marker, and those with index
    // names give the grant up where one is (`slots::naming`, in `take`).
    let grant = take::acquire(&lock_dir, &pool, &ask, &describe)?;
    if source == gpu_count::Source::Kfd {
        let (start, n) = (grant.start, grant.fds.len());
        slots::outsiders::warn(&settings.probe(), &lock_dir, &pool, start, n, prefix, ask.slots);
        if settings.unhealthy == profile::Unhealthy::Warn {
            service::warn_unhealthy(settings, &pool, start, n);
        }
    }
    let mode = launch::Mode::of(settings, vendor, source);
    Err(launch::exec_test(&test_path, argv, command, mode, &pool, grant))
}

/// The name the wrapper was started as (it picks the default profile).
fn argv0(argv: &Argv) -> &'static [u8] {
    argv.get(0).map_or(b"", |a| a.to_bytes())
}

/// The result line of a change made (`--drain`, `--undrain`): on stdout,
/// or where stdout cannot take it (closed, full, a pipe whose reader has
/// gone), on stderr with why. The change stands either way, so the exit is
/// 0: a script must not read it as not made.
fn done(line: &[u8]) -> Result<Answered, Error> {
    sys::stdfds::ignore_sigpipe();
    if let Err(errno) = diag::write_stdout(line) {
        let line = diag::Bytes(line.trim_ascii_end());
        diag::report(TOOL, format_args!("{line} (said here: cannot write to stdout: {})", diag::Os(errno)));
    }
    Ok(Answered)
}

fn print(text: &[u8]) -> Result<Answered, Error> {
    diag::write_stdout(text).map_err(|errno| Error::System { what: "cannot write to stdout", path: None, errno })?;
    Ok(Answered)
}
