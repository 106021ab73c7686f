//! The last lines a child process printed, kept in a fixed buffer as its
//! output streams by, so that a warning about its failure can say why.
//!
//! rocminfo prints its errors on stdout, the pipe the count reads, not on
//! stderr, and colours them. An strace in ROCm/legacy-rocm-build issue
//! #1109 shows it: `write(1, "\33[37m<user> is member of video group\n")`,
//! `write(1, "\33[31mhsa api call failure at: .../rocminfo.cc:1102\n")`,
//! `write(1, "\33[31mCall returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: ...")`,
//! `write(1, "\33[0m")`, then `exit_group(4104)`, status 8 (issue #1185
//! shows the same lines after "Unable to open /dev/kfd read-write: ...").
//! Without the tail a count that fell to zero would name only the exit
//! status. Escape sequences are dropped as the bytes arrive (ECMA-48 CSI
//! `ESC [ params final`, and any other two-byte `ESC x`), so the tail holds
//! the text a terminal shows.
//! Nothing here allocates.

/// How many bytes of the end of the output are kept.
pub const TAIL_BYTES: usize = 1024;
/// How many of its last non-blank lines are shown.
pub const TAIL_LINES: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After `ESC`.
    Start,
    /// Inside `ESC [`, up to its final byte (0x40..=0x7e).
    Csi,
}

/// The end of a byte stream, without its terminal escape sequences.
#[derive(Debug, Clone, Copy)]
pub struct OutputTail {
    buf: [u8; TAIL_BYTES],
    len: usize,
    /// Whether bytes were dropped from the front: the first line kept is
    /// then a fragment.
    cut: bool,
    escape: Escape,
}

impl Default for OutputTail {
    fn default() -> Self {
        Self::new()
    }
}

impl OutputTail {
    pub const fn new() -> Self {
        OutputTail { buf: [0; TAIL_BYTES], len: 0, cut: false, escape: Escape::None }
    }

    /// Takes the next chunk of output, in any split.
    pub fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            self.escape = match (self.escape, b) {
                (Escape::None, 0x1b) => Escape::Start,
                (Escape::None, _) => {
                    self.push(b);
                    Escape::None
                }
                (Escape::Start, b'[') => Escape::Csi,
                (Escape::Start, _) => Escape::None,
                (Escape::Csi, 0x40..=0x7e) => Escape::None,
                (Escape::Csi, _) => Escape::Csi,
            };
        }
    }

    fn push(&mut self, b: u8) {
        if self.len == TAIL_BYTES {
            // Drop the oldest quarter at once, so that a long output costs
            // one move per 256 bytes, not one per byte.
            let drop = TAIL_BYTES / 4;
            self.buf.copy_within(drop.., 0);
            self.len -= drop;
            self.cut = true;
        }
        self.buf[self.len] = b;
        self.len += 1;
    }

    /// Calls `f` with each of the last [`TAIL_LINES`] lines that hold more
    /// than white space, oldest first, trailing white space (rocminfo pads
    /// its columns) removed. A fragment cut at the front is not a line.
    pub fn for_each_line(&self, mut f: impl FnMut(&[u8])) {
        let mut text = &self.buf[..self.len];
        if self.cut {
            match text.iter().position(|&b| b == b'\n') {
                Some(i) => text = &text[i + 1..],
                None => return,
            }
        }
        let trimmed =
            |line: &[u8]| -> usize { line.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1) };
        let lines = || text.split(|&b| b == b'\n').map(|line| &line[..trimmed(line)]).filter(|line| !line.is_empty());
        let skip = lines().count().saturating_sub(TAIL_LINES);
        lines().skip(skip).for_each(&mut f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    fn lines(t: &OutputTail) -> Vec<String> {
        let mut v = Vec::new();
        t.for_each_line(|l| v.push(String::from_utf8_lossy(l).into_owned()));
        v
    }

    fn tail_of(parts: &[&[u8]]) -> OutputTail {
        let mut t = OutputTail::new();
        for p in parts {
            t.feed(p);
        }
        t
    }

    /// rocminfo's failure on a host whose /dev/kfd cannot be opened, as the
    /// strace in ROCm/legacy-rocm-build#1109 shows it, colours included (the
    /// user name, the path and the last message shortened).
    #[test]
    fn rocminfos_coloured_failure_reads_as_text() {
        let out: &[u8] = b"\x1b[37mROCk module is loaded\n\x1b[37mci is member of video group\n\x1b[31mhsa api call failure at: /data/rocminfo/rocminfo.cc:1102\n\x1b[31mCall returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.\n\x1b[0m";
        let want = [
            "ROCk module is loaded",
            "ci is member of video group",
            "hsa api call failure at: /data/rocminfo/rocminfo.cc:1102",
            "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.",
        ];
        assert_eq!(lines(&tail_of(&[out])), want);
        // The same in every split, escape sequences cut in two included.
        for split in 0..out.len() {
            assert_eq!(lines(&tail_of(&[&out[..split], &out[split..]])), want, "split at {split}");
        }
    }

    #[test]
    fn only_the_last_non_blank_lines_are_kept() {
        let mut out = Vec::new();
        for i in 0..20 {
            out.extend_from_slice(format!("line {i}   \n\n  \n").as_bytes());
        }
        let got = lines(&tail_of(&[&out]));
        let want: Vec<String> = (14..20).map(|i| format!("line {i}")).collect();
        assert_eq!(got, want);
        assert_eq!(lines(&tail_of(&[b"one\ntwo"])), ["one", "two"], "a last line without newline counts");
        assert!(lines(&tail_of(&[b"\n \n\t\n"])).is_empty());
        assert!(lines(&tail_of(&[])).is_empty());
    }

    #[test]
    fn a_long_output_keeps_its_end_without_the_cut_fragment() {
        let mut out = vec![b'x'; 5000];
        out.extend_from_slice(b"\nfirst\nsecond\n");
        assert_eq!(lines(&tail_of(&[&out])), ["first", "second"]);
        // A single line longer than the buffer: nothing whole is left.
        assert!(lines(&tail_of(&[&[b'y'; 3000][..]])).is_empty());
        // The end of a long output fed in small pieces.
        let mut t = OutputTail::new();
        for i in 0..500 {
            t.feed(format!("entry {i}\n").as_bytes());
        }
        let want: Vec<String> = (494..500).map(|i| format!("entry {i}")).collect();
        assert_eq!(lines(&t), want);
    }

    #[test]
    fn other_escapes_are_dropped_and_other_bytes_kept() {
        // `ESC ( B` is two bytes here (ESC and '('), then 'B' is text; the
        // CSI with parameters and an intermediate byte goes whole.
        let t = tail_of(&[b"a\x1b(Bb\x1b[1;31 qc\xffd\n"]);
        assert_eq!(lines(&t), ["aBbc\u{fffd}d"]);
    }
}
