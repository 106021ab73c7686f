//! How many GPUs this host gives the test, and from which source:
//! `TF_GPU_COUNT`; else the AMD KFD topology and the NVIDIA driver, both
//! looked at; else a `rocminfo` in the runfiles; otherwise none.
//!
//! **Mixed hosts** (usable AMD and NVIDIA GPUs at once, e.g. a Ryzen 7000
//! desktop, whose CPU has an integrated GPU, with an RTX card): without a
//! chosen vendor the NVIDIA GPUs win, in cuda mode. On every such host
//! published so far the AMD GPU is the CPU's integrated display chip, and a
//! test that wants it says so with `--vendor=rocm`, which takes the AMD GPUs
//! (in rocm mode); `--vendor=cuda` takes the NVIDIA ones. A source whose
//! GPUs this process cannot use does not hide the other: a container given
//! only the NVIDIA devices of such a desktop gets its NVIDIA GPU. With one
//! vendor only, a source that sees GPUs but may use none of them still
//! answers (zero: the test runs without a GPU, `rocminfo` is not run).
//!
//! The sysfs sources cost a few system calls and no allocation; rocminfo is
//! only searched for (and run) when neither saw any GPU.

use crate::hardware::Probe;
use crate::hardware::devnode::{Access, Refusal};
use crate::hardware::{kfd, nvidia, rocminfo, tpu};
use crate::profile::{Profile, Vendor};

/// The source of a count given by the profile's variable.
/// More GPUs than any host has; a larger `TF_GPU_COUNT` is a typo.
pub const MAX_GPU_COUNT: u32 = 4096;

pub fn variable_source(profile: Profile) -> Source {
    match profile {
        Profile::Xla => Source::TfGpuCount,
        Profile::Jax => Source::JaxCount,
    }
}
use wrapper_common::{StackPath, diag};

/// Where the count came from; it also picks the default vendor mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    TfGpuCount,
    /// `JAX_ACCELERATOR_COUNT` (jax profile).
    JaxCount,
    /// TPU chips on the PCI bus (jax profile).
    Tpu,
    Kfd,
    Nvidia,
    Rocminfo,
}

impl Source {
    pub fn default_vendor(self) -> Vendor {
        match self {
            Source::Kfd | Source::Rocminfo => Vendor::Rocm,
            Source::Nvidia => Vendor::Cuda,
            Source::TfGpuCount | Source::JaxCount | Source::Tpu => Vendor::Classic,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Source::TfGpuCount => "TF_GPU_COUNT",
            Source::JaxCount => "JAX_ACCELERATOR_COUNT",
            Source::Tpu => "tpu",
            Source::Kfd => "kfd",
            Source::Nvidia => "nvidia",
            Source::Rocminfo => "rocminfo",
        }
    }
}

/// What the two sysfs sources saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub kfd: Option<kfd::Census>,
    pub nvidia: Option<nvidia::Census>,
}

impl Seen {
    /// How many of `source`'s GPUs refused this user.
    fn denied(&self, source: Source) -> u32 {
        match source {
            Source::Kfd => self.kfd.map_or(0, |c| c.denied),
            Source::Nvidia => self.nvidia.map_or(0, |c| c.denied),
            _ => 0,
        }
    }
}

/// The mixed-host rule (see the module documentation): which sysfs source
/// answers, with its usable count; `None` when neither saw a GPU.
pub fn choose(vendor: Option<Vendor>, seen: &Seen) -> Option<(u32, Source)> {
    let kfd = seen.kfd.map(|c| (c.usable, Source::Kfd));
    let nvidia = seen.nvidia.map(|c| (c.usable, Source::Nvidia));
    let preferred = match vendor {
        Some(Vendor::Rocm) => kfd,
        Some(Vendor::Cuda) => nvidia,
        _ => None,
    };
    let usable = |s: Option<(u32, Source)>| s.filter(|&(n, _)| n > 0);
    preferred.or(usable(nvidia)).or(usable(kfd)).or(kfd).or(nvidia)
}

/// The GPU count and its source (`None` when nothing answered: zero GPUs).
/// Warns (one line) when GPUs were left out because this user may not open
/// their device nodes, or because `/dev/kfd` cannot be used although their
/// render nodes opened.
pub fn count(probe: &Probe) -> (u32, Option<Source>) {
    if let Some(n) = probe.count_variable {
        return (n, Some(variable_source(probe.profile)));
    }
    if probe.profile == Profile::Jax {
        if let Some(c) = tpu::census(probe.sysroot, |_| {}) {
            return (c.usable, Some(Source::Tpu));
        }
    }
    let seen = Seen { kfd: kfd::census(probe.sysroot, |_| {}), nvidia: nvidia::census(probe.sysroot, |_| {}) };
    if let Some((n, source)) = choose(probe.vendor, &seen) {
        let denied = seen.denied(source);
        match seen.kfd.filter(|_| source == Source::Kfd) {
            Some(kfd::Census { kfd_device: Some(errno), gated: gated @ 1.., .. }) => {
                warn_kfd_device(probe.sysroot, errno, gated)
            }
            _ if denied > 0 => warn_denied(probe.sysroot, source, &seen, denied),
            _ => {}
        }
        return (n, Some(source));
    }
    if let Some(n) = rocminfo::count_gpus(|_| {}) {
        // Hostile output cannot make the pool absurdly large.
        let n = u32::try_from(n).unwrap_or(u32::MAX).min(MAX_GPU_COUNT);
        return (n, Some(Source::Rocminfo));
    }
    (0, None)
}

