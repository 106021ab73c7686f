//! What `--status` found ([`crate::report::status`] finds it) and its two
//! outputs: a table for people (readable in 100 columns while commands are
//! short) and one JSON object (its keys are documented in `status`).

use crate::prelude::*;
use crate::report::json;
use crate::slots::drain::Drained;
use crate::slots::proclocks::{ProcessInfo, rfc3339};
use crate::slots::record::STALE_AFTER;
use crate::slots::request::gpus_needed;
use crate::sys::clock::SystemTime;
use crate::sys::clock::UNIX_EPOCH;
use core::fmt::Write as _;
use core::time::Duration;
use wrapper_common::diag::Bytes;

/// One slot. Paths are the bytes they are (no NUL), as the kernel has them.
pub struct Slot {
    pub file: Vec<u8>,
    pub profile: &'static str,
    pub gpu: String,
    pub slot: u32,
    pub file_exists: bool,
    pub configured: bool,
    /// Visible holders first, then one hidden entry (pid 0) per holder
    /// that cannot be seen.
    pub holders: Vec<ProcessInfo>,
    pub since: Option<SystemTime>,
    /// Held or free cannot be told: `/proc/locks` cannot be read and no
    /// visible process holds it.
    pub unknown: bool,
    /// What is at its path, where every test skips it: anything but a
    /// regular file (a FIFO, a symbolic link).
    pub skipped: Option<&'static str>,
}

impl Slot {
    /// Some process holds it.
    pub fn held(&self) -> bool {
        !self.holders.is_empty()
    }

    /// Nothing holds it, as far as the kernel says, and a test may take it.
    pub fn free(&self) -> bool {
        !self.held() && !self.unknown && self.skipped.is_none()
    }
}

/// A waiter: a wrapper with a record in the queue, or a process blocked on
/// a lock file.
pub struct Waiter {
    /// The process that holds the record or waits on the lock file (pid 0:
    /// hidden).
    pub process: ProcessInfo,
    /// `queued` (a record in the queue), `blocked` (in `flock(2)` on a lock file).
    pub position: &'static str,
    /// The record, or the lock file.
    pub file: Vec<u8>,
    /// What a record says and the kernel shows of it.
    pub record: Option<QueueRecord>,
}

impl Waiter {
    /// Since when it waits: its record's ticket, else its process's start.
    pub fn since(&self) -> Option<SystemTime> {
        self.record.as_ref().map_or(self.process.started, |r| r.since)
    }
}

/// A waiter's record, for `--status`.
pub struct QueueRecord {
    /// The GPUs it asks for (as the record says).
    pub needs: u64,
    /// When it began to wait (its ticket, on the wall clock).
    pub since: Option<SystemTime>,
    /// Milliseconds since its last beat (`None`: no whole beat): over a
    /// second, it does not run (frozen, stopped) and nobody waits for it.
    pub beat_age_ms: Option<u64>,
    /// Who made it: the file's owner.
    pub owner: u32,
    /// The test, as the record says.
    pub test: Vec<u8>,
}

/// One GPU.
pub struct Gpu {
    /// As `Slot::gpu`.
    pub gpu: String,
    pub drained: Option<Drained>,
    /// (pid, bytes of its memory) for each process KFD lists on it; `None`
    /// where the kernel does not tell.
    pub kernel_users: Option<Vec<(i64, Option<u64>)>>,
    /// `ok`, or why not.
    pub health: String,
    /// A GPU of the settings (else: a drained GPU they do not give).
    pub configured: bool,
}

