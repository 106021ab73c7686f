//! AMD GPUs from the KFD topology (`/sys/class/kfd/kfd/topology/nodes/*/properties`),
//! counted the way the ROCm runtime enumerates them, without running anything.
//!
//! - A node is a GPU when its `simd_count` is greater than 0. That is ROCR's
//!   own rule (it makes a GPU agent of every node with SIMDs), and the AMD
//!   Kubernetes device plugin counts the same way. It covers kernels that
//!   predate `gfx_target_version` (MI25/Vega hosts, a Raven APU with a Fiji
//!   card: no such line at all), APUs whose CPU cores and GPU share one node
//!   (Raven: `cpu_cores_count 8`, `simd_count 44`), and leaves out nodes
//!   with a `gfx_target_version` but no SIMDs.
//! - A GPU counts only when `/dev/dri/renderD<drm_render_minor>` opens
//!   read-write, as ROCR requires: a container that was not given a GPU sees
//!   its node but has no render node for it (Kubernetes pods, `--device`
//!   lists). A `drm_render_minor` of 0 (or none: old kernels) names no render
//!   node; such a GPU counts unchecked, as ROCR takes it. A garbled minor
//!   cannot be checked and does not count.
//! - A render node that exists but cannot be opened (`EACCES`/`EPERM`: the
//!   user is not in the `render`/`video` group, or the container's device
//!   cgroup refuses it) does not count either; the caller warns about it
//!   (see [`Census::denied`]).
//! - No GPU counts unless `/dev/kfd` may be opened read-write: the runtime
//!   opens it before anything else, and without it enumerates no GPU at all
//!   (ROCm/ROCR-Runtime `libhsakmt/src/openclose.c`, `hsaKmtOpenKFD`: `open`
//!   with `O_RDWR`, failing with `HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED`).
//!   A container given its render nodes but not `/dev/kfd` is a known
//!   mistake (Docker's `--device=/dev/dri` alone; apptainer/singularity#5696:
//!   `--rocm --contain` bound the render nodes only); the caller warns when
//!   a render node opened there (see [`Census::gated`]). Checked with
//!   `access(2)`, which sees the file's permissions and the device cgroup,
//!   and never opened: opening it makes a KFD process of the caller (linux
//!   `drivers/gpu/drm/amd/amdkfd/kfd_process.c`, `kfd_create_process`: data
//!   for every GPU and a `/sys/class/kfd/kfd/proc/<pid>` entry), and the
//!   test's own first open after the exec would wait for the wrapper's to
//!   be torn down (that function flushes its clean-up work queue for just
//!   this case, a process that called exec).
//! - A node whose `properties` read gives `EPERM` is a GPU this process's
//!   device cgroup withholds (linux `drivers/gpu/drm/amd/amdkfd/kfd_topology.c`,
//!   `node_show`, refuses GPU nodes only; libhsakmt skips such a node,
//!   ROCm/ROCR-Runtime `libhsakmt/src/topology.c`,
//!   `topology_sysfs_check_node_supported`): seen, so that the topology
//!   still answers (zero, without running `rocminfo`), and not usable.
//!
//! Indices follow node order, among usable GPUs: that is how ROCR numbers
//! its GPU agents, which `ROCR_VISIBLE_DEVICES` selects.

use crate::hardware::devnode::{Access, open_device};
use crate::prelude::*;
use crate::sys::dirs::{for_each_entry, for_each_line_at, host_exists, host_path, open_dir, with_host_path};
use core::ops::ControlFlow;
use wrapper_common::StackPath;
use wrapper_common::numbers::parse_u64;

/// What one KFD node's `properties` file says, as far as counting and
/// naming go. Numbers that are missing or garbled read as 0.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NodeProperties {
    pub simd_count: u64,
    pub cpu_cores_count: u64,
    /// `None` on kernels that do not report it.
    pub gfx_target_version: Option<u64>,
    pub drm_render_minor: RenderMinor,
    pub location_id: u64,
    pub domain: u64,
    pub unique_id: u64,
    pub vendor_id: u64,
    pub device_id: u64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum RenderMinor {
    /// Not reported (older kernels), or 0: no render node to check.
    #[default]
    Missing,
    /// Not a number: the node cannot be checked, and is not counted.
    Invalid,
    Value(u64),
}

