//! `--status[=text|json]`: who holds which GPU slot of a lock directory,
//! since when, and who waits. The first question on a stuck host ("who
//! holds GPU 3, since when, and who is waiting?") without `lsof` and
//! guesswork, answered from `/proc` alone: `--status` takes no lock and
//! opens no lock file, so it never makes a test see a free slot as busy.
//!
//! Listed: every slot the settings give (the GPU count, or the pool
//! variable, times the slots per GPU; up to 4096 of them), held or free,
//! also one whose lock file does not exist yet; then any other lock file of
//! either profile in the directory (ours and the classic scripts'
//! `gpulock<id>_<slot>`, JAX's `jax_accelerator_lock_<id>_<slot>`).
//! Waiters are the wrappers with a record in the queue (`gpuqueue/`, whose
//! lock their waiter holds: a dead waiter's record is not one), earliest
//! first, each with the process that holds its record (named as a slot's
//! first holder is), its beat (a waiter frozen or stopped has none, and
//! nobody waits for it), and the record's owner; then any process blocked
//! on a lock file. Nothing else is a waiter: another user's lock of the
//! lock directory or of `gpuqueue/` is not.
//!
//! Holders are found as `lsof` finds them ([`crate::slots::holders`]): the
//! processes that have the lock file open through a descriptor whose open
//! file holds the lock. Every such process is listed: the one that took
//! the lock first when it still holds it, then the others, oldest first
//! (a test's children, or the child of a test that forked and exited; the
//! slot is free only once all of them are gone). The PID in `/proc/locks`
//! alone is not trusted: it is the process that took the lock, which for
//! the classic scripts' `flock -n "$fd"` has exited at once, and whose PID
//! may since name another process. (Text lists at most four holders of a
//! slot; JSON every one.) A holder that cannot be seen (another
//! user's process when not root; another PID namespace) is shown as hidden,
//! never dropped, wherever something visible shows the lock held: a
//! `/proc/locks` entry no visible holder accounts for, or a visible process
//! blocked on it. From inside a PID namespace of its own, a wrapper inside
//! waiting in the queue proves slots held without saying which: a slot of
//! a GPU in service with a lock file and no holder in sight is then of
//! unknown state. A slot held from outside with nobody inside waiting at
//! all cannot be told from a free one without taking its lock; the text
//! output then says so.
//!
//! When a slot was granted: the lock file's modification time, which the
//! wrapper sets when it grants the slot (and the classic scripts'
//! `exec {fd}>file` sets by truncating it). When that time is older than
//! the start of the oldest holder (a wrapper that did not set it, a file
//! touched since), or no holder can be seen, the grant time is unknown.
//! Process start times are accurate to about a second, so a time up to a
//! second before the start may still be taken for the grant.
//!
//! `--status=json` is one object:
//!
//! | key | value |
//! |-----|-------|
//! | `lock_dir` | the lock directory |
//! | `slots` | the slots, as listed above, each an object: |
//! | `slots[].file` | the lock file's path |
//! | `slots[].profile` | `xla` (`gpulock…`) or `jax` (`jax_accelerator_lock_…`) |
//! | `slots[].gpu` | the GPU id as the lock file names it (CUDA's MIG form with `/`) |
//! | `slots[].slot` | the slot number |
//! | `slots[].held` | whether some process holds it; `null` when unknown (`/proc/locks` cannot be read and no visible process holds it) |
//! | `slots[].holders` | the processes that hold it (process objects, see below) |
//! | `slots[].since` | when it was granted, `YYYY-MM-DDTHH:MM:SSZ` (UTC), or `null`: free or unknown |
//! | `slots[].file_exists` | whether its lock file exists (not before a test first takes the slot) |
//! | `slots[].configured` | whether it is one of the slots these settings give; `false`: another lock file in the directory |
//! | `slots[].skipped` | only where every test skips its lock path: what is there (`FIFO`, `symbolic link`, `directory`, `socket`, `device`); such a slot is never free (text: `skipped`, metrics: `state="skipped"`) |
//! | `waiters` | the waiters, the queue's in arrival order first (process objects and:) |
//! | `waiters[].position` | `queued` (a record in the queue), `blocked` (waits on a lock file without one: a classic script's `flock`) |
//! | `waiters[].file` | its record, or the lock file it waits on |
//! | `waiters[].needs` | the GPUs it asks for: as its record says, else read from its arguments as the wrapper reads them (`--num_processes`, `--gpus_per_process`); `null` when unknown |
//! | `waiters[].since` | when it began to wait (its record's ticket; where the ticket is earlier, its process's start, or where that process cannot be seen, its record's birth), as `since`; `null` without a record |
//! | `waiters[].beat_age_seconds` | seconds between now and its record's last beat, either way (over 1: it does not run, or runs on another clock, and nobody waits for it); `null` without one |
//! | `waiters[].owner_uid` | the uid that owns its record (the kernel's word, not the record's); `null` without one |
//! | `waiters[].record_test` | the test, as its record says (seen also where the process is hidden); `null` without one |
//! | `unlisted_free_slots` | only where the settings give more than 4096 slots: those without a lock file, not listed (free; counted per GPU in the metrics) |
//! | `pool_error` | only where the pool's GPUs cannot be told (then no slot of these settings is listed): the line a test here is refused with |
//! | `other_owners` | only where the lock directory or `gpuqueue/` is owned by a user other than root and the caller: each `{"dir", "uid"}` (that user can rename a held lock file away) |
//! | `exists` | whether the lock directory exists (the first wrapper that takes a slot creates it) |
//! | `host_pid_namespace` | whether `/proc` shows the host's PID namespace; `false`: a slot held from outside this one, with nobody inside waiting for it, shows as free |
//! | `gpus` | each GPU of the settings, then any other drained GPU of the directory, each an object: |
//! | `gpus[].gpu` | the GPU id, as `slots[].gpu` |
//! | `gpus[].drained` | `null`, or `{"reason", "time", "uid", "user", "owner_uid", "disowned", "untrusted"}`: why, when (as `since`; `null` when unknown), and who took it out of service (`--drain`; `user` `null` where `/etc/passwd` does not name the uid), the record's owner, whether its text names another uid or is no drain record, and why its name cannot be trusted (`null`) |
//! | `gpus[].kernel_users` | the processes that amdgpu's KFD lists on it (`/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`), each `{"pid", "vram_bytes"}` (`vram_bytes` `null` when unreadable), PIDs in the host's PID namespace; `null` where the kernel does not tell: not an AMD GPU counted from KFD, or no KFD process directory. NVIDIA's driver lists no users without NVML, so NVIDIA GPUs have `null` |
//! | `gpus[].health` | `"ok"`, or why not: `uncorrectable memory errors (RAS): umc 3` from amdgpu's RAS counters (`/sys/class/drm/renderD<minor>/device/ras/*_err_count`) |
//! | `gpus[].configured` | whether it is a GPU of these settings |
//! | `locks_readable` | `false`, only where `/proc/locks` cannot be read (else absent): a slot no visible process holds is of unknown state (`held` `null`) |
//!
//! A process object:
//!
//! | key | value |
//! |-----|-------|
//! | `pid` | its PID in this PID namespace; 0 when not known (a hidden holder, a waiter in another PID namespace) |
//! | `visible` | whether this process can see it; `false`: another user's (when not root) or another PID namespace's |
//! | `command` | its command line (at most 200 characters), or `null` when hidden |
//! | `started` | when the process started, as `since`, or `null` when hidden |
//! | `state` | from `/proc/<pid>/stat`: `running`, `sleeping`, `disk-sleep`, `stopped`, `traced`, `zombie`, `idle`, `dead`, another state letter as it stands, or `null` when hidden |
//! | `uid` | its user, the owner of `/proc/<pid>` (the kernel's word, not its command line's), or `null` when hidden |
//!
//! The text output has the same in a table per section (a process's state
//! in `PROCESS`, `-` for what is unknown), then one line per GPU (drained
//! or not, its health, its KFD users); `--status=openmetrics`, as metrics.

