//! `--lock-names=physical`: lock files named by each GPU's stable identity
//! instead of its index, for containers that share one lock directory
//! mounted from the host. A container that sees physical GPUs 2 and 3
//! calls them 0 and 1; by index it would double-book with a container that
//! sees 0 and 1, and wait for GPUs it does not even share.
//!
//! - KFD: `uid-<unique_id>` (the node's `unique_id` as KFD prints it) when
//!   it is not 0, else `pci-<domain>.<bus>.<device>.<function>` from
//!   `domain` and `location_id`. The partitions of one MI300X or MI308X in
//!   CPX (or DPX, QPX) mode share the device's `unique_id`; what tells them
//!   apart is the PCI function of their `location_id`, 0 for the first
//!   partition and 1, 2, ... for the others (ROCm/k8s-device-plugin
//!   ed764684, `testdata/topo-mi300-cpx`: location_id 1280-1287 under one
//!   unique_id). A node whose function is not 0 is `uid-<unique_id>.<function>`.
//!   The name depends on the node's own properties only, so every
//!   container names a partition alike, whichever partitions it can see.
//! - NVIDIA: the `GPU UUID` from `information` (`GPU-...`, as `nvidia-smi -L`
//!   shows it). The test is then given the UUIDs in `CUDA_VISIBLE_DEVICES`,
//!   which CUDA resolves whatever its device order. A GPU known only by its
//!   device node has no identity.
//! - Two GPUs that still have the same identity (no known hardware does)
//!   get `#1`, `#2`, ... in node order after the first; unlike the names
//!   above, these depend on which GPUs this container sees, so the note
//!   says so.
//!
//! When the count comes from `TF_GPU_COUNT` or `rocminfo`, there is no
//! hardware identity: the wrapper falls back to index names with one note.
//! A preset pool (`ROCR_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES`) is named
//! by the GPUs its ids stand for ([`of_preset`]); where that cannot be told,
//! the test is refused (exit 2) with the fix, since index names there would
//! book a GPU that another container knows by another index.

use crate::hardware::Probe;
use crate::hardware::gpu_count::Source;
use crate::hardware::nvidia::Information;
use crate::hardware::survey::{KfdGpu, Survey};
use crate::prelude::*;
use wrapper_common::diag;

pub fn kfd_identity(g: &KfdGpu) -> String {
    if g.props.unique_id == 0 {
        return format!("pci-{}", g.pci().replace(':', "."));
    }
    match g.props.location_id & 0x7 {
        0 => format!("uid-{}", g.props.unique_id),
        function => format!("uid-{}.{function}", g.props.unique_id),
    }
}

/// Appends `.dupN` to repeated names, in order; returns the first name
/// repeated, if any. (`.dup`, not `.N`: `uid-<id>.N` names partition N.)
fn dedupe(names: &mut [String]) -> Option<String> {
    let originals = names.to_vec();
    let mut repeated = None;
    for i in 1..names.len() {
        let k = originals[..i].iter().filter(|n| **n == originals[i]).count();
        if k > 0 {
            names[i] = format!("{}.dup{k}", originals[i]);
            repeated.get_or_insert_with(|| originals[i].clone());
        }
    }
    repeated
}

/// Each GPU's physical name, in the order the count gave them.
pub struct Identities {
    pub names: Vec<String>,
    /// KFD: each GPU's `unique_id`, to match a `GPU-...` id as ROCr does.
    pub uids: Vec<u64>,
    /// NVIDIA: the names are the ids the test is given (`GPU-<UUID>`).
    pub use_as_ids: bool,
}

/// The physical names of the counted GPUs (repeats numbered), or why
/// there are none.
pub fn physical(probe: &Probe, source: Source) -> Result<Identities, String> {
    let survey = match source {
        Source::Kfd | Source::Nvidia => Survey::take(probe),
        Source::TfGpuCount | Source::JaxCount => {
            return Err(format!("the count comes from {}", source.name()));
        }
        Source::Tpu => return Err("TPU chips have no identity here".to_string()),
        Source::Rocminfo => return Err("the count comes from rocminfo".to_string()),
    };
    let (mut names, use_as_ids) = match source {
        Source::Kfd => (survey.usable_kfd().map(kfd_identity).collect::<Vec<_>>(), false),
        _ => {
            let mut uuids = Vec::new();
            for g in survey.usable_nvidia() {
                match g.info.as_ref().map(|i| i.uuid.as_bytes()).filter(|u| !u.is_empty()) {
                    Some(u) => uuids.push(String::from_utf8_lossy(u).into_owned()),
                    None => return Err("a GPU has no GPU UUID in /proc/driver/nvidia".to_string()),
                }
            }
            (uuids, true)
        }
    };
    if let Some(name) = dedupe(&mut names) {
        diag::report(
            crate::TOOL,
            format_args!(
                "note: --lock-names=physical: several GPUs are {name}; they are numbered in the order this container sees them, which another container sharing the lock directory may not"
            ),
        );
    }
    let uids = if use_as_ids { Vec::new() } else { survey.usable_kfd().map(|g| g.props.unique_id).collect() };
    Ok(Identities { names, uids, use_as_ids })
}

