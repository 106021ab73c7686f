//! What amdgpu tells of each GPU beyond the topology: the processes that
//! use it and its memory errors. Read for `--status`, for the warning about
//! a GPU in use outside the lock protocol, and for
//! `PARALLEL_GPU_EXECUTE_UNHEALTHY`; never on the way to a free slot
//! unless asked. This may allocate.
//!
//! - KFD lists every process with a KFD context under
//!   `/sys/class/kfd/kfd/proc/<pid>/`, with a `vram_<gpu_id>` file per GPU
//!   it has a context on, giving the bytes of that GPU's memory it holds
//!   (linux `drivers/gpu/drm/amd/amdkfd/kfd_process.c`,
//!   `kfd_procfs_add_vram_usage`). The `gpu_id` is the topology node's
//!   `gpu_id` file. The PIDs are the host's: in a PID namespace of its own,
//!   they name other processes or none.
//! - amdgpu's RAS counters, `/sys/class/drm/renderD<minor>/device/ras/<block>_err_count`,
//!   count the uncorrectable (`ue: N`) and correctable (`ce: N`) errors of
//!   each hardware block since the driver loaded. A GPU with any
//!   uncorrectable error is unhealthy, as AMD's device metrics exporter
//!   judges with its default thresholds (see docs/operations.md).

use crate::hardware::survey::KfdGpu;
use crate::prelude::*;
use crate::sys::dirs::{for_each_entry, for_each_line_at, open_dir, open_dir_at, with_host_path};
use core::ops::ControlFlow;
use wrapper_common::numbers::parse_u64;

/// KFD's process directory.
const KFD_PROC: &[u8] = b"/sys/class/kfd/kfd/proc";

/// One process KFD lists, with the GPUs (`gpu_id`) it has a context on and
/// the bytes of memory it holds on each (`None`: unreadable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KfdProcess {
    pub pid: i64,
    pub vram: Vec<(u64, Option<u64>)>,
}

/// Whether `<sysroot>/sys/class/kfd/kfd/proc` lists any process: one
/// failed `open` where it does not exist.
pub fn any_kfd_process(sysroot: &[u8]) -> bool {
    let Some(Ok(dir)) = with_host_path(sysroot, KFD_PROC, None, open_dir) else { return false };
    matches!(for_each_entry(&dir, |_, _| ControlFlow::Break(())), Ok(Some(())))
}

/// The processes KFD lists; `None` when there is no such directory (not
/// amdgpu, or not visible here).
pub fn kfd_processes(sysroot: &[u8]) -> Option<Vec<KfdProcess>> {
    let dir = with_host_path(sysroot, KFD_PROC, None, open_dir)?.ok()?;
    let mut pids = Vec::new();
    let _ = for_each_entry(&dir, |name, _| {
        let name = name.to_bytes();
        if let Some(pid) = parse_u64(name).and_then(|p| i64::try_from(p).ok()) {
            pids.push(pid);
        }
        ControlFlow::<()>::Continue(())
    });
    crate::sys::sort::sort_by(&mut pids, &mut |a, b| a < b);
    let mut out = Vec::new();
    for pid in pids {
        let Ok(entry) = open_dir_at(&dir, &alloc::ffi::CString::new(pid.to_string()).unwrap_or_default()) else {
            continue;
        };
        let mut files = Vec::new();
        let _ = for_each_entry(&entry, |name, _| {
            if let Some(id) = name.to_bytes().strip_prefix(b"vram_").and_then(parse_u64) {
                files.push((id, name.to_bytes().to_vec()));
            }
            ControlFlow::<()>::Continue(())
        });
        let mut vram = Vec::new();
        for (id, file) in files {
            let mut bytes = None;
            let _ = for_each_line_at::<64>(&entry, b".", &file, |line| bytes = bytes.or_else(|| parse_u64(line)));
            vram.push((id, bytes));
        }
        crate::sys::sort::sort_by(&mut vram, &mut |a, b| a < b);
        out.push(KfdProcess { pid, vram });
    }
    Some(out)
}

