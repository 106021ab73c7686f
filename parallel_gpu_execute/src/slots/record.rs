//! A waiter's record in `<lockdir>/gpuqueue/` (docs/design.md, "The wait
//! queue"): its name, its beat and what it asks for. The waiter writes it
//! (`queue`); the other participants and `--status` read it.
//!
//! The name is `<ticket>.<pid>`: the ticket is the `CLOCK_BOOTTIME` time,
//! in nanoseconds, at which the waiter began to wait, in 16 lower-case hex
//! digits, so that names sort in arrival order.
//!
//! The content is 32 bytes of beat, then lines of text:
//!
//! | bytes | what |
//! |---|---|
//! | 0-7 | `gpuq`, then the format's version (1) and three zeros |
//! | 8-15 | the beat counter, little-endian |
//! | 16-23 | the `CLOCK_BOOTTIME` nanoseconds of the last beat |
//! | 24-31 | the counter XOR the time XOR [`CHECK`]: a beat read while it was written fails it |
//! | 32- | `pid <pid>`, `prefix <lock-file prefix>`, `slots <slots per GPU>`, `needed <GPUs>`, `names <lock name> ...` (`names *`: every lock file of the prefix, for a pool too long to list), `test <the test>`, one per line; and `except <lock name>:<slot> ...` where there are lock files among them that this waiter cannot open |
//!
//! A record names only what its waiter can take: GPUs it passes over
//! (drained, or avoided as unhealthy) are left out of `names`, lock files
//! it may not open are in `except`, and it is written again when that
//! changes. A later waiter therefore never waits for a lock file that the
//! one ahead of it will not take.

use crate::prelude::*;
use crate::slots::request::Pool;
use core::ffi::CStr;
use core::time::Duration;
use wrapper_common::CBuf;
use wrapper_common::numbers::parse_u64;

/// The directory of the records, in the lock directory.
pub const QUEUE_DIR: &CStr = c"gpuqueue";
/// A beat older than this (by `CLOCK_BOOTTIME`) says that its waiter does
/// not run: four beats missed.
pub const STALE_AFTER: Duration = Duration::from_secs(1);
/// How often a waiter beats.
pub const HEARTBEAT: Duration = Duration::from_millis(250);

const MAGIC: [u8; 8] = *b"gpuq\x01\0\0\0";
/// Mixed into the check.
pub const CHECK: u64 = 0x9e37_79b9_7f4a_7c15;
/// The beat's size: what is read to judge a waiter.
pub const HEADER: usize = 32;
/// The longest `names` line written; a longer pool is written `names *`.
const MAX_NAMES: usize = 16 * 1024;
/// The most of a record read: a longer one is not a record.
pub const MAX_RECORD: usize = 20 * 1024;
/// The test, as much of it as a record keeps.
const MAX_TEST: usize = 200;

/// `<ticket>.<pid>`: 16 hex digits, a dot, at most 20 digits.
pub type RecordName = CBuf<48>;

pub fn record_name(ticket: u64, pid: u32) -> RecordName {
    let mut name = RecordName::new();
    let mut hex = [0u8; 16];
    for (i, h) in hex.iter_mut().enumerate() {
        *h = b"0123456789abcdef"[((ticket >> (60 - 4 * i)) & 0xf) as usize];
    }
    let _ = name.push(&hex);
    let _ = name.push(b".");
    let _ = name.push_u64(u64::from(pid));
    name
}

/// The ticket of a record's name; `None` for any other name (a temporary
/// file, another user's file).
pub fn ticket_of(name: &[u8]) -> Option<u64> {
    let (hex, pid) = (name.get(..16)?, name.get(17..)?);
    if name[16] != b'.' || pid.is_empty() || pid.len() > 10 || !pid.iter().all(u8::is_ascii_digit) {
        return None;
    }
    hex.iter().try_fold(0u64, |t, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(t << 4 | u64::from(digit))
    })
}

/// The beat bytes (8 to 31) for `counter` at `at` nanoseconds.
pub fn beat_bytes(counter: u64, at: u64) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[..8].copy_from_slice(&counter.to_le_bytes());
    b[8..16].copy_from_slice(&at.to_le_bytes());
    b[16..].copy_from_slice(&(counter ^ at ^ CHECK).to_le_bytes());
    b
}

/// A record's beat: its counter and time, when `bytes` start with a whole,
/// consistent one.
pub fn beat_of(bytes: &[u8]) -> Option<(u64, u64)> {
    let word = |i: usize| Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?));
    if bytes.get(..8)? != MAGIC {
        return None;
    }
    let (counter, at, check) = (word(8)?, word(16)?, word(24)?);
    (counter ^ at ^ CHECK == check).then_some((counter, at))
}

