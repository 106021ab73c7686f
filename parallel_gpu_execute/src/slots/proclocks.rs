//! `/proc/locks` and `/proc/<pid>`: who holds or waits for which lock file,
//! for `--status` and the wait telemetry. Both read the real `/proc` (locks
//! are real even when the hardware is faked); this may allocate.
//!
//! A `/proc/locks` line is `N: FLOCK  ADVISORY  WRITE <pid> <MAJ>:<MIN>:<inode> 0 EOF`,
//! with `->` after the number for a process blocked on that lock; major and
//! minor are hex (the superblock's device, which `stat` does not give on
//! btrfs: see `holders`). The PID is the process that took the lock, which
//! may have exited since (`holders` finds who holds it now). In a PID
//! namespace other than the host's, the kernel leaves out every lock whose
//! taker that namespace cannot see (an exited one included) with all its
//! waiters, and shows 0 for a waiter it cannot see behind a holder it can;
//! open-file-description locks show -1.

use crate::prelude::*;
use crate::sys::clock::{SystemTime, UNIX_EPOCH};
use crate::sys::dirs::read_file;
use core::time::Duration;
use wrapper_common::diag;

/// One line of `/proc/locks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockEntry {
    /// Waiting for the lock rather than holding it.
    pub blocked: bool,
    /// A `flock(2)` lock, or a lease that no other process may open the
    /// file under (a write lease, or one being broken).
    pub flock: bool,
    /// A lease being broken toward none (`BREAKING UNLCK`): a write lease
    /// keeps every open out meanwhile, a read lease none for reading, and
    /// the table does not say which it was ([`crate::slots::holders::lease_lets_in`]).
    pub breaking: bool,
    /// The holder's (or waiter's) pid in this namespace; 0 or less when hidden.
    pub pid: i64,
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

/// Parses one line; `None` for lines of another shape.
pub fn parse_line(line: &str) -> Option<LockEntry> {
    let mut words = line.split_ascii_whitespace();
    words.next()?.strip_suffix(':')?;
    let mut kind = words.next()?;
    let blocked = kind == "->";
    if blocked {
        kind = words.next()?;
    }
    let state = words.next()?;
    let mode = words.next()?;
    let pid: i64 = words.next()?.parse().ok()?;
    let mut dev = words.next()?.split(':');
    let major = u32::from_str_radix(dev.next()?, 16).ok()?;
    let minor = u32::from_str_radix(dev.next()?, 16).ok()?;
    let inode = dev.next()?.parse().ok()?;
    // A write lease, or one being broken, keeps every other process from
    // opening the file (a wrapper's open fails with EAGAIN): the slot is
    // held by its holder, as by a `flock`.
    let lease = kind == "LEASE" && state != "BREAKER" && (mode == "WRITE" || state == "BREAKING");
    let breaking = kind == "LEASE" && state == "BREAKING" && mode == "UNLCK";
    Some(LockEntry { blocked, flock: kind == "FLOCK" || lease, breaking, pid, major, minor, inode })
}

/// Every lock of the system, as this process may see them, by file
/// ([`LockEntry::key`]; in the kernel's order for each, so that
/// [`on_file`] finds a file's in a binary search); `None` when
/// `/proc/locks` cannot be read (a `/proc` mounted with `subset=pid`, as
/// systemd's `ProcSubset=pid` makes, none mounted, no descriptor left):
/// then nothing is known of the locks, which is not "none is held".
pub fn read_locks() -> Option<Vec<LockEntry>> {
    let mut locks: Vec<LockEntry> = read_text(c"/proc/locks")?.lines().filter_map(parse_line).collect();
    crate::sys::sort::sort_by(&mut locks, &mut |a, b| a.key() < b.key());
    Some(locks)
}

/// The locks of the file `key` among `locks`, sorted by file as
/// [`read_locks`] gives them: each file's lookup costs a binary search,
/// not a pass over every lock of the system (another user can hold
/// 100,000).
pub fn on_file(locks: &[LockEntry], key: (u32, u32, u64)) -> &[LockEntry] {
    let rest = &locks[locks.partition_point(|l| l.key() < key)..];
    &rest[..rest.iter().take_while(|l| l.key() == key).count()]
}

