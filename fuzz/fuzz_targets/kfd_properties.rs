//! KFD topology `properties` files (parallel_gpu_execute::hardware::kfd): random
//! bytes must never panic, `parse` must agree with a line-by-line
//! reference, and reading the file through the fixed-buffer line reader
//! (as the wrapper does, from a file) must give the lines a plain split gives.

#![no_main]

use gpu_ci_wrappers_fuzz::{MemFile, ref_lines, ref_parse_u64, seed_and_rest};
use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::hardware::kfd::{NodeProperties, RenderMinor};
use std::ops::ControlFlow;
use test_support::XorShift64;
use wrapper_common::lines::{Line, for_each_line_in_file};

/// What a properties file says, the obvious way.
fn reference(lines: impl Iterator<Item = Vec<u8>>) -> NodeProperties {
    let mut p = NodeProperties::default();
    for line in lines {
        let Some(space) = line.iter().position(|&b| b == b' ') else { continue };
        let value = line[space + 1..].trim_ascii();
        let number = ref_parse_u64(value).unwrap_or(0);
        match &line[..space] {
            b"simd_count" => p.simd_count = number,
            b"cpu_cores_count" => p.cpu_cores_count = number,
            b"gfx_target_version" => p.gfx_target_version = Some(number),
            b"drm_render_minor" => {
                p.drm_render_minor = match ref_parse_u64(value) {
                    Some(0) => RenderMinor::Missing,
                    Some(n) => RenderMinor::Value(n),
                    None => RenderMinor::Invalid,
                }
            }
            b"location_id" => p.location_id = number,
            b"domain" => p.domain = number,
            b"unique_id" => p.unique_id = number,
            b"vendor_id" => p.vendor_id = number,
            b"device_id" => p.device_id = number,
            _ => {}
        }
    }
    p
}

fuzz_target!(|data: &[u8]| {
    let (seed, text) = seed_and_rest(data);
    let parsed = NodeProperties::parse(text);
    assert_eq!(parsed, reference(text.split(|&b| b == b'\n').map(<[u8]>::to_vec)));
    assert_eq!(parsed.is_gpu(), parsed.simd_count > 0);

    // The wrapper reads the file through a 1024-byte buffer; try that and a
    // small random buffer, which makes every line "long".
    let file = MemFile::new(text);
    for size in [1024, 1 + XorShift64::new(seed).below(64) as usize] {
        let mut buf = vec![0u8; size];
        let mut seen = Vec::new();
        let mut props = NodeProperties::default();
        for_each_line_in_file(file.path(), &mut buf, |Line { bytes, complete }| {
            seen.push((bytes.to_vec(), complete));
            if complete {
                props.apply_line(bytes);
            }
            ControlFlow::Continue(())
        })
        .expect("read memfd");
        let want = ref_lines(text, size);
        assert_eq!(seen, want, "buffer of {size}");
        let complete = want.into_iter().filter(|(_, c)| *c).map(|(l, _)| l);
        assert_eq!(props, reference(complete));
    }
});
