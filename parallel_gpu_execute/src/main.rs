//! Entry point. A C `main` instead of Rust's: the Rust runtime would set
//! SIGPIPE to "ignore" before `main`, and the test would inherit that through
//! `execve`; it would also cost start-up work on every test. Everything else
//! is in the library (`run`).
//!
//! `no_std`: std's panic machinery (its default hook prints a backtrace)
//! links gimli, addr2line, miniz_oxide and rustc-demangle into every static
//! binary that has std, `panic = "abort"` or not: about 250 KB here, which
//! took the static glibc build over 1.0 MB. Without std, the panic handler
//! below, the allocator (`heap.rs`) and the unwinder stand-ins are all
//! that std provided and this binary needs.

#![no_std]
#![no_main]

extern crate alloc;

use core::ffi::{c_char, c_int};
use parallel_gpu_execute::sys::heap;
use wrapper_common::argv::Argv;
use wrapper_common::diag;

#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: these are the C runtime's own argc/argv.
    let argv = unsafe { Argv::from_main(argc, argv) };
    match parallel_gpu_execute::run(argv) {
        Ok(_) => 0,
        Err(e) => {
            diag::report(parallel_gpu_execute::TOOL, format_args!("{e}"));
            c_int::from(e.exit_code())
        }
    }
}

/// A bug: one line (where, and what), then abort (SIGABRT, 134 in a shell),
/// as `panic = "abort"` did with std.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    match info.location() {
        Some(at) => diag::report(
            parallel_gpu_execute::TOOL,
            format_args!("internal error: panicked at {}:{}: {}", at.file(), at.line(), info.message()),
        ),
        None => diag::report(parallel_gpu_execute::TOOL, format_args!("internal error: panicked: {}", info.message())),
    }
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

/// The static musl build allocates from a bump arena in `.bss`, then from
/// `malloc`: musl sets its heap up at the first `malloc`, at a cost of five
/// system calls and five page faults (`heap.rs`). glibc's static start-up
/// has set its heap up already, and there the arena measured no faster, so
/// glibc builds call `malloc` for every block; so does the dynamically
/// linked build that `tests/alloc_free.rs` runs with a counting `malloc`
/// preloaded, which therefore sees every allocation.
#[cfg(all(target_env = "musl", target_feature = "crt-static"))]
#[global_allocator]
static ALLOCATOR: heap::Arena<heap::Malloc, { heap::ARENA_BYTES }> = heap::Arena::new(heap::Malloc);
#[cfg(not(all(target_env = "musl", target_feature = "crt-static")))]
#[global_allocator]
static ALLOCATOR: heap::Malloc = heap::Malloc;

/// The prebuilt `core` and `alloc` carry unwind tables that name Rust's
/// personality routine; with `panic = "abort"` nothing unwinds, so it is
/// never called, but the linker needs the symbol.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

/// rustup's prebuilt `alloc` is compiled with `panic = "unwind"`, so some of
/// its functions (`fmt::format`, `dealloc` inlined into a drop) keep landing
/// pads that end in a call to `_Unwind_Resume`, and the linker needs the
/// symbol. Nothing can start an unwind here: the panic handler aborts, and
/// neither the C library's code (one thread: no `pthread_cancel`) nor ours
/// raises an exception, so no landing pad is ever entered and this is never
/// called. On musl, std would link the target's libunwind.a for this one
/// symbol (74 KB more here); on a static glibc, libgcc's unwinder, about
/// 20 KB (docs/design.md, "Static linking"). Defined here, in the program's
/// own object, which the linker reads before any archive. If it were ever
/// reached, it would end the process as the panic handler does.
#[cfg(any(target_env = "musl", target_feature = "crt-static"))]
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Resume(_exception: *mut core::ffi::c_void) -> ! {
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

/// libgcc's C personality routine, which a static glibc's stdio names
/// (`fileops.o`) for its clean-ups while a thread is cancelled: with
/// `_Unwind_Resume` above, the last name that linked libgcc's unwinder.
/// Never called here, for nothing unwinds; it aborts if it were. It also
/// lets GNU ld, which reads each archive once, link the static build
/// whatever the order of `libgcc_eh` and `libc`.
#[cfg(all(target_env = "gnu", target_feature = "crt-static"))]
#[unsafe(no_mangle)]
extern "C" fn __gcc_personality_v0(
    _version: c_int,
    _actions: c_int,
    _class: u64,
    _exception: *mut core::ffi::c_void,
    _context: *mut core::ffi::c_void,
) -> c_int {
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

// What std would have linked. A glibc has C code that unwinds
// (`pthread_cancel` clean-ups), for which libgcc's unwinder is named (a
// static build takes nothing from it: see above); on musl, the libc crate
// leaves linking the C library itself to std.
#[cfg(target_env = "gnu")]
#[link(name = "gcc_eh", kind = "static")]
unsafe extern "C" {}
#[cfg(all(target_env = "musl", target_feature = "crt-static"))]
#[link(name = "c", kind = "static")]
unsafe extern "C" {}
#[cfg(all(target_env = "musl", not(target_feature = "crt-static")))]
#[link(name = "c")]
unsafe extern "C" {}
