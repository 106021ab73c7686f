//! Time without std (this crate is `no_std`): the monotonic clock for
//! deadlines and waits, the wall clock for when processes started.
//!
//! The same few operations as std's `Instant` and `SystemTime`, on the C
//! library's `clock_gettime`, as std's are: glibc and musl answer it from the
//! vDSO they found at start-up. (rustix's own `clock_gettime` would first
//! look the vDSO up itself, with one `prctl(PR_GET_AUXV)` per process.)

use core::ops::{Add, Sub};
use core::time::Duration;
use rustix::time::Timespec;

fn read(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`; with a clock that
    // always exists it cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// A point on the monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(Duration);

impl Instant {
    pub fn now() -> Instant {
        Instant(read(libc::CLOCK_MONOTONIC))
    }

    /// How long ago `self` was (zero if it is in the future).
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// Its `CLOCK_MONOTONIC` nanoseconds.
    pub fn as_nanos(&self) -> u64 {
        u64::try_from(self.0.as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates rather than overflows (a wait limit is at most 30 days).
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d))
    }
}

impl Sub for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// A point on the wall clock, as time since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SystemTime(Duration);

/// 1970-01-01T00:00:00Z.
pub const UNIX_EPOCH: SystemTime = SystemTime(Duration::ZERO);

impl SystemTime {
    pub fn now() -> SystemTime {
        SystemTime(read(libc::CLOCK_REALTIME))
    }

    /// `self - earlier`, or `None` when `earlier` is later.
    pub fn duration_since(&self, earlier: SystemTime) -> Option<Duration> {
        self.0.checked_sub(earlier.0)
    }

    pub fn checked_sub(&self, d: Duration) -> Option<SystemTime> {
        self.0.checked_sub(d).map(SystemTime)
    }

    pub fn checked_add(&self, d: Duration) -> Option<SystemTime> {
        self.0.checked_add(d).map(SystemTime)
    }
}

impl Add<Duration> for SystemTime {
    type Output = SystemTime;

    fn add(self, d: Duration) -> SystemTime {
        SystemTime(self.0.saturating_add(d))
    }
}

/// Time since boot, suspend included (`CLOCK_BOOTTIME`): the same for
/// every process of the host (outside time namespaces), never stepped.
/// The wait queue's tickets and beats are on it.
pub fn since_boot() -> Duration {
    read(libc::CLOCK_BOOTTIME)
}

/// The host's time since boot: [`since_boot`] less this process's time
/// namespace's `boottime` offset (`/proc/self/timens_offsets`, read once),
/// so that a waiter in a time namespace writes and judges tickets and beats
/// on the same clock as every other waiter of the host.
pub fn host_since_boot() -> Duration {
    use core::sync::atomic::{AtomicI64, Ordering};
    /// Nanoseconds; `i64::MIN`: not read yet.
    static OFFSET: AtomicI64 = AtomicI64::new(i64::MIN);
    let mut offset = OFFSET.load(Ordering::Relaxed);
    if offset == i64::MIN {
        offset = timens_boottime_offset().unwrap_or(0);
        OFFSET.store(offset, Ordering::Relaxed);
    }
    let local = since_boot();
    let off = Duration::from_nanos(offset.unsigned_abs());
    if offset >= 0 { local.saturating_sub(off) } else { local.saturating_add(off) }
}

/// The `boottime` line of `/proc/self/timens_offsets` (Linux 5.6 and
/// later; absent: no time namespace), in nanoseconds.
fn timens_boottime_offset() -> Option<i64> {
    let fd = wrapper_common::lines::open_for_reading(c"/proc/self/timens_offsets").ok()?;
    let mut buf = [0u8; 256];
    let n = rustix::io::read(&fd, &mut buf).ok()?;
    parse_boottime_offset(&buf[..n])
}

fn parse_boottime_offset(text: &[u8]) -> Option<i64> {
    let line = text.split(|&b| b == b'\n').find(|l| l.starts_with(b"boottime "))?;
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty()).skip(1);
    let (secs, nanos) = (words.next()?, words.next()?);
    let (negative, digits) = match secs {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, secs),
    };
    let secs = i64::try_from(wrapper_common::numbers::parse_u64(digits)?).ok()?;
    let nanos = i64::try_from(wrapper_common::numbers::parse_u64(nanos)?).ok()?;
    let secs = if negative { -secs } else { secs };
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Sleeps for `d`, the whole of it, as std's `thread::sleep` does: a signal
/// that interrupts the sleep (the waiting phase's interval timer) is slept
/// through.
pub fn sleep(d: Duration) {
    let mut ts = Timespec { tv_sec: d.as_secs().try_into().unwrap_or(i64::MAX), tv_nsec: d.subsec_nanos().into() };
    while let rustix::thread::NanosleepRelativeResult::Interrupted(rest) = rustix::thread::nanosleep(&ts) {
        ts = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clocks_agree_with_std() {
        let a = Instant::now();
        sleep(Duration::from_millis(20));
        let waited = a.elapsed();
        assert!(waited >= Duration::from_millis(20) && waited < Duration::from_secs(5), "{waited:?}");
        assert_eq!(a + Duration::from_secs(1) - a, Duration::from_secs(1));
        assert_eq!(a - (a + Duration::from_secs(1)), Duration::ZERO);

        let ours = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let std = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        assert!(ours.abs_diff(std) < Duration::from_secs(5), "{ours:?} vs {std:?}");
        assert!(UNIX_EPOCH.duration_since(SystemTime::now()).is_none());
    }

    #[test]
    fn a_time_namespaces_boottime_offset_is_read() {
        let text = b"monotonic 0 0\nboottime 100000 0\n";
        assert_eq!(parse_boottime_offset(text), Some(100_000_000_000_000));
        assert_eq!(parse_boottime_offset(b"monotonic 5 0\nboottime -3 500\n"), Some(-2_999_999_500));
        assert_eq!(parse_boottime_offset(b"monotonic 5 0\n"), None);
        // Outside a time namespace the host's clock is this process's.
        let (a, b) = (since_boot(), host_since_boot());
        assert!(b.abs_diff(a) < Duration::from_secs(1), "{a:?} {b:?}");
    }
}
