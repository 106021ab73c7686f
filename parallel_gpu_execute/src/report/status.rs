//! `--status[=text|json]`: who holds which GPU slot of a lock directory,
//! since when, and who waits; from the directory and `/proc/locks`, taking
//! no lock. The first question on a stuck host ("who holds GPU 3, since
//! when, and who is waiting?") without `lsof` and guesswork.
//!
//! Lock files of every profile are reported (ours and the classic scripts'
//! `gpulock<id>_<slot>`, JAX's `jax_accelerator_lock_<id>_<slot>`); waiters
//! are the processes that hold or wait for a queue file (the holder is the
//! head of the queue) and any process blocked on a lock file. A PID that
//! `/proc` hides (another user's under `hidepid`, another PID namespace) is
//! shown as hidden, never dropped.
//!
//! The kernel leaves out of `/proc/locks` the locks of processes that this
//! PID namespace cannot see (a container looking at a lock directory shared
//! with other containers). A lock file `/proc/locks` lists no holder for is
//! therefore probed: a non-blocking shared `flock`, released at once. If it
//! is refused, the slot is held by a process that cannot be seen from here.
//! That probe is the only lock `--status` ever takes, for the time of two
//! system calls; a wrapper that tries the slot in that instant moves on to
//! another slot or waits, and is woken by the probe's close.

use crate::cli::StatusFormat as Format;
use crate::error::Error;
use crate::prelude::*;
use crate::report::json;
use crate::slots::proclocks::{LockEntry, ProcessInfo, file_key, process, read_locks, rfc3339};
use crate::slots::request::gpus_needed;
use crate::sys::clock::SystemTime;
use crate::sys::dirs::{for_each_entry, open_dir};
use core::ffi::CStr;
use core::fmt::Write as _;
use core::ops::ControlFlow;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use wrapper_common::diag::{Bytes, Os};

/// Lock file name prefixes, per profile, and their queue files.
pub const LOCK_PREFIXES: &[(&str, &str)] = &[("gpulock", "xla"), ("jax_accelerator_lock_", "jax")];
pub const QUEUE_FILES: &[&str] = &["gpulock.queue", "jax_accelerator_lock.queue"];

/// `<prefix><id>_<slot>` split into (profile, id, slot).
pub fn parse_lock_name(name: &str) -> Option<(&'static str, &str, u32)> {
    for &(prefix, profile) in LOCK_PREFIXES {
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let (id, slot) = rest.rsplit_once('_')?;
        if id.is_empty() || slot.is_empty() || !slot.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        return Some((profile, id, slot.parse().ok()?));
    }
    None
}

/// The GPU id a lock file name stands for: CUDA's MIG form has `+` in the
/// name where the id has `/` ([`crate::slots::request::lock_form`]).
fn gpu_id(name: &str) -> String {
    let id = name.replace('+', "/");
    if crate::slots::request::is_cuda_mig_path(id.as_bytes()) { id } else { name.to_string() }
}

/// Paths are the bytes they are (no NUL), as the kernel has them.
struct Slot {
    file: Vec<u8>,
    profile: &'static str,
    gpu: String,
    slot: u32,
    holders: Vec<ProcessInfo>,
}

struct Waiter {
    process: ProcessInfo,
    /// `head` (holds a queue), `queued` (blocked on a queue), `blocked` (on a lock file).
    position: &'static str,
    file: Vec<u8>,
}

struct Report {
    lock_dir: Vec<u8>,
    /// False when the directory does not exist (yet): the first wrapper
    /// that takes a slot creates it, so that is a host where none has.
    exists: bool,
    slots: Vec<Slot>,
    waiters: Vec<Waiter>,
}

/// Whether a lock file that `/proc/locks` lists no holder for is held all
/// the same, by a process this PID namespace cannot see.
fn held_unseen(dir: impl AsFd, name: &CStr) -> bool {
    let Ok(file) = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) else { return false };
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = rustix::fs::flock(&file, rustix::fs::FlockOperation::Unlock);
            false
        }
        Err(e) => e == rustix::io::Errno::WOULDBLOCK,
    }
}

/// Sorts ids as numbers when they are, else as text after the numbers.
fn id_order(id: &str) -> (u8, u64, String) {
    match id.parse::<u64>() {
        Ok(n) => (0, n, String::new()),
        Err(_) => (1, 0, id.to_string()),
    }
}

