//! The allocators: the C library's `malloc` ([`Malloc`]), and in the static
//! musl build a bump arena in `.bss` in front of it ([`Arena`]); `main.rs`
//! picks one.
//!
//! Why the arena: a GPU run allocates about 1.5 KiB before the exec (the
//! pool, the test's path, the environment, two lines of text), and the
//! process is gone a millisecond later. The first `malloc` of a static musl
//! binary sets its heap up on the spot: two `brk`s and three `mmap`s
//! (one of them a guard page), and five page faults (two pages read, then written). A bump arena
//! in `.bss` costs one page fault for the page it touches and no system
//! call. Measured: README, "Where the time goes".
//!
//! Freeing gives memory back only for the most recent block (the common
//! push-then-drop pattern); anything else freed in the arena stays used.
//! The arena is a fixed size, so that leak is bounded by it: once it is
//! full, every further block comes from the fallback (`malloc`), which
//! frees normally, so a wrapper that waits for hours grows no more than
//! one that does not. Reallocating the most recent block grows or shrinks
//! it in place; any other block is moved (into the arena while it has
//! room, else to the fallback). Blocks of the fallback stay its own.
//!
//! The top of the arena is one atomic word changed by compare-and-swap, so
//! the allocator is sound from any thread; the wrapper has only one.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Bytes of the static musl build's arena. The largest GPU path
/// before the exec (the KFD count on 8 GPUs, a 4-GPU block) uses about
/// 1.5 KiB of it; `--list` and `--status` on large hosts go on to `malloc`.
pub const ARENA_BYTES: usize = 32 * 1024;

/// The C library's allocator, as std uses it.
pub struct Malloc;

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
            unsafe { move_block(self, ptr, layout, new_size) }
        }
    }
}

/// A new block of `new_size` from `to`, the old bytes copied, the old block
/// freed through `to` (GlobalAlloc's default `realloc`).
///
/// # Safety
/// `ptr` is a live block of `to` with `layout`; `new_size` is non-zero and,
/// rounded up to the alignment, does not overflow `isize`.
unsafe fn move_block<A: GlobalAlloc>(to: &A, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: the caller's contract is `realloc`'s.
    unsafe {
        let new = to.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
        if !new.is_null() {
            core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            to.dealloc(ptr, layout);
        }
        new
    }
}

/// The arena's bytes, aligned for any ordinary type.
#[repr(C, align(64))]
struct Bytes<const N: usize>(UnsafeCell<[u8; N]>);

/// A bump arena of `N` bytes in front of `F` (see the module comment).
/// `top` comes first, on the page of the first blocks: the first
/// allocation then faults in one page of `.bss`, not two.
#[repr(C)]
pub struct Arena<F, const N: usize> {
    /// Bytes of the arena handed out (or lost to alignment) so far.
    top: AtomicUsize,
    bytes: Bytes<N>,
    fallback: F,
}

// SAFETY: the bytes are only reached through blocks handed out by `alloc`,
// and the ranges of live blocks never overlap: `top` moves by
// compare-and-swap only, so each range is given to one caller.
unsafe impl<F: Sync, const N: usize> Sync for Arena<F, N> {}

impl<F, const N: usize> Arena<F, N> {
    /// An empty arena; all zero but `fallback`, so a `static` one of a
    /// zero-sized fallback lies in `.bss` and costs no file bytes.
    pub const fn new(fallback: F) -> Self {
        Arena { top: AtomicUsize::new(0), bytes: Bytes(UnsafeCell::new([0; N])), fallback }
    }

    /// Bytes of the arena in use (or lost) now; the rest is still free.
    pub fn used(&self) -> usize {
        self.top.load(Relaxed)
    }

    fn base(&self) -> *mut u8 {
        self.bytes.0.get().cast()
    }

    /// Where `ptr` is in the arena, if it is there.
    fn offset_of(&self, ptr: *mut u8) -> Option<usize> {
        let offset = ptr.addr().wrapping_sub(self.base().addr());
        (offset < N).then_some(offset)
    }

