//! Flags and environment variables, validated once, before anything else
//! happens: a typo in CI configuration fails every test loudly (exit 2) rather
//! than running some of them unlocked.

use crate::cli::Flags;
use crate::error::Error;
use crate::identity::LockNames;
use std::ffi::CStr;
use wrapper_common::env;
use wrapper_common::numbers::{parse_seconds_as_millis, parse_u64};

pub const DEFAULT_LOCK_DIR: &CStr = c"/var/lock";
pub const DEFAULT_TESTS_PER_GPU: u32 = 8;
pub const MAX_TESTS_PER_GPU: u32 = 1024;
/// More GPUs than any host has; a larger `TF_GPU_COUNT` is a typo.
pub const MAX_GPU_COUNT: u32 = 4096;
/// 30 days: longer than any test timeout, small enough for any timer.
pub const MAX_WAIT_MS: u64 = 30 * 24 * 3600 * 1000;

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

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub tf_gpu_count: Option<u32>,
    pub tests_per_gpu: u32,
    pub lock_dir: &'static CStr,
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

fn bounded(name: &'static str, value: &'static [u8], min: u64, max: u64, expected: &'static str) -> Result<u64, Error> {
    match parse_u64(value) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(Error::BadValue { name, value, expected }),
    }
}

impl Settings {
    pub fn load(flags: &Flags) -> Result<Settings, Error> {
        let tf_gpu_count = match env::var_nonempty(b"TF_GPU_COUNT") {
            Some(v) => Some(bounded("TF_GPU_COUNT", v, 0, MAX_GPU_COUNT.into(), "an integer from 0 to 4096")? as u32),
            None => None,
        };
        let tests_per_gpu = match env::var_nonempty(b"TF_TESTS_PER_GPU") {
            Some(v) => bounded("TF_TESTS_PER_GPU", v, 1, MAX_TESTS_PER_GPU.into(), "an integer from 1 to 1024")? as u32,
            None => DEFAULT_TESTS_PER_GPU,
        };
        let lock_dir = match flag_or_var(flags.lock_dir, "--lock-dir", "PARALLEL_GPU_EXECUTE_LOCK_DIR") {
            Some((name, dir)) if dir.is_empty() => {
                return Err(Error::BadValue { name, value: b"", expected: "a directory" });
            }
            Some((_, dir)) => dir,
            None => DEFAULT_LOCK_DIR,
        };
        let vendor = match flag_or_var(flags.vendor, "--vendor", "PARALLEL_GPU_EXECUTE_VENDOR") {
            Some((name, v)) => Some(Vendor::parse(v.to_bytes()).ok_or(Error::BadValue {
                name,
                value: v.to_bytes(),
                expected: "rocm, cuda or classic",
            })?),
            None => None,
        };
        let wait_ms = match flag_or_var(flags.wait, "--wait", "PARALLEL_GPU_EXECUTE_WAIT") {
            Some((name, v)) => match parse_seconds_as_millis(v.to_bytes()) {
                Some(ms) if ms <= MAX_WAIT_MS => Some(ms),
                _ => {
                    return Err(Error::BadValue {
                        name,
                        value: v.to_bytes(),
                        expected: "seconds, from 0 (fail at once) to 2592000, e.g. 600 or 1.5",
                    });
                }
            },
            None => None,
        };
        let sysroot = env::var_nonempty(b"PARALLEL_GPU_EXECUTE_SYSROOT").unwrap_or(b"");
        let lock_names = match flag_or_var(flags.lock_names, "--lock-names", "PARALLEL_GPU_EXECUTE_LOCK_NAMES") {
            Some((name, v)) => LockNames::parse(v.to_bytes()).ok_or(Error::BadValue {
                name,
                value: v.to_bytes(),
                expected: "index or physical",
            })?,
            None => LockNames::Index,
        };
        Ok(Settings { tf_gpu_count, tests_per_gpu, lock_dir, vendor, wait_ms, sysroot, lock_names })
    }
}
