//! Fixed-capacity, NUL-terminated byte strings on the stack.
//!
//! Paths handed to system calls need a trailing NUL. Building them in a
//! `CString` would allocate, which the pass-through paths must not do, so
//! they are built here instead, bounded by `PATH_MAX`.

use core::ffi::CStr;
use core::fmt;

/// The text would not fit, or held a NUL byte, which no path can contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong;

impl fmt::Display for TooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("path too long or contains a NUL byte")
    }
}

/// A byte string of at most `N - 1` bytes plus its terminating NUL.
#[derive(Clone)]
pub struct CBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

/// Room for any path the kernel accepts (`PATH_MAX` includes the NUL).
pub type StackPath = CBuf<4096>;

/// What the paths of the no-GPU and counting paths fit: a real host's
/// paths, Bazel's runfiles and short test prefixes.
pub type ShortPath = CBuf<256>;

/// What joins `dir` and a relative path: `/`, unless `dir` is empty or
/// already ends in one. The one rule for both [`CBuf::push_path`] and the
/// paths built with [`with_joined`].
pub fn separator(dir: &[u8]) -> &'static [u8] {
    if dir.is_empty() || dir.ends_with(b"/") { b"" } else { &PATH_SEPARATOR }
}

/// The `/` that [`separator`] gives, under a name of its own: every lock
/// file path is built with it, so parallel_gpu_execute's link order
/// (`link-order.txt`) puts it first in `.rodata`, beside the start-up
/// tables of glibc, in a page that start-up touches anyway; as an anonymous
/// constant it fell wherever the size of the messages put it, once in a
/// 64 KB fault-around window of its own: one more page fault a run.
#[unsafe(no_mangle)]
pub static GPU_CI_PATH_SEPARATOR: [u8; 1] = *b"/";
use GPU_CI_PATH_SEPARATOR as PATH_SEPARATOR;

/// Calls `f` with `parts` joined, followed by `number` in decimal when
/// given; `None` when the path cannot be built (longer than `PATH_MAX`, or a
/// part holds a NUL).
///
/// The path is built in a [`ShortPath`] when it fits, else in a full
/// [`StackPath`], out of line. So a caller's frame holds 256 bytes, not
/// 4 KiB that the stack probe would fault in on every run whether a path
/// is long or not (README, "Where the time goes").
pub fn with_joined<R>(parts: &[&[u8]], number: Option<u64>, f: impl FnOnce(&CStr) -> R) -> Option<R> {
    let mut short = ShortPath::new();
    match short.push_all(parts, number) {
        Ok(()) => Some(f(short.as_cstr())),
        Err(TooLong) => {
            // One copy of the long path's code for every caller: only this
            // call, through a `dyn`, is each caller's own.
            let (mut f, mut out) = (Some(f), None);
            with_joined_long(parts, number, &mut |c| out = f.take().map(|f| f(c)));
            out
        }
    }
}

#[cold]
#[inline(never)]
fn with_joined_long(parts: &[&[u8]], number: Option<u64>, f: &mut dyn FnMut(&CStr)) {
    let mut long = StackPath::new();
    if long.push_all(parts, number).is_ok() {
        f(long.as_cstr());
    }
}

impl<const N: usize> PartialEq for CBuf<N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const N: usize> Eq for CBuf<N> {}

impl<const N: usize> Default for CBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> CBuf<N> {
    pub const fn new() -> Self {
        CBuf { buf: [0; N], len: 0 }
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TooLong> {
        let mut b = Self::new();
        b.push(bytes)?;
        Ok(b)
    }

    /// Appends `bytes`; on failure the buffer is left as it was.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), TooLong> {
        let end = self.len + bytes.len();
        if end >= N || bytes.contains(&0) {
            return Err(TooLong);
        }
        self.buf[self.len..end].copy_from_slice(bytes);
        self.buf[end] = 0;
        self.len = end;
        Ok(())
    }

    /// Appends each of `parts`, then `number` in decimal when given.
    pub fn push_all(&mut self, parts: &[&[u8]], number: Option<u64>) -> Result<(), TooLong> {
        for part in parts {
            self.push(part)?;
        }
        match number {
            Some(n) => self.push_u64(n),
            None => Ok(()),
        }
    }

    /// Appends a decimal number.
    pub fn push_u64(&mut self, n: u64) -> Result<(), TooLong> {
        let mut digits = [0u8; 20];
        self.push(crate::numbers::format_u64(n, &mut digits))
    }

    /// Appends `/` (unless the buffer is empty or already ends in one) and
    /// then `component`.
    pub fn push_path(&mut self, component: &[u8]) -> Result<(), TooLong> {
        let saved = self.len;
        self.push(separator(self.as_bytes()))?;
        self.push(component).inspect_err(|_| self.truncate(saved))
    }

    /// Shortens to `len` bytes (no-op when already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
            self.buf[len] = 0;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn as_cstr(&self) -> &CStr {
        // The invariant kept by `push`/`truncate`: buf[len] is NUL and no
        // byte before it is, so this cannot fail.
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).unwrap_or(c"")
    }
}

impl<const N: usize> fmt::Debug for CBuf<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", crate::diag::Bytes(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::prelude::rust_2024::*;

    #[test]
    fn push_and_terminate() {
        let mut p = CBuf::<16>::new();
        p.push(b"/a").unwrap();
        p.push_path(b"b").unwrap();
        p.push_u64(42).unwrap();
        assert_eq!(p.as_cstr(), c"/a/b42");
        p.truncate(2);
        assert_eq!(p.as_cstr(), c"/a");
    }

    #[test]
    fn joined_paths_short_and_long() {
        assert_eq!(
            with_joined(&[b"/sys", b"/dev/nvidia"], Some(3), |p| p.to_owned()),
            Some(c"/sys/dev/nvidia3".into())
        );
        // Past the short buffer: built in the long one, the same.
        let long = vec![b'd'; 1000];
        let got = with_joined(&[&long, b"/x"], None, |p| p.to_bytes().to_vec()).unwrap();
        assert_eq!(got.len(), 1002);
        assert!(got.ends_with(b"d/x"));
        // Past PATH_MAX, or with a NUL: no path.
        assert_eq!(with_joined(&[&[b'd'; 5000]], None, |_| ()), None);
        assert_eq!(with_joined(&[b"a\0b"], None, |_| ()), None);
    }

    #[test]
    fn push_path_does_not_double_slash() {
        let mut p = CBuf::<16>::from_bytes(b"/").unwrap();
        p.push_path(b"x").unwrap();
        assert_eq!(p.as_bytes(), b"/x");
        let mut empty = CBuf::<16>::new();
        empty.push_path(b"rel").unwrap();
        assert_eq!(empty.as_bytes(), b"rel");
    }

    #[test]
    fn overflow_leaves_buffer_unchanged() {
        let mut p = CBuf::<8>::from_bytes(b"abcd").unwrap();
        assert_eq!(p.push(b"efgh"), Err(TooLong), "7 bytes + NUL is the limit");
        assert_eq!(p.as_bytes(), b"abcd");
        assert_eq!(p.push_path(b"efg"), Err(TooLong));
        assert_eq!(p.as_bytes(), b"abcd");
        p.push(b"efg").unwrap();
        assert_eq!(p.as_cstr(), c"abcdefg");
    }

    #[test]
    fn nul_is_rejected() {
        let mut p = CBuf::<8>::new();
        assert_eq!(p.push(b"a\0b"), Err(TooLong));
        assert!(p.is_empty());
    }
}
