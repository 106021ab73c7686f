//! rocminfo output (parallel_gpu_execute::hardware::rocminfo): the streaming
//! `grep -c 'Name: *gfx*'` (GfxLineCounter) and the GPU-agent count by
//! `Device Type: GPU` (AgentScanner) must count exactly what plain per-line
//! references count, however the output is cut into reads. The tail kept
//! for a failure's warning (OutputTail) must give the lines a plain
//! reference gives: escape sequences stripped from the whole output, the
//! window the buffer keeps, the last non-blank lines of it.

#![no_main]

use gpu_ci_wrappers_fuzz::{ref_gfx_count, seed_and_rest};
use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::sys::output_tail::{OutputTail, TAIL_BYTES, TAIL_LINES};
use parallel_gpu_execute::hardware::rocminfo::{AgentScanner, GfxLineCounter};
use test_support::XorShift64;

/// `Key:` at the start of the line (after blanks), and its trimmed value.
fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let rest = line.trim_ascii_start().strip_prefix(key)?;
    Some(rest.strip_prefix(b":")?.trim_ascii())
}

/// Agents typed GPU (each agent once; a line is looked at up to its
/// 256th byte), or the classic count when no line has a `Device Type:`;
/// and whether the count is by type (some line has a `Device Type:`).
fn ref_agents(output: &[u8]) -> (u64, bool) {
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
    if saw { (gpus, true) } else { (ref_gfx_count(output), false) }
}

/// The output without `ESC [ ... final` and two-byte `ESC x` sequences.
fn ref_strip(output: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < output.len() {
        if output[i] != 0x1b {
            out.push(output[i]);
            i += 1;
        } else if output.get(i + 1) == Some(&b'[') {
            i += 2;
            while i < output.len() && !(0x40..=0x7e).contains(&output[i]) {
                i += 1;
            }
            i += 1;
        } else {
            i += 2;
        }
    }
    out
}

/// The lines OutputTail shows: the buffer drops its oldest quarter each
/// time it is full, so it keeps the stripped text from the last multiple
/// of a quarter that leaves at most TAIL_BYTES; a cut window starts after
/// its first newline.
fn ref_tail(output: &[u8]) -> Vec<Vec<u8>> {
    let s = ref_strip(output);
    let quarter = TAIL_BYTES / 4;
    let drops = s.len().saturating_sub(TAIL_BYTES).div_ceil(quarter);
    let mut window = &s[drops * quarter..];
    if drops > 0 {
        match window.iter().position(|&b| b == b'\n') {
            Some(i) => window = &window[i + 1..],
            None => return Vec::new(),
        }
    }
    let lines: Vec<Vec<u8>> = window
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii_end().to_vec())
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].to_vec()
}

fn tail_lines(t: &OutputTail) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    t.for_each_line(|l| v.push(l.to_vec()));
    v
}

fuzz_target!(|data: &[u8]| {
    let (seed, output) = seed_and_rest(data);
    let want = ref_gfx_count(output);
    assert_eq!(GfxLineCounter::count(output), want, "whole output");
    let (want_agents, by_type) = ref_agents(output);
    assert_eq!(AgentScanner::count(output), want_agents, "agents, whole output");

    let mut rng = XorShift64::new(seed);
    let mut counter = GfxLineCounter::default();
    let mut scanner = AgentScanner::default();
    let mut names = 0u64;
    let mut tail = OutputTail::new();
    let mut rest = output;
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(17) as u64) as usize;
        counter.feed(&rest[..n]);
        scanner.feed(&rest[..n], &mut |_| names += 1);
        tail.feed(&rest[..n]);
        rest = &rest[n..];
    }
    let want_tail = ref_tail(output);
    assert_eq!(tail_lines(&tail), want_tail, "tail in chunks");
    let mut whole = OutputTail::new();
    whole.feed(output);
    assert_eq!(tail_lines(&whole), want_tail, "tail, whole output");
    // Empty reads happen too (a pipe read of 0 bytes is EOF, but feed must
    // not care).
    counter.feed(&[]);
    scanner.feed(&[], &mut |_| names += 1);
    assert_eq!(counter.finish(), want, "in chunks");
    let agents = scanner.finish(&mut |_| names += 1);
    assert_eq!(agents, want_agents, "agents in chunks");
    // Every GPU agent counted by its Device Type is reported once; a
    // classic count (no `Device Type:` line at all) reports none.
    let want_names = if by_type { agents } else { 0 };
    assert_eq!(names, want_names, "names reported for {agents} agents (counted by type: {by_type})");
});
