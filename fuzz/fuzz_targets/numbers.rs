//! wrapper_common::numbers: every number the wrappers read (TF_GPU_COUNT,
//! TF_TESTS_PER_GPU, waits, KFD values, --num_processes) goes through these.
//! Checked against std parsing with wide arithmetic, and formatting against
//! parsing.

#![no_main]

use gpu_ci_wrappers_fuzz::{ref_parse_u64, ref_seconds_as_millis};
use libfuzzer_sys::fuzz_target;
use wrapper_common::numbers::{format_u64, parse_seconds_as_millis, parse_u64};

fuzz_target!(|data: &[u8]| {
    assert_eq!(parse_u64(data), ref_parse_u64(data), "parse_u64({data:?})");
    assert_eq!(parse_seconds_as_millis(data), ref_seconds_as_millis(data), "parse_seconds_as_millis({data:?})");
    let mut n = [0u8; 8];
    let k = data.len().min(8);
    n[..k].copy_from_slice(&data[..k]);
    let n = u64::from_le_bytes(n);
    let mut buf = [0u8; 20];
    let text = format_u64(n, &mut buf);
    assert_eq!(text, n.to_string().as_bytes());
    assert_eq!(parse_u64(text), Some(n));
});
