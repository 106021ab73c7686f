//! Visible-devices lists (parallel_gpu_execute::slots::request::parse_pool_list),
//! the ids that become lock file names: every accepted id is safe (or, where
//! CUDA's MIG form is allowed, that form), none is listed twice, no two ids
//! share a lock file name, no index has a leading zero (another spelling
//! of one GPU), no CUDA id begins like an index without being one, and each lock file name stays one harmless path component. Every refusal names a real culprit. The part the runtime reads
//! (`runtime_visible`) is the list up to its first negative index.

#![no_main]

use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::slots::lockfile::lock_file_name;
use parallel_gpu_execute::slots::request::{
    MAX_ID_LEN, MAX_POOL, PoolListError, has_leading_zero, is_cuda_mig_path, is_safe_id, lock_form, parse_pool_list,
    runtime_visible,
};
use std::collections::HashSet;

/// Reference: the id alphabet and rules, written out.
fn ref_safe(id: &[u8]) -> bool {
    let alphabet = |b: &u8| matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-');
    !id.is_empty() && id.len() <= MAX_ID_LEN && id.iter().all(alphabet) && !id.windows(2).any(|w| w == b"..")
}

/// Reference: `MIG-GPU-<safe, non-empty>/<1-10 digits>/<1-10 digits>`, at
/// most MAX_ID_LEN bytes in all.
fn ref_mig(id: &[u8]) -> bool {
    let parts: Vec<&[u8]> = id.split(|&b| b == b'/').collect();
    let number = |n: &[u8]| (1..=10).contains(&n.len()) && n.iter().all(u8::is_ascii_digit);
    id.len() <= MAX_ID_LEN
        && parts.len() == 3
        && parts[0].len() > 8
        && parts[0].starts_with(b"MIG-GPU-")
        && ref_safe(parts[0])
        && number(parts[1])
        && number(parts[2])
}

/// Reference: an index with a leading zero, another spelling of a GPU
/// that other jobs write without it.
fn ref_leading_zero(id: &[u8]) -> bool {
    id.len() >= 2 && id.starts_with(b"0") && id.iter().all(u8::is_ascii_digit)
}

/// Reference: a CUDA id that begins like an index (a digit or a sign) and
/// is not one: CUDA reads the digits it begins with.
fn ref_not_index(id: &[u8]) -> bool {
    id.first().is_some_and(|&b| b.is_ascii_digit() || b == b'-' || b == b'+') && !id.iter().all(u8::is_ascii_digit)
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
        assert_eq!(is_cuda_mig_path(p), ref_mig(p), "{p:?}");
        assert_eq!(has_leading_zero(p), ref_leading_zero(p), "{p:?}");
    }
    // The first byte picks whether CUDA's MIG form is allowed, as for
    // CUDA_VISIBLE_DEVICES.
    let mig = data.first().is_some_and(|b| b & 1 == 1);
    let ok = |p: &[u8]| ref_safe(p) || mig && ref_mig(p);
    match parse_pool_list(data, mig) {
        Ok(ids) => {
            assert_eq!(ids, pieces, "ids are the comma-separated pieces");
            assert!(ids.len() <= MAX_POOL);
            let mut seen = HashSet::new();
            let mut names = HashSet::new();
            for id in &ids {
                assert!(ok(id), "accepted unsafe id {id:?}");
                assert!(!ref_leading_zero(id), "accepted an index with a leading zero {id:?}");
                assert!(!(mig && ref_not_index(id)), "accepted a CUDA id that is no index {id:?}");
                assert!(seen.insert(*id), "accepted duplicate id {id:?}");
                let form = lock_form(id);
                assert_eq!(form.contains(&b'/'), false, "{form:?}");
                assert!(names.insert(form.to_vec()), "two ids share the lock file name {form:?}");
                for (prefix, slot) in
                    [(&b"gpulock"[..], 0), (b"gpulock", 7), (b"jax_accelerator_lock_", 1023), (b"gpulock", u32::MAX)]
                {
                    let name = lock_file_name(prefix, &form, slot);
                    let name = name.as_bytes();
                    let mut want = prefix.to_vec();
                    want.extend_from_slice(&form);
                    want.extend_from_slice(format!("_{slot}").as_bytes());
                    assert_eq!(name, &want[..]);
                    assert!(!name.contains(&b'/') && !name.contains(&0), "{name:?}");
                    assert!(name != b"." && name != b"..");
                    assert!(name.len() <= 255, "longer than NAME_MAX: {}", name.len());
                }
            }
        }
        Err(PoolListError::UnsafeId(id)) => {
            assert!(!ok(id));
            assert!(pieces.contains(&id));
        }
        Err(PoolListError::LeadingZero(id)) => {
            assert!(ok(id) && ref_leading_zero(id), "{id:?}");
            assert!(pieces.contains(&id));
        }
        Err(PoolListError::NotIndex(id)) => {
            assert!(mig && ok(id) && !ref_leading_zero(id) && ref_not_index(id), "{id:?}");
            assert!(pieces.contains(&id));
        }
        Err(PoolListError::DuplicateId(id)) => {
            assert!(pieces.iter().filter(|p| **p == id).count() >= 2, "{id:?}");
            assert!(pieces.iter().all(|p| ok(p) && !ref_leading_zero(p) && !(mig && ref_not_index(p))));
        }
        Err(PoolListError::TooMany) => assert!(pieces.len() > MAX_POOL),
    }
});