/// The physical names of a preset pool's ids (`ROCR_VISIBLE_DEVICES`,
/// `CUDA_VISIBLE_DEVICES`), from the names of every GPU this container
/// sees, in the runtime's order (`all`); or why they cannot be told.
///
/// - ROCm: an index `k` is the `k`-th GPU ROCr enumerates, which is the
///   `k`-th usable KFD node; `GPU-<hex>` is the device whose UUID it
///   begins, as ROCr matches it ([`rocr_uuid`]).
/// - CUDA: MIG paths are physical already (the caller keeps them), and
///   `GPU-<UUID>` too, made whole where the driver shows the GPUs'
///   ([`cuda_uuid`]); an index is the `k`-th GPU in PCI bus order only under
///   `CUDA_DEVICE_ORDER=PCI_BUS_ID` (CUDA's default order is fastest first).
pub fn of_preset(all: &Identities, ids: &[&[u8]], rocm: bool) -> Result<Vec<String>, String> {
    let mut names = Vec::with_capacity(ids.len());
    for &id in ids {
        let text = String::from_utf8_lossy(id);
        let index = wrapper_common::numbers::parse_u64(id);
        let name = if rocm {
            match index {
                Some(k) => all.names.get(k as usize).cloned().ok_or_else(|| {
                    format!("it names GPU {k}, but this container sees {} usable KFD GPU(s)", all.names.len())
                })?,
                None => all.names[rocr_uuid(&all.uids, id)?].clone(),
            }
        } else if index.is_none() {
            cuda_uuid(&all.names, &text)?
        } else if wrapper_common::env::var(b"CUDA_DEVICE_ORDER") == Some(&b"PCI_BUS_ID"[..]) {
            let k = index.unwrap_or_default() as usize;
            all.names
                .get(k)
                .cloned()
                .ok_or_else(|| format!("it names GPU {k}, but this container sees {} NVIDIA GPU(s)", all.names.len()))?
        } else {
            return Err("CUDA numbers GPUs fastest first, not in an order the driver shows, unless CUDA_DEVICE_ORDER=PCI_BUS_ID".to_string());
        };
        names.push(name);
    }
    Ok(names)
}

/// A CUDA id that is no index, as its lock file names it: a `GPU-...` UUID,
/// or the beginning of one ([`cuda_matching`]), made the GPU's whole UUID
/// where the driver shows them (`uuids`); anything else (a MIG instance),
/// or without them, as it is.
fn cuda_uuid(uuids: &[String], text: &str) -> Result<String, String> {
    if uuids.is_empty() || !is_uuid(text.as_bytes()) {
        return Ok(text.to_string());
    }
    let matching = cuda_matching(uuids.iter().map(|u| u.as_bytes()), text.as_bytes());
    match matching[..] {
        [k] => Ok(uuids[k].clone()),
        [] => Err(format!("no NVIDIA GPU this container sees has a UUID that begins {text}")),
        _ => Err(format!("the UUIDs of {} GPUs begin {text}", matching.len())),
    }
}

/// The places among `uuids` (the GPUs' `GPU-...` UUIDs) of those that the
/// UUID `id` begins (none for `GPU-` alone), as CUDA takes a UUID or a
/// prefix of one. In either case: where CUDA reads another case, that is
/// the GPU; where it does not, the test sees none, and no GPU is booked
/// under two lock files.
fn cuda_matching<'a>(uuids: impl Iterator<Item = &'a [u8]>, id: &[u8]) -> Vec<usize> {
    let begins = |u: &[u8]| id.len() > 4 && u.len() >= id.len() && u[..id.len()].eq_ignore_ascii_case(id);
    uuids.enumerate().filter(|&(_, u)| begins(u)).map(|(k, _)| k).collect()
}

/// Whether `id` is a GPU UUID, as ROCr and CUDA read one: `GPU-` in
/// either case.
pub fn is_uuid(id: &[u8]) -> bool {
    id.get(..4).is_some_and(|p| p.eq_ignore_ascii_case(b"GPU-"))
}

