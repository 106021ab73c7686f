//! A small JSON writer for `--list=json` and `--status=json`: objects,
//! arrays, strings (escaped; bytes that are not UTF-8 become U+FFFD),
//! numbers, booleans and null, written into a `String`.

use crate::prelude::*;
use core::fmt::Write as _;

/// A JSON string literal of `bytes`.
pub fn string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Control and format characters (a bidirectional override
            // would reorder a terminal's line): as UTF-16 escapes.
            c if wrapper_common::diag::is_unshown(c) => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A string, or `null`.
pub fn opt_string(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(|| "null".to_string(), string)
}

/// A number, or `null`.
pub fn opt_number(n: Option<u64>) -> String {
    n.map_or_else(|| "null".to_string(), |n| n.to_string())
}

/// `{"k": v, ...}` from already-encoded values, in order.
pub fn object(fields: &[(&str, String)]) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: {value}", string(key.as_bytes()));
    }
    out.push('}');
    out
}

/// `[v, ...]` from already-encoded values.
pub fn array(values: &[String]) -> String {
    format!("[{}]", values.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(string(b"a\"b\\c\nd\x01\xff"), "\"a\\\"b\\\\c\\nd\\u0001\u{fffd}\"");
        assert_eq!(object(&[("a", "1".into()), ("b", opt_string(None))]), "{\"a\": 1, \"b\": null}");
        assert_eq!(array(&[string(b"x"), opt_number(Some(3))]), "[\"x\", 3]");
        assert_eq!(array(&[]), "[]");
    }
}
