//! From a granted block to the running test: resolve the test like the
//! classic script's `rlocation`, set the environment, keep only the lock
//! descriptors open, and exec.

use crate::error::Error;
use crate::hardware::gpu_count::Source;
use crate::jax;
use crate::prelude::*;
use crate::profile::{Profile, ROCR_POOL_VARIABLE, Vendor, Visible};
use crate::settings::Settings;
use crate::slots::locks::Grant;
use crate::slots::request::Pool;
use crate::slots::telemetry::seconds;
use alloc::ffi::CString;
use core::ffi::{CStr, c_char};
use core::fmt::Write as _;
use rustix::fd::IntoRawFd;
use rustix::fs::{Mode as FileMode, OFlags};
use rustix::io::FdFlags;
use wrapper_common::argv::Argv;
use wrapper_common::diag::{self, Bytes};
use wrapper_common::env::{self, EnvBuilder};
use wrapper_common::exec;
use wrapper_common::runfiles::{TestLookup, test_lookup};
use wrapper_common::{separator, with_joined};

/// Where the test binary is: an absolute path as is; else
/// `$TEST_SRCDIR/$TEST_WORKSPACE/<test without ./>` when it exists (a
/// `../<repo>/x` test of another repository is `$TEST_SRCDIR/<repo>/x`); else the
/// runfiles manifest (`$RUNFILES_MANIFEST_FILE`, else
/// `$TEST_SRCDIR/MANIFEST`); else the word as given (searched in `PATH` when
/// it has no slash). Fails with 127/126 when that is not an executable file.
///
/// On the GPU path, which allocates anyway: the paths are on the heap or in
/// short buffers, not in 4 KiB stack buffers that every run would fault in.
#[inline(never)]
pub fn resolve_test(test: &CStr) -> Result<CString, Error> {
    match test_lookup(test.to_bytes()) {
        Some(TestLookup::InTree(checked)) => Ok(checked?),
        Some(TestLookup::InManifest(target)) => Ok(exec::resolve(&target)?),
        None => Ok(exec::resolve(test)?),
    }
}

/// The test and its arguments, space-separated, as messages show them.
pub fn describe_test(test: &[u8], argv: &Argv, command: usize) -> String {
    let mut line = format!("{}", Bytes(test));
    for arg in argv.iter_from(command + 1) {
        let _ = write!(line, " {}", Bytes(arg.to_bytes()));
    }
    line
}

/// `a,b,c`
fn comma_list<'a>(items: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out
}

/// `a,b,c` of numbers.
fn comma_list_of_numbers(range: core::ops::Range<usize>) -> Vec<u8> {
    let mut out = String::new();
    for i in range.clone() {
        let _ = write!(out, "{}{i}", if i > range.start { "," } else { "" });
    }
    out.into_bytes()
}

/// How the test is told which accelerators are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The xla profile: one vendor's variables; `visible` for AMD GPUs.
    Vendor { vendor: Vendor, visible: Visible },
    /// The jax profile; `tpu_host` when the host has TPU chips; `rocm`:
    /// the AMD variables, when the GPUs are AMD's (KFD or rocminfo), or
    /// `hip` when `--visible=hip` was asked for on any host.
    Jax { tpu_host: bool, rocm: Option<Visible> },
}

