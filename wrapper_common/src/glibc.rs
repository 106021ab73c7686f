//! Two functions of a static glibc, given here in place of glibc's own, so
//! that the parts of glibc they drag into every static binary stay out:
//! about 75 KB of each binary, none of it run (docs/design.md, "Static
//! linking"). Static glibc builds only; musl has neither problem.
//!
//! - `__dcgettext`: message translation, which glibc's `strerror` (and
//!   `printf`'s `%m`) call. It links the message-catalogue loader, its
//!   plural parser, the character-set converters and, for them, `dlopen`.
//!   These programs never call `setlocale`, so they run in the C locale,
//!   where glibc's own returns the message as given: so does this one.
//! - `__assert_fail`: named by glibc's start-up code; glibc's formats its
//!   message with `fprintf` through gettext. This one writes the same line
//!   (`file:line: Assertion `...' failed.`) and aborts, as glibc's does.

use core::ffi::{CStr, c_char, c_int, c_uint};

// SAFETY: this replaces glibc's `char *__dcgettext(const char *, const char
// *, int)` with the same C signature, in static glibc builds only (the
// module's cfg), where the static link takes the first definition and no
// other object of these programs defines the name; it returns its argument,
// as glibc's does in the C locale.
#[unsafe(no_mangle)]
extern "C" fn __dcgettext(_domain: *const c_char, message: *const c_char, _category: c_int) -> *const c_char {
    message
}

// SAFETY: the same for glibc's `void __assert_fail(const char *, const char
// *, unsigned int, const char *)`: the same C signature, static glibc builds
// only, no other definition among these programs' objects.
#[unsafe(no_mangle)]
extern "C" fn __assert_fail(
    assertion: *const c_char,
    file: *const c_char,
    line: c_uint,
    _function: *const c_char,
) -> ! {
    let text = |p: *const c_char| {
        // SAFETY: glibc passes NUL-terminated strings (or NULL).
        if p.is_null() { &b"?"[..] } else { unsafe { CStr::from_ptr(p) }.to_bytes() }
    };
    let mut digits = [0u8; 20];
    let line = crate::numbers::format_u64(u64::from(line), &mut digits);
    for part in [text(file), b":", line, b": Assertion `", text(assertion), b"' failed.\n"] {
        crate::diag::write_stderr(part);
    }
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

#[cfg(test)]
mod tests {
    #[test]
    fn messages_are_given_back_as_they_are_and_strerror_still_speaks() {
        let message = c"No such file or directory";
        assert_eq!(super::__dcgettext(c"libc".as_ptr(), message.as_ptr(), 5), message.as_ptr());
        // glibc's strerror, through this translation: the C locale's text.
        let text = std::format!("{}", crate::diag::Os(rustix::io::Errno::NOENT));
        assert_eq!(text, "No such file or directory (os error 2)");
    }
}