impl NodeProperties {
    /// Takes one `key value` line into account.
    pub fn apply_line(&mut self, line: &[u8]) {
        let Some(space) = line.iter().position(|&b| b == b' ') else { return };
        let (key, value) = (&line[..space], line[space + 1..].trim_ascii());
        let number = || parse_u64(value).unwrap_or(0);
        match key {
            b"simd_count" => self.simd_count = number(),
            b"cpu_cores_count" => self.cpu_cores_count = number(),
            b"gfx_target_version" => self.gfx_target_version = Some(number()),
            b"drm_render_minor" => {
                self.drm_render_minor = match parse_u64(value) {
                    Some(0) => RenderMinor::Missing,
                    Some(n) => RenderMinor::Value(n),
                    None => RenderMinor::Invalid,
                }
            }
            b"location_id" => self.location_id = number(),
            b"domain" => self.domain = number(),
            b"unique_id" => self.unique_id = number(),
            b"vendor_id" => self.vendor_id = number(),
            b"device_id" => self.device_id = number(),
            _ => {}
        }
    }

    /// Parses a whole `properties` file held in memory.
    pub fn parse(bytes: &[u8]) -> NodeProperties {
        let mut p = NodeProperties::default();
        for line in bytes.split(|&b| b == b'\n') {
            p.apply_line(line);
        }
        p
    }

    /// ROCR's rule: a node with SIMDs is a GPU agent.
    pub fn is_gpu(&self) -> bool {
        self.simd_count > 0
    }

    /// `unique_id` as text, when the kernel reports a non-zero one.
    pub fn unique_id_text(&self) -> Option<String> {
        (self.unique_id != 0).then(|| self.unique_id.to_string())
    }

    /// The gfx target (`gfx942`, `gfx90a`, `gfx1100`) from
    /// `gfx_target_version` (major * 10000 + minor * 100 + stepping, the last
    /// two written in hex), when the kernel reports one.
    pub fn gfx_target(&self) -> Option<GfxTarget> {
        match self.gfx_target_version {
            Some(v) if v > 0 => Some(GfxTarget(v)),
            _ => None,
        }
    }
}

/// A gfx target version, shown as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GfxTarget(pub u64);

impl core::fmt::Display for GfxTarget {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let v = self.0;
        write!(f, "gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100)
    }
}

/// One node, as the scan saw it.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    /// The node's directory name (its number).
    pub name: &'a [u8],
    pub props: NodeProperties,
    /// Whether this process can use it (for GPU nodes).
    pub access: Access,
}

/// What the KFD topology says about this host's AMD GPUs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Census {
    /// GPU nodes seen.
    pub seen: u32,
    /// Those this process may use.
    pub usable: u32,
    /// Those whose render node exists but refused this user.
    pub denied: u32,
    /// The render minor and error of the first refused one.
    pub first_denied: Option<(u64, rustix::io::Errno)>,
    /// Why `/dev/kfd` cannot be used, when it cannot (checked once a GPU
    /// node is seen); then no GPU is usable.
    pub kfd_device: Option<rustix::io::Errno>,
    /// GPUs whose render node opened although `/dev/kfd` cannot be used.
    pub gated: u32,
}

/// Reads `<node>/properties` relative to the nodes directory.
fn read_node(nodes: &rustix::fd::OwnedFd, node: &[u8]) -> Result<NodeProperties, rustix::io::Errno> {
    let mut props = NodeProperties::default();
    for_each_line_at::<1024>(nodes, node, b"properties", |line| props.apply_line(line))?;
    Ok(props)
}

