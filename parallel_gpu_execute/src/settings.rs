//! Flags and environment variables, validated once, before anything else
//! happens: a typo in CI configuration fails every test loudly (exit 2) rather
//! than running some of them unlocked.

use crate::cli::Flags;
use crate::error::Error;
use crate::hardware::Probe;
use crate::hardware::gpu_count::MAX_GPU_COUNT;
use crate::hardware::gpu_count::Source;
use crate::hardware::memory;
use crate::hardware::survey::Survey;
use crate::prelude::*;
use crate::profile::{LockNames, Profile, Unhealthy, Vendor, Visible};
use crate::slots::privacy::PrivatePolicy;
use alloc::borrow::Cow;
use alloc::ffi::CString;
use core::ffi::CStr;
use wrapper_common::diag;
use wrapper_common::env;
use wrapper_common::numbers::{parse_seconds_as_millis, parse_u64};

/// The xla profile's lock directory, the classic script's.
pub const DEFAULT_LOCK_DIR: &CStr = c"/var/lock";
/// The jax profile's, as JAX's script has it since jax-ml/jax 58d4536f:
/// `${JAX_LOCK_DIR:-/tmp/jax_accelerator_locks_${USER:-shared}}`.
pub const JAX_LOCK_DIR_PREFIX: &[u8] = b"/tmp/jax_accelerator_locks_";
pub const DEFAULT_TESTS_PER_GPU: u32 = 8;
pub const MAX_TESTS_PER_GPU: u32 = memory::MAX_TESTS_PER_GPU as u32;
/// 30 days: longer than any test timeout, small enough for any timer.
pub const MAX_WAIT_MS: u64 = 30 * 24 * 3600 * 1000;

