//! NVIDIA GPUs from the driver's `/proc/driver/nvidia/gpus/<bus>/information`
//! and the `/dev/nvidia<N>` device nodes, counted the way CUDA enumerates
//! them: the GPUs whose device node this process can open, less those the
//! driver excludes.
//!
//! - A `/proc/driver/nvidia/gpus/<bus>/` entry counts only when its
//!   `information` does not say `GPU Excluded: Yes` and
//!   `/dev/nvidia<Device Minor>` exists and opens read-write. Under
//!   Kubernetes CDI and nvidia-docker 1, `/proc` shows every GPU of the node
//!   while the container holds only its own device nodes (an H100 pod sees 8
//!   entries and one `/dev/nvidia6`); CUDA sees only those it can open.
//! - A `/dev/nvidia<N>` that opens and that no readable `/proc` entry names
//!   counts too: where `/proc` is hidden, emptied by the runtime (LXD's
//!   `nvidia.runtime` puts a tmpfs there), shows entries without their
//!   `information` (nvidia-docker 1), or lists other GPUs than the
//!   container's own, the device nodes are what CUDA opens. `/dev` is looked
//!   at only when the host has NVIDIA devices at all (a
//!   `/proc/driver/nvidia/gpus` directory, or `/dev/nvidiactl`), so that an
//!   AMD host pays two failed lookups, not a scan of `/dev`.
//! - A MIG-partitioned GPU is one GPU here: its instances are
//!   `/dev/nvidia-caps/*`, which name no CUDA device by number.
//!
//! `information` is `Key: value` lines whose separators are tabs and spaces
//! in any mix (`Model: \t\t Tesla P100`, `GPU Excluded:\t No`).

use crate::hardware::devnode::{Access, open_device};
use crate::sys::dirs::{for_each_entry, for_each_line_at, host_exists, host_path, open_dir, with_host_path};
use core::ops::ControlFlow;
use wrapper_common::numbers::parse_u64;
use wrapper_common::{CBuf, StackPath};

/// What one GPU's `information` file says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Information {
    pub model: CBuf<128>,
    pub uuid: CBuf<96>,
    pub bus_location: CBuf<32>,
    pub device_minor: Option<u64>,
    pub excluded: bool,
}

impl Information {
    /// Takes one `Key: value` line into account.
    pub fn apply_line(&mut self, line: &[u8]) {
        let Some(colon) = line.iter().position(|&b| b == b':') else { return };
        let key = line[..colon].trim_ascii();
        let value = line[colon + 1..].trim_ascii();
        match key {
            b"Model" => self.model = clipped(value),
            b"GPU UUID" => self.uuid = clipped(value),
            b"Bus Location" => self.bus_location = clipped(value),
            b"Device Minor" => self.device_minor = parse_u64(value),
            b"GPU Excluded" => self.excluded = value.eq_ignore_ascii_case(b"yes"),
            _ => {}
        }
    }

    pub fn parse(bytes: &[u8]) -> Information {
        let mut info = Information::default();
        for line in bytes.split(|&b| b == b'\n') {
            info.apply_line(line);
        }
        info
    }
}

/// As much of `value` as fits (a NUL ends it).
fn clipped<const N: usize>(value: &[u8]) -> CBuf<N> {
    let value = value.split(|&b| b == 0).next().unwrap_or(b"");
    CBuf::from_bytes(&value[..value.len().min(N - 1)]).unwrap_or_default()
}

/// One GPU as the scan saw it.
#[derive(Debug, Clone)]
pub struct Gpu<'a> {
    /// The `/proc/driver/nvidia/gpus/` entry (its PCI bus id); `None` for a
    /// GPU found by its device node alone.
    pub entry: Option<&'a [u8]>,
    /// `None` when the entry's `information` could not be read.
    pub info: Option<&'a Information>,
    /// The `/dev/nvidia<N>` minor, when known.
    pub minor: Option<u64>,
    /// `None` when not checked (excluded, or no minor to check).
    pub access: Option<Access>,
}

impl Gpu<'_> {
    pub fn excluded(&self) -> bool {
        self.info.is_some_and(|i| i.excluded)
    }

    pub fn usable(&self) -> bool {
        !self.excluded() && self.access.is_some_and(Access::usable)
    }
}

/// What the NVIDIA driver shows of this host's GPUs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Census {
    pub seen: u32,
    pub usable: u32,
    pub denied: u32,
    pub first_denied: Option<(u64, rustix::io::Errno)>,
    /// GPUs counted from `/dev/nvidia<N>` alone (no readable `/proc` entry).
    pub from_dev: u32,
}

impl Census {
    fn add(&mut self, gpu: &Gpu<'_>) {
        self.seen = self.seen.saturating_add(1);
        if gpu.usable() {
            self.usable = self.usable.saturating_add(1);
        }
        if let (Some(Access::Denied(errno)), Some(minor)) = (gpu.access, gpu.minor) {
            self.denied = self.denied.saturating_add(1);
            self.first_denied.get_or_insert((minor, errno));
        }
    }
}

/// `nvidia<digits>`: a GPU device node (not `nvidiactl`, `nvidia-uvm`, ...).
pub fn is_gpu_node(name: &[u8]) -> bool {
    name.strip_prefix(b"nvidia").is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
}

/// A GPU's device node, less its minor.
const DEVICE_NODE: &[u8] = b"/dev/nvidia";

/// `<sysroot>/dev/nvidia<minor>`, to keep (for a message).
pub fn device_node_path(sysroot: &[u8], minor: u64) -> Option<StackPath> {
    host_path(sysroot, DEVICE_NODE, Some(minor))
}

