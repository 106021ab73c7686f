//! Numbers another user cannot guess, for the names of temporary files in
//! directories every user may write (a sticky directory: a name another
//! user took first cannot be removed).

/// 64 bits from `getrandom(2)`; the boot clock's nanoseconds where the
/// kernel has none to give (before its pool is ready, or seccomp).
pub fn unguessable() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into `bytes`.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), libc::GRND_NONBLOCK) };
    if n == 8 { u64::from_ne_bytes(bytes) } else { crate::sys::clock::since_boot().as_nanos() as u64 }
}
