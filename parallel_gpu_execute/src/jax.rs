//! The `jax` profile: what JAX's `build/parallel_accelerator_execute.sh`
//! (jax-ml/jax main at cec06d11, where the script last changed in 58d4536f)
//! does wherever a user can see it.
//!
//! - `JAX_ACCELERATOR_COUNT` gives the count; unset, the count comes from
//!   the hardware (TPU chips first, then the GPU sources), not the script's
//!   default of 4. `JAX_TESTS_PER_ACCELERATOR` gives the slots (default 8).
//! - Lock files `jax_accelerator_lock_<id>_<slot>`, in `JAX_LOCK_DIR`, else
//!   `/tmp/jax_accelerator_locks_${USER:-shared}` (`settings.rs`), unless
//!   `--lock-dir` or `PARALLEL_GPU_EXECUTE_LOCK_DIR` says otherwise.
//! - The test gets `TPU_VISIBLE_CHIPS`, `CUDA_VISIBLE_DEVICES`,
//!   `ROCR_VISIBLE_DEVICES` and `ONEAPI_VISIBLE_DEVICES` set to its ids, and
//!   `TF_PER_DEVICE_MEMORY_LIMIT_MB` defaults to 2048.
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

use wrapper_common::env::{self, EnvBuilder};

/// `TF_PER_DEVICE_MEMORY_LIMIT_MB` when unset, as JAX's script sets it.
pub const MEMORY_LIMIT_MB: &[u8] = b"2048";

/// Sets the jax profile's variables for a test given `ids` (`len` of them).
pub fn set_environment(env: &mut EnvBuilder, ids: &[u8], len: usize, tpu_host: bool) {
    env.set(b"TPU_VISIBLE_CHIPS", ids)
        .set(b"CUDA_VISIBLE_DEVICES", ids)
        .set(b"ROCR_VISIBLE_DEVICES", ids)
        .set(b"ONEAPI_VISIBLE_DEVICES", ids);
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
