//! Fake hardware for `PARALLEL_GPU_EXECUTE_SYSROOT`: KFD topology nodes,
//! render nodes, NVIDIA `/proc` entries and device nodes, and builders for
//! the hosts and containers that real, published machine descriptions show
//! (written from their facts: node and SIMD counts, missing
//! `gfx_target_version`, render-minor gaps, partitions, excluded GPUs,
//! device minors, a mixed AMD+NVIDIA desktop).
//!
//! Device nodes are plain files here (mode 0666, so any user may open them
//! read-write; [`Sysroot::restrict`] makes one root-only).

use crate::write_file;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A fake hardware root.
pub struct Sysroot {
    pub root: PathBuf,
    next_node: usize,
}

/// One KFD topology node, as its `properties` file says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KfdNode {
    pub cpu_cores_count: u64,
    pub simd_count: u64,
    /// `None`: the line is absent (kernels before the property existed).
    pub gfx_target_version: Option<u64>,
    /// `None`: the line is absent; `Some(0)`: no render node named.
    pub drm_render_minor: Option<u64>,
    pub vendor_id: u64,
    pub device_id: u64,
    pub location_id: u64,
    pub domain: Option<u64>,
    pub unique_id: Option<u64>,
}

impl KfdNode {
    /// A CPU node (no SIMDs).
    pub fn cpu(cores: u64) -> KfdNode {
        KfdNode {
            cpu_cores_count: cores,
            simd_count: 0,
            gfx_target_version: Some(0),
            drm_render_minor: Some(0),
            vendor_id: 0,
            device_id: 0,
            location_id: 0,
            domain: None,
            unique_id: None,
        }
    }

    /// An AMD GPU node.
    pub fn gpu(gfx_target_version: u64, simd_count: u64, render_minor: u64) -> KfdNode {
        KfdNode {
            cpu_cores_count: 0,
            simd_count,
            gfx_target_version: Some(gfx_target_version),
            drm_render_minor: Some(render_minor),
            vendor_id: 4098,
            device_id: 0,
            location_id: 0,
            domain: Some(0),
            unique_id: None,
        }
    }

    pub fn without_gfx_target_version(mut self) -> KfdNode {
        self.gfx_target_version = None;
        self
    }

    pub fn device(mut self, device_id: u64) -> KfdNode {
        self.device_id = device_id;
        self
    }

    /// PCI location: `location_id` is bus << 8 | device << 3 | function.
    pub fn at(mut self, domain: u64, location_id: u64) -> KfdNode {
        self.domain = Some(domain);
        self.location_id = location_id;
        self
    }

    pub fn unique(mut self, unique_id: u64) -> KfdNode {
        self.unique_id = Some(unique_id);
        self
    }

    pub fn cores(mut self, cpu_cores_count: u64) -> KfdNode {
        self.cpu_cores_count = cpu_cores_count;
        self
    }

    /// The `properties` text, in the kernel's key order.
    pub fn properties(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "cpu_cores_count {}", self.cpu_cores_count);
        let _ = writeln!(s, "simd_count {}", self.simd_count);
        let _ = writeln!(s, "mem_banks_count 1");
        if let Some(v) = self.gfx_target_version {
            let _ = writeln!(s, "gfx_target_version {v}");
        }
        let _ = writeln!(s, "vendor_id {}", self.vendor_id);
        let _ = writeln!(s, "device_id {}", self.device_id);
        let _ = writeln!(s, "location_id {}", self.location_id);
        if let Some(d) = self.domain {
            let _ = writeln!(s, "domain {d}");
        }
        if let Some(m) = self.drm_render_minor {
            let _ = writeln!(s, "drm_render_minor {m}");
        }
        if let Some(u) = self.unique_id {
            let _ = writeln!(s, "unique_id {u}");
        }
        s
    }
}

/// One NVIDIA GPU's `/proc/driver/nvidia/gpus/<bus>/information`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaGpu {
    pub bus: String,
    pub model: String,
    pub uuid: String,
    pub minor: u64,
    pub excluded: bool,
}

impl NvidiaGpu {
    pub fn new(bus: &str, model: &str, minor: u64) -> NvidiaGpu {
        NvidiaGpu {
            bus: bus.to_string(),
            model: model.to_string(),
            uuid: format!("GPU-{minor:08x}-0000-4000-8000-{:012x}", minor + 1),
            minor,
            excluded: false,
        }
    }

