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
//! | 0-7 | `gpuq`, then the format's version (2) and three zeros |
//! | 8-15 | the beat counter, little-endian |
//! | 16-23 | the `CLOCK_BOOTTIME` nanoseconds of the last beat |
//! | 24-31 | the counter XOR the time XOR [`CHECK`]: a beat read while it was written fails it |
//! | 32- | `name <its name>`, `needed <GPUs>`, `files <lock file> ...`, `test <the test>`, one per line |
//!
//! A record counts only under the name it says: a hard link to it under
//! another name in `gpuqueue/` is none (it would put its waiter earlier),
//! and one anywhere else (another user's, where `fs.protected_hardlinks`
//! is off) changes nothing.
//!
//! `files` lists the lock files its waiter can take, and no other: those
//! of the blocks it can take whole, so GPUs it passes over (drained, or
//! avoided as unhealthy), lock files it may not open, and the lock files of
//! blocks that hold either are left out, and the record is written again
//! when that changes. A later waiter therefore never waits for a lock file
//! that the one ahead of it will not take. A GPU's run of slots is written
//! `<prefix><id>_<first>-<last>`. A list longer than [`MAX_FILES`] (some
//! 300 GPUs named by UUID) is written `<prefix>*`: every lock file of the
//! profile. A `*` counts only as the whole line: a reader's cost is bounded
//! by the record's entries, whatever another user writes in one.

use crate::prelude::*;
use crate::slots::lockfile::{LockName, lock_file_name, split_lock_file_name};
use crate::slots::request::Pool;
use core::ffi::CStr;
use core::time::Duration;
use rustix::fs::OFlags;
use wrapper_common::CBuf;
use wrapper_common::numbers::parse_u64;

/// The directory of the records, in the lock directory.
pub const QUEUE_DIR: &CStr = c"gpuqueue";
/// How a record is opened to be read: never through a link, never waiting
/// on a FIFO or a lease.
pub const RECORD_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::CLOEXEC).union(OFlags::NOCTTY);
/// A beat older than this (by `CLOCK_BOOTTIME`) says that its waiter does
/// not run: four beats missed.
pub const STALE_AFTER: Duration = Duration::from_secs(1);
/// How often a waiter beats.
pub const HEARTBEAT: Duration = Duration::from_millis(250);

const MAGIC: [u8; 8] = *b"gpuq\x02\0\0\0";
/// Mixed into the check.
const CHECK: u64 = 0x9e37_79b9_7f4a_7c15;
/// The beat's size: what is read to judge a waiter.
pub const HEADER: usize = 32;
/// The longest `files` line written; a longer one is written `<prefix>*`.
const MAX_FILES: usize = 16 * 1024;
/// The most of a record read: a longer one is not a record.
pub const MAX_RECORD: usize = 20 * 1024;
/// The test, as much of it as a record keeps.
const MAX_TEST: usize = 200;

/// `<ticket>.<pid>`: 16 hex digits, a dot, at most 20 digits.
pub type RecordName = CBuf<48>;

pub fn record_name(ticket: u64, pid: u32) -> RecordName {
    let mut name = RecordName::new();
    let hex: [u8; 16] = core::array::from_fn(|i| b"0123456789abcdef"[((ticket >> (60 - 4 * i)) & 0xf) as usize]);
    let _ = name.push_all(&[&hex, b"."], Some(u64::from(pid)));
    name
}

/// Another name with the ticket of `name`, for where its own is taken by
/// another user's file: the ticket, a dot and 10 random digits in place of
/// the PID, which no other user can take first.
pub fn other_name(name: &RecordName) -> RecordName {
    let mut other = RecordName::from_bytes(name.as_bytes().get(..17).unwrap_or_default()).unwrap_or_default();
    let _ = other.push_u64(1_000_000_000 + crate::sys::random::unguessable() % 9_000_000_000);
    other
}

