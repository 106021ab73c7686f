//! Device nodes: whether this process may use one (it opens read-write), and
//! which group it would need when it may not.

use crate::dirs::host_path;
use crate::prelude::*;
use core::ffi::CStr;
use core::ops::ControlFlow;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use wrapper_common::CBuf;
use wrapper_common::diag::Os;
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
}

impl Access {
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
        }
    }
}

/// Opens `path` read-write (and closes it again), as the GPU runtimes open
/// their device nodes.
pub fn open_device(path: &CStr) -> Access {
    let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(_) => Access::Opened,
        Err(Errno::NOENT | Errno::NOTDIR) => Access::Missing,
        Err(e @ (Errno::ACCESS | Errno::PERM)) => Access::Denied(e),
        Err(e) => Access::Failed(e),
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
