//! Whether a lock directory coordinates with anything beyond this one
//! action: the evidence the kernel gives of a directory that only this
//! action can see. Whether the wrapper created it does not matter (an
//! image may ship `/var/lock`; a host's first test creates `/gpu-locks`).
//!
//! - **The action's own root** ([`Private::ActionRoot`]): `TEST_SRCDIR`
//!   starts with `/bazel-out/` (or `//bazel-out/`), so `/` is the action's
//!   input root, as under a remote engine that runs each action in a
//!   chroot or a bubblewrap sandbox of its own; and the lock directory is
//!   on the same mount as `/`. A lock directory the worker mounted from the
//!   host is a mount of its own, and passes.
//! - **A container made for the action** ([`Private::ContainerRoot`]): the
//!   directory that holds `bazel-out` in `TEST_SRCDIR` is the root of a
//!   mount (the input root was mounted into the container), `/` is an
//!   `overlay` or `tmpfs` (an image's root), and the lock directory is on
//!   `/`'s mount. Bazel's own sandbox also mounts the action's directory,
//!   but over the host's root, which is neither.
//! - **A `/tmp` of the action's own** ([`Private::ActionTmp`]): the lock
//!   directory is on a mount of a directory named `_hermetic_tmp`, which is
//!   what Bazel 7 and later mount at `/tmp` in each sandbox
//!   (`--incompatible_sandbox_hermetic_tmp`, on by default since 7.0; see
//!   bazelbuild/bazel `LinuxSandboxedSpawnRunner.java`).
//!
//! Every look is a `statx(2)` (a few microseconds, only under Bazel);
//! `/proc/self/mountinfo` is read only where a mount must be named. The
//! limits (a `tmpfs` mounted fresh at `/tmp` per action, a host whose own
//! root is an overlay) are in docs/remote-execution.md.

use crate::prelude::*;
use crate::sys::dirs::read_file;
use core::ffi::CStr;
use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};

/// Why a lock directory coordinates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Private {
    ActionRoot,
    ContainerRoot,
    ActionTmp,
}

impl Private {
    /// For messages: where the lock directory is.
    pub fn place(self) -> &'static str {
        match self {
            Private::ActionRoot => "inside this action's own root (TEST_SRCDIR is under /bazel-out)",
            Private::ContainerRoot => {
                "on the root file system of a container made for this action (its input root is a mount of its own, its root an overlay or tmpfs)"
            }
            Private::ActionTmp => "in a /tmp of this action's own (Bazel's sandbox mounts one per action)",
        }
    }

    /// For messages: what makes it coordinate.
    pub fn repair(self) -> &'static str {
        match self {
            Private::ActionRoot | Private::ContainerRoot => {
                "mount the host's lock directory there in the worker, or run one action per GPU there"
            }
            Private::ActionTmp => {
                "let the sandboxes share the host's /tmp (--sandbox_add_mount_pair=/tmp), or set JAX_LOCK_DIR (--lock-dir) to a directory they share, made writable with --sandbox_writable_path"
            }
        }
    }
}

/// The mount id of `path` (following links), and whether `path` is the
/// root of that mount.
fn mount_of(path: &CStr) -> Option<(u64, bool)> {
    let st = rustix::fs::statx(rustix::fs::CWD, path, AtFlags::empty(), StatxFlags::MNT_ID).ok()?;
    if st.stx_mask & StatxFlags::MNT_ID.bits() == 0 {
        return None;
    }
    let root = st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
        && st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
    Some((st.stx_mnt_id, root))
}

/// The nearest of `dir` and its parents that exists (a lock directory not
/// made yet will be made on that one's mount). No allocation.
fn nearest_existing(dir: &[u8]) -> Option<(u64, bool)> {
    let mut path = dir;
    loop {
        if let Some(found) = wrapper_common::with_joined(&[path], None, mount_of).flatten() {
            return Some(found);
        }
        let cut = path.iter().rposition(|&b| b == b'/')?;
        path = if cut == 0 { b"/" } else { &path[..cut] };
        if path.is_empty() {
            return None;
        }
    }
}