/// `content` with its `name` line saying `name` instead.
pub fn with_name(content: &[u8], name: &RecordName) -> Vec<u8> {
    let text = content.get(HEADER..).unwrap_or_default();
    let rest = text.iter().position(|&b| b == b'\n').map_or(&b""[..], |end| &text[end..]);
    let mut out = content.get(..HEADER).unwrap_or_default().to_vec();
    out.extend_from_slice(b"name ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(rest);
    out
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

/// The host's boot clock now, in nanoseconds, as tickets and beats say it.
pub fn now_ns() -> u64 {
    u64::try_from(crate::sys::clock::host_since_boot().as_nanos()).unwrap_or(u64::MAX)
}

/// What a waiter asks for, as its record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want<'a> {
    /// The record's name, `<ticket>.<pid>`.
    pub name: &'a [u8],
    pub needed: u64,
    /// The lock files it can take, separated by spaces ([`files_line`]).
    pub files: &'a [u8],
    pub test: &'a [u8],
}

impl<'a> Want<'a> {
    /// The record's content: the first beat and the text.
    pub fn content(&self, at: u64) -> Vec<u8> {
        let mut digits = [0u8; 20];
        let needed = wrapper_common::numbers::format_u64(self.needed, &mut digits);
        let test = &self.test[..self.test.len().min(MAX_TEST)];
        let mut out = Vec::with_capacity(HEADER + 64 + self.files.len() + test.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&beat_bytes(0, at));
        for part in [&b"name "[..], self.name, b"\nneeded ", needed, b"\nfiles ", self.files, b"\ntest "] {
            out.extend_from_slice(part);
        }
        out.extend(test.iter().map(|&b| if b == b'\n' || b == 0 { b' ' } else { b }));
        out.push(b'\n');
        out
    }

    /// Reads a record's content (after its beat); `None` when it is not one.
    pub fn parse(record: &'a [u8]) -> Option<Want<'a>> {
        let (mut name, mut needed, mut files, mut test) = (None, None, None, None);
        for line in record.get(HEADER..)?.split(|&b| b == b'\n') {
            let Some(at) = line.iter().position(|&b| b == b' ') else { continue };
            let value = &line[at + 1..];
            match &line[..at] {
                b"name" => name = Some(value),
                b"needed" => needed = Some(parse_u64(value)?),
                b"files" => files = Some(value),
                b"test" => test = Some(value),
                _ => {}
            }
        }
        Some(Want { name: name?, needed: needed?, files: files?, test: test? })
    }

    /// Calls `mark` with the index (`slot * pool + gpu`) of each lock file
    /// of `pool` at its first `slots` slots under `prefix` that it wants.
    /// The cost is bounded by the record's entries (times the slots a run
    /// names), whatever another user writes in one: a `<stem>*` counts
    /// only as the whole line, as it is written, and each entry is found
    /// among the pool's GPUs by a binary search.
    /// `by_name`: the pool's lock names, sorted once for every record a
    /// look reads ([`by_name`]).
    pub fn wanted(
        &self,
        prefix: &[u8],
        pool: &Pool,
        by_name: &[(&[u8], usize)],
        slots: u32,
        mut mark: impl FnMut(usize),
    ) {
        let width = pool.ids.len();
        if let Some(stem) = self.files.strip_suffix(b"*").filter(|stem| !stem.contains(&b' ')) {
            (0..slots as usize * width)
                .filter(|&i| lock_file(prefix, pool, i).as_bytes().starts_with(stem))
                .for_each(&mut mark);
            return;
        }
        for file in self.files.split(|&b| b == b' ') {
            if let Some((gpu, first, last)) = entry_of(file, prefix, by_name) {
                (first..=last.min(u64::from(slots).saturating_sub(1))).for_each(|s| mark(s as usize * width + gpu));
            }
        }
    }
}

/// The lock names of `pool`'s GPUs, each with its GPU, sorted by name: what
/// [`Want::wanted`] finds a record's entries in.
pub fn by_name(pool: &Pool) -> Vec<(&[u8], usize)> {
    let mut by_name: Vec<(&[u8], usize)> = (0..pool.ids.len()).map(|g| (pool.lock_name(g), g)).collect();
    crate::sys::sort::sort_by(&mut by_name, &mut |a, b| a.0 < b.0);
    by_name
}

/// The lock file of index `i` (`slot * pool + gpu`).
fn lock_file(prefix: &[u8], pool: &Pool, i: usize) -> LockName {
    let width = pool.ids.len().max(1);
    lock_file_name(prefix, pool.lock_name(i % width), (i / width) as u32)
}

/// The GPU of the pool and the slots (first, last) that the `files` entry
/// `file` names under `prefix`: `<prefix><id>_<slot>`, or
/// `<prefix><id>_<first>-<last>` for a run of slots. `by_name`: the pool's
/// lock names with their GPU, sorted by name.
fn entry_of(file: &[u8], prefix: &[u8], by_name: &[(&[u8], usize)]) -> Option<(usize, u64, u64)> {
    // One spelling per slot: `_1`, never `_01`.
    let slot = |digits: &[u8]| parse_u64(digits).filter(|_| digits.len() == 1 || digits[0] != b'0');
    let dash = file.iter().rposition(|&b| b == b'-').filter(|&d| file[d + 1..].iter().all(u8::is_ascii_digit));
    let (single, last) = match dash {
        Some(d) if !file[d + 1..].is_empty() => (&file[..d], Some(slot(&file[d + 1..])?)),
        _ => (file, None),
    };
    let (id, digits) = split_lock_file_name(single, prefix)?;
    let first = slot(digits)?;
    let gpu = by_name.get(by_name.partition_point(|&(name, _)| name < id)).filter(|&&(name, _)| name == id)?.1;
    Some((gpu, first, last.unwrap_or(first)))
}

/// The `files` line: the lock files of `pool` at its first `slots` slots
/// under `prefix` whose index `keep` keeps, GPU by GPU, a run of slots
/// written `<prefix><id>_<first>-<last>`, with spaces between them;
/// `<prefix>*` when that is longer than [`MAX_FILES`].
pub fn files_line(prefix: &[u8], pool: &Pool, slots: u32, keep: impl Fn(usize) -> bool) -> Vec<u8> {
    let (mut out, width) = (Vec::new(), pool.ids.len());
    for gpu in 0..width {
        let mut slot = 0;
        while slot < slots {
            if !keep(slot as usize * width + gpu) {
                slot += 1;
                continue;
            }
            let first = slot;
            while slot + 1 < slots && keep((slot + 1) as usize * width + gpu) {
                slot += 1;
            }
            if !out.is_empty() {
                out.push(b' ');
            }
            out.extend_from_slice(lock_file_name(prefix, pool.lock_name(gpu), first).as_bytes());
            if slot > first {
                let mut digits = [0u8; 20];
                out.push(b'-');
                out.extend_from_slice(wrapper_common::numbers::format_u64(u64::from(slot), &mut digits));
            }
            slot += 1;
            if out.len() > MAX_FILES {
                out.clear();
                out.extend_from_slice(prefix);
                out.push(b'*');
                return out;
            }
        }
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

    fn pool(ids: &[&'static [u8]]) -> Pool {
        let ids = ids.iter().map(|&id| alloc::borrow::Cow::Borrowed(id)).collect();
        Pool { ids, variable: None, ends_early: false, lock_names: None, physical: false }
    }

    fn wanted(want: &Want<'_>, prefix: &[u8], pool: &Pool, slots: u32) -> Vec<usize> {
        let mut out = Vec::new();
        want.wanted(prefix, pool, &by_name(pool), slots, |i| out.push(i));
        out.sort_unstable();
        out
    }

    #[test]
    fn a_record_reads_back_and_a_torn_beat_fails_its_check() {
        let files = b"gpulock0_0 gpulock1_0 gpulockGPU-ab_1";
        let want = Want { name: b"0000000000000abc.42", needed: 4, files, test: b"./pkg/a_test\n--flag" };
        let mut content = want.content(5_000_000_000);
        assert_eq!(beat_of(&content), Some((0, 5_000_000_000)));
        let parsed = Want::parse(&content).unwrap();
        assert_eq!(parsed, Want { test: b"./pkg/a_test --flag", ..want });
        content[8..32].copy_from_slice(&beat_bytes(7, 9));
        assert_eq!(beat_of(&content), Some((7, 9)));
        content[8] ^= 1;
        assert_eq!(beat_of(&content), None, "a counter written but not its time");
        assert_eq!(Want::parse(b"short"), None);
        let mut no_files = Want { files: b"", ..want }.content(0);
        assert!(Want::parse(&no_files).is_some_and(|w| w.files.is_empty()));
        let files_at = no_files.windows(6).position(|w| w == b"files ").unwrap();
        no_files.truncate(files_at);
        assert_eq!(Want::parse(&no_files), None, "a record without its files line is none");
        let unnamed = &want.content(0)[..HEADER];
        let rest = &want.content(0)[HEADER + b"name 0000000000000abc.42\n".len()..];
        assert_eq!(Want::parse(&[unnamed, rest].concat()), None, "a record without its name is none");
    }

    #[test]
    fn a_record_wants_the_files_it_lists_and_no_other() {
        let mine = pool(&[b"1", b"GPU-ab", b"0"]);
        // Indices are slot * 3 + gpu: gpulock0_0 is 2, gpulock1_0 is 0,
        // gpulockGPU-ab_1 is 4.
        let want = Want {
            name: b"0000000000000001.1",
            needed: 1,
            files: b"gpulock0_0 gpulock1_0 gpulockGPU-ab_1",
            test: b"t",
        };
        assert_eq!(wanted(&want, b"gpulock", &mine, 2), [0, 2, 4]);
        assert_eq!(wanted(&want, b"gpulock", &mine, 1), [0, 2], "slot 1 is not among this one's");
        assert_eq!(wanted(&want, b"jax_accelerator_lock_", &mine, 2), [0usize; 0], "another profile's");
        let odd = Want { files: b"gpulock0_01 gpulock0_ gpulock_0 gpulock2_0 gpulockGPU-a_1 gpulock0", ..want };
        assert_eq!(wanted(&odd, b"gpulock", &mine, 2), [0usize; 0], "no other spelling counts");
        let all = Want { files: b"gpulock*", ..want };
        assert_eq!(wanted(&all, b"gpulock", &mine, 2), [0, 1, 2, 3, 4, 5]);
        let starred = Want { files: b"gpulock* gpulock*", ..want };
        assert_eq!(wanted(&starred, b"gpulock", &mine, 2), [0usize; 0], "a `*` among other entries is none");
        let starred = Want { files: b"gpulock0_0 gpulock*", ..want };
        assert_eq!(wanted(&starred, b"gpulock", &mine, 2), [2], "only the entry that is one");
        // The writer's line reads back as what it kept, a run of slots in one entry.
        let line = files_line(b"gpulock", &mine, 2, |i| i != 1 && i != 3);
        assert_eq!(line, b"gpulock1_0 gpulockGPU-ab_1 gpulock0_0-1");
        assert_eq!(wanted(&Want { files: &line, ..want }, b"gpulock", &mine, 2), [0, 2, 4, 5]);
        assert_eq!(wanted(&Want { files: &line, ..want }, b"gpulock", &mine, 1), [0, 2], "a run past its slots");
        let runs = Want { files: b"gpulockGPU-ab_0-1 gpulock1_1-5 gpulock0_1-0 gpulock0_0-01 gpulock0_0-", ..want };
        assert_eq!(wanted(&runs, b"gpulock", &mine, 2), [1, 3, 4], "runs, and no other spelling of one");
        let wide = pool(&[&b"GPU-0123456789abcdef0123456789abcdef"[..], b"GPU-2"]);
        let many = files_line(b"gpulock", &wide, 1000, |i| i != 5);
        let many = String::from_utf8(many).unwrap();
        assert_eq!(many, "gpulockGPU-0123456789abcdef0123456789abcdef_0-999 gpulockGPU-2_0-1 gpulockGPU-2_3-999");
        let scattered = files_line(b"gpulock", &wide, 1000, |i| i % 4 == 0);
        assert_eq!(scattered, b"gpulock*", "a list over MAX_FILES");
    }

    #[test]
    fn another_name_keeps_the_ticket_and_the_record_says_it() {
        let name = record_name(0xabc, 42);
        let other = other_name(&name);
        assert_eq!(ticket_of(other.as_bytes()), Some(0xabc), "{:?}", core::str::from_utf8(other.as_bytes()));
        assert_ne!(other.as_bytes(), name.as_bytes());
        assert_eq!(other.as_bytes().len(), 16 + 1 + 10);
        let want = Want { name: name.as_bytes(), needed: 2, files: b"gpulock0_0", test: b"t" };
        let content = with_name(&want.content(9), &other);
        let read = Want::parse(&content).unwrap();
        assert_eq!(read, Want { name: other.as_bytes(), ..want });
        assert_eq!(beat_of(&content), Some((0, 9)));
    }

    #[test]
    fn a_beat_is_fresh_for_a_second_either_way() {
        let now = Duration::from_secs(100);
        let at = |s: f64| (s * 1e9) as u64;
        assert!(fresh(at(99.5), now) && fresh(at(99.0), now) && fresh(at(100.9), now));
        assert!(!fresh(at(98.9), now) && !fresh(at(101.1), now) && !fresh(0, now));
    }
}