use crate::cli::StatusFormat as Format;
use crate::error::Error;
use crate::hardware::gpu_count;
use crate::prelude::*;
use crate::profile::LockNames;
use crate::report::queued::{Since, queued};
use crate::report::status_format::{self, MAX_LISTED, QueueRecord, Report, Slot, Waiter, skipped_or_free};
use crate::report::{gpus, openmetrics};
use crate::settings::Settings;
use crate::slots::exposure::Exposed;
use crate::slots::holders::{LockFile, PidView, lease_lets_in, mount_device, openers, pid_view};
use crate::slots::lockers::{Readings, lockers, read_after_the_scan};
use crate::slots::lockfile::{lock_file_name, split_lock_file_name};
use crate::slots::proclocks::{ProcessInfo, process};
use crate::slots::record::{QUEUE_DIR, STALE_AFTER};
use crate::slots::request::{Pool, Preset};
use crate::sys::clock::{SystemTime, UNIX_EPOCH, host_since_boot};
use crate::sys::dirs::{for_each_entry, open_dir};
use core::ffi::CStr;
use core::ops::ControlFlow;
use core::time::Duration;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, FileType, Stat};
use wrapper_common::diag::Os;

/// Lock file name prefixes, per profile.
pub const LOCK_PREFIXES: &[(&str, &str)] = &[("gpulock", "xla"), ("jax_accelerator_lock_", "jax")];