    pub fn excluded(mut self) -> NvidiaGpu {
        self.excluded = true;
        self
    }

    pub fn uuid(mut self, uuid: &str) -> NvidiaGpu {
        self.uuid = uuid.to_string();
        self
    }

    /// The `information` text, with the driver's mix of tabs and spaces.
    pub fn information(&self) -> String {
        format!(
            "Model: \t\t {}\nIRQ:   \t\t 47\nGPU UUID: \t {}\nVideo BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {}\nDevice Minor: \t {}\nGPU Excluded:\t {}\n",
            self.model,
            self.uuid,
            self.bus,
            self.minor,
            if self.excluded { "Yes" } else { "No" }
        )
    }
}

/// The `render` group's id in the fake sysroots (Debian's and Ubuntu's).
pub const RENDER_GID: u32 = 109;

impl Sysroot {
    pub fn new(dir: &crate::TempDir) -> Sysroot {
        let root = dir.join("sysroot");
        fs::create_dir_all(&root).unwrap();
        Sysroot { root, next_node: 0 }
    }

    fn kfd_node_dir(&mut self) -> PathBuf {
        let dir = self.root.join(format!("sys/class/kfd/kfd/topology/nodes/{}", self.next_node));
        self.next_node += 1;
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A KFD node, numbered after the ones before it; its render node is
    /// not created (see [`add_render_node`](Self::add_render_node)).
    pub fn add_kfd_node(&mut self, node: &KfdNode) -> usize {
        let number = self.next_node;
        let dir = self.kfd_node_dir();
        write_file(dir.join("properties"), node.properties());
        number
    }

    /// A KFD node whose render node (if it names one) this process can open.
    pub fn add_kfd_node_with_render(&mut self, node: &KfdNode) -> usize {
        let number = self.add_kfd_node(node);
        if let Some(m) = node.drm_render_minor.filter(|&m| m != 0) {
            self.add_render_node(m);
        }
        number
    }

    /// `/dev/dri/renderD<minor>`, openable by anyone, and `/dev/kfd` with it
    /// when it is not there yet: every host or container given an AMD GPU
    /// has both (see [`remove_dev_entry`](Self::remove_dev_entry)).
    pub fn add_render_node(&self, minor: u64) {
        self.add_dev_entry(&format!("dri/renderD{minor}"));
        if !self.root.join("dev/kfd").exists() {
            self.add_dev_entry("kfd");
        }
    }

    /// Removes `/dev/<name>` (`kfd`: a container given its render nodes
    /// but not `/dev/kfd`).
    pub fn remove_dev_entry(&self, name: &str) {
        fs::remove_file(self.root.join("dev").join(name)).unwrap();
    }

    /// A `/dev/<name>` entry (a plain file, mode 0666).
    pub fn add_dev_entry(&self, name: &str) {
        let node = self.root.join("dev").join(name);
        write_file(&node, "");
        fs::set_permissions(&node, fs::Permissions::from_mode(0o666)).unwrap();
    }

    /// Makes `/dev/<name>` root-only (0600) and owned by root:render
    /// ([`RENDER_GID`]), as udev makes GPU nodes: another user gets
    /// `EACCES`, as one outside the `render` group does. Changing the owner
    /// needs root, as running the wrapper as that other user does.
    pub fn restrict(&self, name: &str) {
        let node = self.root.join("dev").join(name);
        fs::set_permissions(&node, fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&node, Some(0), Some(RENDER_GID)).unwrap();
    }

    /// `<root>/etc/group` as a ROCm host has it: root, video and render
    /// ([`RENDER_GID`]).
    pub fn add_gpu_groups(&self) {
        self.add_groups(&[("root", 0), ("video", 44), ("render", RENDER_GID)]);
    }

    /// `<root>/etc/group` with these `(name, gid)` lines.
    pub fn add_groups(&self, groups: &[(&str, u32)]) {
        let text: String = groups.iter().map(|(n, g)| format!("{n}:x:{g}:\n")).collect();
        write_file(self.root.join("etc/group"), text);
    }

    /// A CPU node.
    pub fn add_kfd_cpu(&mut self) {
        self.add_kfd_node(&KfdNode::cpu(16));
    }

    /// An MI300X-like GPU node with a render node that opens read-write.
    pub fn add_kfd_gpu(&mut self, render_minor: u32) {
        self.add_kfd_gpu_raw(render_minor, true);
    }

    /// A GPU node; `accessible` false leaves its render node out, as in a
    /// container that was not given that GPU.
    pub fn add_kfd_gpu_raw(&mut self, render_minor: u32, accessible: bool) {
        let node = KfdNode::gpu(90402, 304, u64::from(render_minor));
        if accessible {
            self.add_kfd_node_with_render(&node);
        } else {
            self.add_kfd_node(&node);
        }
    }

    /// Raw `properties` contents for one more node.
    pub fn add_kfd_properties(&mut self, contents: &[u8]) {
        let dir = self.kfd_node_dir();
        write_file(dir.join("properties"), contents);
    }

    /// A CPU node and `count` AMD GPUs with render minors 128, 129, ...
    pub fn add_kfd_gpus(&mut self, count: u32) {
        self.add_kfd_cpu();
        for i in 0..count {
            self.add_kfd_gpu(128 + i);
        }
    }

    /// An NVIDIA GPU's `/proc` entry; its device node is not created.
    pub fn add_nvidia_proc_entry(&self, gpu: &NvidiaGpu) {
        let dir = self.root.join(format!("proc/driver/nvidia/gpus/{}", gpu.bus));
        fs::create_dir_all(&dir).unwrap();
        write_file(dir.join("information"), gpu.information());
    }

    /// `count` NVIDIA GPUs, each with its `/proc` entry (minor `i`) and its
    /// `/dev/nvidia<i>`, plus the control nodes.
    pub fn add_nvidia_proc_gpus(&self, count: u32) {
        for i in 0..count {
            self.add_nvidia_proc_entry(&NvidiaGpu::new(&format!("0000:{:02x}:00.0", i + 1), "Fake GPU", u64::from(i)));
        }
        self.add_nvidia_dev_nodes(&(0..count).collect::<Vec<_>>());
    }

    /// `/dev/nvidia<N>` nodes, plus the control nodes a real host has, which
    /// must not be counted.
    pub fn add_nvidia_dev_nodes(&self, minors: &[u32]) {
        for m in minors {
            self.add_dev_entry(&format!("nvidia{m}"));
        }
        for control in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"] {
            self.add_dev_entry(control);
        }
    }
}

