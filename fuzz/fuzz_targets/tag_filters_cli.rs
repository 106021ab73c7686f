//! tag_filters' command line (the table lookup and cli::parse, then the
//! whole run into a buffer)
//! over arguments made of the input split at NUL bytes (any bytes, not only
//! UTF-8): never a panic, output in whole lines, errors on one line with
//! exit code 2.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use tag_filters::cli::{Request, parse};

fuzz_target!(|data: &[u8]| {
    let args: Vec<OsString> = if data.is_empty() {
        Vec::new()
    } else {
        data.split(|&b| b == 0).map(|w| std::ffi::OsStr::from_bytes(w).into()).collect()
    };
    let table = tag_filters::load_table(None, &args);
    let parsed = table.as_ref().map_err(|e| e.to_string()).and_then(|t| parse(&args, t).map_err(|e| e.to_string()));
    let mut out = Vec::new();
    let run = tag_filters::run(None, &args, &mut out);
    match (parsed, run) {
        (Ok(request), Ok(code)) => {
            // Empty only for --format=bazelrc of a table without configs.
            assert!(out.is_empty() || out.ends_with(b"\n"), "output not in whole lines: {out:?}");
            let explain = matches!(request, Request::Explain { .. });
            assert!(code == 0 || explain && code == 1);
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b.to_string());
            let message = b.to_string();
            assert!(!message.contains('\n') && !message.contains('\r'), "{message:?}");
            assert_eq!(b.exit_code(), 2);
            assert!(out.is_empty());
        }
        (p, r) => panic!("parse and run disagree: {p:?} vs {r:?}"),
    }
});
