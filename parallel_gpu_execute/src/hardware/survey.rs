//! Everything the counting sources see, device by device, for `--list`
//! (and for naming locks by a GPU's physical identity). The same scans and
//! the same rules as the hot path (`gpu_count`), but kept, sorted and
//! indexed; this may allocate.

use crate::hardware::Probe;
use crate::hardware::devnode::Access;
use crate::hardware::gpu_count::MAX_GPU_COUNT;
use crate::hardware::gpu_count::{Seen, Source, choose, variable_source};
use crate::hardware::kfd::{self, NodeProperties};
use crate::hardware::nvidia::{self, Information};
use crate::hardware::rocminfo;
use crate::hardware::tpu::{self, NodeState};
use crate::prelude::*;
use crate::profile::Profile;

/// One AMD GPU node of the KFD topology.
#[derive(Debug, Clone)]
pub struct KfdGpu {
    pub node: u64,
    pub props: NodeProperties,
    pub access: Access,
}

impl KfdGpu {
    /// The PCI address from `domain` and `location_id` (bus << 8 | dev << 3 | fn).
    pub fn pci(&self) -> String {
        let l = self.props.location_id;
        format!("{:04x}:{:02x}:{:02x}.{:x}", self.props.domain, (l >> 8) & 0xff, (l >> 3) & 0x1f, l & 7)
    }
}

/// One NVIDIA GPU of the driver's `/proc` tree, or of `/dev` alone.
#[derive(Debug, Clone)]
pub struct NvidiaGpu {
    pub entry: Option<String>,
    pub info: Option<Information>,
    pub minor: Option<u64>,
    pub access: Option<Access>,
}

impl NvidiaGpu {
    pub fn excluded(&self) -> bool {
        self.info.as_ref().is_some_and(|i| i.excluded)
    }

    pub fn usable(&self) -> bool {
        !self.excluded() && self.access.is_some_and(Access::usable)
    }
}

/// One TPU chip on the PCI bus.
#[derive(Debug, Clone)]
pub struct TpuChip {
    pub pci: String,
    pub generation: &'static str,
    pub node: Option<String>,
    pub state: NodeState,
}

impl TpuChip {
    pub fn usable(&self) -> bool {
        self.state == NodeState::Usable
    }
}

/// What the host shows, and what the wrapper would do with it.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    /// `TF_GPU_COUNT`, when set: no hardware is looked at.
    pub tf_gpu_count: Option<u32>,
    pub kfd: Vec<KfdGpu>,
    /// Why `/dev/kfd` cannot be used, when the topology shows a GPU and it
    /// cannot: then no KFD GPU is usable.
    pub kfd_device: Option<rustix::io::Errno>,
    pub nvidia: Vec<NvidiaGpu>,
    /// TPU chips (jax profile), in PCI order.
    pub tpu: Vec<TpuChip>,
    /// The GPU agents' names, when rocminfo was run.
    pub rocminfo: Option<Vec<String>>,
    /// The count and the source it came from (`None`: no GPU).
    pub chosen: Option<(u32, Source)>,
}

impl Survey {
    pub fn take(probe: &Probe) -> Survey {
        let mut survey = Survey::default();
        if let Some(n) = probe.count_variable {
            survey.tf_gpu_count = Some(n);
            survey.chosen = Some((n, variable_source(probe.profile)));
            return survey;
        }
        let sysroot = probe.sysroot;
        if probe.profile == Profile::Jax {
            let census = tpu::census(sysroot, |chip| {
                survey.tpu.push(TpuChip {
                    pci: String::from_utf8_lossy(chip.pci).into_owned(),
                    generation: chip.generation,
                    node: chip.node.as_ref().map(|n| String::from_utf8_lossy(n.as_bytes()).into_owned()),
                    state: chip.state,
                });
            });
            if let Some(c) = census {
                crate::sys::sort::sort_by(&mut survey.tpu, &mut |a, b| a.pci < b.pci);
                survey.chosen = Some((c.usable, Source::Tpu));
                return survey;
            }
        }
        let kfd = kfd::census(sysroot, |node| {
            if node.props.is_gpu() || node.access == Access::Withheld {
                let number = wrapper_common::numbers::parse_u64(node.name).unwrap_or(u64::MAX);
                survey.kfd.push(KfdGpu { node: number, props: node.props, access: node.access });
            }
        });
        let nvidia = nvidia::census(sysroot, |gpu| {
            survey.nvidia.push(NvidiaGpu {
                entry: gpu.entry.map(|e| String::from_utf8_lossy(e).into_owned()),
                info: gpu.info.cloned(),
                minor: gpu.minor,
                access: gpu.access,
            });
        });
        crate::sys::sort::sort_by(&mut survey.kfd, &mut |a, b| a.node < b.node);
        survey.kfd_device = kfd.and_then(|c| c.kfd_device);
        // CUDA_DEVICE_ORDER=PCI_BUS_ID order: by bus id, else by minor.
        crate::sys::sort::sort_by(&mut survey.nvidia, &mut |a, b| (&a.entry, a.minor) < (&b.entry, b.minor));
        survey.chosen = choose(probe.vendor, &Seen { kfd, nvidia });
        if survey.chosen.is_none() {
            let mut names = Vec::new();
            if let Some(n) = rocminfo::count_gpus(|name| names.push(String::from_utf8_lossy(name).into_owned())) {
                let n = u32::try_from(n).unwrap_or(u32::MAX).min(MAX_GPU_COUNT);
                survey.chosen = Some((n, Source::Rocminfo));
                survey.rocminfo = Some(names);
            }
        }
        survey
    }

    pub fn count(&self) -> u32 {
        self.chosen.map_or(0, |(n, _)| n)
    }

    pub fn source(&self) -> Option<Source> {
        self.chosen.filter(|&(n, _)| n > 0).map(|(_, s)| s)
    }

    /// Whether the runtime can use this KFD GPU: its render node, and `/dev/kfd`.
    pub fn kfd_usable(&self, g: &KfdGpu) -> bool {
        g.access.usable() && self.kfd_device.is_none()
    }

    /// The usable KFD GPUs, in index order.
    pub fn usable_kfd(&self) -> impl Iterator<Item = &KfdGpu> {
        self.kfd.iter().filter(|g| self.kfd_usable(g))
    }

    /// The usable NVIDIA GPUs, in index order.
    pub fn usable_nvidia(&self) -> impl Iterator<Item = &NvidiaGpu> {
        self.nvidia.iter().filter(|g| g.usable())
    }

    /// The distinct gfx targets of the usable AMD GPUs (KFD, or rocminfo's
    /// agents when it was the source), in order of first appearance.
    pub fn gfx_targets(&self) -> Vec<String> {
        let mut targets: Vec<String> = Vec::new();
        let from_kfd = self.usable_kfd().filter_map(|g| g.props.gfx_target()).map(|t| t.to_string());
        let from_rocminfo = self.rocminfo.iter().flatten().filter(|n| n.starts_with("gfx")).cloned();
        for t in from_kfd.chain(from_rocminfo) {
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
        targets
    }
}