impl LockEntry {
    pub fn key(&self) -> (u32, u32, u64) {
        (self.major, self.minor, self.inode)
    }

    /// A `flock(2)` lock held (not waited for) on the file `key`.
    pub fn held_on(&self, key: (u32, u32, u64)) -> bool {
        self.flock && !self.blocked && self.key() == key
    }
}

/// What `/proc/<pid>` tells about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i64,
    /// `None` when `/proc` hides it (another PID namespace, `hidepid`).
    pub command: Option<String>,
    /// The arguments, for what a waiter needs.
    pub args: Vec<Vec<u8>>,
    pub started: Option<SystemTime>,
    /// The state letter of `/proc/<pid>/stat` (field 3): `R` running, `S`
    /// sleeping, `D` in uninterruptible sleep, `T` stopped, `t` stopped
    /// by a tracer, `Z` zombie, ...; `None` when hidden.
    pub state: Option<char>,
    /// Its user (the owner of `/proc/<pid>`: its effective uid, as the
    /// kernel has it, whatever its command line says); `None` when hidden.
    pub uid: Option<u32>,
}

/// Longest command shown.
pub const MAX_COMMAND: usize = 200;

/// A `/proc` file that holds text (what std's `read_to_string` would give:
/// nothing when it is not UTF-8).
fn read_text(path: &core::ffi::CStr) -> Option<String> {
    String::from_utf8(read_file(path)?).ok()
}

/// `/proc/<pid>/<file>`.
fn proc_path(pid: i64, file: &str) -> alloc::ffi::CString {
    alloc::ffi::CString::new(format!("/proc/{pid}/{file}")).unwrap_or_default()
}

/// When this time namespace's boot was, on the wall clock: to the
/// nanosecond, where `/proc/stat`'s `btime` is whole seconds (up to a
/// second early). Read once a run: two reads differ by the nanoseconds
/// between their clock reads, which would order two processes started in
/// the same clock tick by chance.
fn boot_time() -> Option<SystemTime> {
    use core::sync::atomic::{AtomicU64, Ordering};
    static BOOT_NS: AtomicU64 = AtomicU64::new(0);
    let ns = match BOOT_NS.load(Ordering::Relaxed) {
        0 => {
            let at = SystemTime::now().checked_sub(crate::sys::clock::since_boot())?;
            let ns = u64::try_from(at.duration_since(UNIX_EPOCH)?.as_nanos()).ok()?.max(1);
            BOOT_NS.store(ns, Ordering::Relaxed);
            ns
        }
        ns => ns,
    };
    UNIX_EPOCH.checked_add(Duration::from_nanos(ns))
}

/// The fields of `/proc/<pid>/stat` from field 3 (the state) on. The
/// command (field 2) is in parentheses and may hold spaces: they start
/// after the last ')'.
fn stat_fields(pid: i64) -> Option<String> {
    let stat = read_text(&proc_path(pid, "stat"))?;
    Some(stat.rfind(')').map_or("", |at| &stat[at + 1..]).to_string())
}

/// The state letter and start time of `pid`, from `/proc/<pid>/stat`
/// (starttime is field 22).
fn state_and_start(pid: i64) -> (Option<char>, Option<SystemTime>) {
    let (state, ticks) = state_and_ticks(pid);
    (state, ticks.and_then(since_boot))
}

/// The state letter and start time of `pid` in clock ticks after boot, as
/// `/proc/<pid>/stat` has them: enough to order processes, with one read.
pub fn state_and_ticks(pid: i64) -> (Option<char>, Option<u64>) {
    let Some(rest) = stat_fields(pid) else { return (None, None) };
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next().and_then(|s| s.chars().next());
    (state, fields.nth(18).and_then(|t| wrapper_common::numbers::parse_u64(t.as_bytes())))
}