/// One line of `/proc/self/mountinfo`: the root within its file system
/// and the file system type, for mount `id`.
fn mount_info(id: u64) -> Option<(Vec<u8>, Vec<u8>)> {
    let text = read_file(c"/proc/self/mountinfo")?;
    let want = alloc::format!("{id}");
    let line = text.split(|&b| b == b'\n').find(|l| l.split(|&b| b == b' ').next() == Some(want.as_bytes()))?;
    let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let dash = fields.iter().position(|f| *f == b"-")?;
    Some((fields.get(3)?.to_vec(), fields.get(dash + 1)?.to_vec()))
}

/// Where `TEST_SRCDIR` puts the action's root: the directory that holds
/// `bazel-out`, `/` when it starts there.
fn action_root(srcdir: &[u8]) -> Option<&[u8]> {
    let trimmed = srcdir.strip_prefix(b"/").unwrap_or(srcdir);
    if trimmed.starts_with(b"/bazel-out/") || srcdir.starts_with(b"/bazel-out/") {
        return Some(b"/");
    }
    let at = srcdir.windows(11).position(|w| w == b"/bazel-out/")?;
    Some(&srcdir[..at])
}

/// Whether the lock directory `dir` (or, when missing, where it would be
/// made) coordinates nothing beyond this action, and why. Without Bazel's
/// `TEST_SRCDIR`, or with one that names no `bazel-out` and a lock
/// directory outside `/tmp`, it makes no system call; else two or three
/// `statx(2)`, and allocates only where a mount must be named.
pub fn judge(dir: &CStr) -> Option<Private> {
    let srcdir = wrapper_common::env::var_nonempty(b"TEST_SRCDIR")?;
    let root = action_root(srcdir);
    let under_tmp = dir.to_bytes().starts_with(b"/tmp/");
    if root.is_none() && !under_tmp {
        return None;
    }
    let (lock_mount, _) = nearest_existing(dir.to_bytes())?;
    if let Some(root) = root {
        let (slash, _) = mount_of(c"/")?;
        if lock_mount == slash {
            if root == b"/" {
                return Some(Private::ActionRoot);
            }
            let mounted = wrapper_common::with_joined(&[root], None, mount_of).flatten().is_some_and(|(_, r)| r);
            if mounted && mount_info(slash).is_some_and(|(_, fs)| fs == b"overlay" || fs == b"tmpfs") {
                return Some(Private::ContainerRoot);
            }
            return None;
        }
    }
    // A per-action /tmp is a mount of its own: only a lock directory under
    // one needs mountinfo read.
    if under_tmp && mount_of(c"/tmp").is_some_and(|(id, r)| r && id == lock_mount) {
        return mount_info(lock_mount)
            .filter(|(root, _)| root.ends_with(b"/_hermetic_tmp"))
            .map(|_| Private::ActionTmp);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_roots_from_test_srcdir() {
        assert_eq!(action_root(b"//bazel-out/k8-fastbuild/bin/t.runfiles"), Some(&b"/"[..]));
        assert_eq!(action_root(b"/bazel-out/k8-fastbuild/bin/t.runfiles"), Some(&b"/"[..]));
        assert_eq!(action_root(b"/work/x/bazel-out/k8-opt/bin/t.runfiles"), Some(&b"/work/x"[..]));
        assert_eq!(action_root(b"/home/u/runfiles"), None);
    }

    #[test]
    fn the_nearest_existing_directory_names_the_mount() {
        let here = nearest_existing(b"/proc/self/no/such/dir").unwrap();
        assert_eq!(here, mount_of(c"/proc/self").unwrap());
        assert!(mount_of(c"/").unwrap().1, "/ is the root of its mount");
    }
}
