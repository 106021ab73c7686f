//! One-line messages to stderr, formatted on the stack.
//!
//! Each message is written with a single `write(2)`, so lines from many
//! wrappers sharing one log do not interleave mid-line, and no `std::io`
//! buffering or locking (or heap) is involved.

use core::fmt::{self, Write as _};

/// Formats into a fixed buffer; text past the end is dropped and the line is
/// marked as cut with `...`.
pub struct LineBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    cut: bool,
}

impl<const N: usize> Default for LineBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LineBuf<N> {
    pub const fn new() -> Self {
        LineBuf { buf: [0; N], len: 0, cut: false }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Ends the line with `\n` (replacing the tail with `...\n` when the text
    /// did not fit).
    pub fn finish_line(&mut self) -> &[u8] {
        if self.cut {
            let keep = N.saturating_sub(4).min(self.len);
            self.len = keep;
            let _ = self.push_raw(b"...");
        }
        let _ = self.push_raw(b"\n");
        self.as_bytes()
    }

    fn push_raw(&mut self, bytes: &[u8]) -> bool {
        let room = N - self.len;
        let n = bytes.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        n == bytes.len()
    }
}

impl<const N: usize> fmt::Write for LineBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Keep one byte for the newline.
        let room = N.saturating_sub(1).saturating_sub(self.len);
        if s.len() > room {
            self.cut = true;
            self.push_raw(&s.as_bytes()[..room]);
        } else {
            self.push_raw(s.as_bytes());
        }
        Ok(())
    }
}

/// Whether `c` is an invisible format character (Unicode's `Cf`): a
/// zero-width space or joiner, a bidirectional override, embedding or
/// isolate (`U+202E` shows the rest of a line reversed), a word joiner, a
/// byte-order mark, a tag; and the line and paragraph separators
/// (`U+2028`, `U+2029`), a line break to some viewers. Such a character in
/// a file name can make a row look like another, split it, or reorder the
/// rest of the line on a terminal.
pub fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0xAD | 0x600..=0x605
            | 0x2028..=0x2029
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// Whether `c` must not be shown as it is: a control character, or a
/// format character ([`is_format`]).
pub fn is_unshown(c: char) -> bool {
    c.is_control() || is_format(c)
}

/// Shows a byte string from argv, the environment or a file: valid UTF-8 as
/// is, everything else (and control characters, which could rewrite a
/// terminal or a CI log) as `\xNN`; format characters ([`is_format`]) as
/// `\u{NNNN}`.
pub struct Bytes<'a>(pub &'a [u8]);

impl fmt::Display for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            // Runs of characters shown as they are go out whole (a test's
            // path, on the free-slot path's one line, is one run).
            let (text, mut shown) = (chunk.valid(), 0);
            for (at, c) in text.char_indices() {
                // Every format character is at U+00AD or above.
                let format = c as u32 >= 0xAD && is_format(c);
                if !c.is_control() && !format {
                    continue;
                }
                f.write_str(&text[shown..at])?;
                shown = at + c.len_utf8();
                if format {
                    write!(f, "\\u{{{:04x}}}", c as u32)?;
                } else {
                    write!(f, "\\x{:02x}", c as u32)?;
                }
            }
            f.write_str(&text[shown..])?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{self}'")
    }
}

/// An `errno` as std's `io::Error` shows it: `Permission denied (os error
/// 13)`. Without its `std` feature (which these crates leave off, see the
/// workspace's Cargo.toml) rustix's `Errno` shows only `os error 13`, so every
/// message that names an errno goes through this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Os(pub rustix::io::Errno);

impl fmt::Display for Os {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.0.raw_os_error();
        let mut text = [0u8; 128];
        // SAFETY: the XSI strerror_r (what the libc crate binds on glibc and
        // musl) writes at most `text.len()` bytes, NUL included, into `text`.
        let ok = unsafe { libc::strerror_r(code, text.as_mut_ptr().cast(), text.len()) } == 0;
        match core::ffi::CStr::from_bytes_until_nul(&text) {
            Ok(message) if ok && !message.is_empty() => {
                write!(f, "{} (os error {code})", Bytes(message.to_bytes()))
            }
            _ => write!(f, "os error {code}"),
        }
    }
}

