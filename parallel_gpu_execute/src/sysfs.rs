//! Counting GPUs from what the kernel exposes, without running anything.
//!
//! AMD: the KFD topology lists every compute node; GPU nodes have a non-zero
//! `gfx_target_version`. A container that was not given a GPU still sees its
//! node there, but cannot open its render node, so a GPU with a render minor
//! counts only when `/dev/dri/renderD<minor>` opens read-write (as the ROCm
//! runtime itself requires).
//!
//! NVIDIA: one directory per GPU under `/proc/driver/nvidia/gpus/`; where a
//! sandboxed runtime hides that, the `/dev/nvidia<N>` device nodes.
//!
//! A source answers when it sees GPU hardware at all; its count is then the
//! number of GPUs this process may use (possibly zero).

use crate::dirs::{count_entries, for_each_entry, host_path, open_dir};
use rustix::fs::{Mode, OFlags};
use std::ops::ControlFlow;
use wrapper_common::StackPath;
use wrapper_common::lines::{Line, for_each_line};
use wrapper_common::numbers::parse_u64;

/// What one KFD node's `properties` file says, as far as counting goes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NodeProperties {
    /// 0 when missing or unreadable: not a GPU.
    pub gfx_target_version: u64,
    pub drm_render_minor: RenderMinor,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum RenderMinor {
    /// Older kernels do not report it; the node is counted unchecked.
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
        match key {
            b"gfx_target_version" => self.gfx_target_version = parse_u64(value).unwrap_or(0),
            b"drm_render_minor" => {
                self.drm_render_minor = parse_u64(value).map_or(RenderMinor::Invalid, RenderMinor::Value)
            }
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

    pub fn is_gpu(&self) -> bool {
        self.gfx_target_version != 0
    }
}

/// Reads `<node>/properties` relative to the nodes directory.
fn read_node(nodes: &rustix::fd::OwnedFd, node: &[u8]) -> Option<NodeProperties> {
    let mut rel = StackPath::from_bytes(node).ok()?;
    rel.push_path(b"properties").ok()?;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = rustix::fs::openat(nodes, rel.as_cstr(), flags, Mode::empty()).ok()?;
    let mut props = NodeProperties::default();
    let mut buf = [0u8; 1024];
    for_each_line(&fd, &mut buf, |Line { bytes, complete }| {
        if complete {
            props.apply_line(bytes);
        }
        ControlFlow::Continue(())
    })
    .ok()?;
    Some(props)
}

/// Can this process use the GPU behind `props`?
fn render_node_usable(sysroot: &[u8], props: &NodeProperties) -> bool {
    match props.drm_render_minor {
        RenderMinor::Missing | RenderMinor::Value(0) => true,
        RenderMinor::Invalid => false,
        RenderMinor::Value(minor) => {
            let Some(mut path) = host_path(sysroot, b"/dev/dri/renderD") else { return false };
            if path.push_u64(minor).is_err() {
                return false;
            }
            let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
            rustix::fs::open(path.as_cstr(), flags, Mode::empty()).is_ok()
        }
    }
}

/// The AMD GPUs this process may use, or `None` when the KFD topology shows
/// no GPU at all.
pub fn kfd_gpu_count(sysroot: &[u8]) -> Option<u32> {
    let nodes_path = host_path(sysroot, b"/sys/class/kfd/kfd/topology/nodes")?;
    let nodes = open_dir(nodes_path.as_cstr()).ok()?;
    let (mut gpus_seen, mut usable) = (false, 0u32);
    for_each_entry(&nodes, |name, _| {
        if let Some(props) = read_node(&nodes, name.to_bytes()) {
            if props.is_gpu() {
                gpus_seen = true;
                if render_node_usable(sysroot, &props) {
                    usable = usable.saturating_add(1);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    })
    .ok()?;
    gpus_seen.then_some(usable)
}

/// `nvidia<digits>`: a GPU device node (not `nvidiactl`, `nvidia-uvm`, ...).
pub fn is_nvidia_gpu_node(name: &[u8]) -> bool {
    name.strip_prefix(b"nvidia").is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
}

/// The NVIDIA GPUs of this host, or `None` when there are none to see.
pub fn nvidia_gpu_count(sysroot: &[u8]) -> Option<u32> {
    let proc_gpus = host_path(sysroot, b"/proc/driver/nvidia/gpus")?;
    if let Some(n) = count_entries(proc_gpus.as_cstr(), |_| true).filter(|&n| n > 0) {
        return Some(n);
    }
    let dev = host_path(sysroot, b"/dev")?;
    count_entries(dev.as_cstr(), is_nvidia_gpu_node).filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_properties() {
        let text =
            b"cpu_cores_count 0\nsimd_count 440\ngfx_target_version 90402\nvendor_id 4098\ndrm_render_minor 136\n";
        let p = NodeProperties::parse(text);
        assert_eq!(p, NodeProperties { gfx_target_version: 90402, drm_render_minor: RenderMinor::Value(136) });
        assert!(p.is_gpu());
    }

    #[test]
    fn cpu_and_garbage_nodes_are_not_gpus() {
        assert!(!NodeProperties::parse(b"gfx_target_version 0\ndrm_render_minor 0\n").is_gpu());
        assert!(!NodeProperties::parse(b"gfx_target_version banana\n").is_gpu());
        assert!(!NodeProperties::parse(b"").is_gpu());
        assert!(!NodeProperties::parse(b"\xff\xfe gfx_target_version 5").is_gpu());
        let p = NodeProperties::parse(b"gfx_target_version 1\ndrm_render_minor -3\n");
        assert_eq!(p.drm_render_minor, RenderMinor::Invalid);
        let p = NodeProperties::parse(b"gfx_target_version 1\r\n");
        assert_eq!(p.gfx_target_version, 1, "trailing whitespace tolerated");
    }

    #[test]
    fn nvidia_node_names() {
        assert!(is_nvidia_gpu_node(b"nvidia0"));
        assert!(is_nvidia_gpu_node(b"nvidia15"));
        for name in [&b"nvidia"[..], b"nvidiactl", b"nvidia-uvm", b"nvidia-modeset", b"nvidia0a", b"xnvidia0"] {
            assert!(!is_nvidia_gpu_node(name), "{name:?}");
        }
    }
}