/// Everything `--status` shows.
pub struct Report {
    pub lock_dir: Vec<u8>,
    /// False when the directory does not exist (yet): the first wrapper
    /// that takes a slot creates it, so that is a host where none has.
    pub exists: bool,
    pub slots: Vec<Slot>,
    pub waiters: Vec<Waiter>,
    /// Whether `/proc` shows the host's PID namespace (see
    /// [`crate::slots::holders::host_pid_namespace`]): else a slot held from outside, with nobody
    /// here waiting for it, is listed as free.
    pub host_namespace: bool,
    /// Whether `/proc` shows a PID namespace of its own, not the host's
    /// (and not one it cannot tell: `hidepid`).
    pub own_namespace: bool,
    /// Whether `/proc/locks` could be read: else a slot that no visible
    /// process holds is of unknown state.
    pub locks_readable: bool,
    /// The lock directory and `gpuqueue/` (`true`), where a user other
    /// than root and the caller owns it, with that uid (the owner is
    /// exempt from the sticky bit), or every user may write it without the
    /// sticky bit (`None`): that user, or any, may rename a held lock file
    /// (or a record) away.
    pub exposed: Vec<(Vec<u8>, Option<u32>, bool)>,
    /// What is at `gpuqueue` where it is not a directory (a symbolic link,
    /// a file): no waiter has a place in the queue.
    pub queue_not_dir: Option<&'static str>,
    /// Why the settings' pool cannot be told, where it cannot: no slot of
    /// them is listed.
    pub unresolved: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Lock files and drain records of the directory that are not of these
    /// settings and were left out, so that what any user may put there
    /// cannot make the report grow past the host's GPUs and waiters.
    pub not_shown: usize,
    /// Whether a waiter's record was made again while the report was made,
    /// its holder then unknown (not shown: `render` looks again).
    pub unsettled: bool,
    /// Where the settings give more slots than are listed: per GPU, its
    /// slots without a lock file (free), counted, not listed.
    pub unlisted: Vec<(String, usize)>,
}

/// Most slots of the settings listed one by one: beyond, only those with a
/// lock file are, and the others counted ([`Report::unlisted`]).
pub const MAX_LISTED: usize = 4096;

/// A configured slot without a regular file at its path: free, or, where
/// something else is there (a FIFO, a link: every test skips it), that.
pub fn skipped_or_free(dir_fd: &rustix::fd::OwnedFd, names: &[alloc::ffi::CString], mut slot: Slot) -> Slot {
    let name = slot.file.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    let st = names
        .iter()
        .find(|n| n.to_bytes() == name)
        .map(|n| rustix::fs::statat(dir_fd, n, rustix::fs::AtFlags::SYMLINK_NOFOLLOW));
    if let Some(Ok(st)) =
        st.filter(|st| st.as_ref().is_ok_and(|st| !rustix::fs::FileType::from_raw_mode(st.st_mode).is_file()))
    {
        slot.skipped = Some(crate::slots::lockfile::kind_of(st.st_mode));
        slot.file_exists = true;
    }
    slot
}

/// Why slots are of unknown state, and the repair: one line.
pub const UNREADABLE_LOCKS: &str = "/proc/locks cannot be read (a /proc mounted with subset=pid, as systemd's ProcSubset=pid makes, or none), so a slot that no visible process holds may be held or free: its state is unknown; run --status where /proc is whole (drop ProcSubset=pid from the unit)";

/// What a waiter asks for: as its record says; else from its arguments
/// (`--num_processes` and `--gpus_per_process`, as the wrapper reads them).
pub fn needs(w: &Waiter) -> Option<u64> {
    if let Some(r) = &w.record {
        return Some(r.needs);
    }
    let p = &w.process;
    (!p.args.is_empty()).then(|| gpus_needed(p.args.iter().skip(1).map(Vec::as_slice)))
}

/// A waiter's beat in words: `-` for a process blocked on a lock file.
fn beat_text(w: &Waiter) -> String {
    match w.record.as_ref().map(|r| r.beat_age_ms) {
        None => "-".to_string(),
        Some(Some(age)) if u128::from(age) <= STALE_AFTER.as_millis() => "ok".to_string(),
        Some(Some(age)) => format!("none for {} s", age / 1000),
        Some(None) => "unreadable".to_string(),
    }
}

/// A process state letter in words (`None`: hidden).
pub fn state_name(state: Option<char>) -> Option<String> {
    Some(
        match state? {
            'R' => "running",
            'S' => "sleeping",
            'D' => "disk-sleep",
            'T' => "stopped",
            't' => "traced",
            'Z' => "zombie",
            'I' => "idle",
            'X' | 'x' => "dead",
            other => return Some(other.to_string()),
        }
        .to_string(),
    )
}

/// Most holders of one slot listed in the text (a test's children share
/// its lock); the JSON lists every one.
const MAX_HOLDER_ROWS: usize = 4;

fn pid_text(p: &ProcessInfo) -> String {
    match &p.command {
        Some(_) => p.pid.to_string(),
        None if p.pid > 0 => format!("{} (hidden)", p.pid),
        None => "hidden".to_string(),
    }
}

