//! Two functions of libgcc's unwinder, given here in place of libgcc's
//! own, so that the unwinder stays out of this program's static glibc
//! build: about 12 KB, none of it ever run (docs/design.md, "Static
//! linking"). This program alone: it is `no_std`, and nothing in it
//! unwinds (`panic = "abort"`, one thread, no `pthread_cancel`); the two
//! others link Rust's `std`, whose backtraces need the real unwinder.

use core::ffi::{c_int, c_void};

// SAFETY: the same for libgcc's `void _Unwind_Resume(struct
// _Unwind_Exception *)`, which the prebuilt `core` and `alloc` name from
// their landing pads: these programs never unwind (`panic = "abort"`, one
// thread, no `pthread_cancel`), so it is never called; if it were, an
// abort is what `panic = "abort"` means. The same C signature, static
// glibc builds only, no other definition among these programs' objects.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Resume(_exception: *mut c_void) -> ! {
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

// SAFETY: the same for libgcc's C personality routine, `_Unwind_Reason_Code
// __gcc_personality_v0(int, _Unwind_Action, _Unwind_Exception_Class, struct
// _Unwind_Exception *, struct _Unwind_Context *)`, which glibc's stdio names
// for its cleanups during a thread's cancellation: never called here, for
// nothing unwinds; it aborts if it were. With `_Unwind_Resume` it keeps
// libgcc's unwinder out (about 12 KB), and lets GNU ld link the static
// build whatever the order of the archives (docs/design.md, "Static linking").
#[unsafe(no_mangle)]
extern "C" fn __gcc_personality_v0(
    _version: c_int,
    _actions: c_int,
    _class: u64,
    _exception: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}