/// How a TPU chip's device node is named in sysfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpuNode {
    /// `<pci>/accel/accel<N>` and `/dev/accel<N>` (v2-v4).
    Accel(u32),
    /// `<pci>/iommu_group` -> group `<G>` and `/dev/vfio/<G>` (v5e and later).
    Vfio(u32),
}

impl Sysroot {
    /// A PCI function with these `vendor` and `device` ids.
    pub fn add_pci_device(&self, pci: &str, vendor: &str, device: &str) -> PathBuf {
        let dir = self.root.join("sys/bus/pci/devices").join(pci);
        fs::create_dir_all(&dir).unwrap();
        write_file(dir.join("vendor"), format!("{vendor}\n"));
        write_file(dir.join("device"), format!("{device}\n"));
        dir
    }

    /// A Google TPU chip (`device` is its PCI device id, e.g. `0x0063`);
    /// `present` false leaves its `/dev` node out, as in a container that
    /// was not given the chip.
    pub fn add_tpu_chip(&self, pci: &str, device: &str, node: TpuNode, present: bool) {
        let dir = self.add_pci_device(pci, "0x1ae0", device);
        let dev = match node {
            TpuNode::Accel(n) => {
                fs::create_dir_all(dir.join(format!("accel/accel{n}"))).unwrap();
                format!("accel{n}")
            }
            TpuNode::Vfio(g) => {
                let group = self.root.join(format!("sys/kernel/iommu_groups/{g}"));
                fs::create_dir_all(&group).unwrap();
                std::os::unix::fs::symlink(&group, dir.join("iommu_group")).unwrap();
                format!("vfio/{g}")
            }
        };
        if present {
            self.add_dev_entry(&dev);
        }
    }
}

/// Hosts and containers of real, published machine descriptions, as facts.
/// Each returns what the runtimes enumerate there: the GPU count a test may
/// be given.
pub mod hosts {
    use super::{KfdNode, NvidiaGpu, Sysroot};

