//! How many tests a host can run at once: each GPU's memory, the host's
//! CPUs and RAM. For `--list=bazelrc` and `TF_TESTS_PER_GPU=auto`.
//!
//! - AMD: amdgpu's `<root>/sys/class/drm/renderD<minor>/device/mem_info_vram_total`
//!   (bytes) of each counted GPU; the smallest counts.
//! - NVIDIA: `nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits`
//!   (MiB, one line per GPU) when it is on `PATH`; the smallest counts.
//!   Started only for `--list`, never in a test's start-up.
//! - Tests per GPU: the GPU's memory over the memory a test may take, at
//!   least 1; 8 (the classic default) when the memory is unknown.
//! - Tests at once (`--local_test_jobs`): the smallest of the online CPUs,
//!   the GPUs times the tests per GPU, and the host's RAM in GiB over 6, as
//!   JAX's CUDA CI works it out by hand (jax-ml/jax
//!   `ci/run_bazel_test_cuda_non_rbe.sh` @ 05be4cff: "min(num_cpu_cores,
//!   gpu_count * max_tests_per_gpu, total_ram_gb / 6)").

use crate::hardware::Probe;
use crate::hardware::kfd::RenderMinor;
use crate::hardware::survey::Survey;
use crate::prelude::*;
use crate::sys::child;
use crate::sys::dirs::{read_file, with_host_path};
use wrapper_common::numbers::parse_u64;

/// Tests per GPU when a GPU's memory cannot be read.
pub const UNKNOWN_TESTS_PER_GPU: u64 = 8;
/// Host RAM a test may take, for the cap on tests at once (JAX's figure).
pub const RAM_GIB_PER_TEST: u64 = 6;

/// Where a GPU memory figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemorySource {
    AmdgpuSysfs,
    NvidiaSmi,
}

impl MemorySource {
    pub fn name(self) -> &'static str {
        match self {
            MemorySource::AmdgpuSysfs => "amdgpu sysfs mem_info_vram_total",
            MemorySource::NvidiaSmi => "nvidia-smi memory.total",
        }
    }
}

/// The smallest memory of the usable KFD GPUs, in MiB, from sysfs; `None`
/// when there is none, or one GPU's cannot be read.
pub fn kfd_vram_mib(probe: &Probe, survey: &Survey) -> Option<u64> {
    let mut smallest: Option<u64> = None;
    for g in survey.usable_kfd() {
        let RenderMinor::Value(minor) = g.props.drm_render_minor else { return None };
        let bytes = with_host_path(probe.sysroot, b"/sys/class/drm/renderD", Some(minor), |dir| {
            let mut path = dir.to_bytes().to_vec();
            path.extend_from_slice(b"/device/mem_info_vram_total");
            alloc::ffi::CString::new(path).ok().and_then(|p| read_file(&p))
        })??;
        let mib = parse_u64(trim(&bytes))? / (1024 * 1024);
        smallest = Some(smallest.map_or(mib, |s| s.min(mib)));
    }
    smallest
}

/// The smallest `memory.total` that `nvidia-smi` reports, in MiB; `None`
/// when it is not on `PATH`, fails, or prints something else.
pub fn nvidia_smi_mib() -> Option<u64> {
    let argv = [
        c"nvidia-smi".as_ptr(),
        c"--query-gpu=memory.total".as_ptr(),
        c"--format=csv,noheader,nounits".as_ptr(),
        core::ptr::null(),
    ];
    let mut out = Vec::new();
    let status = child::run(&argv, true, |chunk| {
        if out.len() < 64 * 1024 {
            out.extend_from_slice(chunk);
        }
    })
    .ok()?;
    if !child::succeeded(status) {
        return None;
    }
    let mut smallest: Option<u64> = None;
    for line in out.split(|&b| b == b'\n').map(trim).filter(|l| !l.is_empty()) {
        let mib = parse_u64(line)?;
        smallest = Some(smallest.map_or(mib, |s| s.min(mib)));
    }
    smallest
}

/// `MemTotal` of `<root>/proc/meminfo`, in GiB rounded to the nearest.
pub fn host_ram_gib(probe: &Probe) -> Option<u64> {
    let text = with_host_path(probe.sysroot, b"/proc/meminfo", None, read_file)??;
    let line = text.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"MemTotal:"))?;
    let kib = trim(line).split(|&b| b == b' ').next().and_then(parse_u64)?;
    Some((kib + 512 * 1024) / (1024 * 1024))
}

/// The CPUs this process may run on.
pub fn online_cpus() -> u64 {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).count().max(1) as u64,
        Err(_) => 1,
    }
}

/// The most slots per GPU the wrapper takes (`TF_TESTS_PER_GPU`'s range
/// is 1 to this).
pub const MAX_TESTS_PER_GPU: u64 = 1024;

/// Tests per GPU for a GPU of `vram_mib` when each test may take
/// `per_test_mib`: at least 1, at most [`MAX_TESTS_PER_GPU`] (8 GPUs of
/// 192 GiB with 128 MiB a test would otherwise make 1536, a value the
/// wrapper itself refuses).
pub fn tests_per_gpu(vram_mib: Option<u64>, per_test_mib: u64) -> u64 {
    match vram_mib {
        Some(v) => (v / per_test_mib.max(1)).clamp(1, MAX_TESTS_PER_GPU),
        None => UNKNOWN_TESTS_PER_GPU,
    }
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_per_gpu_is_memory_over_the_share_at_least_one_at_most_1024() {
        assert_eq!(tests_per_gpu(Some(65536), 4096), 16);
        assert_eq!(tests_per_gpu(Some(65535), 4096), 15);
        assert_eq!(tests_per_gpu(Some(1024), 4096), 1);
        assert_eq!(tests_per_gpu(Some(8192), 0), MAX_TESTS_PER_GPU, "at most what TF_TESTS_PER_GPU takes");
        assert_eq!(tests_per_gpu(Some(196_608), 128), MAX_TESTS_PER_GPU);
        assert_eq!(tests_per_gpu(None, 4096), UNKNOWN_TESTS_PER_GPU);
    }

    #[test]
    fn trimming() {
        assert_eq!(trim(b"  81920 \n"), b"81920");
        assert_eq!(trim(b""), b"");
        assert_eq!(trim(b" \n"), b"");
    }
}
