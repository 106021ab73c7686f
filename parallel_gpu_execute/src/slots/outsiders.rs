//! A GPU in use outside the lock protocol: when a test is granted a GPU
//! that KFD shows in use by a process that holds no slot of it in this
//! lock directory, one warning line names that process. It is another
//! user's or container's test that does not share this lock directory (or
//! something run by hand), and the two will compete for the GPU's memory.
//!
//! A process counts as using a GPU while it holds memory there (its
//! `vram_<gpu_id>` above 0): the runtime makes a context on every GPU it
//! can see, whether it uses it or not. Not told: this wrapper and its
//! ancestors; a process that holds a slot of that GPU (by its descriptors,
//! as `--status` finds holders, or by `/proc/locks`); and a process one of
//! whose ancestors holds one (a test's children, which may not be readable
//! by another user). KFD names processes by their PID in the host's PID
//! namespace: in a PID namespace of its own the wrapper cannot tell who
//! they are, and says nothing.
//!
//! Cost: one failed `open` where `/sys/class/kfd/kfd/proc` does not exist
//! (not amdgpu), a directory read where it lists no process; the topology,
//! `/proc/locks` and the processes are read only when some process holds
//! memory on a granted GPU.

use crate::hardware::Probe;
use crate::hardware::kfd_usage::{self, KfdProcess};
use crate::prelude::*;
use crate::slots::holders::{LockFile, host_pid_namespace, mount_device, openers};
use crate::slots::lockfile::lock_file_name;
use crate::slots::proclocks::{process, read_locks};
use crate::slots::request::Pool;
use crate::sys::dirs::read_file;
use core::ffi::CStr;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, FileType};
use wrapper_common::diag::{self, Bytes};

/// The parent of `pid`, from `/proc/<pid>/stat`.
fn parent(pid: i64) -> Option<i64> {
    let stat = read_file(&alloc::ffi::CString::new(format!("/proc/{pid}/stat")).ok()?)?;
    let stat = String::from_utf8_lossy(&stat).into_owned();
    stat[stat.rfind(')')? + 1..].split_ascii_whitespace().nth(1)?.parse().ok()
}

/// `pid` and its ancestors, nearest first (at most 64).
fn lineage(pid: i64) -> Vec<i64> {
    let mut out = vec![pid];
    let mut at = pid;
    while out.len() < 64 {
        match parent(at) {
            Some(p) if p > 0 && !out.contains(&p) => {
                out.push(p);
                at = p;
            }
            _ => break,
        }
    }
    out
}

/// The processes that hold a slot of the GPU named `name` in `dir`.
fn slot_holders(dir: &CStr, prefix: &[u8], name: &[u8], slots: u32) -> Vec<i64> {
    let Ok(dir_fd) = crate::sys::dirs::open_dir(dir) else { return Vec::new() };
    let device = mount_device(dir_fd.as_fd());
    let mut found = Vec::new();
    for slot in 0..slots.min(4096) {
        let file = lock_file_name(prefix, name, slot);
        match rustix::fs::statat(&dir_fd, file.as_cstr(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                found.push((file.as_bytes().to_vec(), st));
            }
            _ => {}
        }
    }
    let files: Vec<LockFile> = found.iter().map(|(n, st)| LockFile::new(n, st, device, false)).collect();
    // Unreadable: the holders are those found by their descriptors.
    let locks = read_locks().unwrap_or_default();
    let mut pids: Vec<i64> = locks
        .iter()
        .filter(|l| l.flock && !l.blocked && l.pid > 0 && files.iter().any(|f| f.key == l.key()))
        .map(|l| l.pid)
        .collect();
    for list in openers(&files) {
        pids.extend(list.iter().filter(|o| o.holds && !o.twin).map(|o| o.pid));
    }
    pids
}

/// Warns about the processes that use the GPUs `start..start + n` of
/// `pool` (just granted) without holding a slot of them in `dir`.
pub fn warn(probe: &Probe, dir: &CStr, pool: &Pool, start: usize, n: usize, prefix: &[u8], slots: u32) {
    if !kfd_usage::any_kfd_process(probe.sysroot) {
        return;
    }
    let Some(procs) = kfd_usage::kfd_processes(probe.sysroot) else { return };
    let own = lineage(i64::from(rustix::process::getpid().as_raw_nonzero().get()));
    let busy: Vec<&KfdProcess> =
        procs.iter().filter(|p| !own.contains(&p.pid) && p.vram.iter().any(|&(_, b)| b.unwrap_or(0) > 0)).collect();
    if busy.is_empty() || !host_pid_namespace() {
        return;
    }
    let gpus = kfd_usage::named_gpus(probe);
    for k in start..(start + n).min(pool.ids.len()) {
        let name = pool.lock_name(k);
        let Some(gpu_id) = kfd_usage::find(&gpus, name).and_then(|g| g.gpu_id) else { continue };
        let users: Vec<i64> = busy
            .iter()
            .filter(|p| p.vram.iter().any(|&(id, b)| id == gpu_id && b.unwrap_or(0) > 0))
            .map(|p| p.pid)
            .collect();
        if users.is_empty() {
            continue;
        }
        let holders = slot_holders(dir, prefix, name, slots);
        let outside: Vec<i64> =
            users.into_iter().filter(|&pid| !lineage(pid).iter().any(|a| holders.contains(a))).collect();
        if outside.is_empty() {
            continue;
        }
        let named: Vec<String> = outside
            .iter()
            .map(|&pid| match process(pid).command {
                Some(c) => format!("PID {pid} ({})", Bytes(c.as_bytes())),
                None => format!("PID {pid}"),
            })
            .collect();
        diag::report(
            crate::TOOL,
            format_args!(
                "warning: GPU {} is in use by {}, which holds no slot of it in {}: a process of another user or container that does not share this lock directory, or one started by hand; this test and it compete for the GPU's memory",
                Bytes(name),
                named.join(", "),
                Bytes(dir.to_bytes())
            ),
        );
    }
}
