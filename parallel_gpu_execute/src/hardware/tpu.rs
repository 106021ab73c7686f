//! Google TPU chips, counted from sysfs without running anything (the `jax`
//! profile looks at them first).
//!
//! A TPU chip is a PCI function under `<root>/sys/bus/pci/devices/*/` whose
//! `vendor` is `0x1ae0` (Google) and whose `device` is one of the TPU
//! generations' ids, as JAX itself lists them (jax-ml/jax
//! `jax/_src/hardware_utils.py`, `_TPU_PCI_DEVICE_IDS`, at cec06d11; the
//! TPU8 ids came in a92b670a, "TPU8i/t support for Jax"):
//!
//! | device | generation | device node |
//! |---|---|---|
//! | `0x0027` | v2, v3 | `/dev/accel<N>` |
//! | `0x0056` | no public name ("plc") | `/dev/accel<N>` |
//! | `0x005e` | v4 | `/dev/accel<N>` |
//! | `0x0062` | v5p | VFIO group `/dev/vfio/<group>` |
//! | `0x0063` | v5e | VFIO group `/dev/vfio/<group>` |
//! | `0x006f` | v6e | VFIO group `/dev/vfio/<group>` |
//! | `0x0076` | 7x | VFIO group `/dev/vfio/<group>` |
//! | `0x0083` | 8i | `/dev/accel<N>` if the driver made one, else the VFIO group |
//! | `0x007c` | 8t | `/dev/accel<N>` if the driver made one, else the VFIO group |
//!
//! Nothing published says which node TPU8 chips use, so both are looked
//! for; a chip with neither counts as missing, as on the older generations.
//!
//! A chip counts only when its device node exists and this user may open it
//! read-write: `<pci>/accel/accel<N>` names `/dev/accel<N>`; on VFIO
//! generations `<pci>/iommu_group` names `/dev/vfio/<group>`. The node is
//! checked with `access(2)`, not opened: a VFIO group can be open only once
//! (a second open fails with `EBUSY`), so opening it would report a chip in
//! use as absent and could make a test that is starting on it fail. Chips
//! are numbered in PCI address order (the directory's order, sorted).

use crate::sys::dirs::{EntryPath, for_each_entry, open_at, open_dir, open_dir_at, with_host_path};
use core::ops::ControlFlow;
use rustix::fs::{Access as Perm, AtFlags};
use wrapper_common::CBuf;
use wrapper_common::numbers::parse_u64;
use wrapper_common::runfiles::exists_cstr;

/// Google's PCI vendor id.
pub const GOOGLE_VENDOR: &[u8] = b"0x1ae0";

/// How a generation exposes its chips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Accel,
    Vfio,
    /// `/dev/accel<N>` when `<pci>/accel/` names one, else the VFIO group.
    AccelOrVfio,
}

/// The TPU PCI device ids, their generation and device node kind.
const GENERATIONS: &[(&[u8], &str, NodeKind)] = &[
    (b"0x0027", "v2/v3", NodeKind::Accel),
    (b"0x0056", "plc", NodeKind::Accel),
    (b"0x005e", "v4", NodeKind::Accel),
    (b"0x0062", "v5p", NodeKind::Vfio),
    (b"0x0063", "v5e", NodeKind::Vfio),
    (b"0x006f", "v6e", NodeKind::Vfio),
    (b"0x0076", "7x", NodeKind::Vfio),
    (b"0x0083", "8i", NodeKind::AccelOrVfio),
    (b"0x007c", "8t", NodeKind::AccelOrVfio),
];

/// The TPU generation of PCI device id `device` (any case), and its device
/// node kind.
pub fn generation(device: &[u8]) -> Option<(&'static str, NodeKind)> {
    GENERATIONS.iter().find(|(id, ..)| id.eq_ignore_ascii_case(device)).map(|&(_, g, k)| (g, k))
}

/// Whether a chip's device node can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    Usable,
    /// sysfs names no node for it (driver not bound).
    Unnamed,
    Missing,
    Denied,
}

/// One TPU chip as the scan saw it.
#[derive(Debug, Clone)]
pub struct Chip<'a> {
    /// The PCI address (`0000:00:04.0`).
    pub pci: &'a [u8],
    pub generation: &'static str,
    /// `/dev/accel<N>` or `/dev/vfio/<group>`, when named.
    pub node: Option<CBuf<64>>,
    pub state: NodeState,
}

/// What the PCI bus shows of TPU chips.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Census {
    pub seen: u32,
    pub usable: u32,
}

/// A small sysfs attribute (`vendor`, `device`) of the PCI function `pci`.
fn attr(devices: &rustix::fd::OwnedFd, pci: &[u8], name: &[u8]) -> Option<CBuf<32>> {
    let fd = open_at(devices, pci, name).ok()?;
    let mut buf = [0u8; 31];
    let n = rustix::io::read(&fd, &mut buf).ok()?;
    CBuf::from_bytes(buf[..n].trim_ascii()).ok()
}

