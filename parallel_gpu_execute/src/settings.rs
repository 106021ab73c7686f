//! Flags and environment variables, validated once, before anything else
//! happens: a typo in CI configuration fails every test loudly (exit 2) rather
//! than running some of them unlocked.

use crate::cli::Flags;
use crate::error::Error;
use crate::identity::LockNames;
use crate::prelude::*;
use alloc::borrow::Cow;
use alloc::ffi::CString;
use core::ffi::CStr;
use wrapper_common::env;
use wrapper_common::numbers::{parse_seconds_as_millis, parse_u64};

/// The xla profile's lock directory, the classic script's.
pub const DEFAULT_LOCK_DIR: &CStr = c"/var/lock";
/// The jax profile's, as JAX's script has it since jax-ml/jax 58d4536f:
/// `${JAX_LOCK_DIR:-/tmp/jax_accelerator_locks_${USER:-shared}}`.
pub const JAX_LOCK_DIR_PREFIX: &[u8] = b"/tmp/jax_accelerator_locks_";
pub const DEFAULT_TESTS_PER_GPU: u32 = 8;
pub const MAX_TESTS_PER_GPU: u32 = 1024;
/// More GPUs than any host has; a larger `TF_GPU_COUNT` is a typo.
pub const MAX_GPU_COUNT: u32 = 4096;
/// 30 days: longer than any test timeout, small enough for any timer.
pub const MAX_WAIT_MS: u64 = 30 * 24 * 3600 * 1000;

/// Whose conventions the wrapper follows: XLA's `parallel_gpu_execute.sh`
/// (the default) or JAX's `parallel_accelerator_execute.sh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Xla,
    Jax,
}

impl Profile {
    fn parse(value: &[u8]) -> Option<Profile> {
        match value {
            b"xla" => Some(Profile::Xla),
            b"jax" => Some(Profile::Jax),
            _ => None,
        }
    }

    /// The default: `jax` when the executable is called
    /// `parallel_accelerator_execute` (so it drops in for JAX's script).
    pub fn from_argv0(argv0: &[u8]) -> Profile {
        let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or(argv0);
        if base == b"parallel_accelerator_execute" { Profile::Jax } else { Profile::Xla }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Xla => "xla",
            Profile::Jax => "jax",
        }
    }

    /// `gpulock<id>_<slot>` or `jax_accelerator_lock_<id>_<slot>`.
    pub fn lock_prefix(self) -> &'static [u8] {
        match self {
            Profile::Xla => b"gpulock",
            Profile::Jax => b"jax_accelerator_lock_",
        }
    }

    /// The lock directory when neither `--lock-dir` nor
    /// `PARALLEL_GPU_EXECUTE_LOCK_DIR` names one: the classic script's
    /// `/var/lock`, or JAX's `${JAX_LOCK_DIR:-/tmp/jax_accelerator_locks_${USER:-shared}}`.
    fn default_lock_dir(self) -> LockDir {
        match self {
            Profile::Xla => LockDir::Path(DEFAULT_LOCK_DIR),
            Profile::Jax => match env::var_nonempty_cstr(b"JAX_LOCK_DIR") {
                Some(dir) => LockDir::Path(dir),
                None => LockDir::JaxDefault { user: env::var_nonempty(b"USER").unwrap_or(b"shared") },
            },
        }
    }

    /// The waiters' queue file; its name cannot clash with a lock file's,
    /// which always ends in `_<digits>`.
    pub fn queue_file(self) -> &'static [u8] {
        match self {
            Profile::Xla => b"gpulock.queue",
            Profile::Jax => b"jax_accelerator_lock.queue",
        }
    }

    /// The variable that gives the count.
    pub fn count_variable(self) -> &'static str {
        match self {
            Profile::Xla => "TF_GPU_COUNT",
            Profile::Jax => "JAX_ACCELERATOR_COUNT",
        }
    }

    /// The variable that gives the slots per GPU.
    pub fn slots_variable(self) -> &'static str {
        match self {
            Profile::Xla => "TF_TESTS_PER_GPU",
            Profile::Jax => "JAX_TESTS_PER_ACCELERATOR",
        }
    }
}

/// How the test is told which GPUs are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// `ROCR_VISIBLE_DEVICES=<ids>`, `HIP_VISIBLE_DEVICES=0..n-1`, no `CUDA_VISIBLE_DEVICES`.
    Rocm,
    /// `CUDA_VISIBLE_DEVICES=<ids>`.
    Cuda,
    /// `CUDA_VISIBLE_DEVICES=<ids>` and `HIP_VISIBLE_DEVICES=<ids>`, as the
    /// original TensorFlow script did.
    Classic,
}

impl Vendor {
    fn parse(value: &[u8]) -> Option<Vendor> {
        match value {
            b"rocm" => Some(Vendor::Rocm),
            b"cuda" => Some(Vendor::Cuda),
            b"classic" => Some(Vendor::Classic),
            _ => None,
        }
    }
}

