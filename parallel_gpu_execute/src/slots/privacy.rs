//! Whether a lock directory coordinates with anything beyond this one
//! action: the evidence the kernel gives of a directory that only this
//! action can see. Whether the wrapper created it does not matter (an
//! image may ship `/var/lock`; a host's first test creates `/gpu-locks`).
//! A false refusal costs as much as a silent double booking, so each rule
//! needs evidence of a place made for this one action, and Bazel's own
//! sandbox, which runs every test of a build over one host (or one
//! container), is told apart:
//!
//! - **The action's own root** ([`Private::ActionRoot`]): `TEST_SRCDIR`
//!   starts with `/bazel-out/` (or `//bazel-out/`), so `/` is the action's
//!   input root (a remote engine's chroot or bubblewrap sandbox), and the
//!   lock directory is on `/`'s mount.
//! - **Bazel's per-action `/tmp`** ([`Private::ActionTmp`]): the lock
//!   directory is on a mount of `<sandbox>/_hermetic_tmp` or of a directory
//!   in it: Bazel 7 and later bind it at `/tmp` in each sandbox, and from 7.4
//!   a `--sandbox_writable_path` under `/tmp` is made inside it and bound
//!   over the host's (bazelbuild/bazel `LinuxSandboxedSpawnRunner.java`).
//! - **A mount made for this action** ([`Private::SandboxMount`],
//!   [`Private::ContainerMount`]): the lock directory is on a mount of a
//!   whole file system (its root is `/` in mountinfo, unlike a directory
//!   bound from the host), born after the action began: a `--sandbox_tmpfs_path=/tmp` (the
//!   sandbox mounts it after Bazel made `TEST_TMPDIR`), or a fresh tmpfs at
//!   `/run` in a container made for the action (after its input root was
//!   made). The action began at `TEST_TMPDIR`'s birth inside Bazel's
//!   sandbox, at its input root's where that is a mount (a container);
//!   elsewhere there is no such look.
//! - **Bazel's hermetic sandbox** ([`Private::HermeticRoot`]): in Bazel's
//!   sandbox, the lock directory is on `/`'s mount, and `/` is a directory
//!   made for this action, `<sandbox base>/linux-sandbox/<id>`, that
//!   `--experimental_use_hermetic_linux_sandbox` pivots into (mountinfo's
//!   root field of `/`), with the execroot at `/execroot/<workspace>`:
//!   only what is mounted into it is shared.
//! - **The test's runfiles tree** ([`Private::Runfiles`]): a relative lock
//!   directory (taken from the working directory,
//!   `$TEST_SRCDIR/$TEST_WORKSPACE`), or one spelled under `TEST_SRCDIR`,
//!   that is inside that tree, a tree of each test's own, by the
//!   directories themselves.
//! - **A container made for the action** ([`Private::ContainerRoot`]): the
//!   directory that holds `bazel-out` in `TEST_SRCDIR` is the root of a
//!   mount (the input root was mounted into the container), the lock
//!   directory is on `/`'s mount, whatever its file system (overlay, tmpfs,
//!   btrfs, zfs, a plain directory), and this is not Bazel's own sandbox,
//!   which also mounts the action's directory but runs over the host's (or
//!   its container's) root: its PID 1 is `linux-sandbox`, or that mount is
//!   a bind of a directory under `sandbox/linux-sandbox/`. Nor is it the
//!   host itself, with the workspace mounted there (an executor's overlayfs
//!   workspace): `/proc` shows the host's PID namespace and PID 1 has this
//!   `/` mount at `/`.
//!
//! [`private_lock_dir`] then refuses the test or warns, as
//! `PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR` says.
//!
//! Every look is a `statx(2)` (a few microseconds, and only under Bazel);
//! `/proc/self/mountinfo` and `/proc/1/comm` are read only where a mount
//! must be named. The limits are in docs/remote-execution.md.

use crate::prelude::*;
use crate::sys::dirs::read_file;
use core::ffi::CStr;
use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};

/// Why a lock directory coordinates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Private {
    ActionRoot,
    /// The root of Bazel's hermetic sandbox, a directory of this action's.
    HermeticRoot,
    /// In this test's runfiles tree (a relative path, or one under it).
    Runfiles,
    ContainerRoot,
    ActionTmp,
    /// A mount born after the action began, in Bazel's sandbox.
    SandboxMount,
    /// A mount born after the action's input root, in a container.
    ContainerMount,
}

