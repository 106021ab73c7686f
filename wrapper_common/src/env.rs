//! The environment: read in place, and rebuilt (with allocation) only when a
//! wrapper has something to change.
//!
//! Reading goes straight to `environ`, so a lookup costs a scan of the
//! pointer array and nothing else. Nothing in these binaries calls `setenv`,
//! so the strings `environ` points to stay valid until `execve`.

use std::ffi::{CStr, CString, c_char};

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

/// Every `KEY=value` entry of the environment.
pub fn entries() -> impl Iterator<Item = &'static CStr> {
    let mut p = environ_ptr();
    std::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: `environ` is a NULL-terminated array of valid C strings;
        // `p` only advances while the current entry is non-NULL.
        unsafe {
            let entry = *p;
            if entry.is_null() {
                p = std::ptr::null();
                return None;
            }
            p = p.add(1);
            Some(CStr::from_ptr(entry))
        }
    })
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
    entries().find_map(|e| {
        let bytes = e.to_bytes_with_nul();
        let value_start = name.len() + 1;
        let matches = bytes.len() > value_start && bytes.starts_with(name) && bytes[name.len()] == b'=';
        matches.then(|| CStr::from_bytes_with_nul(&bytes[value_start..]).unwrap_or(c""))
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
        EnvBuilder { entries: entries().map(CStr::as_ptr).collect(), owned: Vec::new() }
    }

    /// Removes every entry for `key`.
    pub fn remove(&mut self, key: &[u8]) -> &mut Self {
        self.entries.retain(|&p| {
            if p.is_null() {
                // The terminator `as_envp` added; it is added again there.
                return false;
            }
            // SAFETY: every pointer in `entries` is a valid C string, either
            // from `environ` or from `owned`, which outlives `entries`.
            let e = unsafe { CStr::from_ptr(p) };
            split_entry(e.to_bytes()).0 != key
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
            self.entries.push(std::ptr::null());
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
    fn reads_the_process_environment() {
        // PATH is set for every cargo test run.
        let path = std::env::var_os("PATH").unwrap();
        assert_eq!(var(b"PATH"), Some(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())));
        assert_eq!(var(b"SURELY_NOT_SET_ANYWHERE_4242"), None);
    }
}
