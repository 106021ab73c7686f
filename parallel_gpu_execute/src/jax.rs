//! The `jax` profile: what JAX's `build/parallel_accelerator_execute.sh`
//! (jax-ml/jax main at cec06d11, where the script last changed in 58d4536f)
//! does wherever a user can see it and it works; `--visible=hip` gives the
//! ROCm/jax fork's variables (its script at 4443705e).
//!
//! - `JAX_ACCELERATOR_COUNT` gives the count; unset, the count comes from
//!   the hardware (TPU chips first, then the GPU sources), not the script's
//!   default of 4. `JAX_TESTS_PER_ACCELERATOR` gives the slots (default 8).
//! - Lock files `jax_accelerator_lock_<id>_<slot>`, in `JAX_LOCK_DIR`, else
//!   `/tmp/jax_accelerator_locks_${USER:-shared}` (`settings.rs`), unless
//!   `--lock-dir` or `PARALLEL_GPU_EXECUTE_LOCK_DIR` says otherwise.
//! - The test gets `TPU_VISIBLE_CHIPS`, `CUDA_VISIBLE_DEVICES`,
//!   `ROCR_VISIBLE_DEVICES` and `ONEAPI_VISIBLE_DEVICES` set to its ids, and
//!   `TF_PER_DEVICE_MEMORY_LIMIT_MB` defaults to 2048. On AMD GPUs,
//!   `HIP_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` are `0..n-1` instead
//!   (docs/jax.md, "AMD GPUs").
//! - `Running test <test> <args> on accelerator <ids>`; all busy:
//!   `Cannot find a free accelerator to run the test ... on, exiting with
//!   failure...` (`error.rs`).
//!
//! On a TPU host, a test given one chip also gets what libtpu needs to run
//! one process per chip, as defaults that never override a value the user
//! set: `TPU_CHIPS_PER_PROCESS_BOUNDS=1,1,1` and `TPU_PROCESS_BOUNDS=1,1,1`
//! (the "non-communicating processes, 1 chip per process" settings of
//! Skye Wanderman-Milne's TPU topology notes, a JAX maintainer's, and of
//! pytorch/xla's `configure_topology`, which sets the same
//! `TPU_CHIPS_PER_PROCESS_BOUNDS=1,1,1` default). For blocks of several
//! chips no bounds are set: their shape depends on which chips form the
//! block and on the generation's mesh, and no published contract says what
//! libtpu expects for an arbitrary block.

use crate::profile::Visible;
use wrapper_common::env::{self, EnvBuilder};

/// `TF_PER_DEVICE_MEMORY_LIMIT_MB` when unset, as JAX's script sets it.
pub const MEMORY_LIMIT_MB: &[u8] = b"2048";

/// A test's accelerators, comma-separated, as the variables need them.
#[derive(Debug, Clone, Copy)]
pub struct Gpus<'a> {
    /// The ids (pool entries).
    pub ids: &'a [u8],
    /// Their indices among what ROCr shows when `ROCR_VISIBLE_DEVICES` is
    /// left as it is (positions in a preset pool, else the ids).
    pub hip: &'a [u8],
    /// `0..n-1`.
    pub zero_based: &'a [u8],
}

/// Sets the jax profile's variables for a test given `gpus` (`len` of
/// them). `amd`: the AMD variables, when the GPUs are AMD's or `hip` was
/// asked for.
pub fn set_environment(env: &mut EnvBuilder, gpus: Gpus<'_>, len: usize, tpu_host: bool, amd: Option<Visible>) {
    match amd {
        // The ROCm/jax fork's script: TPU_VISIBLE_CHIPS, CUDA_ and
        // HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES left as it is.
        Some(Visible::Hip) => {
            env.set(b"TPU_VISIBLE_CHIPS", gpus.hip)
                .set(b"CUDA_VISIBLE_DEVICES", gpus.hip)
                .set(b"HIP_VISIBLE_DEVICES", gpus.hip);
        }
        // JAX main's, except that HIP is told the GPUs ROCr shows: with
        // HIP_VISIBLE_DEVICES unset, HIP reads CUDA_VISIBLE_DEVICES as
        // indices among the GPUs ROCr shows, so JAX main's
        // `CUDA_VISIBLE_DEVICES=<i>` beside `ROCR_VISIBLE_DEVICES=<i>` would
        // show a test on GPU 1 or above no GPU (ROCm/clr
        // `rocclr/device/rocm/rocdevice.cpp`, docs/jax.md).
        Some(Visible::Rocr) => {
            env.set(b"TPU_VISIBLE_CHIPS", gpus.ids)
                .set(b"ROCR_VISIBLE_DEVICES", gpus.ids)
                .set(b"HIP_VISIBLE_DEVICES", gpus.zero_based)
                .set(b"CUDA_VISIBLE_DEVICES", gpus.zero_based)
                .set(b"ONEAPI_VISIBLE_DEVICES", gpus.ids);
        }
        None => {
            env.set(b"TPU_VISIBLE_CHIPS", gpus.ids)
                .set(b"CUDA_VISIBLE_DEVICES", gpus.ids)
                .set(b"ROCR_VISIBLE_DEVICES", gpus.ids)
                .set(b"ONEAPI_VISIBLE_DEVICES", gpus.ids);
        }
    }
    if env::var_nonempty(b"TF_PER_DEVICE_MEMORY_LIMIT_MB").is_none() {
        env.set(b"TF_PER_DEVICE_MEMORY_LIMIT_MB", MEMORY_LIMIT_MB);
    }
    if tpu_host && len == 1 {
        for var in [&b"TPU_CHIPS_PER_PROCESS_BOUNDS"[..], b"TPU_PROCESS_BOUNDS"] {
            if env::var(var).is_none() {
                env.set(var, b"1,1,1");
            }
        }
    }
}
