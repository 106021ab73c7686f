//! Every executable the benchmark times starts from the same page-cache
//! state.
//!
//! How a file was written decides the page-cache folios its pages sit in
//! (a linker that writes through `mmap`, gcc's small `write`s, `cp`'s
//! `copy_file_range`), and with them how many page faults an `execve` of
//! it takes and how much each costs. Measured on the AMD EPYC VM (6.18,
//! ext4): byte-identical copies of the C floor cost 0.92x to 1.00x of one
//! another, depending only on how each copy had been written. So before
//! timing, each executable is written back (`fdatasync`) and dropped from
//! the page cache (`POSIX_FADV_DONTNEED`); its first exec reads it back
//! through readahead, as a host reads a binary fetched earlier. After that,
//! the copies measured within 0.98x to 1.00x of one another.
//!
//! The state readahead leaves differs from one drop to the next, though:
//! over six drops in one interleaved run, one binary's ratio to the floor
//! ranged from 1.09x to 1.12x. So the drop is repeated before each tenth of
//! a group's rounds (`measure::run_group`), and each median spans ten
//! page-cache states.

use super::*;

/// Writes back and drops each file's cached pages; returns the files whose
/// pages stayed resident (a file system that cannot drop them, such as
/// tmpfs, or a file another process has mapped).
pub(crate) fn settle(files: &[PathBuf]) -> Vec<PathBuf> {
    files.iter().filter(|f| !drop_cached(f)).cloned().collect()
}

/// Whether `file` has no page in the page cache after the drop.
fn drop_cached(file: &Path) -> bool {
    let Ok(f) = fs::File::open(file) else { return false };
    let fd = f.as_raw_fd();
    // Dirty pages cannot be dropped: write them back first.
    if f.sync_data().is_err() {
        return false;
    }
    // SAFETY: a plain system call on a descriptor this function owns.
    if unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) } != 0 {
        return false;
    }
    resident_pages(&f) == Some(0)
}

/// How many of `f`'s pages are in the page cache (`mincore` over a
/// read-only mapping, which itself faults nothing in).
fn resident_pages(f: &fs::File) -> Option<usize> {
    let len = usize::try_from(f.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return Some(0);
    }
    // SAFETY: a shared read-only mapping of a file this function holds
    // open; it is only passed to mincore and unmapped before returning.
    let map = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0) };
    if map == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|&p| p > 0)?;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `map` is a mapping of `len` bytes made above; `vec` has one
    // byte per page of it, as mincore(2) needs.
    let ok = unsafe { libc::mincore(map, len, vec.as_mut_ptr()) } == 0;
    // SAFETY: unmaps exactly the mapping made above.
    unsafe { libc::munmap(map, len) };
    ok.then(|| vec.iter().filter(|&&b| b & 1 == 1).count())
}