fn state_text(p: &ProcessInfo) -> String {
    state_name(p.state).unwrap_or_else(|| "-".to_string())
}

fn time_text(t: Option<SystemTime>) -> String {
    match t {
        Some(t) => {
            let ago = SystemTime::now().duration_since(t).map_or(0, |d| d.as_secs());
            format!("{} ({ago} s ago)", rfc3339(t))
        }
        None => "-".to_string(),
    }
}

fn command_text(p: &ProcessInfo) -> &str {
    p.command
        .as_deref()
        .unwrap_or("(not visible from here: another user's, another PID namespace's, or passed between processes)")
}

/// The widest of `values`, at least `min`.
fn width<'a>(min: usize, values: impl Iterator<Item = &'a str>) -> usize {
    values.map(|v| v.chars().count()).fold(min, usize::max)
}

/// The GPU part of a lock file's name, as the text shows it: any user may
/// create a file named `gpulock<ESC>...` or with a newline in a shared lock
/// directory, and neither may reach the operator's terminal or forge a row.
fn gpu_text(s: &Slot) -> String {
    Bytes(s.gpu.as_bytes()).to_string()
}

fn slot_rows(out: &mut String, s: &Slot, gpu_w: usize, state_w: usize, since_w: usize) {
    let lead = format!("{:<8} {:<gpu_w$} {:>4}", s.profile, gpu_text(s), s.slot);
    if s.holders.is_empty() {
        let _ = match s.skipped {
            Some(kind) => writeln!(out, "{lead}  skipped (a {kind}: no test takes it)"),
            None => writeln!(out, "{lead}  {}", if s.unknown { "unknown" } else { "free" }),
        };
        return;
    }
    let since = time_text(s.since);
    for h in s.holders.iter().take(MAX_HOLDER_ROWS) {
        let (pid, state) = (pid_text(h), state_text(h));
        let _ = writeln!(out, "{lead}  held  {pid:<12} {state:<state_w$} {since:<since_w$} {}", command_text(h));
    }
    if s.holders.len() > MAX_HOLDER_ROWS {
        let more = s.holders.len() - MAX_HOLDER_ROWS;
        let _ = writeln!(out, "{lead}  held  and {more} more process(es) (--status=json lists every one)");
    }
}