    /// Claims `size` bytes aligned to `align`; their offset, or None when
    /// the arena has no room.
    fn claim(&self, size: usize, align: usize) -> Option<usize> {
        let base = self.base().addr();
        let mut top = self.top.load(Relaxed);
        loop {
            let start = base.checked_add(top)?.checked_next_multiple_of(align)? - base;
            let end = start.checked_add(size).filter(|&end| end <= N)?;
            match self.top.compare_exchange_weak(top, end, Relaxed, Relaxed) {
                Ok(_) => return Some(start),
                Err(now) => top = now,
            }
        }
    }

    /// Moves the top from `from` to `to` if no block was claimed since.
    fn retop(&self, from: usize, to: usize) -> bool {
        self.top.compare_exchange(from, to, Relaxed, Relaxed).is_ok()
    }
}

// SAFETY: blocks from the arena are `layout.size()` bytes at an offset
// aligned to `layout.align()` (`claim`), inside the arena's `N` bytes, and
// never overlap a live block (see `Sync`); a block's bytes are given back
// only when it is the most recent one and its owner frees or resizes it.
// Blocks from `fallback` are passed back to it alone.
unsafe impl<F: GlobalAlloc, const N: usize> GlobalAlloc for Arena<F, N> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.claim(layout.size(), layout.align()) {
            // SAFETY: `offset + size <= N`: inside the arena's bytes.
            Some(offset) => unsafe { self.base().add(offset) },
            // SAFETY: the caller's contract is passed on.
            None => unsafe { self.fallback.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match self.offset_of(ptr) {
            // The most recent block goes back; any other stays used.
            Some(offset) => {
                self.retop(offset + layout.size(), offset);
            }
            // SAFETY: not in the arena, so the fallback's block.
            None => unsafe { self.fallback.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(offset) = self.offset_of(ptr) else {
            // SAFETY: not in the arena, so the fallback's block.
            return unsafe { self.fallback.realloc(ptr, layout, new_size) };
        };
        let end = offset + layout.size();
        if offset.checked_add(new_size).is_some_and(|new_end| new_end <= N && self.retop(end, new_end)) {
            return ptr;
        }
        // SAFETY: `ptr` is this arena's block with `layout`; `realloc`'s
        // contract bounds `new_size`.
        unsafe { move_block(self, ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;
    use std::vec::Vec;

    /// An arena under test, through calls that keep `GlobalAlloc`'s
    /// contract: every block is used and freed with the layout it was
    /// allocated with, and only while it is live.
    struct Under<'a, const N: usize>(&'a Arena<System, N>);

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    impl<const N: usize> Under<'_, N> {
        fn alloc(&self, size: usize, align: usize) -> *mut u8 {
            // SAFETY: the sizes the tests ask for are non-zero.
            let ptr = unsafe { self.0.alloc(layout(size, align)) };
            assert!(!ptr.is_null(), "{size} bytes: out of memory");
            ptr
        }
        fn free(&self, ptr: *mut u8, size: usize, align: usize) {
            // SAFETY: the tests free live blocks with their own layout.
            unsafe { self.0.dealloc(ptr, layout(size, align)) }
        }
        fn realloc(&self, ptr: *mut u8, size: usize, new_size: usize) -> *mut u8 {
            // SAFETY: a live block of `size` bytes aligned to 8; `new_size`
            // is non-zero.
            let new = unsafe { self.0.realloc(ptr, layout(size, 8), new_size) };
            assert!(!new.is_null(), "{new_size} bytes: out of memory");
            new
        }
        fn inside(&self, ptr: *mut u8, size: usize) -> bool {
            self.0.offset_of(ptr).is_some_and(|offset| offset + size <= N)
        }
    }

    fn fill(ptr: *mut u8, bytes: &[u8]) {
        // SAFETY: the tests fill live blocks of at least `bytes.len()` bytes.
        unsafe { ptr.copy_from_nonoverlapping(bytes.as_ptr(), bytes.len()) }
    }

    fn read(ptr: *const u8, len: usize) -> Vec<u8> {
        // SAFETY: the tests read live blocks of at least `len` bytes that
        // they filled.
        unsafe { core::slice::from_raw_parts(ptr, len) }.to_vec()
    }

    #[test]
    fn blocks_are_aligned_disjoint_and_inside_until_it_is_full() {
        let arena: Arena<System, 256> = Arena::new(System);
        let a = Under(&arena);
        let mut blocks = Vec::new();
        for (size, align) in [(1, 1), (24, 8), (3, 1), (16, 16), (40, 64), (7, 2)] {
            let ptr = a.alloc(size, align);
            assert_eq!(ptr.addr() % align, 0, "{size} bytes aligned to {align}");
            assert!(a.inside(ptr, size), "{size} bytes still fit");
            fill(ptr, &vec![size as u8; size]);
            blocks.push((ptr, size));
        }
        for &(ptr, size) in &blocks {
            assert_eq!(read(ptr, size), vec![size as u8; size], "a block was overwritten by another");
        }
        // No room for 200 more: the fallback's block, freed by the fallback.
        let big = a.alloc(200, 8);
        assert!(arena.offset_of(big).is_none());
        let used = arena.used();
        a.free(big, 200, 8);
        assert_eq!(arena.used(), used, "freeing a fallback block leaves the arena alone");
    }

    #[test]
    fn freeing_the_latest_block_gives_it_back_and_others_stay_used() {
        let arena: Arena<System, 128> = Arena::new(System);
        let a = Under(&arena);
        let first = a.alloc(32, 8);
        let second = a.alloc(32, 8);
        a.free(first, 32, 8);
        assert_eq!(arena.used(), 64, "an older block is not given back");
        a.free(second, 32, 8);
        assert_eq!(arena.used(), 32, "the latest block is");
        assert_eq!(a.alloc(32, 8), second, "and is handed out again");
    }

    #[test]
    fn reallocating_grows_the_latest_block_in_place_and_moves_the_others() {
        let arena: Arena<System, 256> = Arena::new(System);
        let a = Under(&arena);
        let first = a.alloc(8, 8);
        fill(first, b"abcdefgh");
        assert_eq!(a.realloc(first, 8, 64), first, "the latest block grows in place");
        assert_eq!(arena.used(), 64);
        assert_eq!((a.realloc(first, 64, 16), arena.used()), (first, 16), "and shrinks in place");

        let second = a.alloc(8, 8);
        let moved = a.realloc(first, 16, 32);
        assert!(moved != first && a.inside(moved, 32), "an older block moves within the arena");
        assert_eq!(read(moved, 8), b"abcdefgh");

        let out = a.realloc(moved, 32, 1000);
        assert!(arena.offset_of(out).is_none(), "a block too large for the arena moves to the fallback");
        assert_eq!(read(out, 8), b"abcdefgh");
        let out = a.realloc(out, 1000, 4000);
        assert_eq!(read(out, 8), b"abcdefgh", "the fallback reallocates its own");
        a.free(out, 4000, 8);
        a.free(second, 8, 8);
    }

    #[test]
    fn a_full_arena_serves_everything_from_the_fallback() {
        let arena: Arena<System, 64> = Arena::new(System);
        let a = Under(&arena);
        assert!(a.inside(a.alloc(64, 8), 64));
        for _ in 0..100 {
            let p = a.alloc(16, 8);
            assert!(arena.offset_of(p).is_none());
            a.free(p, 16, 8);
        }
        assert_eq!(arena.used(), 64);
        // An alignment that cannot be met inside falls back too.
        let arena: Arena<System, 64> = Arena::new(System);
        let a = Under(&arena);
        let p = a.alloc(8, 4096);
        assert_eq!(p.addr() % 4096, 0);
        a.free(p, 8, 4096);
    }

    #[test]
    fn threads_never_share_a_block() {
        static ARENA: Arena<System, 65536> = Arena::new(System);
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                std::thread::spawn(move || {
                    let a = Under(&ARENA);
                    let mine: Vec<*mut u8> = (0..500)
                        .map(|_| {
                            let p = a.alloc(24, 8);
                            fill(p, &[t; 24]);
                            p
                        })
                        .collect();
                    for p in mine {
                        assert_eq!(read(p, 24), [t; 24], "thread {t}'s block was written by another");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