/// The lock directory when neither `--lock-dir` nor
/// `PARALLEL_GPU_EXECUTE_LOCK_DIR` names one: the classic script's
/// `/var/lock`, or JAX's `${JAX_LOCK_DIR:-/tmp/jax_accelerator_locks_${USER:-shared}}`.
fn default_lock_dir(profile: Profile) -> LockDir {
    match profile {
        Profile::Xla => LockDir::Path(DEFAULT_LOCK_DIR),
        Profile::Jax => match env::var_nonempty_cstr(b"JAX_LOCK_DIR") {
            Some(dir) => LockDir::Path(dir),
            None => LockDir::JaxDefault { user: env::var_nonempty(b"USER").unwrap_or(b"shared") },
        },
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
    /// `TF_TESTS_PER_GPU=auto` (`JAX_TESTS_PER_ACCELERATOR=auto`): the
    /// slots per GPU from its memory ([`Settings::per_test_mib`]); until
    /// resolved, `tests_per_gpu` holds the default.
    pub tests_per_gpu_auto: bool,
    pub lock_dir: LockDir,
    /// `None`: chosen from where the GPU count came.
    pub vendor: Option<Vendor>,
    /// `--visible`: which variable tells an AMD test its GPUs; `None`: the
    /// profile's default ([`Visible::default_for`]).
    pub visible: Option<Visible>,
    /// `None`: wait as long as it takes.
    pub wait_ms: Option<u64>,
    /// Prefix for `/sys`, `/dev` and `/proc` (empty: the real root).
    pub sysroot: &'static [u8],
    pub lock_names: LockNames,
    /// `PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR`: what to do with a lock
    /// directory created inside the action's own root.
    pub private_lock_dir: PrivatePolicy,
    /// `PARALLEL_GPU_EXECUTE_UNHEALTHY`: what a GPU with uncorrectable
    /// memory errors means for a test.
    pub unhealthy: Unhealthy,
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
    /// Whether a test in the classic mode keeps the caller's
    /// `ROCR_VISIBLE_DEVICES`, and the AMD runtime reads it (and so the
    /// classic mode reads it as the pool): in the xla profile, and in the
    /// jax profile with its `hip` variables, on a host that shows AMD GPUs
    /// and no NVIDIA driver (a count given by hand tells no vendor). Asked
    /// only where the variable is set.
    pub fn rocr_kept(&self, vendor: Vendor) -> bool {
        let kept =
            self.profile == Profile::Xla || Visible::in_force(self.profile, vendor, self.visible) == Some(Visible::Hip);
        kept && crate::hardware::kfd::amd_only(self.sysroot)
    }

    /// The GPU memory one test may take, in MiB, and whence:
    /// `TF_PER_DEVICE_MEMORY_LIMIT_MB` when it is a positive integer, else
    /// the profile's default for it (4096, jax: 2048).
    pub fn per_test_mib(&self) -> (u64, &'static str) {
        match env::var_nonempty(b"TF_PER_DEVICE_MEMORY_LIMIT_MB").and_then(parse_u64).filter(|&n| n > 0) {
            Some(n) => (n, "TF_PER_DEVICE_MEMORY_LIMIT_MB"),
            None if self.profile == Profile::Jax => (2048, "the jax profile's default"),
            None => (4096, "the xla profile's default"),
        }
    }

    /// The slots per GPU: `TF_TESTS_PER_GPU`, or with `auto` the smallest
    /// GPU's memory in sysfs over [`Settings::per_test_mib`] (AMD GPUs
    /// counted from KFD; no process is started in a test's start-up), or
    /// the default with one note where the memory cannot be read.
    pub fn slots_per_gpu(&self, source: Source) -> u32 {
        // (The source first: the other paths read nothing more.)
        if matches!(source, Source::Tpu | Source::JaxCount) && self.slots_unset_or_auto() && self.tpu_chips(source) {
            return 1;
        }
        if !self.tests_per_gpu_auto {
            return self.tests_per_gpu;
        }
        let probe = self.probe();
        let vram = match source {
            Source::Kfd => memory::kfd_vram_mib(&probe, &Survey::take(&probe)),
            _ => None,
        };
        if vram.is_none() {
            diag::report(
                crate::TOOL,
                format_args!(
                    "note: {}=auto: the GPUs' memory cannot be read here ({}); {} slots per GPU",
                    self.profile.slots_variable(),
                    match source {
                        Source::Kfd => "no readable mem_info_vram_total in /sys/class/drm",
                        _ => "only AMD GPUs counted from KFD show it in sysfs",
                    },
                    memory::UNKNOWN_TESTS_PER_GPU
                ),
            );
        }
        memory::tests_per_gpu(vram, self.per_test_mib().0).min(u64::from(MAX_TESTS_PER_GPU)) as u32
    }

    /// Whether the accelerators are TPU chips, each of which serves one
    /// test (its VFIO group opens once, docs/jax.md; JAX's TPU CI runs one
    /// job per chip): counted on the bus, or counted by hand on a host that
    /// has them (one look at the PCI bus, only then).
    pub fn tpu_chips(&self, source: Source) -> bool {
        source == Source::Tpu
            || source == Source::JaxCount && crate::hardware::tpu::census(self.sysroot, |_| {}).is_some()
    }

    /// Whether the slots per GPU are the wrapper's to choose: their
    /// variable is unset, or `auto` (a number set wins).
    pub fn slots_unset_or_auto(&self) -> bool {
        self.tests_per_gpu_auto || env::var_nonempty(self.profile.slots_variable().as_bytes()).is_none()
    }

    /// What the hardware layer needs of these settings to count GPUs.
    pub fn probe(&self) -> Probe {
        Probe { sysroot: self.sysroot, profile: self.profile, count_variable: self.tf_gpu_count, vendor: self.vendor }
    }

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
        let (tests_per_gpu, tests_per_gpu_auto) = match env::var_nonempty(slots_var.as_bytes()) {
            Some(b"auto") => (DEFAULT_TESTS_PER_GPU, true),
            Some(v) => (
                bounded(slots_var, v, 1, MAX_TESTS_PER_GPU.into(), "an integer from 1 to 1024, or auto")? as u32,
                false,
            ),
            None => (DEFAULT_TESTS_PER_GPU, false),
        };
        let lock_dir = match flag_or_var(flags.lock_dir, "--lock-dir", "PARALLEL_GPU_EXECUTE_LOCK_DIR") {
            Some((name, dir)) if dir.is_empty() => {
                return Err(Error::BadValue { name, value: b"", expected: "a directory" });
            }
            Some((_, dir)) => LockDir::Path(dir),
            None => default_lock_dir(profile),
        };
        let vendor =
            parsed(flags.vendor, "--vendor", "PARALLEL_GPU_EXECUTE_VENDOR", Vendor::parse, "rocm, cuda or classic")?;
        let visible =
            parsed(flags.visible, "--visible", "PARALLEL_GPU_EXECUTE_VISIBLE", Visible::parse, "hip or rocr")?;
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
        let private_lock_dir =
            parsed(None, "", "PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR", PrivatePolicy::parse, "auto, run or refuse")?
                .unwrap_or(PrivatePolicy::Auto);
        let unhealthy = parsed(None, "", "PARALLEL_GPU_EXECUTE_UNHEALTHY", Unhealthy::parse, "report, warn or avoid")?
            .unwrap_or(Unhealthy::Report);
        Ok(Settings {
            profile,
            tf_gpu_count,
            tests_per_gpu,
            tests_per_gpu_auto,
            lock_dir,
            vendor,
            visible,
            wait_ms,
            sysroot,
            lock_names,
            private_lock_dir,
            unhealthy,
        })
    }
}