    /// Two EPYC sockets (two CPU nodes) and 8 MI210 (gfx90a, 416 SIMDs),
    /// nodes 2-9, render minors 128-135. ROCR: 8.
    pub fn mi210x8_two_sockets(s: &mut Sysroot) -> u32 {
        s.add_kfd_node(&KfdNode::cpu(64));
        s.add_kfd_node(&KfdNode::cpu(64));
        for i in 0..8u64 {
            let gpu = KfdNode::gpu(90010, 416, 128 + i).device(29704).at(0, (0x10 + 0x10 * i) << 8).unique(0x1000 + i);
            s.add_kfd_node_with_render(&gpu);
        }
        8
    }

    /// MI300X in CPX mode: 8 devices x 8 partitions, 63 of them present
    /// (nodes 2-64, render 128-190), each partition its own node. The
    /// partitions of a device share its unique_id; their location_ids are
    /// the device's plus the partition (PCI function 0-7). ROCR: 63.
    pub fn mi300x_cpx_partitions(s: &mut Sysroot) -> u32 {
        s.add_kfd_node(&KfdNode::cpu(96));
        s.add_kfd_node(&KfdNode::cpu(96));
        for i in 0..63u64 {
            let (device, part) = (i / 8, i % 8);
            let gpu = KfdNode::gpu(90402, 38 * 4, 128 + i).device(29857).at(0, ((0x05 + 0x10 * device) << 8) | part);
            s.add_kfd_node_with_render(&gpu.unique(0x2000 + device));
        }
        63
    }

    /// MI308X in CPX mode: 32 partitions, 4 per device (sharing its
    /// unique_id, PCI functions 0-3), render minors with gaps (128-131,
    /// 136-139, ...). ROCR: 32.
    pub fn mi308x_cpx_render_gaps(s: &mut Sysroot) -> u32 {
        s.add_kfd_node(&KfdNode::cpu(64));
        for device in 0..8u64 {
            for part in 0..4u64 {
                let gpu = KfdNode::gpu(90402, 80, 128 + device * 8 + part).at(0, ((0x10 + device) << 8) | part);
                s.add_kfd_node_with_render(&gpu.unique(0x3000 + device));
            }
        }
        32
    }

    /// A Vega10/MI25 host on a kernel without `gfx_target_version`: nodes 1
    /// and 2 have 256 SIMDs, render 128 and 129. ROCR: 2.
    pub fn vega10_old_kernel(s: &mut Sysroot) -> u32 {
        s.add_kfd_node(&KfdNode::cpu(20).without_gfx_target_version());
        for minor in [128, 129] {
            let gpu = KfdNode::gpu(0, 256, minor).without_gfx_target_version().device(26720).at(0, 0x1900);
            s.add_kfd_node_with_render(&gpu);
        }
        2
    }

    /// A Raven Ridge APU (CPU cores and a 44-SIMD GPU in node 0, render 129)
    /// and a Fiji card whose buggy kernel reported render minor 0 (node 1);
    /// no `gfx_target_version` anywhere. ROCR: 2.
    pub fn raven_apu_and_fiji(s: &mut Sysroot) -> u32 {
        let apu = KfdNode::gpu(0, 44, 129).without_gfx_target_version().cores(8).device(5597).at(0, 2560);
        s.add_kfd_node_with_render(&apu);
        let fiji = KfdNode::gpu(0, 256, 0).without_gfx_target_version();
        s.add_kfd_node(&KfdNode { vendor_id: 0, ..fiji });
        s.add_render_node(128);
        2
    }

    /// MI300A, 4 APU sockets in SPX mode: CPU nodes 0-3, GPU nodes 4-7
    /// (render 128, 136, 144, 152), and spare partition render nodes
    /// 129-135, 137-143, ... that no node names. Each APU is its own PCI
    /// domain (0-3) with the GPU at the same place in each, bus 2 device 0
    /// (`location_id` 512 on all four), and its own `unique_id`. ROCR: 4.
    pub fn mi300a_four_apus(s: &mut Sysroot) -> u32 {
        mi300a(s, |apu| 0x5a00_0000_0000_0000 + apu * 0x1_0001)
    }

    /// [`mi300a_four_apus`] as a kernel shows it when it has no `unique_id`
    /// for the APUs (0, as KFD reports a device without one): only the PCI
    /// domain tells the four apart, their `location_id` being the same.
    pub fn mi300a_four_apus_without_unique_id(s: &mut Sysroot) -> u32 {
        mi300a(s, |_| 0)
    }