pub fn text(r: &Report) -> String {
    // The slots of these settings; other lock files listed below them are
    // counted apart (all of them, where none is of these settings).
    let any_configured = r.slots.iter().any(|s| s.configured) || !r.unlisted.is_empty();
    let mine = || r.slots.iter().filter(|s| s.configured || !any_configured);
    let unlisted: usize = r.unlisted.iter().map(|(_, n)| n).sum();
    let held = mine().filter(|s| s.held()).count();
    let unknown = mine().filter(|s| s.unknown && s.skipped.is_none()).count();
    let unknown_text = if unknown > 0 { format!(", {unknown} unknown") } else { String::new() };
    let mut out = if r.exists {
        format!(
            "lock dir {}: {} slot(s), {held} held{unknown_text}, {} waiting\n",
            Bytes(&r.lock_dir),
            mine().count() + unlisted,
            r.waiters.len()
        )
    } else {
        format!(
            "lock dir {}: does not exist (no test has taken a slot there yet): {} slot(s), 0 held, 0 waiting\n",
            Bytes(&r.lock_dir),
            r.slots.len() + unlisted
        )
    };
    if r.not_shown > 0 {
        let _ = writeln!(
            out,
            "note: {} more lock files or drain records in the directory, not of these settings, are not shown",
            r.not_shown
        );
    }
    if let Some(why) = &r.unresolved {
        let _ = writeln!(out, "note: the slots of these settings are not listed, as a test here is refused: {why}");
    }
    if unlisted > 0 {
        let _ = writeln!(
            out,
            "note: {unlisted} more slots of these settings, free (no lock file yet), are counted, not listed (over {})",
            MAX_LISTED
        );
    }
    for (dir, owner, queue) in &r.exposed {
        let _ = writeln!(out, "note: {}", crate::slots::exposure::Exposed { dir, owner: *owner, queue: *queue });
    }
    if let Some(kind) = r.queue_not_dir {
        let q = Bytes(&r.lock_dir);
        let _ = writeln!(
            out,
            "note: {q}/gpuqueue is a {kind}, not a directory: every waiter waits without a place in the queue, so later tests may be served first; its owner or root runs: rm -f {q}/gpuqueue"
        );
    }
    if unknown > 0 && !r.locks_readable {
        let _ = writeln!(out, "note: {UNREADABLE_LOCKS}");
    } else if unknown > 0 {
        out.push_str(
            "note: no kernel threads in /proc (a PID namespace of its own?): its /proc/locks leaves out locks taken\n      \
             outside it, and a test waits in this lock directory, so a slot with no holder in sight is of unknown state\n",
        );
    } else if r.exists && !r.host_namespace && r.locks_readable && !r.slots.is_empty() {
        out.push_str(
            "note: no kernel threads in /proc (a PID namespace of its own?): a slot held from outside it,\n      \
             with nobody here waiting for it, cannot be told from a free one\n",
        );
    }
    let holders = || r.slots.iter().flat_map(|s| s.holders.iter().take(MAX_HOLDER_ROWS));
    let gpus: Vec<String> = r.slots.iter().map(gpu_text).collect();
    let gpu_w = width(3, gpus.iter().map(String::as_str));
    let states: Vec<String> = holders().chain(r.waiters.iter().map(|w| &w.process)).map(state_text).collect();
    let state_w = width(7, states.iter().map(String::as_str));
    let sinces: Vec<String> = r.slots.iter().map(|s| time_text(s.since)).collect();
    let since_w = width(5, sinces.iter().map(String::as_str));
    if !r.slots.is_empty() {
        let _ = writeln!(
            out,
            "{:<8} {:<gpu_w$} {:>4}  {:<5} {:<12} {:<state_w$} {:<since_w$} COMMAND",
            "PROFILE", "GPU", "SLOT", "STATE", "PID", "PROCESS", "SINCE"
        );
    }
    let any_configured = r.slots.iter().any(|s| s.configured);
    let mut others_said = false;
    for s in &r.slots {
        if any_configured && !s.configured && !others_said {
            others_said = true;
            let others = r.slots.iter().filter(|s| !s.configured).count();
            let _ = writeln!(out, "other lock files in the directory ({others}, not slots of these settings):");
        }
        slot_rows(&mut out, s, gpu_w, state_w, since_w);
    }
    if !r.waiters.is_empty() {
        let started: Vec<String> = r.waiters.iter().map(|w| time_text(w.since())).collect();
        let started_w = width(7, started.iter().map(String::as_str));
        let beats: Vec<String> = r.waiters.iter().map(beat_text).collect();
        let beat_w = width(4, beats.iter().map(String::as_str));
        out.push_str("waiting, first come first served:\n");
        let _ = writeln!(
            out,
            "{:<8} {:<12} {:<state_w$} {:<beat_w$} {:<10} {:<started_w$} COMMAND",
            "POSITION", "PID", "PROCESS", "BEAT", "NEEDS", "WAITING SINCE"
        );
        for ((w, started), beat) in r.waiters.iter().zip(&started).zip(&beats) {
            let needs = needs(w).map_or("-".to_string(), |n| format!("{n} GPU(s)"));
            let command = match (&w.process.command, &w.record) {
                (None, Some(rec)) => format!("{} (as its record says; made by uid {})", Bytes(&rec.test), rec.owner),
                _ => command_text(&w.process).to_string(),
            };
            let _ = writeln!(
                out,
                "{:<8} {:<12} {:<state_w$} {beat:<beat_w$} {needs:<10} {started:<started_w$} {command}",
                w.position,
                pid_text(&w.process),
                state_text(&w.process),
            );
        }
    }
    gpus_text(&mut out, &r.gpus);
    out
}

/// When a GPU was drained.
pub fn drained_at(d: &Drained) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(Duration::from_secs(d.time?))
}

