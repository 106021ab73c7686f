//! Ids across user namespaces. Inside one (a rootless container, Bazel's
//! `linux-sandbox` run by a user other than root) the kernel shows a file's
//! owner as this namespace maps it, and an owner it does not map as the
//! overflow id, 65534; `/proc/self/uid_map` (`gid_map`) says how its ids
//! map onto its parent's, one `inside outside count` line per range. For
//! messages, `--drain` and `--status` only: nothing on a test's way reads
//! a map unless an owner shows as 65534.

use core::ffi::CStr;
use core::ops::ControlFlow;
use wrapper_common::lines::{Line, for_each_line_in_file};
use wrapper_common::numbers::parse_u64;

/// The id the kernel shows for an owner this user namespace does not map
/// (the default of `/proc/sys/kernel/overflowuid` and `overflowgid`).
const OVERFLOW: u32 = 65534;

/// What the overflow id is, as messages say it (once in the binary).
pub const ANY_OUTSIDE: &str = "which stands for any user outside this user namespace";

/// Which ids: of users or of groups.
#[derive(Clone, Copy)]
pub enum Ids {
    User,
    Group,
}

/// What a map says: how many ranges, whether the last maps every id to
/// itself, and what one id is outside.
#[derive(Default)]
struct Map {
    ranges: u32,
    whole: bool,
    outside: Option<u32>,
}

impl Map {
    /// Takes one line of the map, looking for `id`.
    fn line(&mut self, line: &[u8], id: u64) {
        let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty()).map(parse_u64);
        if let (Some(Some(inside)), Some(Some(out)), Some(Some(count))) = (fields.next(), fields.next(), fields.next())
        {
            self.ranges += 1;
            self.whole = (inside, out, count) == (0, 0, u64::from(u32::MAX));
            if (inside..inside.saturating_add(count)).contains(&id) {
                self.outside = u32::try_from(out + (id - inside)).ok();
            }
        }
    }

    /// Whether it is the initial user namespace's: one range, every id to itself.
    fn initial(&self) -> bool {
        self.ranges == 1 && self.whole
    }
}

/// Reads this process's map of `ids`, looking for `id`. Where it cannot
/// be read (no `/proc`), the map is taken as the initial namespace's
/// (every id to itself) unless `/dev/null`, root's on every host, shows
/// as the overflow id (a user namespace that does not map root: a
/// sandbox without `/proc`); then nothing is known of it.
#[cold]
#[inline(never)]
fn read(ids: Ids, id: u32) -> Option<Map> {
    let path: &CStr = match ids {
        Ids::User => c"/proc/self/uid_map",
        Ids::Group => c"/proc/self/gid_map",
    };
    let mut map = Map::default();
    let mut buf = [0u8; 1024];
    let read = for_each_line_in_file(path, &mut buf, |Line { bytes, .. }| {
        map.line(bytes, u64::from(id));
        ControlFlow::Continue(())
    });
    if read.is_err() {
        let null = rustix::fs::stat(c"/dev/null").ok()?;
        let owner = match ids {
            Ids::User => null.st_uid,
            Ids::Group => null.st_gid,
        };
        (owner != OVERFLOW).then(|| map.line(b"0 0 4294967295", u64::from(id)))?;
    }
    Some(map)
}

/// Whether an owner shown as `id` may be one this user namespace does not
/// map, and so cannot be told: the overflow id, anywhere but in the
/// initial user namespace ([`read`] where the map cannot be read). A
/// namespace that maps 65534 itself (a rootless container maps it to a
/// subordinate id) shows the unmapped owners (root's files outside) the
/// same.
pub fn unmapped(id: u32, ids: Ids) -> bool {
    id == OVERFLOW && !initial(ids)
}

/// Whether this process runs in the initial user namespace, as its map of
/// `ids` says ([`read`] where it cannot be read).
pub fn initial(ids: Ids) -> bool {
    read(ids, 0).is_some_and(|m| m.initial())
}

/// What the id `id` of this namespace is in its parent user namespace (the
/// host's, for a container run on the host; itself in the initial
/// namespace): `None` where it may be unmapped ([`unmapped`]) or nothing is
/// known of the map.
pub fn outside(id: u32, ids: Ids) -> Option<u32> {
    let map = read(ids, id)?;
    if id == OVERFLOW && !map.initial() {
        return None;
    }
    map.outside
}

#[cfg(test)]
mod tests {
    use super::Map;

    fn map(text: &[u8], id: u64) -> Map {
        let mut map = Map::default();
        text.split(|&b| b == b'\n').for_each(|line| map.line(line, id));
        map
    }

    #[test]
    fn only_the_initial_namespaces_map_is_whole() {
        assert!(map(b"         0          0 4294967295\n", 0).initial());
        // Bazel's linux-sandbox, or `unshare -U --map-user=1000`: the caller alone.
        assert!(!map(b"      1000       1000          1\n", 0).initial());
        // A rootless container: root is the caller, then a subordinate range.
        assert!(!map(b"0 1000 1\n1 100000 65536\n", 0).initial());
        assert!(!map(b"         0          0 4294967295\n         0          0 1\n", 0).initial());
        assert!(!map(b"", 0).initial());
    }

    #[test]
    fn an_id_is_found_in_its_range() {
        let rootless = b"         0       1000          1\n         1     100000      65536\n";
        assert_eq!(map(rootless, 0).outside, Some(1000));
        assert_eq!(map(rootless, 1).outside, Some(100_000));
        assert_eq!(map(rootless, 65536).outside, Some(165_535));
        assert_eq!(map(rootless, 65537).outside, None);
        assert_eq!(map(b"0 0 4294967295\n", 4_294_967_294).outside, Some(4_294_967_294));
        // Out of range of a u32 outside: none.
        assert_eq!(map(b"0 4294967295 2\n", 1).outside, None);
    }
}