/// The advice where the place is the action's, not Bazel's: never a
/// directory under a per-action `/tmp`.
const MOUNT_HOST_DIR: &str = "mount the host's lock directory there in the worker (or set --lock-dir to one the worker mounts from the host), or run one action per GPU there";
/// The advice inside Bazel's sandbox.
const SHARED_DIR: &str = "use a lock directory outside /tmp that every test sees, such as /var/lock/gpu (made once on the host, mode 1777), with --lock-dir (JAX_LOCK_DIR for JAX) and --sandbox_writable_path=/var/lock/gpu; or let the sandboxes share the host's /tmp (--sandbox_add_mount_pair=/tmp, without --sandbox_tmpfs_path=/tmp)";

/// The advice in Bazel's hermetic sandbox.
const HERMETIC_DIR: &str = "mount the host's lock directory into every sandbox: --sandbox_add_mount_pair=/var/lock (for JAX, one outside /tmp, with JAX_LOCK_DIR)";
/// The advice for a relative lock directory under Bazel.
const ABSOLUTE_DIR: &str =
    "give an absolute lock directory every test sees, such as /var/lock (--lock-dir; JAX_LOCK_DIR for JAX)";

/// What to do with a lock directory that coordinates nothing (see
/// [`judge`]; `PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivatePolicy {
    /// `auto` (the default): refuse where the pool has several GPUs, run
    /// with a warning where it has one.
    Auto,
    /// `run`: run with a warning (a worker that runs one action at a time).
    Run,
    /// `refuse`: exit 2 before the test starts.
    Refuse,
}

impl PrivatePolicy {
    pub fn parse(value: &[u8]) -> Option<PrivatePolicy> {
        match value {
            b"auto" => Some(PrivatePolicy::Auto),
            b"run" => Some(PrivatePolicy::Run),
            b"refuse" => Some(PrivatePolicy::Refuse),
            _ => None,
        }
    }
}

impl Private {
    /// For messages: where the lock directory is.
    pub fn place(self) -> &'static str {
        match self {
            Private::ActionRoot => "inside this action's own root (TEST_SRCDIR is under /bazel-out)",
            Private::HermeticRoot => {
                "inside this action's own root (Bazel's hermetic sandbox shares only what is mounted in)"
            }
            Private::Runfiles => "inside this test's runfiles tree, which Bazel makes for each test",
            Private::ContainerRoot => {
                "on the root file system of a container made for this action (its input root is a mount of its own, and this is not Bazel's sandbox)"
            }
            Private::ActionTmp => {
                "in a /tmp of this action's own (Bazel's sandbox mounts its _hermetic_tmp there, and a writable path under /tmp inside it)"
            }
            Private::SandboxMount => {
                "on a mount made after this action began (a tmpfs of its own in Bazel's sandbox, as --sandbox_tmpfs_path makes)"
            }
            Private::ContainerMount => {
                "on a mount made after this action's input root (a tmpfs of its own in a container made for the action, such as a fresh /run)"
            }
        }
    }

    /// For messages: what makes it coordinate. Never a directory under a
    /// per-action `/tmp`.
    pub fn repair(self) -> &'static str {
        match self {
            Private::ActionRoot | Private::ContainerRoot | Private::ContainerMount => MOUNT_HOST_DIR,
            Private::ActionTmp | Private::SandboxMount => SHARED_DIR,
            Private::HermeticRoot => HERMETIC_DIR,
            Private::Runfiles => ABSOLUTE_DIR,
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

/// Of one line of `/proc/self/mountinfo`: the root of the mount within its
/// file system and its mount point, each unescaped (`\\040` a space).
struct MountInfo {
    root: Vec<u8>,
    point: Vec<u8>,
}

fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal =
            field.get(i + 1..i + 4).filter(|d| field[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8).wrapping_add(b - b'0')));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// The line of mount `id` in `mountinfo` (`/proc/self/mountinfo`'s text).
fn mount_info(mountinfo: &[u8], id: u64) -> Option<MountInfo> {
    let mut digits = [0u8; 20];
    let want = wrapper_common::numbers::format_u64(id, &mut digits);
    let line = mountinfo.split(|&b| b == b'\n').find(|l| l.split(|&b| b == b' ').next() == Some(want))?;
    let mut fields = line.split(|&b| b == b' ').skip(3);
    Some(MountInfo { root: unescape(fields.next()?), point: unescape(fields.next()?) })
}