impl Mode {
    pub fn of(settings: &Settings, vendor: Vendor, source: Source) -> Mode {
        let visible = Visible::in_force(settings.profile, vendor, settings.visible);
        match settings.profile {
            // Not rocm mode: its variable is never read.
            Profile::Xla => Mode::Vendor { vendor, visible: visible.unwrap_or(Visible::Hip) },
            Profile::Jax => {
                // A count given by hand says nothing of the hardware: look.
                let tpu_host = source == Source::Tpu
                    || source == Source::JaxCount && crate::hardware::tpu::census(settings.sysroot, |_| {}).is_some();
                Mode::Jax { tpu_host, rocm: visible }
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Vendor { vendor, .. } => mode_name(vendor),
            Mode::Jax { .. } => "jax",
        }
    }
}

/// `0,1,...,len-1`: HIP's indices of every device that ROCR shows the test.
fn first_indices(len: usize) -> String {
    let mut list = String::new();
    for i in 0..len {
        let _ = write!(list, "{}{i}", if i > 0 { "," } else { "" });
    }
    list
}

/// The GPUs a test was given, as the variables need them.
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    /// Their ids, comma-separated: pool ids (KFD indices, or a preset
    /// pool's entries).
    pub ids: &'a [u8],
    /// Their indices among the GPUs that ROCr shows the test when
    /// `ROCR_VISIBLE_DEVICES` is left as it is, comma-separated: the ids,
    /// or, for a pool preset in `ROCR_VISIBLE_DEVICES`, their positions in
    /// it (ROCr shows the listed GPUs in the list's order, and HIP numbers
    /// them from 0).
    pub hip: &'a [u8],
    pub len: usize,
}

/// The environment the test runs with.
pub fn test_environment(mode: Mode, block: Block<'_>) -> EnvBuilder {
    let mut env = EnvBuilder::from_current();
    let (vendor, visible) = match mode {
        Mode::Vendor { vendor, visible } => (vendor, visible),
        Mode::Jax { tpu_host, rocm } => {
            let zero_based = first_indices(block.len);
            let gpus = jax::Gpus { ids: block.ids, hip: block.hip, zero_based: zero_based.as_bytes() };
            jax::set_environment(&mut env, gpus, block.len, tpu_host, rocm);
            return env;
        }
    };
    match (vendor, visible) {
        (Vendor::Rocm, Visible::Hip) => {
            env.set(b"HIP_VISIBLE_DEVICES", block.hip).set(b"CUDA_VISIBLE_DEVICES", block.hip);
        }
        (Vendor::Rocm, Visible::Rocr) => {
            env.set(b"ROCR_VISIBLE_DEVICES", block.ids)
                .set(b"HIP_VISIBLE_DEVICES", first_indices(block.len).as_bytes())
                .remove(b"CUDA_VISIBLE_DEVICES");
        }
        (Vendor::Cuda, _) => {
            env.set(b"CUDA_VISIBLE_DEVICES", block.ids);
        }
        // The ids, or under a preset `ROCR_VISIBLE_DEVICES` their positions in it.
        (Vendor::Classic, _) => {
            env.set(b"CUDA_VISIBLE_DEVICES", block.hip).set(b"HIP_VISIBLE_DEVICES", block.hip);
        }
    }
    // XLA main's scripts' default, the CUDA copy's since de271824.
    if env::var_nonempty(b"TF_PER_DEVICE_MEMORY_LIMIT_MB").is_none() {
        env.set(b"TF_PER_DEVICE_MEMORY_LIMIT_MB", b"4096");
    }
    env
}

/// The name of the file the wrapper adds to the test's Bazel annotations.
pub const ANNOTATION_FILE: &[u8] = b"parallel_gpu_execute.part";

fn mode_name(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Rocm => "rocm",
        Vendor::Cuda => "cuda",
        Vendor::Classic => "classic",
    }
}

