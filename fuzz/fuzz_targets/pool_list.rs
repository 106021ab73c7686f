//! Visible-devices lists (parallel_gpu_execute::request::parse_pool_list),
//! the ids that become lock file names: every accepted id is safe, none is
//! listed twice, and each lock file name stays one harmless path component.
//! Every refusal names a real culprit. The part the runtime reads
//! (`runtime_visible`) is the list up to its first negative index.

#![no_main]

use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::locks::lock_file_name;
use parallel_gpu_execute::request::{
    MAX_ID_LEN, MAX_POOL, PoolListError, is_safe_id, parse_pool_list, runtime_visible,
};
use std::collections::HashSet;

/// Reference: the id alphabet and rules, written out.
fn ref_safe(id: &[u8]) -> bool {
    let alphabet = |b: &u8| matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-');
    !id.is_empty() && id.len() <= MAX_ID_LEN && id.iter().all(alphabet) && !id.windows(2).any(|w| w == b"..")
}

/// Reference: a token the runtimes stop at, a negative integer (`-0` is 0).
fn ref_negative(token: &[u8]) -> bool {
    token.len() >= 2
        && token[0] == b'-'
        && token[1..].iter().all(u8::is_ascii_digit)
        && token[1..].iter().any(|&d| d != b'0')
}

fuzz_target!(|data: &[u8]| {
    let pieces: Vec<&[u8]> = data.split(|&b| b == b',').collect();
    let visible = runtime_visible(data);
    let kept = pieces.iter().position(|p| ref_negative(p)).unwrap_or(pieces.len());
    if kept == pieces.len() {
        assert_eq!(visible, data, "no negative index: the whole list");
    } else {
        assert_eq!(visible, pieces[..kept].join(&b','), "the pieces before the first negative index");
    }
    for p in &pieces {
        assert_eq!(is_safe_id(p), ref_safe(p), "{p:?}");
    }
    match parse_pool_list(data) {
        Ok(ids) => {
            assert_eq!(ids, pieces, "ids are the comma-separated pieces");
            assert!(ids.len() <= MAX_POOL);
            let mut seen = HashSet::new();
            for id in &ids {
                assert!(ref_safe(id), "accepted unsafe id {id:?}");
                assert!(seen.insert(*id), "accepted duplicate id {id:?}");
                for (prefix, slot) in
                    [(&b"gpulock"[..], 0), (b"gpulock", 7), (b"jax_accelerator_lock_", 1023), (b"gpulock", u32::MAX)]
                {
                    let name = lock_file_name(prefix, id, slot);
                    let name = name.as_bytes();
                    let mut want = prefix.to_vec();
                    want.extend_from_slice(id);
                    want.extend_from_slice(format!("_{slot}").as_bytes());
                    assert_eq!(name, &want[..]);
                    assert!(!name.contains(&b'/') && !name.contains(&0), "{name:?}");
                    assert!(name != b"." && name != b"..");
                    assert!(name.len() <= 255, "longer than NAME_MAX: {}", name.len());
                }
            }
        }
        Err(PoolListError::UnsafeId(id)) => {
            assert!(!ref_safe(id));
            assert!(pieces.contains(&id));
        }
        Err(PoolListError::DuplicateId(id)) => {
            assert!(pieces.iter().filter(|p| **p == id).count() >= 2, "{id:?}");
            assert!(pieces.iter().all(|p| ref_safe(p)));
        }
        Err(PoolListError::TooMany) => assert!(pieces.len() > MAX_POOL),
    }
});