/// Can this process use the GPU behind `props`?
pub fn render_access(sysroot: &[u8], props: &NodeProperties) -> Access {
    match props.drm_render_minor {
        RenderMinor::Missing => Access::Unchecked,
        RenderMinor::Invalid => Access::Invalid,
        RenderMinor::Value(minor) => {
            with_host_path(sysroot, RENDER_NODE, Some(minor), open_device).unwrap_or(Access::Invalid)
        }
    }
}

/// A render node's path, less its minor.
const RENDER_NODE: &[u8] = b"/dev/dri/renderD";

/// The runtime's own device node.
const KFD_DEVICE: &[u8] = b"/dev/kfd";
/// The topology's nodes, one directory each.
pub const TOPOLOGY: &[u8] = b"/sys/class/kfd/kfd/topology/nodes";

/// Whether this process may open `<sysroot>/dev/kfd` read-write, asked
/// with `access(2)` (see the module documentation for why it is not opened).
fn kfd_device_access(sysroot: &[u8]) -> Result<(), rustix::io::Errno> {
    let read_write = rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK;
    with_host_path(sysroot, KFD_DEVICE, None, |path| rustix::fs::access(path, read_write))
        .unwrap_or(Err(rustix::io::Errno::NAMETOOLONG))
}

/// `<sysroot>/dev/kfd`, to keep (for a message).
pub fn kfd_device_path(sysroot: &[u8]) -> Option<StackPath> {
    host_path(sysroot, KFD_DEVICE, None)
}

/// `<sysroot>/dev/dri/renderD<minor>`, to keep (for a message).
pub fn render_node_path(sysroot: &[u8], minor: u64) -> Option<StackPath> {
    host_path(sysroot, RENDER_NODE, Some(minor))
}

/// Whether the host shows the AMD runtime's GPUs and no other's: a KFD
/// topology and no NVIDIA driver (two `access(2)`, nothing read). Where
/// a count was given by hand, this says whether `ROCR_VISIBLE_DEVICES`
/// is the variable that chooses the test's GPUs.
#[cold]
pub fn amd_only(sysroot: &[u8]) -> bool {
    host_exists(sysroot, TOPOLOGY) && !host_exists(sysroot, crate::hardware::nvidia::PROC_GPUS)
}