/// A topology node's `gpu_id`, the number KFD's process files name it by.
pub fn gpu_id(sysroot: &[u8], node: u64) -> Option<u64> {
    let nodes = with_host_path(sysroot, crate::hardware::kfd::TOPOLOGY, None, open_dir)?.ok()?;
    let mut id = None;
    for_each_line_at::<64>(&nodes, node.to_string().as_bytes(), b"gpu_id", |line| id = id.or_else(|| parse_u64(line)))
        .ok()?;
    id.filter(|&id| id != 0)
}

/// The blocks whose RAS counters show uncorrectable errors, with their
/// counts, in name order; `None` when the GPU has no RAS counters to read.
pub fn uncorrectable_errors(sysroot: &[u8], g: &KfdGpu) -> Option<Vec<(String, u64)>> {
    let crate::hardware::kfd::RenderMinor::Value(minor) = g.props.drm_render_minor else { return None };
    let path = format!("/sys/class/drm/renderD{minor}/device/ras");
    let dir = with_host_path(sysroot, path.as_bytes(), None, open_dir)?.ok()?;
    let mut files = Vec::new();
    let _ = for_each_entry(&dir, |name, _| {
        if let Some(block) = name.to_bytes().strip_suffix(b"_err_count") {
            files.push((String::from_utf8_lossy(block).into_owned(), name.to_bytes().to_vec()));
        }
        ControlFlow::<()>::Continue(())
    });
    crate::sys::sort::sort_by(&mut files, &mut |a, b| a < b);
    let mut out = Vec::new();
    for (block, file) in files {
        let mut ue = 0;
        let _ = for_each_line_at::<256>(&dir, b".", &file, |line| {
            if let Some(n) = line.strip_prefix(b"ue:").and_then(|n| parse_u64(n.trim_ascii())) {
                ue = n;
            }
        });
        if ue > 0 {
            out.push((block, ue));
        }
    }
    Some(out)
}

/// `"ok"`, or why the GPU is unhealthy: `uncorrectable memory errors
/// (RAS): umc 3, gfx 1`.
pub fn health(sysroot: &[u8], g: &KfdGpu) -> String {
    match uncorrectable_errors(sysroot, g) {
        Some(blocks) if !blocks.is_empty() => {
            let list: Vec<String> = blocks.iter().map(|(b, n)| format!("{b} {n}")).collect();
            format!("uncorrectable memory errors (RAS): {}", list.join(", "))
        }
        _ => "ok".to_string(),
    }
}

/// A usable KFD GPU with the names a lock file may give it.
#[derive(Debug, Clone)]
pub struct NamedGpu {
    /// Its index among the usable GPUs, as ROCr numbers it (`--lock-names=index`).
    pub index: String,
    /// Its physical identity (`--lock-names=physical`).
    pub identity: String,
    pub gpu: KfdGpu,
    pub gpu_id: Option<u64>,
}

/// The usable KFD GPUs, in ROCr's order; none when the GPUs are not
/// counted from KFD (`TF_GPU_COUNT`, NVIDIA, rocminfo).
pub fn named_gpus(probe: &crate::hardware::Probe) -> Vec<NamedGpu> {
    let survey = crate::hardware::survey::Survey::take(probe);
    if survey.source() != Some(crate::hardware::gpu_count::Source::Kfd) {
        return Vec::new();
    }
    survey
        .usable_kfd()
        .enumerate()
        .map(|(k, g)| NamedGpu {
            index: k.to_string(),
            identity: crate::hardware::identity::kfd_identity(g),
            gpu: g.clone(),
            gpu_id: gpu_id(probe.sysroot, g.node),
        })
        .collect()
}

/// The GPU that lock files call `name`.
pub fn find<'a>(gpus: &'a [NamedGpu], name: &[u8]) -> Option<&'a NamedGpu> {
    gpus.iter().find(|g| g.index.as_bytes() == name || g.identity.as_bytes() == name)
}