/// `<prefix><id>_<slot>` split into (profile, id, slot).
pub fn parse_lock_name(name: &str) -> Option<(&'static str, &str, u32)> {
    for &(prefix, profile) in LOCK_PREFIXES {
        let Some((id, slot)) = split_lock_file_name(name.as_bytes(), prefix.as_bytes()) else { continue };
        // Cut where ASCII bytes (the prefix, `_`) end and begin.
        let id = name.get(prefix.len()..prefix.len() + id.len())?;
        return Some((profile, id, core::str::from_utf8(slot).ok()?.parse().ok()?));
    }
    None
}

/// The GPU id a lock file name stands for: CUDA's MIG form has `+` in the
/// name where the id has `/` ([`crate::slots::request::lock_form`]).
pub fn gpu_id(name: &str) -> String {
    String::from_utf8_lossy(&crate::slots::request::id_form(name.as_bytes())).into_owned()
}

/// Sorts ids as numbers when they are, else as text after the numbers.
fn id_order(id: &str) -> (u8, u64, String) {
    match wrapper_common::numbers::parse_u64(id.as_bytes()) {
        Some(n) => (0, n, String::new()),
        None => (1, 0, id.to_string()),
    }
}

/// The slots the settings give: the lock file names of the pool's GPUs
/// (in pool order) and the slots per GPU. None without a GPU, or with a
/// pool variable the wrapper would refuse.
pub struct Configured {
    profile: &'static str,
    prefix: &'static [u8],
    /// The pool's GPUs as lock file names have them.
    pub names: Vec<Vec<u8>>,
    slots: u32,
    /// Why the pool's GPUs cannot be told (the line a test here is refused
    /// with), where they cannot: then none is listed.
    pub unresolved: Option<String>,
}