/// Whether a beat at `at` nanoseconds is fresh at `now` (both
/// `CLOCK_BOOTTIME`): no older than [`STALE_AFTER`], and not ahead of now by
/// as much (a writer in a time namespace with an offset is passed, never
/// waited for).
pub fn fresh(at: u64, now: Duration) -> bool {
    let at = Duration::from_nanos(at);
    now.saturating_sub(at) <= STALE_AFTER && at.saturating_sub(now) <= STALE_AFTER
}

/// What a waiter asks for, as its record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want<'a> {
    pub pid: u64,
    pub prefix: &'a [u8],
    pub slots: u32,
    pub needed: u64,
    /// The lock names of its pool, separated by spaces; `None`: every lock
    /// file of the prefix.
    pub names: Option<&'a [u8]>,
    /// Lock files among them it cannot take, `<lock name>:<slot>`
    /// separated by spaces (empty: none).
    pub except: &'a [u8],
    pub test: &'a [u8],
}

impl Want<'_> {
    /// Whether it wants the lock files of `name` (at its slots).
    pub fn lists(&self, name: &[u8]) -> bool {
        self.names.is_none_or(|names| names.split(|&b| b == b' ').any(|n| n == name))
    }

    /// Whether it wants the lock file of `name` at `slot` (the queue's
    /// reader asks [`Want::lists`] once per GPU, then `wants_listed`).
    #[cfg(test)]
    pub fn wants(&self, name: &[u8], slot: u32) -> bool {
        self.lists(name) && self.wants_listed(name, slot)
    }

    /// Whether it wants the lock file of `name` at `slot`, for a `name` it
    /// [`lists`](Want::lists): `slot` within its slots, and not among its
    /// exceptions.
    pub fn wants_listed(&self, name: &[u8], slot: u32) -> bool {
        slot < self.slots
            && !self.except.split(|&b| b == b' ').any(|e| {
                e.len() > name.len()
                    && e.starts_with(name)
                    && e[name.len()] == b':'
                    && parse_u64(&e[name.len() + 1..]) == Some(u64::from(slot))
            })
    }

    /// The record's content: the first beat and the text.
    pub fn content(&self, at: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 96 + self.names.map_or(1, <[u8]>::len) + self.test.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&beat_bytes(0, at));
        let number = |label: &[u8], n: u64, out: &mut Vec<u8>| {
            let mut digits = [0u8; 20];
            out.extend_from_slice(label);
            out.extend_from_slice(wrapper_common::numbers::format_u64(n, &mut digits));
            out.push(b'\n');
        };
        number(b"pid ", self.pid, &mut out);
        out.extend_from_slice(b"prefix ");
        out.extend_from_slice(self.prefix);
        out.push(b'\n');
        number(b"slots ", u64::from(self.slots), &mut out);
        number(b"needed ", self.needed, &mut out);
        out.extend_from_slice(b"names ");
        out.extend_from_slice(self.names.unwrap_or(b"*"));
        if !self.except.is_empty() {
            out.extend_from_slice(b"\nexcept ");
            out.extend_from_slice(self.except);
        }
        out.extend_from_slice(b"\ntest ");
        let test = &self.test[..self.test.len().min(MAX_TEST)];
        out.extend(test.iter().map(|&b| if b == b'\n' || b == 0 { b' ' } else { b }));
        out.push(b'\n');
        out
    }
}

