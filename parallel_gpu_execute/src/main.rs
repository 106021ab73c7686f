//! Entry point. A C `main` instead of Rust's: the Rust runtime would set
//! SIGPIPE to "ignore" before `main`, and the test would inherit that through
//! `execve`; it would also cost start-up work on every test. Everything else
//! is in the library (`run`).
//!
//! `no_std`: std's panic machinery (its default hook prints a backtrace)
//! links gimli, addr2line, miniz_oxide and rustc-demangle into every static
//! binary that has std, `panic = "abort"` or not: about 250 KB here, which
//! took the static glibc build over 1.0 MB. Without std, the panic handler
//! below, the allocator (libc's `malloc`) and the unwinder stand-ins are all
//! that std provided and this binary needs.

#![no_std]
#![no_main]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_char, c_int, c_void};
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

/// The C library's allocator, as std uses it.
struct Malloc;

// SAFETY: malloc/realloc/free return blocks aligned to at least 16 bytes
// (`max_align_t` on both targets) or NULL; larger alignments go through
// posix_memalign. Each block is freed once, by `dealloc`.
unsafe impl GlobalAlloc for Malloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= 16 && layout.align() <= layout.size() {
            // SAFETY: see the impl.
            unsafe { libc::malloc(layout.size()).cast() }
        } else {
            let mut out: *mut c_void = core::ptr::null_mut();
            let align = layout.align().max(core::mem::size_of::<usize>());
            // SAFETY: `align` is a power of two and a multiple of the pointer size.
            let ok = unsafe { libc::posix_memalign(&mut out, align, layout.size()) } == 0;
            if ok { out.cast() } else { core::ptr::null_mut() }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above.
        unsafe { libc::free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= 16 && layout.align() <= new_size {
            // SAFETY: `ptr` came from this allocator with an alignment that
            // malloc's blocks have; realloc keeps it.
            unsafe { libc::realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: as GlobalAlloc's default: a new block, the old bytes
            // copied, the old block freed.
            unsafe {
                let new = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                if !new.is_null() {
                    core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

#[global_allocator]
static ALLOCATOR: Malloc = Malloc;

/// The prebuilt `core` and `alloc` carry unwind tables that name Rust's
/// personality routine; with `panic = "abort"` nothing unwinds, so it is
/// never called, but the linker needs the symbol.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

// What std would have linked. A static glibc has C code that unwinds
// (`pthread_cancel` clean-ups) and needs libgcc's unwinder; on musl, the libc
// crate leaves linking the C library itself to std.
#[cfg(target_env = "gnu")]
#[link(name = "gcc_eh", kind = "static")]
unsafe extern "C" {}
#[cfg(all(target_env = "musl", target_feature = "crt-static"))]
#[link(name = "c", kind = "static")]
unsafe extern "C" {}
#[cfg(all(target_env = "musl", not(target_feature = "crt-static")))]
#[link(name = "c")]
unsafe extern "C" {}