impl Configured {
    pub fn of(settings: &Settings) -> Configured {
        let (profile, prefix) = (settings.profile.name(), settings.profile.lock_prefix());
        let (count, source) = gpu_count::count(&settings.probe());
        let source = source.filter(|_| count > 0);
        let pool = source.map(|source| {
            let vendor = settings.vendor.unwrap_or(source.default_vendor());
            let mut pool = Pool::for_vendor(Preset::of(vendor, || settings.rocr_kept(vendor)), count)?;
            // A pool whose GPUs cannot be told: its slots are not listed,
            // and a note says why.
            match settings.lock_names {
                LockNames::Physical => pool.name_physically(&settings.probe(), source)?,
                LockNames::Index => pool.name_by_index(&settings.probe())?,
            }
            Ok::<Pool, Error>(pool)
        });
        let (pool, unresolved) = match pool {
            Some(Ok(pool)) => (Some(pool), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        let names = pool.map_or_else(Vec::new, |p| (0..p.ids.len()).map(|i| p.lock_name(i).to_vec()).collect());
        let slots = source.map_or(settings.tests_per_gpu, |s| settings.slots_per_gpu(s));
        Configured { profile, prefix, names, slots, unresolved }
    }

    fn contains(&self, profile: &str, id: &str, slot: u32) -> bool {
        profile == self.profile && slot < self.slots && self.names.iter().any(|n| n == id.as_bytes())
    }

    /// Whether the settings give more slots than are listed.
    fn over(&self) -> bool {
        self.names.len().saturating_mul(self.slots as usize) > MAX_LISTED
    }

    /// Per GPU, where not all are listed, its slots not in `listed` (free).
    fn unlisted(&self, listed: &[Slot]) -> Vec<(String, usize)> {
        let gpus = self.names.iter().map(|n| gpu_id(&String::from_utf8_lossy(n))).filter(|_| self.over());
        let there = |gpu: &String| listed.iter().filter(|s| s.configured && s.gpu == *gpu).count();
        gpus.map(|g| (g.clone(), (self.slots as usize).saturating_sub(there(&g)))).collect()
    }

    /// Every (lock file name, GPU, slot), GPU by GPU; none when there are
    /// more than [`MAX_LISTED`].
    fn each(&self) -> Vec<(String, String, u32)> {
        if self.over() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for name in &self.names {
            let id = String::from_utf8_lossy(name).into_owned();
            for slot in 0..self.slots {
                let file = lock_file_name(self.prefix, name, slot);
                out.push((String::from_utf8_lossy(file.as_bytes()).into_owned(), gpu_id(&id), slot));
            }
        }
        out
    }
}

/// A lock file of the directory that `--status` reports on.
struct Found {
    name: String,
    st: Stat,
}

fn mtime(st: &Stat) -> Option<SystemTime> {
    let secs = u64::try_from(st.st_mtime).ok()?;
    let nanos = u32::try_from(st.st_mtime_nsec).ok().filter(|&n| n < 1_000_000_000)?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// How much earlier than its holder's start a lock file written by that
/// holder may read: a start time is in clock ticks (10 ms) and a file's
/// time comes from the kernel's coarse clock, up to a tick behind (10 ms
/// at `HZ=100`).
const STAMP_SLACK: Duration = Duration::from_millis(20);

/// When the slot was granted: the file's modification time, when it is not
/// older than its oldest holder (give or take [`STAMP_SLACK`]), and was set
/// with its change time, as a grant sets both (not by hand: `touch -d`).
fn granted(st: &Stat, holders: &[ProcessInfo]) -> Option<SystemTime> {
    let visible: Vec<&ProcessInfo> = holders.iter().filter(|h| h.command.is_some()).collect();
    let oldest = visible.iter().map(|h| h.started).collect::<Option<Vec<_>>>()?.into_iter().min()?;
    // Nor a time ahead of now (`touch -d 2099` by the file's owner).
    let now = SystemTime::now() + STAMP_SLACK;
    let m = mtime(st).filter(|&m| m.checked_add(STAMP_SLACK).is_some_and(|m| m >= oldest) && m <= now)?;
    let changed = i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec);
    let modified = i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
    (changed.abs_diff(modified) <= STAMP_SLACK.as_nanos()).then_some(m)
}

fn survey(settings: &Settings, dir: &CStr) -> Result<Report, Error> {
    let configured = Configured::of(settings);
    let path = |name: &str| [dir.to_bytes(), wrapper_common::separator(dir.to_bytes()), name.as_bytes()].concat();
    let free = |(name, gpu, slot): (String, String, u32)| Slot {
        file: path(&name),
        profile: configured.profile,
        gpu,
        slot,
        file_exists: false,
        configured: true,
        holders: Vec::new(),
        since: None,
        unknown: false,
        skipped: None,
    };
    let view = pid_view();
    let mut report = Report {
        lock_dir: dir.to_bytes().to_vec(),
        exists: true,
        slots: Vec::new(),
        waiters: Vec::new(),
        host_namespace: view == PidView::Host,
        own_namespace: view == PidView::Own,
        locks_readable: true,
        exposed: Vec::new(),
        queue_not_dir: None,
        unresolved: configured.unresolved.clone(),
        gpus: Vec::new(),
        not_shown: 0,
        unsettled: false,
        unlisted: Vec::new(),
    };
    let unreadable = |errno| Error::StatusDir { dir: dir.to_bytes().to_vec(), error: Os(errno).to_string() };
    let drains = |e| Error::StatusDir { dir: dir.to_bytes().to_vec(), error: format!("its gpudrain/: {}", Os(e)) };
    let dir_fd = match open_dir(dir) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            // A symbolic link to nothing: every test here fails with this
            // error, which `--status` says as they do, not "no test yet".
            if let Some(e) = crate::slots::lockfile::dangling(dir) {
                return Err(e);
            }
            report.exists = false;
            report.slots = configured.each().into_iter().map(free).collect();
            report.unlisted = configured.unlisted(&report.slots);
            (report.gpus, report.not_shown) = gpus::survey(settings, &configured.names, dir).map_err(drains)?;
            return Ok(report);
        }
        Err(e) => return Err(unreadable(e)),
    };
    // Another user's lock directory or queue, or one any user may write
    // without the sticky bit: that user, or any, may rename a held lock
    // file (or a record) away, unseen here.
    let queue = path(QUEUE_DIR.to_str().unwrap_or("gpuqueue"));
    let found = [
        (rustix::fs::fstat(&dir_fd), dir.to_bytes(), false),
        (rustix::fs::statat(&dir_fd, QUEUE_DIR, AtFlags::SYMLINK_NOFOLLOW), &queue[..], true),
    ];
    for (st, at, is_queue) in found {
        let Ok(st) = st else { continue };
        // Something else at `gpuqueue` (a link, a file): no waiter has a
        // place, whatever its mode says.
        if is_queue && FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            report.queue_not_dir = Some(crate::slots::lockfile::kind_of(st.st_mode));
        } else if let Some(e) = Exposed::of(at, st.st_uid, st.st_mode, is_queue) {
            report.exposed.push((at.to_vec(), e.owner, is_queue));
        }
    }
    let mut names = Vec::new();
    for_each_entry(&dir_fd, |name, _| {
        names.push(alloc::ffi::CString::from(name));
        ControlFlow::<()>::Continue(())
    })
    .map_err(unreadable)?;
    let (mut found, mut odd) = (Vec::new(), Vec::new());
    for entry in &names {
        let Ok(name) = entry.to_str() else { continue };
        if parse_lock_name(name).is_none() {
            continue;
        }
        let Ok(st) = rustix::fs::statat(&dir_fd, entry.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
            found.push(Found { name: name.to_string(), st });
        } else {
            odd.push((name, st.st_mode));
        }
    }
    let queued = queued(&dir_fd);
    let device = mount_device(dir_fd.as_fd());
    // The lock files, then the records: one scan of the processes for both.
    let mut files: Vec<LockFile> =
        found.iter().map(|f| LockFile::new(f.name.as_bytes(), &f.st, device, false)).collect();
    files.extend(queued.iter().map(|r| LockFile::new(r.name.as_bytes(), &r.st, device, true)));
    // /proc/locks before and after the scan of the processes, and again
    // until it can be believed (`slots::lockers`).
    // Unreadable (`/proc` mounted with `subset=pid`): what the kernel
    // says of the locks is not known, and a slot no visible process holds
    // is of unknown state, never free.
    let table = Readings::before_the_scan();
    report.locks_readable = table.is_some();
    let mut readings = table.unwrap_or_default();
    let locks = readings.reads.first().map_or(&[][..], |r| r.as_slice());
    lease_lets_in(&mut files, locks, &dir_fd);
    let open = openers(&files);
    // Without the lock table, a visible waiter proves an unseen holder,
    // as from another PID namespace.
    let partial = !report.host_namespace || !report.locks_readable;
    read_after_the_scan(&mut readings, &files, &open, partial);
    let seen = readings.seen();
    let mut extra = Vec::new();
    for ((f, file), open) in found.iter().zip(&files).zip(&open) {
        let l = lockers(file, open, seen, partial);
        let mut holders: Vec<ProcessInfo> = l.holders.iter().map(|&pid| process(pid)).collect();
        // Gone from /proc since the scan: it has exited, and holds nothing
        // any more (a lock the kernel lists that no process found accounts
        // for is counted by `lockers`).
        holders.retain(|h| h.command.is_some());
        // The taker first when it holds the lock, then oldest first.
        let taker_first = l.taker_holds && holders.first().is_some_and(|h| Some(&h.pid) == l.holders.first());
        let first = usize::from(taker_first);
        crate::sys::sort::sort_by(&mut holders[first..], &mut |a, b| {
            (a.started.is_none(), a.started, a.pid) < (b.started.is_none(), b.started, b.pid)
        });
        holders.extend((0..l.hidden_holders).map(|_| process(0)));
        let waiter =
            |pid: i64| Waiter { process: process(pid), position: "blocked", file: path(&f.name), record: None };
        report.waiters.extend(l.waiters.iter().map(|&pid| waiter(pid)));
        let Some((profile, id, slot)) = parse_lock_name(&f.name) else { continue };
        extra.push(Slot {
            file: path(&f.name),
            profile,
            gpu: gpu_id(id),
            slot,
            file_exists: true,
            configured: configured.contains(profile, id, slot),
            since: granted(&f.st, &holders),
            unknown: !report.locks_readable && holders.is_empty(),
            holders,
            skipped: None,
        });
    }
    // The configured slots in the settings' order, each from its file when
    // there is one; then the other lock files.
    for (name, gpu, slot) in configured.each() {
        let at = extra.iter().position(|s| s.configured && s.file == path(&name));
        report.slots.push(match at {
            Some(at) => extra.remove(at),
            None => skipped_or_free(&dir_fd, &names, free((name, gpu, slot))),
        });
    }
    let key = |s: &Slot| (s.holders.is_empty(), s.profile, id_order(&s.gpu), s.slot);
    crate::sys::sort::sort_by(&mut extra, &mut |a, b| key(a) < key(b));
    // Held first, by GPU and slot. More slots than are listed: those with a
    // lock file listed, the rest counted.
    if configured.over() {
        let mut others = Vec::new();
        extra.into_iter().for_each(|s| if s.configured { report.slots.push(s) } else { others.push(s) });
        extra = others;
        // Its lock paths where something else than a file is: skipped.
        for &(n, mode) in &odd {
            let Some((_, id, slot)) = parse_lock_name(n).filter(|&(p, id, s)| configured.contains(p, id, s)) else {
                continue;
            };
            let mut s = free((n.to_string(), gpu_id(id), slot));
            (s.skipped, s.file_exists) = (Some(crate::slots::lockfile::kind_of(mode)), true);
            report.slots.push(s);
        }
        report.unlisted = configured.unlisted(&report.slots);
    }
    // The other lock files: at most MAX_OTHERS of them.
    report.not_shown += extra.len().saturating_sub(MAX_OTHERS);
    extra.truncate(MAX_OTHERS);
    report.slots.extend(extra);
    // The queue's waiters, in arrival order, before those blocked on a lock
    // file (a classic script's).
    let (boot, wall) = (host_since_boot(), SystemTime::now());
    let mut queue_waiters = Vec::new();
    for (r, (file, open)) in queued.iter().zip(files.iter().zip(&open).skip(found.len())) {
        let l = lockers(file, open, seen, partial);
        // Its lock held by no process, seen or unseen: its waiter may have
        // left (served, or died) since its record was read, or made it again.
        if !l.held() {
            match r.since(&dir_fd) {
                Since::Left => continue,
                Since::Remade => report.unsettled = true,
                Since::Here => {}
            }
        }
        let process = l.holders.first().map_or_else(|| process(0), |&pid| process(pid));
        let ticket = Duration::from_nanos(r.ticket);
        // A ticket is its writer's word: one from before its process started
        // (a second's slack for rounding) would pass for a wait of hours (and
        // an alert): that start is shown, or where the process cannot be seen,
        // the record's birth (one made again after a cleaner: since then).
        let bound = process.started.or(r.born);
        let since = wall
            .checked_sub(boot.saturating_sub(ticket))
            .map(|t| bound.filter(|&s| t + Duration::from_secs(1) < s).unwrap_or(t));
        let beat_age_ms = r
            .beat
            // A beat ahead of now (a writer on another clock) is as stale
            // as one as far behind: readers pass it.
            .map(|at| u64::try_from(boot.abs_diff(Duration::from_nanos(at)).as_millis()).unwrap_or(u64::MAX));
        let mut file = path(QUEUE_DIR.to_str().unwrap_or("gpuqueue"));
        file.push(b'/');
        file.extend_from_slice(r.name.as_bytes());
        queue_waiters.push(Waiter {
            process,
            position: "queued",
            file,
            record: Some(QueueRecord { needs: r.needed, since, beat_age_ms, owner: r.st.st_uid, test: r.test.clone() }),
        });
    }
    let order = |w: &Waiter| (w.process.started.is_none(), w.process.started, w.process.pid);
    crate::sys::sort::sort_by(&mut report.waiters, &mut |a, b| order(a) < order(b));
    queue_waiters.append(&mut report.waiters);
    report.waiters = queue_waiters;
    let (gpus, not_shown) = gpus::survey(settings, &configured.names, dir).map_err(drains)?;
    report.gpus = gpus;
    report.not_shown += not_shown;
    unseen_holders(&mut report);
    Ok(report)
}

