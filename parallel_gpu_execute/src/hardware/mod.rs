//! What the host has: the accelerators the runtimes will enumerate, counted
//! without starting a process where the kernel can tell (KFD topology,
//! NVIDIA's driver files, TPU chips; `rocminfo` in the runfiles as the
//! last resort), their identities, and the device nodes a test may open.
//!
//! Reads `<sysroot>/sys`, `<sysroot>/dev` and `<sysroot>/proc`; takes no
//! lock and writes nothing. Below the slots, above the system layer.

pub mod devnode;
pub mod gpu_count;
pub mod identity;
pub mod kfd;
pub mod kfd_usage;
pub mod memory;
pub mod nvidia;
pub mod rocminfo;
pub mod survey;
pub mod tpu;

use crate::profile::{Profile, Vendor};

/// What the hardware layer is asked to look at: the settings that decide
/// how GPUs are counted, and nothing else.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Prefix for `/sys`, `/dev` and `/proc` (empty: the real root).
    pub sysroot: &'static [u8],
    /// The jax profile counts TPU chips too, and names its count variable.
    pub profile: Profile,
    /// `TF_GPU_COUNT` (xla) or `JAX_ACCELERATOR_COUNT` (jax), when set.
    pub count_variable: Option<u32>,
    /// `--vendor`, when given: which of a mixed host's GPUs count.
    pub vendor: Option<Vendor>,
}
