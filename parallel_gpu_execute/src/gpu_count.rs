//! How many GPUs this host gives the wrapper, from the first source that
//! answers: `TF_GPU_COUNT`, the AMD KFD topology, the NVIDIA driver, a
//! `rocminfo` in the runfiles; otherwise none.
//!
//! The first three cost a few system calls and no allocation; rocminfo is
//! only searched for (and run) when none of them answered.

use crate::rocminfo;
use crate::settings::{MAX_GPU_COUNT, Settings, Vendor};
use crate::sysfs;

/// Where the count came from; it also picks the default vendor mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    TfGpuCount,
    Kfd,
    Nvidia,
    Rocminfo,
}

impl Source {
    pub fn default_vendor(self) -> Vendor {
        match self {
            Source::Kfd | Source::Rocminfo => Vendor::Rocm,
            Source::Nvidia => Vendor::Cuda,
            Source::TfGpuCount => Vendor::Classic,
        }
    }
}

/// The GPU count and its source (`None` when nothing answered: zero GPUs).
pub fn count(settings: &Settings) -> (u32, Option<Source>) {
    if let Some(n) = settings.tf_gpu_count {
        return (n, Some(Source::TfGpuCount));
    }
    if let Some(n) = sysfs::kfd_gpu_count(settings.sysroot) {
        return (n, Some(Source::Kfd));
    }
    if let Some(n) = sysfs::nvidia_gpu_count(settings.sysroot) {
        return (n, Some(Source::Nvidia));
    }
    if let Some(n) = rocminfo::count_gpus() {
        // Hostile output cannot make the pool absurdly large.
        let n = u32::try_from(n).unwrap_or(u32::MAX).min(MAX_GPU_COUNT);
        return (n, Some(Source::Rocminfo));
    }
    (0, None)
}
