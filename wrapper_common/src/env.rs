//! The environment: read in place, and rebuilt (with allocation) only when a
//! wrapper has something to change.
//!
//! Reading goes straight to `environ`, so a lookup costs a scan of the
//! pointer array and nothing else: each entry is compared with the name in
//! place, byte by byte, and only a matching entry's value is measured (a
//! `strlen` of every entry for every lookup was, with musl's bytewise
//! `strlen`, two thirds of the pass-through's instructions). Nothing in
//! these binaries calls `setenv`, so the strings `environ` points to stay
//! valid until `execve`.

use alloc::ffi::CString;
use alloc::vec::Vec;
use core::ffi::{CStr, c_char};

unsafe extern "C" {
    // The C runtime's environment array. libc declares it for glibc only;
    // musl has the same symbol.
    static mut environ: *const *const c_char;
}

/// The current environment array, for `execve` when nothing changes.
pub fn environ_ptr() -> *const *const c_char {
    // SAFETY: reading the pointer value (not creating a reference); the C
    // runtime initialised it before `main`, and nothing here writes it.
    unsafe { environ }
}

/// The entries of `environ` as they are: valid C strings that live until
/// `execve`, none of them measured.
fn entry_ptrs() -> impl Iterator<Item = *const c_char> {
    let mut p = environ_ptr();
    core::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: `environ` is a NULL-terminated array of valid C strings;
        // `p` only advances while the current entry is non-NULL.
        unsafe {
            let entry = *p;
            if entry.is_null() {
                p = core::ptr::null();
                return None;
            }
            p = p.add(1);
            Some(entry)
        }
    })
}

/// A name as `after_key` takes it: one without a NUL byte (which no entry's
/// key can hold).
#[derive(Clone, Copy)]
struct Key<'a>(&'a [u8]);

impl Key<'_> {
    fn new(name: &[u8]) -> Option<Key<'_>> {
        (!name.contains(&0)).then_some(Key(name))
    }
}

/// When the C string at `entry` is `name=value` (or just `name`, an entry
/// without `=`), the byte after the name: `=` or the terminating NUL.
///
/// # Safety
/// `entry` must point to a valid NUL-terminated string.
#[inline]
unsafe fn after_key(entry: *const c_char, Key(name): Key<'_>) -> Option<u8> {
    for (i, &want) in name.iter().enumerate() {
        // SAFETY: bytes 0..i matched `name`, which has no NUL, so the
        // terminator is not among them and byte i is still in the string.
        if unsafe { *entry.add(i) } as u8 != want {
            return None;
        }
    }
    // SAFETY: as above, for i = name.len().
    let next = unsafe { *entry.add(name.len()) } as u8;
    matches!(next, b'=' | 0).then_some(next)
}

/// Splits `KEY=value`; an entry without `=` has an empty value.
fn split_entry(entry: &[u8]) -> (&[u8], &[u8]) {
    match entry.iter().position(|&b| b == b'=') {
        Some(i) => (&entry[..i], &entry[i + 1..]),
        None => (entry, b""),
    }
}

/// The value of `name`, as `getenv` would return it (the first entry wins).
/// The value is a suffix of its `KEY=value` entry, so it is still a C string.
pub fn var_cstr(name: &[u8]) -> Option<&'static CStr> {
    let key = Key::new(name)?;
    entry_ptrs().find_map(|e| {
        // SAFETY: `e` is a valid C string (`entry_ptrs`); after a `=` at
        // name.len(), the value starts one byte on and ends at the same NUL.
        unsafe { (after_key(e, key)? == b'=').then(|| CStr::from_ptr(e.add(name.len() + 1))) }
    })
}

/// The value of `name`, as bytes.
pub fn var(name: &[u8]) -> Option<&'static [u8]> {
    var_cstr(name).map(CStr::to_bytes)
}

/// The value of `name` when set and not empty: how the wrappers treat
/// `TF_GPU_COUNT=` and friends (an empty assignment means "not set", as in
/// the classic scripts' `${VAR:-default}`).
pub fn var_nonempty(name: &[u8]) -> Option<&'static [u8]> {
    var(name).filter(|v| !v.is_empty())
}

/// [`var_nonempty`], as a C string.
pub fn var_nonempty_cstr(name: &[u8]) -> Option<&'static CStr> {
    var_cstr(name).filter(|v| !v.is_empty())
}

/// A changed copy of the environment for `execve`. Unchanged entries are
/// borrowed from `environ`; only the new ones are allocated.
pub struct EnvBuilder {
    entries: Vec<*const c_char>,
    owned: Vec<CString>,
}

impl EnvBuilder {
    pub fn from_current() -> EnvBuilder {
        EnvBuilder { entries: entry_ptrs().collect(), owned: Vec::new() }
    }

