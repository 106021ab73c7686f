//! Runfiles manifests (wrapper_common::runfiles): line splitting, the
//! `\s`/`\n`/`\b` escapes, the lookup over a whole file (read through the
//! fixed 16 KiB line buffer) and the rlocation of a path relative to the
//! test's directory, each against a plain reference.
//!
//! Input: `<key>\0<manifest>`; the key is looked up in the manifest and is
//! also used as the workspace name for `rlocation_from_cwd`.

#![no_main]

use gpu_ci_wrappers_fuzz::{MemFile, manifest_escape, ref_lines, ref_unescape};
use libfuzzer_sys::fuzz_target;
use wrapper_common::StackPath;
use wrapper_common::runfiles::{
    MANIFEST_BUFFER, manifest_lookup, parse_manifest_line, rlocation_from_cwd, strip_dot_slash, unescape_into,
};

/// Fits a `StackPath` (shorter than PATH_MAX, no NUL).
fn fits(bytes: &[u8]) -> bool {
    bytes.len() < 4096 && !bytes.contains(&0)
}

/// Reference lookup: the first line naming `key` decides; its target (if
/// any, and if it fits a path) is the answer. Without such a line, the
/// longest entry (the first of that length) naming a directory above `key`,
/// with a target that fits, gives that target, a `/` and the rest of `key`,
/// where that fits a path.
fn ref_lookup(manifest: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let mut above: Option<(usize, Vec<u8>)> = None;
    for (line, complete) in ref_lines(manifest, MANIFEST_BUFFER) {
        if !complete {
            continue;
        }
        let (escaped, rest) = match line.split_first() {
            Some((b' ', rest)) => (true, rest),
            _ => (false, &line[..]),
        };
        let (rloc, target) = match rest.iter().position(|&b| b == b' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &b""[..]),
        };
        if rloc.is_empty() {
            continue;
        }
        let name = if escaped { ref_unescape(rloc) } else { rloc.to_vec() };
        if escaped && !fits(&name) {
            continue;
        }
        let target = if escaped { ref_unescape(target) } else { target.to_vec() };
        let usable = !target.is_empty() && fits(&target);
        if name == key {
            return usable.then_some(target);
        }
        let is_above = key.len() > name.len() && key.starts_with(&name) && key[name.len()] == b'/';
        if usable && is_above && above.as_ref().is_none_or(|(len, _)| name.len() > *len) {
            above = Some((name.len(), target));
        }
    }
    let (len, mut target) = above?;
    if target.last() != Some(&b'/') {
        target.push(b'/');
    }
    target.extend_from_slice(&key[len + 1..]);
    fits(&target).then_some(target)
}

fuzz_target!(|data: &[u8]| {
    let (key, manifest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b""[..], data),
    };

    let mut out = StackPath::new();
    for line in manifest.split(|&b| b == b'\n') {
        match parse_manifest_line(line) {
            Some(e) => {
                assert!(!e.rlocation.is_empty() && !e.rlocation.contains(&b' '));
                let rebuilt_len = usize::from(e.escaped) + e.rlocation.len() + e.target.len();
                assert!(rebuilt_len == line.len() || rebuilt_len + 1 == line.len());
                for part in [e.rlocation, e.target] {
                    match unescape_into(part, e.escaped, &mut out) {
                        Ok(()) => {
                            let want = if e.escaped { ref_unescape(part) } else { part.to_vec() };
                            assert_eq!(out.as_bytes(), &want[..]);
                        }
                        Err(_) => {
                            let want = if e.escaped { ref_unescape(part) } else { part.to_vec() };
                            assert!(!fits(&want), "refused a path that fits: {want:?}");
                        }
                    }
                }
            }
            None => assert!(line.is_empty() || line == b" " || line.starts_with(b"  "), "{line:?}"),
        }
        // Escaping then unescaping gives the text back.
        if fits(line) && manifest_escape(line).len() < 4096 {
            unescape_into(&manifest_escape(line), true, &mut out).expect("fits");
            assert_eq!(out.as_bytes(), line);
        }
        // A path relative to the test's directory never names something
        // outside the runfiles tree (given a workspace name that is one
        // plain component, as Bazel's TEST_WORKSPACE always is).
        let plain_workspace = !key.contains(&b'/') && key != b"..";
        if let Some(r) = rlocation_from_cwd(line, key).filter(|_| plain_workspace) {
            let r = r.as_bytes();
            assert!(!r.is_empty() && !r.starts_with(b"/") && r != b".." && !r.starts_with(b"../"), "{r:?}");
            assert!(!strip_dot_slash(r).starts_with(b"../"));
        }
    }

    let file = MemFile::new(manifest);
    let found = manifest_lookup(file.path(), key).expect("read memfd");
    assert_eq!(found.as_ref().map(|p| p.as_bytes().to_vec()), ref_lookup(manifest, key), "lookup of {key:?}");
});
