//! rocminfo output (parallel_gpu_execute::rocminfo): the streaming
//! `grep -c 'Name: *gfx*'` (GfxLineCounter) and the GPU-agent count by
//! `Device Type: GPU` (AgentScanner) must count exactly what plain per-line
//! references count, however the output is cut into reads.

#![no_main]

use gpu_ci_wrappers_fuzz::{ref_gfx_count, seed_and_rest};
use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::rocminfo::{AgentScanner, GfxLineCounter};
use test_support::XorShift64;

/// `Key:` at the start of the line (after blanks), and its trimmed value.
fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let rest = line.trim_ascii_start().strip_prefix(key)?;
    Some(rest.strip_prefix(b":")?.trim_ascii())
}

/// Agents typed GPU (each agent once; a line is looked at up to its
/// 256th byte), or the classic count when no line has a `Device Type:`.
fn ref_agents(output: &[u8]) -> u64 {
    let (mut saw, mut typed, mut gpus) = (false, false, 0);
    for line in output.split(|&b| b == b'\n') {
        let line = &line[..line.len().min(256)];
        let t = line.trim_ascii();
        if t.strip_prefix(b"Agent ").is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit)) {
            typed = false;
        } else if field(line, b"Name").is_some() {
        } else if let Some(v) = field(line, b"Device Type") {
            saw = true;
            if !typed && v == b"GPU" {
                gpus += 1;
            }
            typed = true;
        }
    }
    if saw { gpus } else { ref_gfx_count(output) }
}

fuzz_target!(|data: &[u8]| {
    let (seed, output) = seed_and_rest(data);
    let want = ref_gfx_count(output);
    assert_eq!(GfxLineCounter::count(output), want, "whole output");
    let want_agents = ref_agents(output);
    assert_eq!(AgentScanner::count(output), want_agents, "agents, whole output");

    let mut rng = XorShift64::new(seed);
    let mut counter = GfxLineCounter::default();
    let mut scanner = AgentScanner::default();
    let mut names = 0u64;
    let mut rest = output;
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(17) as u64) as usize;
        counter.feed(&rest[..n]);
        scanner.feed(&rest[..n], &mut |_| names += 1);
        rest = &rest[n..];
    }
    // Empty reads happen too (a pipe read of 0 bytes is EOF, but feed must
    // not care).
    counter.feed(&[]);
    scanner.feed(&[], &mut |_| names += 1);
    assert_eq!(counter.finish(), want, "in chunks");
    let agents = scanner.finish(&mut |_| names += 1);
    assert_eq!(agents, want_agents, "agents in chunks");
    // Every GPU agent counted by its Device Type is reported once; a
    // classic count reports none.
    assert!(names == agents || names == 0, "{names} names for {agents} agents");
});