/// One warning line for the chosen source's `denied` (at least one) GPUs
/// whose device node exists but refused this user: which node, the error,
/// and what would let it (the group it needs, or the device given to the
/// container). Out of line and called only when there is something to say:
/// its paths stay off the stack of every other run.
#[cold]
#[inline(never)]
fn warn_denied(sysroot: &[u8], source: Source, seen: &Seen, denied: u32) {
    // The source's first refusal, and how that source names a device node.
    type NodePath = fn(&[u8], u64) -> Option<StackPath>;
    let (first, node_path): (_, NodePath) = match source {
        Source::Kfd => (seen.kfd.and_then(|c| c.first_denied), kfd::render_node_path),
        Source::Nvidia => (seen.nvidia.and_then(|c| c.first_denied), nvidia::device_node_path),
        _ => return,
    };
    let Some((minor, errno)) = first else { return };
    let Some(path) = node_path(sysroot, minor) else { return };
    let why = Refusal { sysroot, node: path.as_cstr(), errno };
    diag::report(
        crate::TOOL,
        format_args!(
            "warning: cannot open {}: {}: {why}; {} more GPU(s) likewise; not counting them",
            diag::Bytes(path.as_bytes()),
            diag::Os(errno),
            denied - 1
        ),
    );
}

/// One warning line for GPUs whose render node opened while `/dev/kfd`,
/// which the ROCm runtime needs for any of them, cannot be used (a
/// container given its render nodes but not `/dev/kfd`). Out of line, as
/// [`warn_denied`].
#[cold]
#[inline(never)]
fn warn_kfd_device(sysroot: &[u8], errno: rustix::io::Errno, gated: u32) {
    let Some(path) = kfd::kfd_device_path(sysroot) else { return };
    let shown = diag::Bytes(path.as_bytes());
    let then = "the ROCm runtime needs it for every AMD GPU, so none of the";
    let what = "GPU(s) whose render node opened is counted";
    if Access::refused(errno) == Access::Missing {
        diag::report(
            crate::TOOL,
            format_args!(
                "warning: {shown} does not exist here: {then} {gated} {what} (a container needs --device=/dev/kfd as well as its render nodes)"
            ),
        );
    } else {
        let why = Refusal { sysroot, node: path.as_cstr(), errno };
        diag::report(
            crate::TOOL,
            format_args!("warning: cannot open {shown}: {}: {why}; {then} {gated} {what}", diag::Os(errno)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kfd(usable: u32) -> Option<kfd::Census> {
        Some(kfd::Census { seen: usable.max(1), usable, ..Default::default() })
    }

    fn nv(usable: u32) -> Option<nvidia::Census> {
        Some(nvidia::Census { seen: usable.max(1), usable, ..Default::default() })
    }

    #[test]
    fn one_vendor_hosts_are_unchanged() {
        assert_eq!(choose(None, &Seen { kfd: kfd(8), nvidia: None }), Some((8, Source::Kfd)));
        assert_eq!(choose(None, &Seen { kfd: None, nvidia: nv(2) }), Some((2, Source::Nvidia)));
        // Seen but not usable: still answers, with zero.
        assert_eq!(choose(None, &Seen { kfd: kfd(0), nvidia: None }), Some((0, Source::Kfd)));
        assert_eq!(choose(None, &Seen { kfd: None, nvidia: nv(0) }), Some((0, Source::Nvidia)));
        assert_eq!(choose(None, &Seen::default()), None);
        // A vendor whose hardware is absent does not hide the other.
        assert_eq!(choose(Some(Vendor::Cuda), &Seen { kfd: kfd(4), nvidia: None }), Some((4, Source::Kfd)));
    }

    #[test]
    fn mixed_hosts() {
        let desktop = Seen { kfd: kfd(1), nvidia: nv(1) };
        assert_eq!(choose(None, &desktop), Some((1, Source::Nvidia)));
        assert_eq!(choose(Some(Vendor::Classic), &desktop), Some((1, Source::Nvidia)));
        assert_eq!(choose(Some(Vendor::Rocm), &desktop), Some((1, Source::Kfd)));
        assert_eq!(choose(Some(Vendor::Cuda), &desktop), Some((1, Source::Nvidia)));
        // A container given only the NVIDIA devices: the iGPU is seen, not usable.
        let container = Seen { kfd: kfd(0), nvidia: nv(1) };
        assert_eq!(choose(None, &container), Some((1, Source::Nvidia)));
        // And one given only the AMD devices.
        let amd_only = Seen { kfd: kfd(1), nvidia: nv(0) };
        assert_eq!(choose(None, &amd_only), Some((1, Source::Kfd)));
        // --vendor=rocm on a host whose AMD GPU is not usable: zero, in rocm mode.
        assert_eq!(choose(Some(Vendor::Rocm), &container), Some((0, Source::Kfd)));
    }
}