/// Who drained it, by the record's owner: `alice (uid 1000)` where the
/// record's text agrees (the name `/etc/passwd` gives the uid), `uid 1000`
/// where it names nobody, and the owner with a flag where the text names
/// another user (it was written or replaced by someone other than who it
/// says) or the file holds no drain record; the text, said as such, where
/// the owner is outside this user namespace and cannot be told.
fn drained_by(d: &Drained) -> String {
    let said = match (&d.user, d.uid) {
        (Some(u), Some(uid)) => format!("{} (uid {uid})", Bytes(u)),
        (None, Some(uid)) => format!("uid {uid}"),
        (_, None) => "-".to_string(),
    };
    // Asked once: each asking reads this process's user namespace map.
    let disowned = d.disowned();
    match d.owner {
        Some(owner) if disowned && d.uid.is_none() => {
            format!("uid {owner} (its file holds no drain record: not written by --drain)")
        }
        Some(owner) if disowned => {
            format!(
                "uid {owner} (its record claims {said}, but the file is uid {owner}'s: not written by whom it says)"
            )
        }
        Some(owner) if crate::sys::userns::unmapped(owner, crate::sys::userns::Ids::User) => match d.uid {
            Some(_) => {
                format!("{said}, as its record says (its owner is uid {owner}, {})", crate::sys::userns::ANY_OUTSIDE)
            }
            None => format!("uid {owner}, {}", crate::sys::userns::ANY_OUTSIDE),
        },
        Some(owner) if d.uid.is_none() => format!("uid {owner}"),
        _ => said,
    }
}

/// A GPU's line in the text.
fn gpu_line(g: &Gpu, gpu_w: usize, health_w: usize) -> String {
    let state = match &g.drained {
        Some(d) => format!(
            "drained {} by {}: {}{}",
            drained_at(d).map_or_else(|| "-".to_string(), rfc3339),
            drained_by(d),
            Bytes(&d.reason),
            d.doubt.map_or_else(String::new, |why| format!(
                " (which GPU it names cannot be trusted: {}; tests pass it over)",
                why.describe()
            ))
        ),
        None => "in service".to_string(),
    };
    let users = match &g.kernel_users {
        None => "-".to_string(),
        Some(u) if u.is_empty() => "none".to_string(),
        Some(u) => {
            let each: Vec<String> = u
                .iter()
                .map(|(pid, bytes)| match bytes {
                    Some(b) => format!("{pid} ({} MiB)", b / (1024 * 1024)),
                    None => pid.to_string(),
                })
                .collect();
            each.join(", ")
        }
    };
    let gpu = Bytes(g.gpu.as_bytes()).to_string();
    let other = if g.configured { "" } else { " (not a GPU of these settings)" };
    format!("{gpu:<gpu_w$} {:<health_w$} {users:<24} {state}{other}\n", Bytes(g.health.as_bytes()).to_string())
}

fn gpus_text(out: &mut String, gpus: &[Gpu]) {
    if gpus.is_empty() {
        return;
    }
    let names: Vec<String> = gpus.iter().map(|g| Bytes(g.gpu.as_bytes()).to_string()).collect();
    let gpu_w = width(3, names.iter().map(String::as_str));
    let health: Vec<String> = gpus.iter().map(|g| Bytes(g.health.as_bytes()).to_string()).collect();
    let health_w = width(6, health.iter().map(String::as_str));
    out.push_str("gpus:\n");
    let _ = writeln!(out, "{:<gpu_w$} {:<health_w$} {:<24} STATE", "GPU", "HEALTH", "KERNEL USERS (PID)");
    for g in gpus {
        out.push_str(&gpu_line(g, gpu_w, health_w));
    }
}

fn gpu_json(g: &Gpu) -> String {
    let drained = g.drained.as_ref().map_or_else(
        || "null".to_string(),
        |d| {
            json::object(&[
                ("reason", json::string(&d.reason)),
                ("time", time_json(drained_at(d))),
                ("uid", json::opt_number(d.uid.map(u64::from))),
                ("user", json::opt_string(d.user.as_deref())),
                ("owner_uid", json::opt_number(d.owner.map(u64::from))),
                ("disowned", d.disowned().to_string()),
                (
                    "untrusted",
                    d.doubt.map_or_else(|| "null".to_string(), |why| json::string(why.describe().as_bytes())),
                ),
            ])
        },
    );
    let users = g.kernel_users.as_ref().map_or_else(
        || "null".to_string(),
        |u| {
            let each: Vec<String> = u
                .iter()
                .map(|(pid, b)| json::object(&[("pid", pid.to_string()), ("vram_bytes", json::opt_number(*b))]))
                .collect();
            json::array(&each)
        },
    );
    json::object(&[
        ("gpu", json::string(g.gpu.as_bytes())),
        ("drained", drained),
        ("kernel_users", users),
        ("health", json::string(g.health.as_bytes())),
        ("configured", g.configured.to_string()),
    ])
}