/// When Bazel asks for annotations (`TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR`,
/// set for every test), writes `parallel_gpu_execute.part` there: one line
/// with the GPU ids, the slot, the mode and the wait. Bazel folds `*.part`
/// files into the test's annotations, which reach the Build Event Protocol.
/// A file that cannot be written is one warning; the test runs anyway.
///
/// The file is overwritten in place and then cut to the line's length,
/// not opened with `O_TRUNC`: on ext4, truncating a file that holds data
/// and closing it starts writeback of the new data at once (the
/// `auto_da_alloc` heuristic), which cost 150 µs per test where an existing
/// file (a retried test, a reused output directory) was rewritten, against
/// under 10 µs this way (README, "Where the time goes"). It is cut only
/// when an `fstat` says it was longer than the line. Bazel empties the
/// directory before every test run (bazelbuild/bazel,
/// `src/main/java/com/google/devtools/build/lib/analysis/test/TestRunnerAction.java`,
/// `deleteOutputs`), so the file is normally new, and an `ftruncate` that
/// changes nothing still updates the file's times through ext4's journal:
/// 1.4% of a whole `TF_GPU_COUNT` run here, where the `fstat` costs under 0.1%.
fn annotate(mode: Mode, ids: &[u8], grant: &Grant) {
    let Some(dir) = env::var_nonempty(b"TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR") else { return };
    let waited = grant.waited.map_or("0.0 s".to_string(), seconds);
    let line = format!(
        "parallel_gpu_execute: GPU(s) {} slot {} mode {} waited {waited}\n",
        Bytes(ids),
        grant.slot,
        mode.name()
    );
    let written = with_joined(&[dir, separator(dir), ANNOTATION_FILE], None, |path| {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY;
        let fd = rustix::fs::open(path, flags, FileMode::from_raw_mode(0o644))?;
        let before = rustix::fs::fstat(&fd)?.st_size;
        diag::write_all(&fd, line.as_bytes())?;
        if before > line.len() as i64 { rustix::fs::ftruncate(&fd, line.len() as u64) } else { Ok(()) }
    });
    match written {
        Some(Ok(())) => {}
        None => diag::report(
            crate::TOOL,
            format_args!("warning: annotations directory path too long; no annotation written"),
        ),
        Some(Err(errno)) => diag::report(
            crate::TOOL,
            format_args!(
                "warning: cannot write the annotation {}{}{}: {}; running the test anyway",
                Bytes(dir),
                Bytes(separator(dir)),
                Bytes(ANNOTATION_FILE),
                diag::Os(errno)
            ),
        ),
    }
}

/// Hands the granted locks to the test and execs it. Returns only on failure.
pub fn exec_test(test: &CStr, argv: &Argv, command: usize, mode: Mode, pool: &Pool, grant: Grant) -> Error {
    let block = &pool.ids[grant.start..grant.start + grant.fds.len()];
    let ids = comma_list(block.iter().map(|id| &id[..]));
    let positions;
    let hip = if pool.variable == Some(ROCR_POOL_VARIABLE) {
        positions = comma_list_of_numbers(grant.start..grant.start + block.len());
        &positions[..]
    } else {
        &ids[..]
    };
    let mut env = test_environment(mode, Block { ids: &ids, hip, len: block.len() });

    if let Some(waited) = grant.waited {
        diag::report(
            crate::TOOL,
            format_args!("waited {} for GPU(s) {} (slot {})", seconds(waited), Bytes(&ids), grant.slot),
        );
    }
    annotate(mode, &ids, &grant);
    // Each profile's script's own wording.
    let on = if matches!(mode, Mode::Jax { .. }) { "accelerator" } else { "GPU(s)" };
    let line = format!("Running test {} on {on} {}\n", describe_test(test.to_bytes(), argv, command), Bytes(&ids));
    diag::say_line(line.as_bytes());

    // The locks are the only descriptors of ours that the test inherits.
    for fd in grant.fds {
        if let Err(errno) = rustix::io::fcntl_setfd(&fd, FdFlags::empty()) {
            return Error::System { what: "cannot pass the lock to the test (fcntl)", path: None, errno };
        }
        let _ = fd.into_raw_fd();
    }
    let mut test_argv: Vec<*const c_char> = Vec::with_capacity(argv.len() - command + 1);
    test_argv.push(test.as_ptr());
    test_argv.extend(argv.iter_from(command + 1).map(CStr::as_ptr));
    test_argv.push(core::ptr::null());
    Error::Exec(exec::exec(test, test_argv.as_ptr(), env.as_envp()))
}
