//! Line-by-line reading through a caller-supplied buffer.
//!
//! Manifests, KFD `properties` files and configuration files are read with
//! this, so that reading them costs no heap and memory stays bounded whatever
//! the file holds (a 50,000-line MANIFEST or a file of random bytes alike).

use core::cell::UnsafeCell;
use core::ffi::{CStr, c_int};
use core::ops::ControlFlow;
use core::sync::atomic::{AtomicBool, Ordering};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// The first `byte` in `hay`: the C library's `memchr`, which reads a
/// word (glibc: a vector) at a time, where a byte loop costs three to four
/// instructions a byte. Lines of a 50,000-entry runfiles manifest are
/// looked through twice each (its newline, its space).
pub fn find_byte(hay: &[u8], byte: u8) -> Option<usize> {
    // SAFETY: `memchr` reads at most `hay.len()` bytes from `hay`'s start,
    // all of which the slice borrows; the pointer it returns, when not
    // null, points into that range, so the offset is in bounds.
    let found = unsafe { libc::memchr(hay.as_ptr().cast(), c_int::from(byte), hay.len()) };
    if found.is_null() {
        return None;
    }
    // SAFETY: as above, `found` lies in `hay`, after its start.
    Some(unsafe { found.cast::<u8>().offset_from(hay.as_ptr()) } as usize)
}

/// Size of the [`with_read_buffer`] buffer.
pub const READ_BUFFER: usize = 16 * 1024;

/// One process-wide read buffer in `.bss`. Unlike a buffer on the stack it
/// is not zeroed on every use (the kernel hands it out zeroed once) and
/// costs a page fault only for each page a `read` actually fills: a stack
/// buffer's pages are all touched by the stack probe when its function is
/// entered, used or not (README, "Where the time goes").
static SHARED: Shared = Shared { busy: AtomicBool::new(false), buf: UnsafeCell::new([0; READ_BUFFER]) };

/// A buffer lent to one caller at a time: a try-lock, as `core` has no
/// mutex (this crate is `no_std`).
struct Shared {
    busy: AtomicBool,
    buf: UnsafeCell<[u8; READ_BUFFER]>,
}

// SAFETY: `buf` is reached only in `with_read_buffer`, by the one caller
// whose swap turned `busy` from false to true, until it stores false again.
unsafe impl Sync for Shared {}

/// Calls `f` with a buffer of [`READ_BUFFER`] bytes: the shared static one,
/// or, when that is in use (a nested call, or another thread in a test), a
/// fresh one on the stack. Its contents on entry are unspecified.
pub fn with_read_buffer<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    if SHARED.busy.swap(true, Ordering::Acquire) {
        return on_the_stack(f);
    }
    struct Lent;
    impl Drop for Lent {
        fn drop(&mut self) {
            SHARED.busy.store(false, Ordering::Release);
        }
    }
    let _lent = Lent;
    // SAFETY: this call turned `busy` on, so no other reference to the
    // buffer exists until `_lent` turns it off, after `f` returns.
    f(unsafe { &mut *SHARED.buf.get() })
}

#[cold]
#[inline(never)]
fn on_the_stack<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    let mut buf = [0u8; READ_BUFFER];
    f(&mut buf)
}

/// One line as read, without its `\n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub bytes: &'a [u8],
    /// False when the line did not fit the buffer: `bytes` is then its
    /// beginning, and the rest of the line is skipped.
    pub complete: bool,
}