/// Clock ticks a second: the kernel's `AT_CLKTCK`, as
/// `sysconf(_SC_CLK_TCK)` answers it (100 where it is missing), without
/// the rest of sysconf linked in (2 KB of code).
fn clock_ticks() -> u64 {
    // SAFETY: getauxval has no preconditions; it answers 0 for a type not there.
    match unsafe { libc::getauxval(libc::AT_CLKTCK) } {
        0 => 100,
        hz => hz,
    }
}

/// The wall-clock time `ticks` clock ticks after boot.
fn since_boot(ticks: u64) -> Option<SystemTime> {
    let hz = clock_ticks();
    let nanos = (ticks % hz) * 1_000_000_000 / hz;
    boot_time()?.checked_add(Duration::new(ticks / hz, nanos as u32))
}

/// Reads what `/proc` shows of `pid`.
pub fn process(pid: i64) -> ProcessInfo {
    let hidden = ProcessInfo { pid, command: None, args: Vec::new(), started: None, state: None, uid: None };
    if pid <= 0 {
        return hidden;
    }
    let Some(raw) = read_file(&proc_path(pid, "cmdline")) else { return hidden };
    let args: Vec<Vec<u8>> = raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(<[u8]>::to_vec).collect();
    let mut command = String::from_utf8_lossy(&args.join(&b' ')).into_owned();
    if command.chars().count() > MAX_COMMAND {
        command = command.chars().take(MAX_COMMAND - 3).collect::<String>() + "...";
    }
    let command = command.chars().map(|c| if diag::is_unshown(c) { '?' } else { c }).collect();
    let (state, started) = state_and_start(pid);
    let uid = rustix::fs::stat(proc_path(pid, "").as_c_str()).ok().map(|st| st.st_uid);
    ProcessInfo { pid, command: Some(command), args, started, state, uid }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn rfc3339(t: SystemTime) -> String {
    // Past 9999-12-31T23:59:59Z (a time a file's owner set), that: the
    // format has four digits of year.
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()).min(253_402_300_799);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_locks_lines() {
        let held = parse_line("1: FLOCK  ADVISORY  WRITE 12345 fd:01:1234567 0 EOF").unwrap();
        assert_eq!(
            held,
            LockEntry {
                blocked: false,
                flock: true,
                breaking: false,
                pid: 12345,
                major: 0xfd,
                minor: 1,
                inode: 1234567
            }
        );
        let waiting = parse_line("1: -> FLOCK  ADVISORY  WRITE 12346 08:10:99 0 EOF").unwrap();
        assert!(waiting.blocked);
        assert_eq!((waiting.pid, waiting.major, waiting.minor, waiting.inode), (12346, 8, 16, 99));
        let hidden = parse_line("7: FLOCK  ADVISORY  WRITE 0 00:2a:5 0 EOF").unwrap();
        assert_eq!(hidden.pid, 0);
        let ofd = parse_line("3: OFDLCK ADVISORY  READ  -1 00:05:1234 0 EOF").unwrap();
        assert_eq!((ofd.flock, ofd.pid), (false, -1));
        let posix = parse_line("2: POSIX  ADVISORY  WRITE 999 00:19:4 0 EOF").unwrap();
        assert!(!posix.flock);
        // Leases: a write lease and one being broken hold the file as a
        // flock does; a read lease and a breaker's entry do not.
        for (line, holds) in [
            ("4: LEASE  ACTIVE    WRITE 77 00:2a:9 0 EOF", true),
            ("4: LEASE  BREAKING  UNLCK 77 00:2a:9 0 EOF", true),
            ("4: LEASE  BREAKING  READ 77 00:2a:9 0 EOF", true),
            ("4: LEASE  ACTIVE    READ 77 00:2a:9 0 EOF", false),
            ("5: LEASE  BREAKER   UNLCK 78 00:2a:9 0 EOF", false),
            ("6: DELEG  ACTIVE    READ 79 00:2a:9 0 EOF", false),
        ] {
            let entry = parse_line(line).unwrap();
            assert_eq!((entry.flock, entry.pid, entry.inode), (holds, entry.pid, 9), "{line}");
        }
        for bad in ["", "garbage", "1: FLOCK ADVISORY WRITE x 08:01:2 0 EOF", "1: FLOCK ADVISORY WRITE 5 zz:01:2 0 EOF"]
        {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn clock_ticks_are_what_sysconf_says() {
        // SAFETY: sysconf has no preconditions.
        let sysconf = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        assert_eq!(Some(clock_ticks()), u64::try_from(sysconf).ok());
    }

    #[test]
    fn processes_started_in_one_tick_start_at_one_time() {
        // Else their order, by start time then PID, is left to chance.
        let first = since_boot(12_345).unwrap();
        assert!((0..1000).all(|_| since_boot(12_345) == Some(first)));
        assert!(since_boot(12_346).unwrap() > first);
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_796_113_431)), "2026-12-01T08:23:51Z");
        // A drain record's `time 99999999999999999`: the format's last second.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(99_999_999_999_999_999)), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
        // The first day of an era (day 0 of the 400-year cycle), and dates
        // past a century's end in it.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_868_800)), "2000-03-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(4_107_456_000)), "2100-02-28T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(4_107_542_400)), "2100-03-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(13_574_563_200)), "2400-02-29T00:00:00Z");
    }

    /// A child started now, with a command line of `len` characters.
    fn child_with_command_of(len: usize) -> std::process::Child {
        // "sh -c sleep\ 30 " is 15 characters, then the last argument.
        let tail = "x".repeat(len - 15);
        std::process::Command::new("sh").args(["-c", "sleep 30", &tail]).spawn().unwrap()
    }

    #[test]
    fn a_process_is_shown_with_its_start_and_its_command_cut_to_the_limit() {
        for (len, shown) in
            [(MAX_COMMAND, MAX_COMMAND), (MAX_COMMAND + 1, MAX_COMMAND), (MAX_COMMAND + 60, MAX_COMMAND)]
        {
            let before = SystemTime::now();
            let mut child = child_with_command_of(len);
            let mut info = process(i64::from(child.id()));
            for _ in 0..100 {
                if info.command.as_ref().is_some_and(|c| c.starts_with("sh -c")) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
                info = process(i64::from(child.id()));
            }
            let _ = child.kill();
            let _ = child.wait();
            let command = info.command.unwrap_or_default();
            assert_eq!(command.chars().count(), shown, "{len}: {command}");
            assert_eq!(command.ends_with("..."), len > MAX_COMMAND, "{len}: {command}");
            // In clock ticks (10 ms), not before the spawn began by more.
            let started = info.started.expect("a start time");
            let off =
                started.duration_since(before).or_else(|| before.duration_since(started)).unwrap_or(Duration::MAX);
            assert!(off < Duration::from_secs(1), "started {started:?}, spawned at {before:?}");
            assert!(before.duration_since(started).is_none_or(|d| d <= Duration::from_millis(20)), "{started:?}");
        }
    }

    #[test]
    fn this_process_is_visible() {
        let me = process(i64::from(std::process::id()));
        assert!(me.command.is_some());
        assert!(me.started.is_some_and(|t| t <= SystemTime::now()));
        assert!(me.state.is_some_and(|s| s.is_ascii_alphabetic()), "{:?}", me.state);
        assert_eq!(process(0).command, None);
    }

    #[test]
    fn a_files_locks_are_found_among_every_files() {
        let at =
            |inode, pid| LockEntry { blocked: false, flock: true, breaking: false, pid, major: 0, minor: 40, inode };
        let locks = [at(1, 10), at(2, 20), at(2, 21), at(3, 30), at(5, 50)];
        assert_eq!(on_file(&locks, (0, 40, 2)), &[at(2, 20), at(2, 21)]);
        assert_eq!(on_file(&locks, (0, 40, 5)), &[at(5, 50)]);
        assert!(on_file(&locks, (0, 40, 4)).is_empty() && on_file(&locks, (0, 41, 1)).is_empty());
        assert!(on_file(&[], (0, 40, 1)).is_empty());
    }
}
