//! Device nodes: whether this process may use one (it opens read-write), and
//! what would let it when it may not: the group it needs (`EACCES`: the
//! file's permissions), or the device itself given to the container
//! (`EPERM`: the device cgroup, which no group membership changes; linux
//! `security/device_cgroup.c`, `devcgroup_check_permission`).

use crate::prelude::*;
use crate::sys::dirs::host_path;
use core::ffi::CStr;
use core::ops::ControlFlow;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::CBuf;
use wrapper_common::diag::{Bytes, Os};
use wrapper_common::lines::{Line, for_each_line_in_file};
use wrapper_common::numbers::parse_u64;

/// What opening a GPU's device node gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The source names no node to check; the GPU counts as the runtime takes it.
    Unchecked,
    /// Opened read-write.
    Opened,
    /// No such node here (a container that was not given the GPU).
    Missing,
    /// The node exists but refused this user (`EACCES`/`EPERM`).
    Denied(Errno),
    /// Any other error opening it.
    Failed(Errno),
    /// The source's value cannot name a node.
    Invalid,
    /// The source itself withholds the GPU: the KFD topology gives `EPERM`
    /// for the `properties` of a GPU node that the caller's device cgroup
    /// does not allow (linux `drivers/gpu/drm/amd/amdkfd/kfd_topology.c`,
    /// `node_show`), as in a container given other GPUs of the host.
    Withheld,
}

impl Access {
    /// What an error from opening (or asking about) a device node means.
    pub fn refused(errno: Errno) -> Access {
        match errno {
            Errno::NOENT | Errno::NOTDIR => Access::Missing,
            Errno::ACCESS | Errno::PERM => Access::Denied(errno),
            e => Access::Failed(e),
        }
    }

    pub fn usable(self) -> bool {
        matches!(self, Access::Unchecked | Access::Opened)
    }

    /// A short phrase for `--list`.
    pub fn describe(self) -> String {
        match self {
            Access::Unchecked => "no node to check (counted)".to_string(),
            Access::Opened => "opened".to_string(),
            Access::Missing => "missing (not given to this container)".to_string(),
            Access::Denied(e) => format!("denied: {}", Os(e)),
            Access::Failed(e) => format!("cannot open: {}", Os(e)),
            Access::Invalid => "unusable node number".to_string(),
            Access::Withheld => {
                "withheld: the device cgroup does not give this container that GPU (its properties read Operation not permitted)".to_string()
            }
        }
    }

    /// The machine-readable word for `--list=json`.
    pub fn key(self) -> &'static str {
        match self {
            Access::Unchecked => "unchecked",
            Access::Opened => "opened",
            Access::Missing => "missing",
            Access::Denied(_) => "denied",
            Access::Failed(_) => "failed",
            Access::Invalid => "invalid",
            Access::Withheld => "withheld",
        }
    }
}

/// Opens `path` read-write (and closes it again), as the GPU runtimes open
/// their device nodes.
pub fn open_device(path: &CStr) -> Access {
    let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(_) => Access::Opened,
        Err(e) => Access::refused(e),
    }
}

/// The group owning `node`: its gid, and its name from `<sysroot>/etc/group`
/// when listed there. No allocation.
pub fn owner_group(sysroot: &[u8], node: &CStr) -> Option<(u32, Option<CBuf<64>>)> {
    let gid = rustix::fs::stat(node).ok()?.st_gid;
    let mut name = None;
    if let Some(group_file) = host_path(sysroot, b"/etc/group", None) {
        let mut buf = [0u8; 1024];
        let _ = for_each_line_in_file(group_file.as_cstr(), &mut buf, |Line { bytes, complete }| {
            // name:password:gid:members
            let mut fields = bytes.split(|&b| b == b':');
            let (Some(n), Some(_), Some(g)) = (fields.next(), fields.next(), fields.next()) else {
                return ControlFlow::Continue(());
            };
            if complete && parse_u64(g) == Some(u64::from(gid)) {
                name = CBuf::from_bytes(n).ok();
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
    }
    Some((gid, name))
}

/// Why `node` refused this process, in words, for a warning line.
pub struct Refusal<'a> {
    pub sysroot: &'a [u8],
    pub node: &'a CStr,
    pub errno: Errno,
}

impl core::fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.errno {
            Errno::PERM => f.write_str(
                "the container's device rules (its device cgroup) refuse it, whatever this user's groups (give the container the device: docker --device, or the cluster's GPU device plugin)",
            ),
            Errno::ACCESS => match owner_group(self.sysroot, self.node) {
                Some((gid, _)) if crate::sys::userns::unmapped(gid, crate::sys::userns::Ids::Group) => write!(
                    f,
                    "this user is not allowed to use it (its group, gid {gid} here, is outside this user namespace: give the container the group that owns it on the host, usually 'render' or 'video')"
                ),
                Some((gid, Some(name))) => write!(
                    f,
                    "this user is not allowed to use it (add the user to group '{}', gid {gid}, that owns it)",
                    Bytes(name.as_bytes())
                ),
                Some((gid, None)) => write!(
                    f,
                    "this user is not allowed to use it (add the user to the group with gid {gid}, usually 'render' or 'video')"
                ),
                None => f.write_str("this user is not allowed to use it (usually: not in group 'render' or 'video')"),
            },
            _ => f.write_str("it cannot be opened"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(errno: Errno, node: &CStr) -> String {
        Refusal { sysroot: b"/nonexistent-sysroot", node, errno }.to_string()
    }

    #[test]
    fn a_device_cgroup_refusal_does_not_send_the_user_to_a_group() {
        // EPERM on a device node is the device cgroup: no group helps.
        let perm = said(Errno::PERM, c"/dev/null");
        assert!(perm.starts_with("the container's device rules (its device cgroup) refuse it"), "{perm}");
        assert!(!perm.contains("add the user"), "{perm}");
        // EACCES is the file's permissions: the owning group (here /dev/null's
        // gid, with no group file in the sysroot to name it).
        let access = said(Errno::ACCESS, c"/dev/null");
        assert!(
            access.starts_with("this user is not allowed to use it (add the user to the group with gid"),
            "{access}"
        );
        let gone = said(Errno::ACCESS, c"/nonexistent-sysroot/dev/kfd");
        assert_eq!(gone, "this user is not allowed to use it (usually: not in group 'render' or 'video')");
        assert_eq!(said(Errno::IO, c"/dev/null"), "it cannot be opened");
    }
}