/// Where the lock files are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockDir {
    /// From `--lock-dir`, a variable, or the xla profile's default.
    Path(&'static CStr),
    /// The jax profile's default, [`JAX_LOCK_DIR_PREFIX`] and the user:
    /// built only when a lock is looked for, so that the pass-through does
    /// not allocate.
    JaxDefault { user: &'static [u8] },
}

impl LockDir {
    /// The directory's path.
    pub fn path(self) -> Cow<'static, CStr> {
        match self {
            LockDir::Path(dir) => Cow::Borrowed(dir),
            LockDir::JaxDefault { user } => {
                let mut bytes = Vec::with_capacity(JAX_LOCK_DIR_PREFIX.len() + user.len() + 1);
                bytes.extend_from_slice(JAX_LOCK_DIR_PREFIX);
                bytes.extend_from_slice(user);
                // `user` is a variable's value, so it holds no NUL byte and
                // the fallback is never taken.
                CString::new(bytes).map_or(Cow::Borrowed(c"/tmp/jax_accelerator_locks_shared"), Cow::Owned)
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub profile: Profile,
    /// `TF_GPU_COUNT` (xla) or `JAX_ACCELERATOR_COUNT` (jax), when set.
    pub tf_gpu_count: Option<u32>,
    pub tests_per_gpu: u32,
    pub lock_dir: LockDir,
    /// `None`: chosen from where the GPU count came.
    pub vendor: Option<Vendor>,
    /// `None`: wait as long as it takes.
    pub wait_ms: Option<u64>,
    /// Prefix for `/sys`, `/dev` and `/proc` (empty: the real root).
    pub sysroot: &'static [u8],
    pub lock_names: LockNames,
}

/// A flag's value when given, else its variable's when set and not empty,
/// with the name to blame in a message.
fn flag_or_var(
    flag: Option<&'static CStr>,
    flag_name: &'static str,
    var: &'static str,
) -> Option<(&'static str, &'static CStr)> {
    match flag {
        Some(v) => Some((flag_name, v)),
        None => env::var_nonempty_cstr(var.as_bytes()).map(|v| (var, v)),
    }
}

/// [`flag_or_var`]'s value read by `parse`, when given; a value `parse`
/// rejects is a `BadValue` that names the flag or variable and `expected`.
fn parsed<T>(
    flag: Option<&'static CStr>,
    flag_name: &'static str,
    var: &'static str,
    parse: impl FnOnce(&[u8]) -> Option<T>,
    expected: &'static str,
) -> Result<Option<T>, Error> {
    let Some((name, value)) = flag_or_var(flag, flag_name, var) else { return Ok(None) };
    let value = value.to_bytes();
    parse(value).map(Some).ok_or(Error::BadValue { name, value, expected })
}

fn bounded(name: &'static str, value: &'static [u8], min: u64, max: u64, expected: &'static str) -> Result<u64, Error> {
    match parse_u64(value) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(Error::BadValue { name, value, expected }),
    }
}

impl Settings {
    /// The settings in force for the wrapper started as `argv0`.
    pub fn load(flags: &Flags, argv0: &[u8]) -> Result<Settings, Error> {
        let profile = parsed(flags.profile, "--profile", "PARALLEL_GPU_EXECUTE_PROFILE", Profile::parse, "xla or jax")?
            .unwrap_or_else(|| Profile::from_argv0(argv0));
        let count_var = profile.count_variable();
        let tf_gpu_count = match env::var_nonempty(count_var.as_bytes()) {
            Some(v) => Some(bounded(count_var, v, 0, MAX_GPU_COUNT.into(), "an integer from 0 to 4096")? as u32),
            None => None,
        };
        let slots_var = profile.slots_variable();
        let tests_per_gpu = match env::var_nonempty(slots_var.as_bytes()) {
            Some(v) => bounded(slots_var, v, 1, MAX_TESTS_PER_GPU.into(), "an integer from 1 to 1024")? as u32,
            None => DEFAULT_TESTS_PER_GPU,
        };
        let lock_dir = match flag_or_var(flags.lock_dir, "--lock-dir", "PARALLEL_GPU_EXECUTE_LOCK_DIR") {
            Some((name, dir)) if dir.is_empty() => {
                return Err(Error::BadValue { name, value: b"", expected: "a directory" });
            }
            Some((_, dir)) => LockDir::Path(dir),
            None => profile.default_lock_dir(),
        };
        let vendor =
            parsed(flags.vendor, "--vendor", "PARALLEL_GPU_EXECUTE_VENDOR", Vendor::parse, "rocm, cuda or classic")?;
        let wait_ms = parsed(
            flags.wait,
            "--wait",
            "PARALLEL_GPU_EXECUTE_WAIT",
            |v| parse_seconds_as_millis(v).filter(|&ms| ms <= MAX_WAIT_MS),
            "seconds, from 0 (fail at once) to 2592000, e.g. 600 or 1.5",
        )?;
        let sysroot = env::var_nonempty(b"PARALLEL_GPU_EXECUTE_SYSROOT").unwrap_or(b"");
        let lock_names = parsed(
            flags.lock_names,
            "--lock-names",
            "PARALLEL_GPU_EXECUTE_LOCK_NAMES",
            LockNames::parse,
            "index or physical",
        )?
        .unwrap_or(LockNames::Index);
        Ok(Settings { profile, tf_gpu_count, tests_per_gpu, lock_dir, vendor, wait_ms, sysroot, lock_names })
    }
}