fn survey(dir: &CStr) -> Result<Report, Error> {
    let unreadable = |errno| Error::StatusDir { dir: dir.to_bytes().to_vec(), error: Os(errno).to_string() };
    let dir_fd = match open_dir(dir) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            return Ok(Report {
                lock_dir: dir.to_bytes().to_vec(),
                exists: false,
                slots: Vec::new(),
                waiters: Vec::new(),
            });
        }
        Err(e) => return Err(unreadable(e)),
    };
    let mut names = Vec::new();
    for_each_entry(&dir_fd, |name, _| {
        names.push(alloc::ffi::CString::from(name));
        ControlFlow::<()>::Continue(())
    })
    .map_err(unreadable)?;
    let locks = read_locks();
    let on = |key: (u32, u32, u64)| locks.iter().filter(move |l: &&LockEntry| l.flock && l.key() == key);
    let mut slots = Vec::new();
    let mut waiters = Vec::new();
    for entry in &names {
        let Ok(name) = entry.to_str() else { continue };
        let path = [dir.to_bytes(), wrapper_common::separator(dir.to_bytes()), name.as_bytes()].concat();
        let Ok(meta) = rustix::fs::statat(&dir_fd, entry.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(meta.st_mode) != FileType::RegularFile {
            continue;
        }
        let key = file_key(meta.st_dev, meta.st_ino);
        if QUEUE_FILES.contains(&name) {
            for l in on(key) {
                let position = if l.blocked { "queued" } else { "head" };
                waiters.push(Waiter { process: process(l.pid), position, file: path.clone() });
            }
        } else if let Some((profile, gpu, slot)) = parse_lock_name(name) {
            let mut holders = Vec::new();
            for l in on(key) {
                if l.blocked {
                    waiters.push(Waiter { process: process(l.pid), position: "blocked", file: path.clone() });
                } else {
                    holders.push(process(l.pid));
                }
            }
            if holders.is_empty() && held_unseen(&dir_fd, entry) {
                holders.push(process(0));
            }
            slots.push(Slot { file: path, profile, gpu: gpu_id(gpu), slot, holders });
        }
    }
    slots.sort_by(|a, b| (a.profile, id_order(&a.gpu), a.slot).cmp(&(b.profile, id_order(&b.gpu), b.slot)));
    let rank = |p: &str| match p {
        "head" => 0,
        "queued" => 1,
        _ => 2,
    };
    waiters.sort_by_key(|w| (rank(w.position), w.process.started, w.process.pid));
    Ok(Report { lock_dir: dir.to_bytes().to_vec(), exists: true, slots, waiters })
}

/// What a waiter asks for, from its arguments (`--num_processes` and
/// `--gpus_per_process`, as the wrapper reads them).
fn needs(p: &ProcessInfo) -> Option<u64> {
    (!p.args.is_empty()).then(|| gpus_needed(p.args.iter().skip(1).map(Vec::as_slice)))
}

fn pid_text(p: &ProcessInfo) -> String {
    match &p.command {
        Some(_) => p.pid.to_string(),
        None if p.pid > 0 => format!("{} (hidden)", p.pid),
        None => "hidden".to_string(),
    }
}

fn since(t: Option<SystemTime>) -> String {
    match t {
        Some(t) => {
            let held = SystemTime::now().duration_since(t).map_or(0, |d| d.as_secs());
            format!("{} ({held} s ago)", rfc3339(t))
        }
        None => "-".to_string(),
    }
}

fn command_text(p: &ProcessInfo) -> &str {
    p.command.as_deref().unwrap_or("(not visible from here: another user or PID namespace)")
}

