//! Strict decimal parsing and formatting without allocation.
//!
//! Environment variables such as `TF_GPU_COUNT` come from CI configuration
//! that people type by hand; anything that is not plainly a number in range is
//! reported rather than guessed at, so these parsers accept ASCII digits only
//! (no sign, no spaces, no `0x`).

/// Parses ASCII digits into a `u64`; `None` on anything else or on overflow.
/// Out of line: inlined, it was copied into some twenty callers.
#[inline(never)]
pub fn parse_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// Parses a number of seconds, `S` or `S.F` (up to millisecond precision;
/// further digits are checked but ignored, but that a time above zero is
/// never read as zero: `0.0009` is 1 ms), into milliseconds.
pub fn parse_seconds_as_millis(bytes: &[u8]) -> Option<u64> {
    let (whole, frac) = match bytes.iter().position(|&b| b == b'.') {
        Some(dot) => (&bytes[..dot], Some(&bytes[dot + 1..])),
        None => (bytes, None),
    };
    let mut millis = parse_u64(whole)?.checked_mul(1000)?;
    if let Some(frac) = frac {
        if frac.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut scale = 100;
        for &d in frac.iter().take(3) {
            // Checked: `18446744073709551.999` is past u64::MAX milliseconds.
            millis = millis.checked_add(u64::from(d - b'0') * scale)?;
            scale /= 10;
        }
        if millis == 0 && frac.iter().any(|&d| d != b'0') {
            millis = 1;
        }
    }
    Some(millis)
}

/// Writes `n` in decimal into `buf` and returns the digits.
pub fn format_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::prelude::rust_2024::*;

    #[test]
    fn parses_plain_digits_only() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"0042"), Some(42));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        for bad in [&b""[..], b"18446744073709551616", b"-1", b"+1", b" 1", b"1 ", b"0x10", b"1e3", b"\xff"] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds_as_millis(b"0"), Some(0));
        assert_eq!(parse_seconds_as_millis(b"600"), Some(600_000));
        assert_eq!(parse_seconds_as_millis(b"1.5"), Some(1500));
        assert_eq!(parse_seconds_as_millis(b"0.25"), Some(250));
        assert_eq!(parse_seconds_as_millis(b"2.0009"), Some(2000));
        assert_eq!(parse_seconds_as_millis(b"0.0009"), Some(1), "above zero is never zero");
        assert_eq!(parse_seconds_as_millis(b"0.0000"), Some(0));
        for bad in [&b""[..], b".5", b"1.", b"1.x", b"-1", b"1,5", b"99999999999999999999"] {
            assert_eq!(parse_seconds_as_millis(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn seconds_near_the_top_of_the_range_do_not_wrap() {
        // Found by the `numbers` fuzz target: the fraction was added without
        // a check, so this wrapped to a few hundred milliseconds (release)
        // or panicked (debug).
        assert_eq!(parse_seconds_as_millis(b"18446744073709551.999"), None);
        assert_eq!(parse_seconds_as_millis(b"18446744073709551.630"), None);
        assert_eq!(parse_seconds_as_millis(b"18446744073709551.616"), None);
        assert_eq!(parse_seconds_as_millis(b"18446744073709551.615"), Some(u64::MAX));
        assert_eq!(parse_seconds_as_millis(b"18446744073709551.6149"), Some(u64::MAX - 1));
        assert_eq!(parse_seconds_as_millis(b"18446744073709552"), None);
    }

    #[test]
    fn formats() {
        let mut b = [0; 20];
        assert_eq!(format_u64(0, &mut b), b"0");
        assert_eq!(format_u64(1234, &mut b), b"1234");
        assert_eq!(format_u64(u64::MAX, &mut b), b"18446744073709551615");
    }
}