fn time_json(t: Option<SystemTime>) -> String {
    json::opt_string(t.map(rfc3339).as_deref().map(str::as_bytes))
}

fn process_json(p: &ProcessInfo) -> Vec<(&'static str, String)> {
    vec![
        ("pid", p.pid.max(0).to_string()),
        ("visible", p.command.is_some().to_string()),
        ("command", json::opt_string(p.command.as_deref().map(str::as_bytes))),
        ("started", time_json(p.started)),
        ("state", json::opt_string(state_name(p.state).as_deref().map(str::as_bytes))),
        ("uid", json::opt_number(p.uid.map(u64::from))),
    ]
}

pub fn json(r: &Report) -> String {
    let path = |p: &[u8]| json::string(p);
    let slots: Vec<String> = r
        .slots
        .iter()
        .map(|s| {
            let holders: Vec<String> = s.holders.iter().map(|h| json::object(&process_json(h))).collect();
            let mut fields = vec![
                ("file", path(&s.file)),
                ("profile", json::string(s.profile.as_bytes())),
                ("gpu", json::string(s.gpu.as_bytes())),
                ("slot", s.slot.to_string()),
                ("held", if s.unknown { "null".to_string() } else { s.held().to_string() }),
                ("holders", json::array(&holders)),
                ("since", time_json(s.since)),
                ("file_exists", s.file_exists.to_string()),
                ("configured", s.configured.to_string()),
            ];
            if let Some(kind) = s.skipped {
                fields.push(("skipped", json::string(kind.as_bytes())));
            }
            json::object(&fields)
        })
        .collect();
    let waiters: Vec<String> = r
        .waiters
        .iter()
        .map(|w| {
            let mut fields = process_json(&w.process);
            fields.push(("position", json::string(w.position.as_bytes())));
            fields.push(("file", path(&w.file)));
            fields.push(("needs", json::opt_number(needs(w))));
            let record = w.record.as_ref();
            fields.push(("since", time_json(record.and_then(|r| r.since))));
            let beat = record.and_then(|r| r.beat_age_ms).map(|a| format!("{}.{:03}", a / 1000, a % 1000));
            fields.push(("beat_age_seconds", beat.unwrap_or_else(|| "null".to_string())));
            fields.push(("owner_uid", json::opt_number(record.map(|r| u64::from(r.owner)))));
            fields.push(("record_test", record.map_or_else(|| "null".to_string(), |r| json::string(&r.test))));
            json::object(&fields)
        })
        .collect();
    let mut fields = vec![
        ("lock_dir", path(&r.lock_dir)),
        ("slots", json::array(&slots)),
        ("waiters", json::array(&waiters)),
        ("exists", r.exists.to_string()),
        ("host_pid_namespace", r.host_namespace.to_string()),
        ("gpus", json::array(&r.gpus.iter().map(gpu_json).collect::<Vec<_>>())),
        ("not_shown", r.not_shown.to_string()),
    ];
    if !r.unlisted.is_empty() {
        fields.push(("unlisted_free_slots", r.unlisted.iter().map(|(_, n)| n).sum::<usize>().to_string()));
    }
    if !r.locks_readable {
        fields.push(("locks_readable", "false".to_string()));
    }
    if let Some(why) = &r.unresolved {
        fields.push(("pool_error", json::string(why.as_bytes())));
    }
    let owned: Vec<String> = r
        .exposed
        .iter()
        .filter_map(|(dir, uid, _)| Some(json::object(&[("dir", path(dir)), ("uid", (*uid)?.to_string())])))
        .collect();
    if !owned.is_empty() {
        fields.push(("other_owners", json::array(&owned)));
    }
    let unsticky: Vec<String> = r.exposed.iter().filter(|(_, uid, _)| uid.is_none()).map(|(d, ..)| path(d)).collect();
    if !unsticky.is_empty() {
        fields.push(("unsticky_dirs", json::array(&unsticky)));
    }
    if let Some(kind) = r.queue_not_dir {
        fields.push(("queue_not_a_directory", json::string(kind.as_bytes())));
    }
    json::object(&fields) + "\n"
}