/// Opens `<sysroot>/dev/nvidia<minor>` as the driver's clients do.
fn open_node(sysroot: &[u8], minor: u64) -> Access {
    with_host_path(sysroot, DEVICE_NODE, Some(minor), open_device).unwrap_or(Access::Invalid)
}

/// The driver's directory of its GPUs.
pub const PROC_GPUS: &[u8] = b"/proc/driver/nvidia/gpus";

fn read_information(dir: &rustix::fd::OwnedFd, entry: &[u8]) -> Option<Information> {
    let mut info = Information::default();
    for_each_line_at::<512>(dir, entry, b"information", |line| info.apply_line(line)).ok()?;
    Some(info)
}

/// Minors below this are remembered (on the stack) when `/proc` names
/// them, so that `/dev` does not count them twice; NVIDIA GPU minors are
/// 0-254 (255 is `nvidiactl`).
const MINOR_BITS: u64 = 256;

/// Scans `/proc`, then the `/dev/nvidia<N>` nodes `/proc` did not name;
/// calls `visit` for every GPU seen (directory order). `None` when there is
/// none to see. Allocates nothing.
///
/// Never inlined: its stack buffers (paths, directory reads) then occupy
/// the stack only while it runs, and the pages are reused by the next
/// source instead of all being probed and faulted in at once (see the
/// README's start-up cost notes).
#[inline(never)]
pub fn census(sysroot: &[u8], mut visit: impl FnMut(&Gpu<'_>)) -> Option<Census> {
    let mut census = Census::default();
    let mut named = [0u64; (MINOR_BITS / 64) as usize];
    let proc_dir = with_host_path(sysroot, PROC_GPUS, None, open_dir).and_then(Result::ok);
    let proc_seen = proc_dir.is_some();
    if let Some(dir) = proc_dir {
        let _ = for_each_entry(&dir, |name, _| {
            let entry = name.to_bytes();
            let info = read_information(&dir, entry);
            let Some((info, minor)) = info.as_ref().and_then(|i| i.device_minor.map(|m| (i, m))) else {
                // Seen, but nothing says which device node is its own.
                visit(&Gpu { entry: Some(entry), info: info.as_ref(), minor: None, access: None });
                return ControlFlow::<()>::Continue(());
            };
            if minor < MINOR_BITS {
                named[(minor / 64) as usize] |= 1 << (minor % 64);
            }
            let access = if info.excluded { None } else { Some(open_node(sysroot, minor)) };
            let gpu = Gpu { entry: Some(entry), info: Some(info), minor: Some(minor), access };
            census.add(&gpu);
            visit(&gpu);
            ControlFlow::Continue(())
        });
    }
    // `/proc/driver/nvidia/gpus` exists (even emptied, as LXD leaves it)
    // wherever the driver is loaded and /proc is not hidden; else the
    // control node tells.
    let has_nvidia = proc_seen || host_exists(sysroot, b"/dev/nvidiactl");
    if has_nvidia {
        if let Some(dev) = with_host_path(sysroot, b"/dev", None, open_dir).and_then(Result::ok) {
            let _ = for_each_entry(&dev, |name, _| {
                let name = name.to_bytes();
                let minor = if is_gpu_node(name) { parse_u64(&name[b"nvidia".len()..]) } else { None };
                let Some(minor) = minor else { return ControlFlow::<()>::Continue(()) };
                if minor < MINOR_BITS && named[(minor / 64) as usize] & (1 << (minor % 64)) != 0 {
                    return ControlFlow::Continue(());
                }
                let access = open_node(sysroot, minor);
                let gpu = Gpu { entry: None, info: None, minor: Some(minor), access: Some(access) };
                census.add(&gpu);
                if gpu.usable() {
                    census.from_dev = census.from_dev.saturating_add(1);
                }
                visit(&gpu);
                ControlFlow::Continue(())
            });
        }
    }
    (census.seen > 0).then_some(census)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_information_with_tabs_and_spaces() {
        let text = b"Model: \t\t Tesla P100-SXM2-16GB\nIRQ:   \t\t 47\nGPU UUID: \t GPU-1b2c3d4e-0000-1111-2222-333344445555\nBus Location: \t 0000:08:00.0\nDevice Minor: \t 2\nGPU Excluded:\t Yes\n";
        let info = Information::parse(text);
        assert_eq!(info.model.as_bytes(), b"Tesla P100-SXM2-16GB");
        assert_eq!(info.uuid.as_bytes(), b"GPU-1b2c3d4e-0000-1111-2222-333344445555");
        assert_eq!(info.bus_location.as_bytes(), b"0000:08:00.0");
        assert_eq!(info.device_minor, Some(2));
        assert!(info.excluded);
        let plain = Information::parse(b"Model:  NVIDIA GeForce RTX 4090\nDevice Minor: 0\nGPU Excluded: No\n");
        assert_eq!((plain.device_minor, plain.excluded), (Some(0), false));
        assert_eq!(plain.model.as_bytes(), b"NVIDIA GeForce RTX 4090");
    }

    #[test]
    fn garbage_information() {
        let info = Information::parse(b"Device Minor: -1\nGPU Excluded: maybe\n\xff:\xfe\nno colon\n");
        assert_eq!((info.device_minor, info.excluded), (None, false));
        assert_eq!(Information::parse(b""), Information::default());
    }

    #[test]
    fn node_names() {
        assert!(is_gpu_node(b"nvidia0"));
        assert!(is_gpu_node(b"nvidia15"));
        for name in
            [&b"nvidia"[..], b"nvidiactl", b"nvidia-uvm", b"nvidia-modeset", b"nvidia0a", b"xnvidia0", b"nvidia-caps"]
        {
            assert!(!is_gpu_node(name), "{name:?}");
        }
    }
}