/// [`Bytes`], cut to its first [`Excerpt::MAX`] bytes (and marked `...`):
/// for values quoted in a message, so that an absurdly long one cannot push
/// the rest of the message (what is wrong with it) past the end of the line.
pub struct Excerpt<'a>(pub &'a [u8]);

impl Excerpt<'_> {
    /// Long enough for any real path (Bazel's output paths run to a few
    /// hundred bytes), short enough that a few of them fit one report line.
    pub const MAX: usize = 1024;
}

impl fmt::Display for Excerpt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= Self::MAX {
            return write!(f, "{}", Bytes(self.0));
        }
        write!(f, "{}...", Bytes(&self.0[..Self::MAX]))
    }
}

/// Writes all of `bytes` to `fd`, retrying on interruption; a write that
/// writes nothing is `EIO`.
pub fn write_all(fd: impl rustix::fd::AsFd, bytes: &[u8]) -> Result<(), rustix::io::Errno> {
    let mut rest = bytes;
    while !rest.is_empty() {
        match rustix::io::write(fd.as_fd(), rest) {
            Ok(0) => return Err(rustix::io::Errno::IO),
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// While not zero: how long (nanoseconds) a line waits for stderr to take
/// it before it is dropped ([`stderr_patience`]).
static STDERR_PATIENCE: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// From now on, a line waits at most `patience` for stderr to take it,
/// and is dropped after (`None`: as long as it takes, the default): a
/// process that must keep doing something else (a waiter, which beats and
/// looks) does not stop on a pipe nobody reads.
pub fn stderr_patience(patience: Option<core::time::Duration>) {
    let ns = patience.map_or(0, |p| u64::try_from(p.as_nanos()).unwrap_or(u64::MAX).max(1));
    STDERR_PATIENCE.store(ns, core::sync::atomic::Ordering::Relaxed);
}

/// Whether stderr takes a line (of at most a pipe's atomic 4 KiB, which a
/// pipe with room for any takes whole) within `patience` nanoseconds.
#[cold]
fn takes_within(stderr: rustix::fd::BorrowedFd<'_>, patience: u64) -> bool {
    let now = || {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec into `now`.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
    };
    let until = now().saturating_add(patience);
    loop {
        let left = until.saturating_sub(now());
        let ts = rustix::event::Timespec { tv_sec: (left / 1_000_000_000) as _, tv_nsec: (left % 1_000_000_000) as _ };
        let mut fds = [rustix::event::PollFd::new(&stderr, rustix::event::PollFlags::OUT)];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return true,
        }
    }
}

/// Writes all of `bytes` to stderr; errors are ignored (there is nowhere
/// left to report them).
pub fn write_stderr(bytes: &[u8]) {
    // SAFETY: stderr is not owned by any Rust object here; writing to it
    // through a borrowed fd for the duration of the call is sound even if
    // it was closed (the call then fails with EBADF).
    let stderr = unsafe { rustix::fd::BorrowedFd::borrow_raw(2) };
    let patience = STDERR_PATIENCE.load(core::sync::atomic::Ordering::Relaxed);
    if patience != 0 && !takes_within(stderr, patience) {
        return;
    }
    let _ = write_all(stderr, bytes);
}

/// Writes all of `bytes` to stdout (for `--help` and `--version`).
pub fn write_stdout(bytes: &[u8]) -> Result<(), rustix::io::Errno> {
    // SAFETY: as for stderr above.
    let stdout = unsafe { rustix::fd::BorrowedFd::borrow_raw(1) };
    write_all(stdout, bytes)
}

/// Writes `<tool>: <message>\n` to stderr in one write.
pub fn report(tool: &str, message: fmt::Arguments<'_>) {
    let mut line = LineBuf::<4096>::new();
    let _ = write!(line, "{tool}: {message}");
    write_stderr(line.finish_line());
}

/// Writes `line`, which must end in `\n`, to stderr in one write, without a
/// tool prefix (for the lines the classic scripts printed, which CI logs
/// are grepped for). The caller builds the line: no 4 KiB line buffer on
/// the stack.
pub fn say_line(line: &[u8]) {
    write_stderr(line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::prelude::rust_2024::*;

    #[test]
    fn format_characters_are_escaped() {
        let shown = Bytes("a\u{200b}b\u{202e}c\u{2066}d\u{feff}e\u{61c}f\u{e0041}\u{660}".as_bytes()).to_string();
        assert_eq!(shown, "a\\u{200b}b\\u{202e}c\\u{2066}d\\u{feff}e\\u{061c}f\\u{e0041}\u{660}");
        let split = Bytes("ls\u{2028}ps\u{2029}x".as_bytes()).to_string();
        assert_eq!(split, "ls\\u{2028}ps\\u{2029}x");
        assert!(!is_format('0') && !is_format('\u{e9}') && !is_format('\u{660}'));
        // Runs shown whole between escapes, at either end too, across
        // invalid bytes.
        let mixed = Bytes(b"\nab\x7fc\xc3\xa9\xe2\x80\xaed\xffe\x1b");
        assert_eq!(mixed.to_string(), "\\x0aab\\x7fc\u{e9}\\u{202e}d\\xffe\\x1b");
        assert_eq!(Bytes(b"").to_string(), "");
    }

    #[test]
    fn errnos_read_as_std_shows_them() {
        use rustix::io::Errno;
        for errno in [Errno::ACCESS, Errno::NOENT, Errno::NOTDIR, Errno::NAMETOOLONG] {
            let std = std::io::Error::from_raw_os_error(errno.raw_os_error()).to_string();
            assert_eq!(Os(errno).to_string(), std);
        }
        assert_eq!(Os(Errno::ACCESS).to_string(), "Permission denied (os error 13)");
    }

    #[test]
    fn line_fits() {
        let mut l = LineBuf::<32>::new();
        let what = "bad";
        write!(l, "tool: {what} {}", 7).unwrap();
        assert_eq!(l.finish_line(), b"tool: bad 7\n");
    }

    #[test]
    fn line_is_cut_visibly() {
        let mut l = LineBuf::<12>::new();
        write!(l, "0123456789abcdef").unwrap();
        let out = l.finish_line();
        assert_eq!(out, b"01234567...\n");
        assert_eq!(out.len(), 12);
    }

    #[test]
    fn exact_fit_is_not_cut() {
        let mut l = LineBuf::<6>::new();
        write!(l, "abcde").unwrap();
        assert_eq!(l.finish_line(), b"abcde\n");
    }

    #[test]
    fn excerpts_are_cut_visibly() {
        assert_eq!(Excerpt(b"short\n").to_string(), "short\\x0a");
        let long = vec![b'a'; Excerpt::MAX + 1];
        assert_eq!(Excerpt(&long).to_string(), format!("{}...", "a".repeat(Excerpt::MAX)));
        assert_eq!(Excerpt(&long[1..]).to_string(), "a".repeat(Excerpt::MAX));
    }

    #[test]
    fn bytes_escape_controls_and_invalid_utf8() {
        assert_eq!(Bytes(b"ok/\xc3\xa9").to_string(), "ok/\u{e9}");
        assert_eq!(Bytes(b"a\nb\x1b[2J\xff").to_string(), "a\\x0ab\\x1b[2J\\xff");
        // Shown again (a test's description passes through twice: into
        // the record, then from it), what was shown stays as it was: a
        // backslash is left as it is, so that no escape is escaped again.
        for raw in [&b"a\\x0ab"[..], b"p\nq", b"\xff\\"] {
            let once = Bytes(raw).to_string();
            assert_eq!(Bytes(once.as_bytes()).to_string(), once);
        }
    }
}