/// `<pci>/accel/accel<N>` → `/dev/accel<N>`.
fn accel_node(devices: &rustix::fd::OwnedFd, pci: &[u8]) -> Option<CBuf<64>> {
    let mut rel = EntryPath::from_bytes(pci).ok()?;
    rel.push_path(b"accel").ok()?;
    let dir = open_dir_at(devices, rel.as_cstr()).ok()?;
    let name = for_each_entry(&dir, |name, _| {
        let n = name.to_bytes();
        match n.strip_prefix(b"accel").and_then(parse_u64) {
            Some(_) => ControlFlow::Break(CBuf::<64>::from_bytes(n).ok()),
            None => ControlFlow::Continue(()),
        }
    })
    .ok()??;
    let mut node = CBuf::<64>::from_bytes(b"/dev/").ok()?;
    node.push(name?.as_bytes()).ok()?;
    Some(node)
}

/// `<pci>/iommu_group` → `/dev/vfio/<group>`.
fn vfio_node(devices: &rustix::fd::OwnedFd, pci: &[u8]) -> Option<CBuf<64>> {
    let mut rel = EntryPath::from_bytes(pci).ok()?;
    rel.push_path(b"iommu_group").ok()?;
    let mut target = [0u8; 256];
    let link = rustix::fs::readlinkat(devices, rel.as_cstr(), &mut target[..]).ok()?;
    let group = link.as_bytes().rsplit(|&b| b == b'/').next()?;
    parse_u64(group)?;
    let mut node = CBuf::<64>::from_bytes(b"/dev/vfio/").ok()?;
    node.push(group).ok()?;
    Some(node)
}

fn node_state(sysroot: &[u8], node: Option<&CBuf<64>>) -> NodeState {
    let Some(node) = node else { return NodeState::Unnamed };
    with_host_path(sysroot, node.as_bytes(), None, |path| {
        if !exists_cstr(path) {
            return NodeState::Missing;
        }
        match rustix::fs::accessat(rustix::fs::CWD, path, Perm::READ_OK | Perm::WRITE_OK, AtFlags::EACCESS) {
            Ok(()) => NodeState::Usable,
            Err(_) => NodeState::Denied,
        }
    })
    .unwrap_or(NodeState::Missing)
}

/// Scans the PCI bus; calls `visit` for every TPU chip (directory order).
/// `None` when there is none. Allocates nothing.
///
/// Never inlined: its stack buffers (paths, directory reads) then occupy
/// the stack only while it runs, and the pages are reused by the next
/// source instead of all being probed and faulted in at once (see the
/// README's start-up cost notes).
#[inline(never)]
pub fn census(sysroot: &[u8], mut visit: impl FnMut(&Chip<'_>)) -> Option<Census> {
    let devices = with_host_path(sysroot, b"/sys/bus/pci/devices", None, open_dir)?.ok()?;
    let mut census = Census::default();
    for_each_entry(&devices, |name, _| {
        let pci = name.to_bytes();
        if attr(&devices, pci, b"vendor").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(GOOGLE_VENDOR)) {
            let device = attr(&devices, pci, b"device");
            if let Some((generation, kind)) = device.and_then(|d| generation(d.as_bytes())) {
                let node = match kind {
                    NodeKind::Accel => accel_node(&devices, pci),
                    NodeKind::Vfio => vfio_node(&devices, pci),
                    NodeKind::AccelOrVfio => accel_node(&devices, pci).or_else(|| vfio_node(&devices, pci)),
                };
                let state = node_state(sysroot, node.as_ref());
                census.seen = census.seen.saturating_add(1);
                if state == NodeState::Usable {
                    census.usable = census.usable.saturating_add(1);
                }
                visit(&Chip { pci, generation, node, state });
            }
        }
        ControlFlow::<()>::Continue(())
    })
    .ok()?;
    (census.seen > 0).then_some(census)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations() {
        assert_eq!(generation(b"0x0063"), Some(("v5e", NodeKind::Vfio)));
        assert_eq!(generation(b"0x005e"), Some(("v4", NodeKind::Accel)));
        assert_eq!(generation(b"0x0027"), Some(("v2/v3", NodeKind::Accel)));
        assert_eq!(generation(b"0x0076"), Some(("7x", NodeKind::Vfio)));
        for other in [&b"0x0001"[..], b"0x63", b"", b"0x00630"] {
            assert_eq!(generation(other), None, "{other:?}");
        }
        assert_eq!(generation(b"0x006F"), Some(("v6e", NodeKind::Vfio)));
        assert_eq!(generation(b"0x0083"), Some(("8i", NodeKind::AccelOrVfio)));
        assert_eq!(generation(b"0x007C"), Some(("8t", NodeKind::AccelOrVfio)));
    }
}
