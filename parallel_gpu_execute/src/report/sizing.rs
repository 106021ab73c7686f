//! `--list=bazelrc`: the `.bazelrc` lines that size a host's test jobs to
//! its GPUs' memory, CPUs and RAM (see `hardware::memory` for the rules).
//!
//! ```text
//! # parallel_gpu_execute --list=bazelrc: 8 GPUs (kfd); 65536 MiB each (the smallest; amdgpu sysfs mem_info_vram_total); 4096 MiB a test (the xla profile's default) ...
//! test --local_test_jobs=64
//! test --test_env=TF_TESTS_PER_GPU=16
//! ```

use crate::hardware::Probe;
use crate::hardware::gpu_count::Source;
use crate::hardware::memory::{self, MemorySource, RAM_GIB_PER_TEST};
use crate::hardware::survey::Survey;
use crate::prelude::*;
use crate::settings::Settings;
use crate::slots::request::Pool;
use core::fmt::Write as _;

/// The smallest GPU memory of the counted GPUs, in MiB, and whence.
fn gpu_memory(probe: &Probe, survey: &Survey) -> Option<(u64, MemorySource)> {
    let kfd = || memory::kfd_vram_mib(probe, survey).map(|m| (m, MemorySource::AmdgpuSysfs));
    let smi = || memory::nvidia_smi_mib().map(|m| (m, MemorySource::NvidiaSmi));
    match survey.source()? {
        Source::Kfd => kfd(),
        Source::Nvidia => smi(),
        // A count given by hand: whatever the host shows.
        Source::TfGpuCount | Source::JaxCount if survey.usable_kfd().next().is_some() => kfd(),
        Source::TfGpuCount | Source::JaxCount if survey.usable_nvidia().next().is_some() => smi(),
        _ => None,
    }
}

/// The text for `--list=bazelrc`; `pool`: the GPUs tests are given here
/// (a preset pool's, where its variable is set: a job's slice).
pub fn bazelrc(settings: &Settings, survey: &Survey, pool: Option<&Pool>) -> String {
    let probe = settings.probe();
    let preset = pool.and_then(|p| p.variable.map(|var| (var, p.ids.len() as u64)));
    let gpus = preset.map_or(u64::from(survey.count()), |(_, n)| n);
    let cpus = memory::online_cpus();
    let ram = memory::host_ram_gib(&probe);
    let ram_cap = ram.map(|g| (g / RAM_GIB_PER_TEST).max(1));
    let (per_test, per_test_from) = settings.per_test_mib();
    let slots_variable = settings.profile.slots_variable();
    let mut why = format!("# parallel_gpu_execute --list=bazelrc ({} profile): {gpus} GPU(s)", settings.profile.name());
    if let Some(source) = survey.source() {
        let _ = write!(why, " ({})", source.name());
    }
    if let Some((var, _)) = preset {
        let _ = write!(why, " in the pool of {var}");
    }
    let mut lines = String::new();
    let jobs = if gpus == 0 {
        why.push_str("; no GPU: the tests run without one");
        cpus
    } else {
        let tpu = survey.source().is_some_and(|s| settings.tpu_chips(s));
        let per_gpu = if tpu && settings.slots_unset_or_auto() {
            why.push_str("; a TPU chip serves one test (its VFIO group opens once)");
            1
        } else if settings.slots_unset_or_auto() {
            let memory = gpu_memory(&probe, survey);
            match memory {
                Some((mib, from)) => {
                    let _ = write!(why, "; {mib} MiB each (the smallest; {})", from.name());
                }
                None => {
                    let _ = write!(
                        why,
                        "; their memory cannot be read here (amdgpu sysfs, or nvidia-smi on PATH), so {} tests per GPU",
                        memory::UNKNOWN_TESTS_PER_GPU
                    );
                }
            }
            let _ = write!(why, "; {per_test} MiB a test ({per_test_from})");
            let per_gpu = memory::tests_per_gpu(memory.map(|m| m.0), per_test);
            if memory.is_some_and(|m| m.0 / per_test.max(1) > per_gpu) {
                let _ = write!(why, "; at most {} tests per GPU", memory::MAX_TESTS_PER_GPU);
            }
            per_gpu
        } else {
            let _ = write!(why, "; {slots_variable}={} as set", settings.tests_per_gpu);
            u64::from(settings.tests_per_gpu)
        };
        let _ = writeln!(lines, "test --test_env={slots_variable}={per_gpu}");
        cpus.min(gpus.saturating_mul(per_gpu))
    };
    let _ = write!(why, "; {cpus} CPU(s)");
    let jobs = match (ram, ram_cap) {
        (Some(gib), Some(cap)) => {
            let _ = write!(why, "; {gib} GiB RAM / {RAM_GIB_PER_TEST} GiB a test = {cap}");
            jobs.min(cap)
        }
        _ => {
            why.push_str("; RAM unknown (no MemTotal in /proc/meminfo)");
            jobs
        }
    };
    format!("{why}\ntest --local_test_jobs={}\n{lines}", jobs.max(1))
}
