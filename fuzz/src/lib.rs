//! What the fuzz targets share: turning fuzz bytes into an argv, a file
//! (in memory, so that fuzzing never writes to disk), a small PRNG for
//! splitting input into chunks, and plain reference implementations that the
//! optimised parsers are checked against.
//!
//! A reference here is written the obvious way (std parsing, `Vec`s,
//! whole-input splitting) on purpose: the product parsers stream, work in
//! fixed buffers and avoid the heap, and a disagreement between the two is a
//! bug in one of them.

use std::ffi::{CString, c_char, c_int};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use wrapper_common::argv::Argv;

/// The fuzz input cut at NUL bytes: one C string per word.
pub fn words(data: &[u8]) -> Vec<CString> {
    data.split(|&b| b == 0).map(|w| CString::new(w).expect("no NUL inside a piece")).collect()
}

/// Calls `f` with an [`Argv`] over `words`, as a C `main` would get it.
///
/// `Argv` hands out `&'static CStr`; here they really live only as long as
/// `words`, so `f` must not let anything borrowed from the `Argv` escape.
pub fn with_argv<R>(words: &[CString], f: impl FnOnce(Argv) -> R) -> R {
    let ptrs: Vec<*const c_char> = words.iter().map(|w| w.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    // SAFETY: `ptrs` is a NULL-terminated array of `words.len()` valid C
    // strings, all alive until this function returns (see above for the
    // lifetime the callers must respect).
    let argv = unsafe { Argv::from_main(words.len() as c_int, ptrs.as_ptr()) };
    f(argv)
}

/// A file that exists only in memory (`memfd_create`), reachable by path as
/// `/proc/self/fd/<n>`, for the functions that take a path.
pub struct MemFile {
    _fd: OwnedFd,
    path: CString,
}

impl MemFile {
    pub fn new(contents: &[u8]) -> MemFile {
        // SAFETY: memfd_create with a valid name and flags; the descriptor is
        // owned from here on.
        let raw = unsafe { libc::memfd_create(c"fuzz".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0, "memfd_create failed");
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut rest = contents;
        while !rest.is_empty() {
            // SAFETY: writing from a live slice to our own descriptor.
            let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
            assert!(n > 0, "write to memfd failed");
            rest = &rest[n as usize..];
        }
        let path = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        MemFile { _fd: fd, path }
    }

    pub fn path(&self) -> &std::ffi::CStr {
        &self.path
    }
}

/// A `u64` seed from the first eight bytes (fewer are zero-padded), and
/// the rest of the input.
pub fn seed_and_rest(data: &[u8]) -> (u64, &[u8]) {
    let n = data.len().min(8);
    let mut seed = [0u8; 8];
    seed[..n].copy_from_slice(&data[..n]);
    (u64::from_le_bytes(seed), &data[n..])
}

/// Reference: a strict decimal `u64`, digits only.
pub fn ref_parse_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Reference: `S` or `S.F` seconds to milliseconds (digits after the third
/// decimal checked but ignored, but that a time above zero is at least
/// 1 ms), `None` when it does not fit a `u64`.
pub fn ref_seconds_as_millis(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (text, None),
    };
    let whole: u128 = u128::from(ref_parse_u64(whole.as_bytes())?);
    let mut millis = whole * 1000;
    if let Some(frac) = frac {
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let first3: String = frac.chars().chain("000".chars()).take(3).collect();
        millis += first3.parse::<u128>().ok()?;
        // A time above zero is never zero: at least a millisecond.
        if millis == 0 && frac.bytes().any(|b| b != b'0') {
            millis = 1;
        }
    }
    u64::try_from(millis).ok()
}

/// Reference: the lines of `data` as `for_each_line` with a buffer of
/// `buf` bytes reports them: a line shorter than the buffer is complete,
/// a longer one is cut to the buffer and marked incomplete.
pub fn ref_lines(data: &[u8], buf: usize) -> Vec<(Vec<u8>, bool)> {
    let mut pieces: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    // The piece after a final newline (or of empty input) is no line.
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .map(|line| if line.len() < buf { (line.to_vec(), true) } else { (line[..buf].to_vec(), false) })
        .collect()
}

/// Reference: does a line match the basic regular expression `Name: *gfx*`
/// (that is: `Name:`, any number of spaces, `gf`)?
pub fn ref_gfx_line(line: &[u8]) -> bool {
    (0..line.len()).any(|i| {
        let Some(rest) = line[i..].strip_prefix(b"Name:") else { return false };
        let spaces = rest.iter().take_while(|&&b| b == b' ').count();
        rest[spaces..].starts_with(b"gf")
    })
}

/// Reference: `grep -c 'Name: *gfx*'` over a whole output.
pub fn ref_gfx_count(output: &[u8]) -> u64 {
    output.split(|&b| b == b'\n').filter(|l| ref_gfx_line(l)).count() as u64
}

/// Reference: Bazel's manifest escaping, the inverse of `unescape_into`
/// for any text.
pub fn manifest_escape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in text {
        match b {
            b' ' => out.extend_from_slice(b"\\s"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\\' => out.extend_from_slice(b"\\b"),
            _ => out.push(b),
        }
    }
    out
}

/// Reference: undoes the manifest escapes, keeping unknown sequences.
pub fn ref_unescape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        match (text[i], text.get(i + 1)) {
            (b'\\', Some(b's')) => (out.push(b' '), i += 2),
            (b'\\', Some(b'n')) => (out.push(b'\n'), i += 2),
            (b'\\', Some(b'b')) => (out.push(b'\\'), i += 2),
            (b, _) => (out.push(b), i += 1),
        };
    }
    out
}
