//! rocminfo output (parallel_gpu_execute::rocminfo::GfxLineCounter): the
//! streaming `grep -c 'Name: *gfx*'` must count exactly what a plain
//! per-line reference counts, however the output is cut into reads.

#![no_main]

use gpu_ci_wrappers_fuzz::{ref_gfx_count, seed_and_rest};
use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::rocminfo::GfxLineCounter;
use test_support::XorShift64;

fuzz_target!(|data: &[u8]| {
    let (seed, output) = seed_and_rest(data);
    let want = ref_gfx_count(output);
    assert_eq!(GfxLineCounter::count(output), want, "whole output");

    let mut rng = XorShift64::new(seed);
    let mut counter = GfxLineCounter::default();
    let mut rest = output;
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(17) as u64) as usize;
        counter.feed(&rest[..n]);
        rest = &rest[n..];
    }
    // Empty reads happen too (a pipe read of 0 bytes is EOF, but feed must
    // not care).
    counter.feed(&[]);
    assert_eq!(counter.finish(), want, "in chunks");
});