/// Whether `root` (a mount's root within its file system) is Bazel's
/// per-action `/tmp`, or a directory in it.
fn hermetic_tmp(root: &[u8]) -> bool {
    root.ends_with(b"/_hermetic_tmp") || root.windows(15).any(|w| w == b"/_hermetic_tmp/")
}

/// When `path` was born (`statx`'s `stx_btime`), where the file system
/// says.
fn born(path: &[u8]) -> Option<(i64, u32)> {
    wrapper_common::with_joined(&[path], None, |p| {
        let st = rustix::fs::statx(rustix::fs::CWD, p, AtFlags::empty(), StatxFlags::BTIME).ok()?;
        let t = st.stx_btime;
        (st.stx_mask & StatxFlags::BTIME.bits() != 0 && (t.tv_sec, t.tv_nsec) != (0, 0))
            .then_some((t.tv_sec, t.tv_nsec))
    })
    .flatten()
}

/// Whether a mount whose root was born at `mounted` was made since the
/// action began at `began`. Equal times count: a file system stamps a new
/// inode from the kernel's coarse clock, which moves once a tick (4 ms at
/// `HZ=250`), and a sandbox mounts its tmpfs within a tick of Bazel making
/// `TEST_TMPDIR` as often as not. That clock never runs backwards between
/// the two (multigrain timestamps keep it at or above any fine one given
/// out), so a mount made later never reads as older. A mount every test
/// shares was made before the build, not in the tick this one began.
fn made_since(began: (i64, u32), mounted: (i64, u32)) -> bool {
    mounted >= began
}

/// Whether this process runs in Bazel's own sandbox: its PID namespace's
/// first process is `linux-sandbox` (bazelbuild/bazel
/// `src/main/tools/linux-sandbox.cc`: it clones PID 1 into a new PID
/// namespace without an exec, and mounts a new `/proc`).
pub fn in_linux_sandbox() -> bool {
    read_file(c"/proc/1/comm").is_some_and(|c| c.strip_suffix(b"\n").unwrap_or(&c) == b"linux-sandbox")
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

/// Whether `root` (the root field of `/`'s mount) is a sandbox directory of
/// Bazel's hermetic sandbox: `<sandbox base>/linux-sandbox/<id>`
/// (bazelbuild/bazel `LinuxSandboxedSpawnRunner.java`, `sandboxPath`,
/// given to `linux-sandbox -h`, which `pivot_root`s into it).
fn hermetic_root(root: &[u8]) -> bool {
    let root = root.strip_suffix(b"/").unwrap_or(root);
    let Some(cut) = root.iter().rposition(|&b| b == b'/') else { return false };
    let (parent, id) = (&root[..cut], &root[cut + 1..]);
    !id.is_empty() && id.iter().all(u8::is_ascii_digit) && parent.ends_with(b"/linux-sandbox")
}

/// Whether `root`, the directory that holds `bazel-out`, is where Bazel's
/// hermetic sandbox puts the execroot: `/execroot/<workspace>` (its
/// `sandboxPath/execroot/<workspace>`, entered below the sandbox's root).
fn hermetic_execroot(root: &[u8]) -> bool {
    root.strip_prefix(b"/execroot/").is_some_and(|ws| !ws.is_empty() && !ws.contains(&b'/'))
}

/// Whether the lock directory `dir` lies inside the runfiles tree
/// `srcdir` (a `<target>.runfiles` directory, as Bazel names them), by the
/// directories themselves, not their names (a link in the tree to a shared
/// directory leads out of it; `srcdir` may be spelled through a link): the
/// nearest of `dir` and its parents that exists, on the tree's own mount
/// (a directory mounted into the tree is from elsewhere), and the
/// directories above it, up to `srcdir` or `/`. Anything else is no
/// evidence: a part not made yet that climbs (`..`), a path through a link
/// to nothing or a file, a path too long to be opened.
fn in_runfiles(dir: &[u8], srcdir: &[u8]) -> bool {
    use rustix::fs::{Mode, OFlags};
    const AT: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);
    let id = |st: rustix::fs::Stat| (st.st_dev, st.st_ino);
    let mount = |fd: &rustix::fd::OwnedFd| {
        let st = rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID).ok()?;
        (st.stx_mask & StatxFlags::MNT_ID.bits() != 0).then_some(st.stx_mnt_id)
    };
    let named = srcdir[..srcdir.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1)].ends_with(b".runfiles");
    let open = |p: &[u8]| wrapper_common::with_joined(&[p], None, |p| rustix::fs::open(p, AT, Mode::empty()).ok());
    let Some(tree) = open(srcdir).flatten().filter(|_| named && dir.len() < 4096) else { return false };
    let (tree_id, tree_mount) = (rustix::fs::fstat(&tree).map(id), mount(&tree));
    let mut path = dir;
    let mut at = loop {
        if let Some(fd) = open(path).flatten() {
            break fd;
        }
        // Something there that leads nowhere (a dangling link, a file).
        let there = wrapper_common::with_joined(&[path], None, |p| rustix::fs::lstat(p).is_ok());
        let (rest, last) = match path.iter().rposition(|&b| b == b'/') {
            Some(0) => (&b"/"[..], &path[1..]),
            Some(cut) => (&path[..cut], &path[cut + 1..]),
            None if path == b"." || path == b"/" => return false,
            None => (&b"."[..], path),
        };
        if last == b".." || there == Some(true) {
            return false;
        }
        path = rest;
    };
    if mount(&at) != tree_mount {
        return false;
    }
    for _ in 0..256 {
        let Ok(here) = rustix::fs::fstat(&at).map(id) else { return false };
        if Ok(here) == tree_id {
            return true;
        }
        let Ok(up) = rustix::fs::openat(&at, c"..", AT, Mode::empty()) else { return false };
        if rustix::fs::fstat(&up).map(id) == Ok(here) {
            return false;
        }
        at = up;
    }
    false
}