    fn mi300a(s: &mut Sysroot, unique_id: impl Fn(u64) -> u64) -> u32 {
        for _ in 0..4 {
            s.add_kfd_node(&KfdNode::cpu(48));
        }
        for apu in 0..4u64 {
            let gpu = KfdNode::gpu(90402, 912, 128 + 8 * apu).device(29856).at(apu, 512).unique(unique_id(apu));
            s.add_kfd_node_with_render(&gpu);
        }
        for minor in 128..160 {
            s.add_render_node(minor);
        }
        4
    }

    /// An H100 pod under Kubernetes CDI: `/proc` shows the node's 8 GPUs,
    /// the pod holds only `/dev/nvidia6`. CUDA: 1.
    pub fn h100_cdi_pod(s: &mut Sysroot) -> u32 {
        for minor in 0..8u64 {
            s.add_nvidia_proc_entry(&NvidiaGpu::new(
                &format!("0000:{:02x}:00.0", 0x18 + minor * 0x10),
                "NVIDIA H100 80GB HBM3",
                minor,
            ));
        }
        s.add_dev_entry("nvidia6");
        for control in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"] {
            s.add_dev_entry(control);
        }
        1
    }

    /// Three P100s, the third one `GPU Excluded: Yes`. CUDA: 2.
    pub fn p100_one_excluded(s: &mut Sysroot) -> u32 {
        for (minor, bus) in [(0, "0000:04:00.0"), (1, "0000:06:00.0")] {
            s.add_nvidia_proc_entry(&NvidiaGpu::new(bus, "Tesla P100-SXM2-16GB", minor));
        }
        s.add_nvidia_proc_entry(&NvidiaGpu::new("0000:08:00.0", "Tesla P100-SXM2-16GB", 2).excluded());
        s.add_nvidia_dev_nodes(&[0, 1, 2]);
        2
    }

    /// LXD with `nvidia.runtime`: `/proc/driver/nvidia/gpus` is an empty
    /// tmpfs, `/dev/nvidia0` and `/dev/nvidia1` are there. CUDA: 2.
    pub fn lxd_empty_proc(s: &mut Sysroot) -> u32 {
        std::fs::create_dir_all(s.root.join("proc/driver/nvidia/gpus")).unwrap();
        s.add_nvidia_dev_nodes(&[0, 1]);
        2
    }

    /// nvidia-docker 1 with `NV_GPU=1`: both GPUs' `/proc` entries without
    /// their `information`, only `/dev/nvidia1`. CUDA: 1.
    pub fn nvidia_docker1(s: &mut Sysroot) -> u32 {
        for bus in ["0000:01:00.0", "0000:02:00.0"] {
            std::fs::create_dir_all(s.root.join(format!("proc/driver/nvidia/gpus/{bus}"))).unwrap();
        }
        s.add_nvidia_dev_nodes(&[1]);
        1
    }

    /// An A100 in MIG mode: `/dev/nvidia0`, the MIG capability nodes, no
    /// `/proc` tree. One GPU.
    pub fn a100_mig(s: &mut Sysroot) -> u32 {
        s.add_nvidia_dev_nodes(&[0]);
        for cap in [1, 2, 66, 67, 75, 76, 84, 85] {
            s.add_dev_entry(&format!("nvidia-caps/nvidia-cap{cap}"));
        }
        1
    }

    /// A Ryzen desktop: the CPU's gfx1036 iGPU (4 SIMDs, render 128) next to
    /// an RTX 4090 (minor 0, `renderD129`). With `container`, only the NVIDIA
    /// devices were given. A CUDA test's GPU: the RTX, 1.
    pub fn rtx4090_and_ryzen_igpu(s: &mut Sysroot, container: bool) -> u32 {
        s.add_kfd_node(&KfdNode::cpu(16));
        let igpu = KfdNode::gpu(100306, 4, 128).device(5710).at(0, 0x7300);
        if container {
            s.add_kfd_node(&igpu);
        } else {
            s.add_kfd_node_with_render(&igpu);
            s.add_render_node(129);
        }
        s.add_nvidia_proc_entry(&NvidiaGpu::new("0000:01:00.0", "NVIDIA GeForce RTX 4090", 0));
        s.add_nvidia_dev_nodes(&[0]);
        1
    }
}