/// The place among `uids` (the usable KFD GPUs' `unique_id`s, in ROCr's
/// order) of the GPU that ROCr takes the UUID `id` for. ROCr upper-cases
/// it and takes the one GPU whose `GPU-<unique_id as 16 hex digits>` (none
/// for a `unique_id` of 0) it begins, for an id of 5 to 20 characters;
/// any other id ends its list (ROCm/ROCR-Runtime
/// `runtime/hsa-runtime/core/runtime/amd_filter_device.cpp`,
/// `RvdFilter::ProcessUuidToken` and `BuildDeviceUuidList`, at cdbe554a).
fn rocr_uuid(uids: &[u64], id: &[u8]) -> Result<usize, String> {
    let text = String::from_utf8_lossy(id);
    if !is_uuid(id) {
        return Err(format!("'{text}' is neither an index nor GPU-<hex unique_id>"));
    }
    let token = text.to_ascii_uppercase();
    if !(5..=20).contains(&token.len()) {
        return Err(format!("'{text}' is not GPU- and 1 to 16 hex digits"));
    }
    let uuid = |uid: u64| format!("GPU-{uid:016X}");
    let matching: Vec<usize> = (0..uids.len()).filter(|&k| uids[k] != 0 && uuid(uids[k]).starts_with(&token)).collect();
    match matching[..] {
        [k] => Ok(k),
        [] => Err(format!(
            "no usable KFD GPU's UUID (GPU- and its unique_id in 16 hex digits, as ROCr matches it) begins with {token}"
        )),
        [k, ..] if matching.iter().all(|&m| uids[m] == uids[k]) => {
            Err(format!("{} GPUs (partitions of one device) have the UUID {}", matching.len(), uuid(uids[k])))
        }
        _ => {
            Err(format!("the UUIDs of {} GPUs begin with {token}: more of its digits tell them apart", matching.len()))
        }
    }
}

/// Index lock names (the default): the index a preset pool's id stands for
/// when it names a GPU by its UUID, so that its lock file is the one a job
/// without a pool (or with the index) takes for that GPU.
///
/// - ROCm: `GPU-<hex>` is the usable KFD node whose UUID it begins, as
///   ROCr matches it ([`rocr_uuid`]); an id that is neither an index nor
///   that form names no GPU ROCr shows. Partitions of one device share a
///   `unique_id`: such a UUID is refused.
/// - CUDA: `GPU-<UUID>` (or a prefix of it, [`cuda_matching`]) is the GPU of
///   `/proc/driver/nvidia` with that UUID, at its place in PCI bus order,
///   which is CUDA's order under `CUDA_DEVICE_ORDER=PCI_BUS_ID`. CUDA's
///   default puts the fastest GPU first and leaves the rest unspecified, so
///   without that setting the place is taken only where every GPU is one
///   model (the order is then the bus order, as `nvidia-smi` shows it).
///
/// `Ok(None)`: the id is not a UUID and keeps its own lock name (a CUDA MIG
/// instance, or any other id CUDA reads as it is).
pub fn index_of(survey: &Survey, id: &[u8], rocm: bool) -> Result<Option<usize>, String> {
    let text = String::from_utf8_lossy(id);
    if rocm {
        if !is_uuid(id) {
            return Err(format!("'{text}' is neither an index nor GPU-<hex unique_id>"));
        }
        if survey.kfd.is_empty() {
            return Err("this container sees no KFD topology (/sys/class/kfd)".to_string());
        }
        let uids: Vec<u64> = survey.usable_kfd().map(|g| g.props.unique_id).collect();
        return rocr_uuid(&uids, id).map(Some);
    }
    if !is_uuid(id) {
        return Ok(None);
    }
    if survey.nvidia.iter().all(|g| g.info.is_none()) {
        return Err("this container sees no /proc/driver/nvidia/gpus".to_string());
    }
    let usable: Vec<&Information> = survey.usable_nvidia().filter_map(|g| g.info.as_ref()).collect();
    let matching = cuda_matching(usable.iter().map(|i| i.uuid.as_bytes()), id);
    let k = match matching[..] {
        [k] => k,
        [] => return Err("no usable NVIDIA GPU has that UUID".to_string()),
        _ => return Err(format!("{} GPUs have UUIDs that start so", matching.len())),
    };
    let pci_order = wrapper_common::env::var(b"CUDA_DEVICE_ORDER") == Some(&b"PCI_BUS_ID"[..]);
    if !pci_order && usable.iter().any(|i| i.model.as_bytes() != usable[0].model.as_bytes()) {
        return Err("this host's GPUs are of several models, so CUDA's default order (fastest first) is not known without CUDA_DEVICE_ORDER=PCI_BUS_ID".to_string());
    }
    Ok(Some(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_get_suffixes() {
        let mut names: Vec<String> = ["a", "b", "a", "a", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(dedupe(&mut names).as_deref(), Some("a"));
        assert_eq!(names, ["a", "b", "a.dup1", "a.dup2", "c"]);
        let mut distinct: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        assert_eq!(dedupe(&mut distinct), None);
    }

    #[test]
    fn kfd_identities() {
        let mut g = KfdGpu {
            node: 2,
            props: crate::hardware::kfd::NodeProperties::parse(b"simd_count 4\nlocation_id 29440\ndomain 0\n"),
            access: crate::hardware::devnode::Access::Opened,
        };
        assert_eq!(kfd_identity(&g), "pci-0000.73.00.0");
        g.props.unique_id = 14073402507705256556;
        assert_eq!(kfd_identity(&g), "uid-14073402507705256556");
        // CPX partitions: one unique_id, the partition in the PCI function.
        g.props.location_id = 1283;
        assert_eq!(kfd_identity(&g), "uid-14073402507705256556.3");
        g.props.unique_id = 0;
        assert_eq!(kfd_identity(&g), "pci-0000.05.00.3");
    }
}