/// Whether the lock directory `dir` (or, when missing, where it would be
/// made) coordinates nothing beyond this action, and why. Without Bazel's
/// `TEST_SRCDIR`, or with one that names no `bazel-out` and a lock
/// directory outside `/tmp` and outside the runfiles tree by its name, it
/// makes no system call; else two or three `statx(2)` (a few more for the
/// runfiles tree's walk), and reads `/proc` only where a mount must be
/// named.
pub fn judge(dir: &CStr) -> Option<Private> {
    let srcdir = wrapper_common::env::var_nonempty(b"TEST_SRCDIR")?;
    // Relative (taken from the test's working directory, in its runfiles
    // tree), or spelled under `TEST_SRCDIR`: in the tree, or no evidence.
    let relative = !dir.to_bytes().starts_with(b"/");
    if (relative || dir.to_bytes().starts_with(srcdir)) && in_runfiles(dir.to_bytes(), srcdir) {
        return Some(Private::Runfiles);
    }
    if relative {
        return None;
    }
    let root = action_root(srcdir);
    let under_tmp = dir.to_bytes().starts_with(b"/tmp/");
    if root.is_none() && !under_tmp {
        return None;
    }
    let (lock_mount, _) = nearest_existing(dir.to_bytes())?;
    let (slash, _) = mount_of(c"/")?;
    if root == Some(b"/") && lock_mount == slash {
        return Some(Private::ActionRoot);
    }
    // The action's input root, where it is a mount of its own.
    let root_mount = root
        .and_then(|r| wrapper_common::with_joined(&[r], None, mount_of).flatten())
        .filter(|&(_, is_root)| is_root)
        .map(|(id, _)| id);
    if lock_mount == slash && root_mount.is_none() {
        // On the root of a host, of a long-lived container, or of Bazel's
        // sandbox over either: shared.
        return None;
    }
    let mountinfo = read_file(c"/proc/self/mountinfo")?;
    let lock = mount_info(&mountinfo, lock_mount)?;
    if hermetic_tmp(&lock.root) {
        return Some(Private::ActionTmp);
    }
    // A directory bound from elsewhere, such as the host's lock directory
    // (`--sandbox_writable_path`, a bind mount): shared, told before
    // anything more is read.
    if lock_mount != slash && lock.root != b"/" {
        return None;
    }
    let root = root?;
    let root_info = root_mount.and_then(|id| mount_info(&mountinfo, id));
    let bazel_sandbox = in_linux_sandbox()
        || root_info.as_ref().is_some_and(|i| i.root.windows(23).any(|w| w == b"/sandbox/linux-sandbox/"));
    // The root of Bazel's hermetic sandbox: a directory of this action's,
    // pivoted into (its non-hermetic sandbox keeps the host's `/`).
    if bazel_sandbox && lock_mount == slash && hermetic_root(&lock.root) && hermetic_execroot(root) {
        return Some(Private::HermeticRoot);
    }
    if lock_mount != slash {
        // A whole file system mounted there (one bound from elsewhere was
        // told above): made for this action when it was born after the
        // action began.
        let began = if bazel_sandbox {
            wrapper_common::env::var_nonempty(b"TEST_TMPDIR").filter(|t| t.starts_with(b"/")).and_then(born)
        } else {
            root_mount.and_then(|_| born(root))
        };
        return match (began, born(&lock.point)) {
            (Some(began), Some(mounted)) if made_since(began, mounted) => {
                Some(if bazel_sandbox { Private::SandboxMount } else { Private::ContainerMount })
            }
            _ => None,
        };
    }
    // Nor the host itself, with the workspace mounted there: `/proc` shows
    // the host's PID namespace (or a VM's: pid 2 is a kernel thread), and
    // PID 1's mounts (`/proc/1/mountinfo`, which any user may read) have
    // this very mount at `/` (mount ids are the kernel's, one per mount, so
    // a container's own mount namespace, with copies of the host's mounts,
    // has others). Where that cannot be read, or the executor runs in a
    // mount namespace of its own, the rule stands.
    let host = || {
        crate::slots::holders::pid_view() == crate::slots::holders::PidView::Host
            && read_file(c"/proc/1/mountinfo").is_some_and(|m| mount_info(&m, slash).is_some_and(|i| i.point == b"/"))
    };
    (!bazel_sandbox && !host()).then_some(Private::ContainerRoot)
}