    /// Removes every entry for `key`.
    pub fn remove(&mut self, key: &[u8]) -> &mut Self {
        let Some(key) = Key::new(key) else { return self };
        self.entries.retain(|&p| {
            if p.is_null() {
                // The terminator `as_envp` added; it is added again there.
                return false;
            }
            // SAFETY: every pointer in `entries` is a valid C string, either
            // from `environ` or from `owned`, which outlives `entries`.
            unsafe { after_key(p, key) }.is_none()
        });
        self
    }

    /// Sets `key` to `value`, replacing any existing entries. A value with a
    /// NUL byte cannot be represented and is cut at the NUL.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.remove(key);
        let mut bytes = Vec::with_capacity(key.len() + 1 + value.len());
        bytes.extend_from_slice(key);
        bytes.push(b'=');
        bytes.extend_from_slice(value);
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            bytes.truncate(nul);
        }
        let entry = CString::new(bytes).unwrap_or_default();
        // The CString's heap buffer does not move when the CString itself is
        // moved into `owned`, so the pointer stays valid.
        self.entries.push(entry.as_ptr());
        self.owned.push(entry);
        self
    }

    /// The NULL-terminated array for `execve`; valid while `self` lives.
    pub fn as_envp(&mut self) -> *const *const c_char {
        if self.entries.last().is_none_or(|p| !p.is_null()) {
            self.entries.push(core::ptr::null());
        }
        self.entries.as_ptr()
    }

    /// The value `key` will have, for inspection and tests.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries.iter().filter(|p| !p.is_null()).find_map(|&p| {
            // SAFETY: as in `remove`.
            let e = unsafe { CStr::from_ptr(p) };
            let (k, v) = split_entry(e.to_bytes());
            (k == key).then_some(v)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::prelude::rust_2024::*;

    #[test]
    fn builder_sets_removes_and_terminates() {
        let mut b = EnvBuilder { entries: Vec::new(), owned: Vec::new() };
        b.set(b"A", b"1").set(b"B", b"2").set(b"A", b"3").remove(b"B");
        assert_eq!(b.get(b"A"), Some(&b"3"[..]));
        assert_eq!(b.get(b"B"), None);
        let envp = b.as_envp();
        // SAFETY: envp has one entry and a NULL terminator.
        unsafe {
            assert_eq!(CStr::from_ptr(*envp), c"A=3");
            assert!((*envp.add(1)).is_null());
        }
        // A second call does not add a second terminator.
        b.as_envp();
        assert_eq!(b.entries.len(), 2);
    }

    #[test]
    fn split() {
        assert_eq!(split_entry(b"K=v=w"), (&b"K"[..], &b"v=w"[..]));
        assert_eq!(split_entry(b"K"), (&b"K"[..], &b""[..]));
        assert_eq!(split_entry(b"=x"), (&b""[..], &b"x"[..]));
    }

    #[test]
    fn keys_are_compared_in_place() {
        let key = |entry: &CStr, name: &[u8]| {
            // SAFETY: `entry` is a C string literal.
            Key::new(name).and_then(|name| unsafe { after_key(entry.as_ptr(), name) })
        };
        assert_eq!(key(c"TF_GPU_COUNT=8", b"TF_GPU_COUNT"), Some(b'='));
        assert_eq!(key(c"TF_GPU_COUNT=", b"TF_GPU_COUNT"), Some(b'='));
        // An entry without `=` has the whole entry as its key.
        assert_eq!(key(c"TF_GPU_COUNT", b"TF_GPU_COUNT"), Some(0));
        // A longer key, a shorter one, another one.
        assert_eq!(key(c"TF_GPU_COUNTS=8", b"TF_GPU_COUNT"), None);
        assert_eq!(key(c"TF_GPU=8", b"TF_GPU_COUNT"), None);
        assert_eq!(key(c"PATH=/bin", b"TF_GPU_COUNT"), None);
        assert_eq!(key(c"", b"A"), None);
        // An empty name is the key of `=x`; a name with a NUL never matches
        // (it would otherwise compare past the terminator).
        assert_eq!(key(c"=x", b""), Some(b'='));
        assert_eq!(key(c"A", b"A\0B"), None);
    }

    #[test]
    fn builder_removes_by_whole_key() {
        let mut b = EnvBuilder { entries: Vec::new(), owned: Vec::new() };
        b.set(b"KEY", b"1").set(b"KEYS", b"2").set(b"KE", b"3").remove(b"KEY");
        assert_eq!((b.get(b"KEY"), b.get(b"KEYS"), b.get(b"KE")), (None, Some(&b"2"[..]), Some(&b"3"[..])));
    }

    #[test]
    fn reads_the_process_environment() {
        // PATH is set for every cargo test run.
        let path = std::env::var_os("PATH").unwrap();
        assert_eq!(var(b"PATH"), Some(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())));
        assert_eq!(var(b"SURELY_NOT_SET_ANYWHERE_4242"), None);
    }
}
