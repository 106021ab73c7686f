//! The process's own argument vector, borrowed, never copied.
//!
//! The wrappers pass the test's arguments on to `execve` untouched, so they
//! keep the `argv` array the kernel gave them and hand a pointer into it to
//! `execve`: no allocation, no re-encoding.

use core::ffi::{CStr, c_char, c_int};

/// `argv` as handed to a C `main`: `len` pointers to NUL-terminated strings,
/// followed by a NULL pointer.
#[derive(Clone, Copy)]
pub struct Argv {
    len: usize,
    ptr: *const *const c_char,
}

impl Argv {
    /// # Safety
    /// `argc` and `argv` must be the values the C runtime passed to `main`
    /// (or equivalent: `argv[0..argc]` valid NUL-terminated strings that live
    /// for the rest of the process, and `argv[argc]` NULL).
    pub unsafe fn from_main(argc: c_int, argv: *const *const c_char) -> Argv {
        let len = if argv.is_null() { 0 } else { usize::try_from(argc).unwrap_or(0) };
        Argv { len, ptr: argv }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Argument `i`, if present.
    pub fn get(&self, i: usize) -> Option<&'static CStr> {
        if i >= self.len {
            return None;
        }
        // SAFETY: i < argc, so argv[i] is a valid, non-NULL pointer to a
        // NUL-terminated string that lives as long as the process
        // (`from_main`'s contract).
        Some(unsafe { CStr::from_ptr(*self.ptr.add(i)) })
    }

    /// Iterates over arguments `from..`.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &'static CStr> + '_ {
        (from..self.len).filter_map(|i| self.get(i))
    }

    /// The NULL-terminated array `argv[from..]`, ready for `execve` (empty
    /// when `from` is past the end).
    pub fn tail_ptr(&self, from: usize) -> *const *const c_char {
        let from = from.min(self.len);
        // SAFETY: from <= argc, and the array has argc + 1 entries.
        unsafe { self.ptr.add(from) }
    }
}