impl<'a> Want<'a> {
    /// Reads a record's content (after its beat); `None` when it is not one.
    pub fn parse(record: &'a [u8]) -> Option<Want<'a>> {
        let text = record.get(HEADER..)?;
        let mut want = Want { pid: 0, prefix: b"", slots: 0, needed: 0, names: None, except: b"", test: b"" };
        let mut seen = 0u8;
        for line in text.split(|&b| b == b'\n') {
            let (key, value) = match line.iter().position(|&b| b == b' ') {
                Some(at) => (&line[..at], &line[at + 1..]),
                None => continue,
            };
            let number = || parse_u64(value);
            match key {
                b"pid" => want.pid = number()?,
                b"prefix" => want.prefix = value,
                b"slots" => want.slots = u32::try_from(number()?).ok()?,
                b"needed" => want.needed = number()?,
                b"names" => want.names = (value != b"*").then_some(value),
                b"test" => want.test = value,
                b"except" => {
                    want.except = value;
                    continue;
                }
                _ => continue,
            }
            seen += 1;
        }
        (seen >= 6 && !want.prefix.is_empty() && want.slots > 0).then_some(want)
    }
}

/// The `names` of a pool's GPUs that `keep` keeps: their lock names with
/// spaces between them; `None` when that would be longer than
/// [`MAX_NAMES`].
pub fn pool_names(pool: &Pool, keep: impl Fn(usize) -> bool) -> Option<Vec<u8>> {
    let mut names = Vec::new();
    for i in (0..pool.ids.len()).filter(|&i| keep(i)) {
        if !names.is_empty() {
            names.push(b' ');
        }
        names.extend_from_slice(pool.lock_name(i));
        if names.len() > MAX_NAMES {
            return None;
        }
    }
    Some(names)
}

/// The `except` of lock files `(gpu, slot)` of a pool: `<lock name>:<slot>`
/// with spaces between them, at most [`MAX_NAMES`] long (the rest are left
/// out: their waiter is then merely waited for longer).
pub fn except_names(pool: &Pool, files: impl Iterator<Item = (usize, u32)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (gpu, slot) in files {
        let mut digits = [0u8; 20];
        let slot = wrapper_common::numbers::format_u64(u64::from(slot), &mut digits);
        if out.len() + pool.lock_name(gpu).len() + slot.len() + 2 > MAX_NAMES {
            break;
        }
        if !out.is_empty() {
            out.push(b' ');
        }
        out.extend_from_slice(pool.lock_name(gpu));
        out.push(b':');
        out.extend_from_slice(slot);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_in_ticket_order_and_parse_back() {
        let a = record_name(0x0123_4567_89ab_cdef, 42);
        assert_eq!(a.as_bytes(), b"0123456789abcdef.42");
        assert_eq!(ticket_of(a.as_bytes()), Some(0x0123_4567_89ab_cdef));
        let (early, late) = (record_name(999, 7), record_name(1000, 3));
        assert!(early.as_bytes() < late.as_bytes());
        for other in
            [&b".0123456789abcdef.1.new"[..], b"0123456789abcdeF.1", b"0123456789abcdef.", b"0123456789abcdef-1", b"x"]
        {
            assert_eq!(ticket_of(other), None, "{:?}", core::str::from_utf8(other));
        }
    }

    #[test]
    fn a_record_reads_back_and_a_torn_beat_fails_its_check() {
        let want = Want {
            pid: 1234,
            prefix: b"gpulock",
            slots: 2,
            needed: 4,
            names: Some(b"0 1 GPU-ab 3"),
            except: b"",
            test: b"./pkg/a_test\n--flag",
        };
        let mut content = want.content(5_000_000_000);
        assert_eq!(beat_of(&content), Some((0, 5_000_000_000)));
        let parsed = Want::parse(&content).unwrap();
        assert_eq!(parsed, Want { test: b"./pkg/a_test --flag", ..want });
        assert!(parsed.lists(b"GPU-ab") && parsed.lists(b"3") && !parsed.lists(b"2") && !parsed.lists(b"GPU"));
        content[8..32].copy_from_slice(&beat_bytes(7, 9));
        assert_eq!(beat_of(&content), Some((7, 9)));
        content[8] ^= 1;
        assert_eq!(beat_of(&content), None, "a counter written but not its time");
        let all = Want { names: None, ..want };
        assert!(Want::parse(&all.content(0)).unwrap().lists(b"anything"));
        // Lock files it cannot open are not wanted; the rest are.
        let some = Want { except: b"1:0 GPU-ab:1", ..want };
        let some_content = some.content(0);
        let parsed_some = Want::parse(&some_content).unwrap();
        assert_eq!(parsed_some.except, b"1:0 GPU-ab:1");
        assert!(!parsed_some.wants(b"1", 0) && parsed_some.wants(b"1", 1) && !parsed_some.wants(b"GPU-ab", 1));
        assert!(parsed_some.wants(b"0", 0) && !parsed_some.wants(b"0", 2) && !parsed_some.wants(b"2", 0));
        assert_eq!(Want::parse(b"short"), None);
    }

    #[test]
    fn a_beat_is_fresh_for_a_second_either_way() {
        let now = Duration::from_secs(100);
        let at = |s: f64| (s * 1e9) as u64;
        assert!(fresh(at(99.5), now) && fresh(at(99.0), now) && fresh(at(100.9), now));
        assert!(!fresh(at(98.9), now) && !fresh(at(101.1), now) && !fresh(0, now));
    }
}