/// Scans the topology, calling `visit` for every node (GPU or not, in
/// directory order; a node's `access` is its render node's alone, the
/// returned census says whether `/dev/kfd` lets any of them be used);
/// `None` when there is no topology or it shows no GPU. Allocates nothing.
///
/// Never inlined: its stack buffers (paths, directory reads) then occupy
/// the stack only while it runs, and the pages are reused by the next
/// source instead of all being probed and faulted in at once (see the
/// README's start-up cost notes).
#[inline(never)]
pub fn census(sysroot: &[u8], mut visit: impl FnMut(&Node<'_>)) -> Option<Census> {
    let nodes = with_host_path(sysroot, TOPOLOGY, None, open_dir)?.ok()?;
    let mut census = Census::default();
    let mut kfd_device = None;
    for_each_entry(&nodes, |name, _| {
        let props = match read_node(&nodes, name.to_bytes()) {
            Ok(props) => props,
            Err(rustix::io::Errno::PERM) => {
                // A GPU node this process's device cgroup withholds (CPU
                // nodes are never refused): seen, not usable, and no
                // warning, as in a container given other GPUs of the host.
                census.seen = census.seen.saturating_add(1);
                visit(&Node { name: name.to_bytes(), props: NodeProperties::default(), access: Access::Withheld });
                return ControlFlow::Continue(());
            }
            Err(_) => return ControlFlow::Continue(()),
        };
        let access = if props.is_gpu() { render_access(sysroot, &props) } else { Access::Unchecked };
        if props.is_gpu() {
            let runtime = *kfd_device.get_or_insert_with(|| kfd_device_access(sysroot));
            census.seen = census.seen.saturating_add(1);
            match (access.usable(), runtime) {
                (true, Ok(())) => census.usable = census.usable.saturating_add(1),
                (true, Err(_)) if access == Access::Opened => census.gated = census.gated.saturating_add(1),
                _ => {}
            }
            if let (Access::Denied(errno), RenderMinor::Value(minor)) = (access, props.drm_render_minor) {
                census.denied = census.denied.saturating_add(1);
                census.first_denied.get_or_insert((minor, errno));
            }
        }
        visit(&Node { name: name.to_bytes(), props, access });
        ControlFlow::<()>::Continue(())
    })
    .ok()?;
    census.kfd_device = kfd_device.and_then(Result::err);
    (census.seen > 0).then_some(census)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_properties() {
        let text = b"cpu_cores_count 0\nsimd_count 440\ngfx_target_version 90402\nvendor_id 4098\ndevice_id 29856\nlocation_id 512\ndomain 0\ndrm_render_minor 136\nunique_id 7843934696581995200\n";
        let p = NodeProperties::parse(text);
        assert_eq!(p.simd_count, 440);
        assert_eq!(p.gfx_target_version, Some(90402));
        assert_eq!(p.drm_render_minor, RenderMinor::Value(136));
        assert_eq!((p.location_id, p.unique_id, p.vendor_id, p.device_id), (512, 7843934696581995200, 4098, 29856));
        assert!(p.is_gpu());
    }

    #[test]
    fn simd_count_decides_not_gfx_target_version() {
        // An old kernel's GPU node: no gfx_target_version line at all.
        let old = NodeProperties::parse(b"cpu_cores_count 0\nsimd_count 256\ndrm_render_minor 128\n");
        assert!(old.is_gpu());
        assert_eq!(old.gfx_target(), None);
        // An APU: CPU cores and SIMDs in one node.
        assert!(NodeProperties::parse(b"cpu_cores_count 8\nsimd_count 44\n").is_gpu());
        // A target version but no SIMDs: ROCR makes no GPU agent of it.
        assert!(!NodeProperties::parse(b"simd_count 0\ngfx_target_version 90402\n").is_gpu());
        assert!(!NodeProperties::parse(b"gfx_target_version 90402\n").is_gpu());
        // A version of 0 names no target: --list says "unknown", not "gfx000".
        assert_eq!(NodeProperties::parse(b"simd_count 4\ngfx_target_version 0\n").gfx_target(), None);
        let one = NodeProperties::parse(b"simd_count 4\ngfx_target_version 1\n").gfx_target();
        assert_eq!(one.map(|t| t.to_string()).as_deref(), Some("gfx001"));
    }

    #[test]
    fn cpu_and_garbage_nodes_are_not_gpus() {
        assert!(!NodeProperties::parse(b"simd_count 0\ngfx_target_version 0\ndrm_render_minor 0\n").is_gpu());
        assert!(!NodeProperties::parse(b"simd_count banana\n").is_gpu());
        assert!(!NodeProperties::parse(b"simd_count -4\n").is_gpu());
        assert!(!NodeProperties::parse(b"").is_gpu());
        assert!(!NodeProperties::parse(b"\xff\xfe simd_count 5").is_gpu());
        let p = NodeProperties::parse(b"simd_count 1\ndrm_render_minor -3\n");
        assert_eq!(p.drm_render_minor, RenderMinor::Invalid);
        let p = NodeProperties::parse(b"simd_count 1\ndrm_render_minor 0\n");
        assert_eq!(p.drm_render_minor, RenderMinor::Missing, "0 names no render node");
        let p = NodeProperties::parse(b"simd_count 1\r\n");
        assert_eq!(p.simd_count, 1, "trailing whitespace tolerated");
    }

    #[test]
    fn gfx_target_names() {
        for (v, name) in [
            (90402, "gfx942"),
            (90010, "gfx90a"),
            (110000, "gfx1100"),
            (100306, "gfx1036"),
            (90008, "gfx908"),
            (110501, "gfx1151"),
            (90000, "gfx900"),
            (90006, "gfx906"),
        ] {
            assert_eq!(GfxTarget(v).to_string(), name);
        }
    }
}