/// Reads `fd` to the end (or until `f` breaks), calling `f` for each line.
/// A last line without a trailing newline is passed too.
pub fn for_each_line(fd: impl AsFd, buf: &mut [u8], f: impl FnMut(Line<'_>) -> ControlFlow<()>) -> Result<(), Errno> {
    scan_lines(fd, buf, false, f)
}

/// [`for_each_line`] for a kernel attribute file (sysfs, procfs) or a small
/// regular file: a `read` that returns less than it was asked for is taken
/// as the end, so the second, end-of-file `read` is skipped (on a KFD host
/// that is one system call per topology node). The kernel produces such a
/// file whole on its first read; a larger file fills each read and is read
/// on. Not for pipes or sockets, whose reads may be short before the end.
pub fn for_each_line_of_attribute(
    fd: impl AsFd,
    buf: &mut [u8],
    f: impl FnMut(Line<'_>) -> ControlFlow<()>,
) -> Result<(), Errno> {
    scan_lines(fd, buf, true, f)
}

fn scan_lines(
    fd: impl AsFd,
    buf: &mut [u8],
    short_read_is_end: bool,
    mut f: impl FnMut(Line<'_>) -> ControlFlow<()>,
) -> Result<(), Errno> {
    let (mut start, mut end) = (0usize, 0usize);
    // Inside an over-long line whose beginning was already passed on.
    let mut skipping = false;
    let mut at_end = false;
    loop {
        while let Some(nl) = find_byte(&buf[start..end], b'\n') {
            if !skipping && f(Line { bytes: &buf[start..start + nl], complete: true }).is_break() {
                return Ok(());
            }
            skipping = false;
            start += nl + 1;
        }
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        if end == buf.len() {
            if !skipping && f(Line { bytes: &buf[..end], complete: false }).is_break() {
                return Ok(());
            }
            skipping = true;
            end = 0;
        }
        let n = if at_end {
            0
        } else {
            loop {
                match rustix::io::read(fd.as_fd(), &mut buf[end..]) {
                    Err(Errno::INTR) => continue,
                    other => break other?,
                }
            }
        };
        if n == 0 {
            if end > 0 && !skipping {
                let _ = f(Line { bytes: &buf[..end], complete: true });
            }
            return Ok(());
        }
        at_end = short_read_is_end && n < buf.len() - end;
        end += n;
    }
}

/// Opens `path` for reading, close-on-exec, refusing to block on a FIFO.
pub fn open_for_reading(path: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY, Mode::empty())
}

/// [`for_each_line`] over the file at `path`.
pub fn for_each_line_in_file(
    path: &CStr,
    buf: &mut [u8],
    f: impl FnMut(Line<'_>) -> ControlFlow<()>,
) -> Result<(), Errno> {
    let fd = open_for_reading(path)?;
    for_each_line(&fd, buf, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::prelude::rust_2024::*;

    #[test]
    fn a_nested_read_buffer_is_a_different_one() {
        with_read_buffer(|outer| {
            outer[0] = 1;
            with_read_buffer(|inner| {
                assert_eq!(inner.len(), READ_BUFFER);
                inner[0] = 2;
            });
            assert_eq!(outer[0], 1, "the inner call must not have been given the outer buffer");
        });
    }

    fn lines_of(data: &[u8], bufsize: usize) -> Vec<(Vec<u8>, bool)> {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let data = data.to_vec();
        let writer = std::thread::spawn(move || crate::diag::write_all(&w, &data).unwrap());
        let mut buf = vec![0u8; bufsize];
        let mut out = Vec::new();
        for_each_line(&r, &mut buf, |l| {
            out.push((l.bytes.to_vec(), l.complete));
            ControlFlow::Continue(())
        })
        .unwrap();
        writer.join().unwrap();
        out
    }

    #[test]
    fn splits_lines_and_keeps_last_unterminated_line() {
        let got = lines_of(b"a b\n\ncd\nlast", 8);
        let want: Vec<(Vec<u8>, bool)> =
            vec![(b"a b".to_vec(), true), (b"".to_vec(), true), (b"cd".to_vec(), true), (b"last".to_vec(), true)];
        assert_eq!(got, want);
    }

    #[test]
    fn overlong_line_is_cut_and_skipped() {
        let got = lines_of(b"short\n0123456789ABCDEF\nnext\n", 8);
        let want: Vec<(Vec<u8>, bool)> =
            vec![(b"short".to_vec(), true), (b"01234567".to_vec(), false), (b"next".to_vec(), true)];
        assert_eq!(got, want);
    }

    #[test]
    fn line_exactly_filling_buffer_before_newline() {
        let got = lines_of(b"12345678\nx\n", 8);
        let want: Vec<(Vec<u8>, bool)> = vec![(b"12345678".to_vec(), false), (b"x".to_vec(), true)];
        assert_eq!(got, want);
    }

    #[test]
    fn many_lines_across_reads() {
        let mut data = Vec::new();
        for i in 0..5000 {
            data.extend_from_slice(format!("line{i}\n").as_bytes());
        }
        let got = lines_of(&data, 64);
        assert_eq!(got.len(), 5000);
        assert_eq!(got[4999].0, b"line4999");
        assert!(got.iter().all(|(_, c)| *c));
    }

    /// Lines of a regular file through [`for_each_line_of_attribute`].
    fn attribute_lines(data: &[u8], bufsize: usize) -> Vec<(Vec<u8>, bool)> {
        let file = tempfile_with(data);
        let mut buf = vec![0u8; bufsize];
        let mut out = Vec::new();
        for_each_line_of_attribute(&file, &mut buf, |l| {
            out.push((l.bytes.to_vec(), l.complete));
            ControlFlow::Continue(())
        })
        .unwrap();
        out
    }

    fn tempfile_with(data: &[u8]) -> OwnedFd {
        let dir = std::env::temp_dir().join(format!("lines-attr-{}-{}", std::process::id(), data.len()));
        std::fs::write(&dir, data).unwrap();
        let path = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).unwrap();
        let file = rustix::fs::open(path.as_c_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        std::fs::remove_file(&dir).unwrap();
        file
    }

    #[test]
    fn attribute_file_read_whole_gives_the_same_lines() {
        for (data, bufsize) in [
            (&b"a b\n\ncd\nlast"[..], 64),
            (&b"simd_count 304\ndrm_render_minor 128\n"[..], 1024),
            (&b""[..], 16),
            // Fills the buffer: each read is full, so reading goes on to the end.
            (&b"short\n0123456789ABCDEF\nnext\n"[..], 8),
            (&b"1234567\n"[..], 8),
        ] {
            assert_eq!(attribute_lines(data, bufsize), lines_of(data, bufsize), "{:?}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn attribute_file_of_many_lines_is_read_in_full() {
        let mut data = Vec::new();
        for i in 0..500 {
            data.extend_from_slice(format!("key{i} {i}\n").as_bytes());
        }
        let got = attribute_lines(&data, 1024);
        assert_eq!(got.len(), 500);
        assert_eq!(got[499].0, b"key499 499");
    }

    #[test]
    fn break_stops_early() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        crate::diag::write_all(&w, b"a\nb\nc\n").unwrap();
        drop(w);
        let mut seen = 0;
        let mut buf = [0u8; 16];
        for_each_line(&r, &mut buf, |_| {
            seen += 1;
            ControlFlow::Break(())
        })
        .unwrap();
        assert_eq!(seen, 1);
    }
}
