//! `--lock-names=physical`: lock files named by each GPU's stable identity
//! instead of its index, for containers that share one lock directory
//! mounted from the host. A container that sees physical GPUs 2 and 3
//! calls them 0 and 1; by index it would double-book with a container that
//! sees 0 and 1, and wait for GPUs it does not even share.
//!
//! - KFD: `uid-<unique_id>` (the node's `unique_id` as KFD prints it) when
//!   it is not 0, else `pci-<domain>.<bus>.<device>.<function>` from
//!   `domain` and `location_id`.
//! - NVIDIA: the `GPU UUID` from `information` (`GPU-...`, as `nvidia-smi -L`
//!   shows it). The test is then given the UUIDs in `CUDA_VISIBLE_DEVICES`,
//!   which CUDA resolves whatever its device order. A GPU known only by its
//!   device node has no identity.
//! - Two GPUs with the same identity (partitions of one device reporting
//!   one location) get `.1`, `.2`, ... in node order after the first.
//!
//! When the count comes from `TF_GPU_COUNT` or `rocminfo`, or the pool is
//! preset (`ROCR_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES`), there is no
//! hardware identity: the wrapper falls back to index names with one note.

use crate::hardware::Probe;
use crate::hardware::gpu_count::Source;
use crate::hardware::survey::{KfdGpu, Survey};
use crate::prelude::*;

fn kfd_identity(g: &KfdGpu) -> String {
    if g.props.unique_id != 0 {
        return format!("uid-{}", g.props.unique_id);
    }
    format!("pci-{}", g.pci().replace(':', "."))
}

/// Appends `.N` to repeated names, in order.
fn dedupe(names: &mut [String]) {
    let originals = names.to_vec();
    for i in 1..names.len() {
        let k = originals[..i].iter().filter(|n| **n == originals[i]).count();
        if k > 0 {
            names[i] = format!("{}.{k}", originals[i]);
        }
    }
}

/// Each GPU's physical name, in the order the count gave them.
pub struct Identities {
    pub names: Vec<String>,
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
    dedupe(&mut names);
    Ok(Identities { names, use_as_ids })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_get_suffixes() {
        let mut names: Vec<String> = ["a", "b", "a", "a", "c"].iter().map(|s| s.to_string()).collect();
        dedupe(&mut names);
        assert_eq!(names, ["a", "b", "a.1", "a.2", "c"]);
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
    }
}