fn text(r: &Report) -> String {
    if !r.exists {
        return format!(
            "lock dir {}: does not exist (no test has taken a slot there yet): 0 slot(s), 0 held, 0 waiting\n",
            Bytes(&r.lock_dir)
        );
    }
    let held = r.slots.iter().filter(|s| !s.holders.is_empty()).count();
    let mut out = format!(
        "lock dir {}: {} slot(s), {held} held, {} waiting\n",
        Bytes(&r.lock_dir),
        r.slots.len(),
        r.waiters.len()
    );
    if !r.slots.is_empty() {
        let _ = writeln!(
            out,
            "{:<8} {:<24} {:>4}  {:<5} {:<12} {:<34} COMMAND",
            "PROFILE", "GPU", "SLOT", "STATE", "PID", "STARTED"
        );
    }
    for s in &r.slots {
        if s.holders.is_empty() {
            let _ = writeln!(out, "{:<8} {:<24} {:>4}  free", s.profile, s.gpu, s.slot);
        }
        for h in &s.holders {
            let _ = writeln!(
                out,
                "{:<8} {:<24} {:>4}  {:<5} {:<12} {:<34} {}",
                s.profile,
                s.gpu,
                s.slot,
                "held",
                pid_text(h),
                since(h.started),
                command_text(h)
            );
        }
    }
    if !r.waiters.is_empty() {
        out.push_str("waiting:\n");
        let _ = writeln!(out, "{:<8} {:<12} {:<10} {:<34} COMMAND", "POSITION", "PID", "NEEDS", "STARTED");
        for w in &r.waiters {
            let needs = needs(&w.process).map_or("-".to_string(), |n| format!("{n} GPU(s)"));
            let _ = writeln!(
                out,
                "{:<8} {:<12} {:<10} {:<34} {}",
                w.position,
                pid_text(&w.process),
                needs,
                since(w.process.started),
                command_text(&w.process)
            );
        }
    }
    out
}

fn process_json(p: &ProcessInfo) -> Vec<(&'static str, String)> {
    vec![
        ("pid", p.pid.max(0).to_string()),
        ("visible", p.command.is_some().to_string()),
        ("command", json::opt_string(p.command.as_deref().map(str::as_bytes))),
        ("started", json::opt_string(p.started.map(rfc3339).as_deref().map(str::as_bytes))),
    ]
}

fn json_text(r: &Report) -> String {
    let path = |p: &[u8]| json::string(p);
    let slots: Vec<String> = r
        .slots
        .iter()
        .map(|s| {
            let holders: Vec<String> = s.holders.iter().map(|h| json::object(&process_json(h))).collect();
            json::object(&[
                ("file", path(&s.file)),
                ("profile", json::string(s.profile.as_bytes())),
                ("gpu", json::string(s.gpu.as_bytes())),
                ("slot", s.slot.to_string()),
                ("held", (!s.holders.is_empty()).to_string()),
                ("holders", json::array(&holders)),
            ])
        })
        .collect();
    let waiters: Vec<String> = r
        .waiters
        .iter()
        .map(|w| {
            let mut fields = process_json(&w.process);
            fields.push(("position", json::string(w.position.as_bytes())));
            fields.push(("file", path(&w.file)));
            fields.push(("needs", json::opt_number(needs(&w.process))));
            json::object(&fields)
        })
        .collect();
    json::object(&[
        ("lock_dir", path(&r.lock_dir)),
        ("slots", json::array(&slots)),
        ("waiters", json::array(&waiters)),
        ("exists", r.exists.to_string()),
    ]) + "\n"
}

/// The text for `--status=FORMAT` over `lock_dir`. Never inlined: its
/// directory read has a 4 KiB buffer, which would otherwise sit in `run`'s
/// frame and be faulted in on every start, `--status` or not.
#[inline(never)]
pub fn render(lock_dir: &CStr, format: Format) -> Result<String, Error> {
    let report = survey(lock_dir)?;
    Ok(match format {
        Format::Text => text(&report),
        Format::Json => json_text(&report),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_names() {
        assert_eq!(parse_lock_name("gpulock3_0"), Some(("xla", "3", 0)));
        assert_eq!(parse_lock_name("gpulockGPU-ab-12_7"), Some(("xla", "GPU-ab-12", 7)));
        assert_eq!(parse_lock_name("gpulocka_b_12"), Some(("xla", "a_b", 12)));
        assert_eq!(parse_lock_name("jax_accelerator_lock_2_5"), Some(("jax", "2", 5)));
        assert_eq!(gpu_id("MIG-GPU-8932f937+1+2"), "MIG-GPU-8932f937/1/2");
        assert_eq!(gpu_id("GPU-8932f937+1"), "GPU-8932f937+1", "not a MIG path: the name as it is");
        for bad in ["gpulock.queue", "gpulock_0", "gpulock3_", "gpulock3_x", "other3_0", "gpulock3"] {
            assert_eq!(parse_lock_name(bad), None, "{bad}");
        }
    }
}