/// In a PID namespace of its own, `/proc/locks` leaves out the locks taken
/// outside it. A waiter in the queue that runs (its beat is fresh) proves
/// that slots it could take are held: then a slot of a GPU in service,
/// with a lock file and no holder in sight, is of unknown state, never
/// free.
fn unseen_holders(report: &mut Report) {
    let fresh = |w: &Waiter| {
        w.record.as_ref().and_then(|r| r.beat_age_ms).is_some_and(|age| u128::from(age) <= STALE_AFTER.as_millis())
    };
    if report.host_namespace || !report.waiters.iter().any(fresh) {
        return;
    }
    let (gpus, slots) = (&report.gpus, &mut report.slots);
    let drained = |gpu: &str| gpus.iter().any(|g| g.gpu == gpu && g.drained.is_some());
    for s in slots.iter_mut().filter(|s| s.configured && s.file_exists && s.holders.is_empty() && !drained(&s.gpu)) {
        s.unknown = true;
    }
}

/// Most lock files not of these settings that `--status` lists (held ones
/// first); the rest are counted.
pub const MAX_OTHERS: usize = 64;

/// The text for `--status=FORMAT` with these settings. Never inlined: its
/// directory reads have 4 KiB buffers, which would otherwise sit in `run`'s
/// frame and be faulted in on every start, `--status` or not.
#[inline(never)]
pub fn render(settings: &Settings, format: Format) -> Result<String, Error> {
    let lock_dir = settings.lock_dir.path();
    let mut report = survey(settings, &lock_dir)?;
    // A record made again while it looked, its holder unknown: looked at
    // again (twice at most), so that its waiter is named.
    for _ in 0..2 {
        if !report.unsettled {
            break;
        }
        report = survey(settings, &lock_dir)?;
    }
    if format != Format::Text && !report.locks_readable && report.slots.iter().any(|s| s.unknown) {
        // The text says it in a note; JSON and metrics on stderr (a
        // metrics unit's journal).
        wrapper_common::diag::report(crate::TOOL, format_args!("warning: {}", status_format::UNREADABLE_LOCKS));
    }
    Ok(match format {
        Format::Text => status_format::text(&report),
        Format::Json => status_format::json(&report),
        Format::OpenMetrics => openmetrics::render(&report, settings.profile.name()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status_format::state_name;

    #[test]
    fn lock_names() {
        assert_eq!(parse_lock_name("gpulock3_0"), Some(("xla", "3", 0)));
        assert_eq!(parse_lock_name("gpulockGPU-ab-12_7"), Some(("xla", "GPU-ab-12", 7)));
        assert_eq!(parse_lock_name("gpulocka_b_12"), Some(("xla", "a_b", 12)));
        assert_eq!(parse_lock_name("jax_accelerator_lock_2_5"), Some(("jax", "2", 5)));
        assert_eq!(gpu_id("MIG-GPU-8932f937+1+2"), "MIG-GPU-8932f937/1/2");
        assert_eq!(gpu_id("GPU-8932f937+1"), "GPU-8932f937+1", "not a MIG path: the name as it is");
        for bad in ["gpulock.queue", "gpulock_0", "gpulock3_", "gpulock3_x", "other3_0", "gpulock3", "gpulock0_05"] {
            assert_eq!(parse_lock_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn states() {
        assert_eq!(state_name(Some('T')).as_deref(), Some("stopped"));
        assert_eq!(state_name(Some('D')).as_deref(), Some("disk-sleep"));
        assert_eq!(state_name(Some('W')).as_deref(), Some("W"));
        assert_eq!(state_name(None), None);
    }

    fn holder(started: u64) -> ProcessInfo {
        let started = UNIX_EPOCH.checked_add(Duration::from_secs(started));
        ProcessInfo { pid: 7, command: Some("t".into()), args: Vec::new(), started, state: Some('S'), uid: Some(0) }
    }

    #[test]
    fn the_grant_time_is_never_before_the_holder_started() {
        // SAFETY: a plain C struct, all zeroes is a valid value.
        let mut st: Stat = unsafe { core::mem::zeroed() };
        // Modified and changed at once, as a grant sets them.
        fn set(st: &mut Stat, secs: i64, nanos: i64) {
            let n = nanos.try_into().unwrap();
            (st.st_mtime, st.st_mtime_nsec, st.st_ctime, st.st_ctime_nsec) = (secs, n, secs, n);
        }
        set(&mut st, 1000, 0);
        let at = UNIX_EPOCH.checked_add(Duration::from_secs(1000));
        assert_eq!(granted(&st, &[holder(990)]), at);
        assert_eq!(granted(&st, &[holder(1000)]), at);
        assert_eq!(granted(&st, &[holder(1001)]), None, "a file older than its holder: unknown");
        set(&mut st, 999, 985_000_000);
        let stamped = UNIX_EPOCH.checked_add(Duration::new(999, 985_000_000));
        assert_eq!(granted(&st, &[holder(1000)]), stamped, "written within a tick of its holder's start");
        set(&mut st, 999, 975_000_000);
        assert_eq!(granted(&st, &[holder(1000)]), None, "written before its holder started");
        set(&mut st, 1000, 0);
        assert_eq!(granted(&st, &[holder(1005), holder(995)]), at, "the oldest holder counts");
        assert_eq!(granted(&st, &[process(0)]), None, "a hidden holder's start is unknown");
        assert_eq!(granted(&st, &[]), None);
        // A time given by hand (`touch -d`): changed later than modified.
        st.st_ctime = 1001;
        assert_eq!(granted(&st, &[holder(995)]), None, "a time given by hand");
        // A time ahead of now (`touch -d 2099`) is no grant either.
        set(&mut st, 4_070_908_800, 0);
        assert_eq!(granted(&st, &[holder(995)]), None, "a time ahead of now");
    }
}