/// What keeps a lock directory from being used at all, said before any
/// other judgement: read-only, not writable by this user, or missing where
/// it cannot be made.
fn unusable(dir: &CStr) -> Option<&'static str> {
    use rustix::fs::Access;
    use rustix::io::Errno;
    match rustix::fs::access(dir, Access::WRITE_OK) {
        Err(Errno::ROFS) => Some("is read-only"),
        Err(Errno::ACCESS | Errno::PERM) => Some("is not writable by this user"),
        Err(Errno::NOENT) => {
            // The nearest directory above it that exists.
            let mut path = dir.to_bytes();
            let found = loop {
                let cut = path.iter().rposition(|&b| b == b'/')?;
                path = if cut == 0 { b"/" } else { &path[..cut] };
                let looked = wrapper_common::with_joined(&[path], None, |p| rustix::fs::access(p, Access::WRITE_OK))?;
                if looked != Err(Errno::NOENT) || path == b"/" {
                    break looked;
                }
            };
            match found {
                Err(Errno::ROFS) => Some("does not exist and cannot be made (read-only file system)"),
                Err(Errno::ACCESS | Errno::PERM) => Some("does not exist and this user cannot make it"),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A lock directory that coordinates nothing: refused or warned about, as
/// `policy` says (see [`PrivatePolicy`]).
#[cold]
pub fn private_lock_dir(
    dir: &CStr,
    why: Private,
    pool: &crate::slots::request::Pool,
    policy: PrivatePolicy,
) -> Result<(), crate::error::Error> {
    let gpus = pool.ids.len();
    if policy == PrivatePolicy::Refuse || policy == PrivatePolicy::Auto && gpus > 1 {
        let unusable = unusable(dir);
        return Err(crate::error::Error::PrivateLockDir {
            dir: dir.to_bytes().into(),
            unusable,
            place: why.place(),
            repair: why.repair(),
            gpus,
        });
    }
    wrapper_common::diag::report(
        crate::TOOL,
        format_args!(
            "warning: lock directory {} is {}, so it coordinates with no other test: tests running at once here may get the same GPU; {}",
            wrapper_common::diag::Bytes(dir.to_bytes()),
            why.place(),
            why.repair()
        ),
    );
    Ok(())
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
    fn mountinfo_fields_are_unescaped_and_hermetic_tmp_is_told() {
        let text = b"22 1 0:5 / / rw - ext4 /dev/vda rw\n\
                     71 22 254:0 /out/sandbox/linux-sandbox/4/_hermetic_tmp/jax\\040locks /tmp/jax\\040locks rw - ext4 /dev/vda rw\n";
        let m = mount_info(text, 71).unwrap();
        assert_eq!(m.point, b"/tmp/jax locks");
        assert!(hermetic_tmp(&m.root));
        assert!(hermetic_tmp(b"/o/sandbox/linux-sandbox/1/_hermetic_tmp"));
        assert!(!hermetic_tmp(b"/o/_hermetic_tmpx/y") && !hermetic_tmp(b"/tmp"));
        assert_eq!(mount_info(text, 7).map(|m| m.root), None);
        assert_eq!(mount_info(text, 22).unwrap().root, b"/");
    }

    #[test]
    fn the_hermetic_sandbox_root_is_told_by_its_name() {
        assert!(hermetic_root(b"/home/u/.cache/bazel/_bazel_u/ab12/sandbox/linux-sandbox/3"));
        assert!(hermetic_root(b"/dev/shm/bazel-sandbox.x/linux-sandbox/17/"));
        assert!(!hermetic_root(b"/"));
        assert!(!hermetic_root(b"/o/sandbox/linux-sandbox/3/execroot/_main"));
        assert!(!hermetic_root(b"/o/sandbox/linux-sandbox/"));
        assert!(!hermetic_root(b"/o/sandbox/my-linux-sandbox/3"));
        assert!(!hermetic_root(b"/srv/hostroot"));
        assert!(hermetic_execroot(b"/execroot/_main") && hermetic_execroot(b"/execroot/xla"));
        assert!(!hermetic_execroot(b"/o/sandbox/linux-sandbox/1/execroot/_main"));
        assert!(!hermetic_execroot(b"/execroot/") && !hermetic_execroot(b"/execroot/a/b"));
    }

    #[test]
    fn a_lock_directory_is_in_the_runfiles_by_the_directories_not_their_names() {
        let base = std::env::temp_dir().join(format!("privacy-unit-{}", std::process::id()));
        let tree = base.join("t.runfiles");
        std::fs::create_dir_all(tree.join("ws/src")).unwrap();
        std::fs::create_dir_all(base.join("shared")).unwrap();
        std::os::unix::fs::symlink(base.join("shared"), tree.join("ws/out")).unwrap();
        std::os::unix::fs::symlink(base.join("nowhere"), tree.join("ws/dangling")).unwrap();
        let b = |p: &std::path::Path| p.to_str().unwrap().as_bytes().to_vec();
        let (t, ws) = (b(&tree), b(&tree.join("ws")));
        let under = |rest: &str| [ws.as_slice(), b"/", rest.as_bytes()].concat();
        assert!(in_runfiles(&under("locks"), &t));
        assert!(in_runfiles(&under("src/../locks"), &t), "climbs within the tree, through what exists");
        assert!(in_runfiles(&under("a/b"), &[t.as_slice(), b"/"].concat()));
        assert!(!in_runfiles(&under("new/../../../up"), &t), "climbs out through what is not made yet");
        assert!(!in_runfiles(&under("out/locks"), &t), "a link out of the tree");
        assert!(!in_runfiles(&under("dangling/locks"), &t), "a link to nothing");
        assert!(!in_runfiles(&under("locks"), &b(&base)), "not a runfiles tree");
        assert!(!in_runfiles(&b(&base.join("shared")), &t));
        assert!(!in_runfiles(&under("locks"), b"/no/such/x.runfiles"));
        let mut long = under("x/").repeat(2100);
        long.push(b'x');
        assert!(!in_runfiles(&long, &t));
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_mount_born_in_the_tick_the_action_began_is_the_actions() {
        assert!(made_since((100, 4_000_000), (100, 4_000_000)));
        assert!(made_since((100, 4_000_000), (100, 8_000_000)));
        assert!(made_since((100, 999_999_999), (101, 0)));
        assert!(!made_since((100, 4_000_000), (100, 3_999_999)));
        assert!(!made_since((101, 0), (100, 999_999_999)));
    }

    #[test]
    fn the_nearest_existing_directory_names_the_mount() {
        let here = nearest_existing(b"/proc/self/no/such/dir").unwrap();
        assert_eq!(here, mount_of(c"/proc/self").unwrap());
        assert!(mount_of(c"/").unwrap().1, "/ is the root of its mount");
    }
}
