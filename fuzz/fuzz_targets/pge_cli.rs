//! parallel_gpu_execute's command line: the wrapper's own options
//! (cli::parse over an argv made of the input split at NUL bytes) and the
//! GPU request among the test's arguments (request::gpus_needed), each
//! against a reference; every error message stays on one line.

#![no_main]

use gpu_ci_wrappers_fuzz::{ref_parse_u64, with_argv, words};
use libfuzzer_sys::fuzz_target;
use parallel_gpu_execute::cli::{Invocation, parse};
use parallel_gpu_execute::error::Error;
use parallel_gpu_execute::slots::drain::MAX_REASON;
use parallel_gpu_execute::slots::request::gpus_needed;

/// `--drain`, `--undrain` and `--reason` as `service` in cli.rs checks them:
/// `None` when none was given.
fn ref_service(values: &[Option<Vec<u8>>; 3], other: bool, command: bool) -> Option<Parsed> {
    let [drain, undrain, reason] = values;
    let gpu = match (drain, undrain) {
        (None, None) if reason.is_some() => return Some(Parsed::Other),
        (None, None) => return None,
        (Some(_), Some(_)) => return Some(Parsed::Other),
        (Some(g), None) | (None, Some(g)) => g,
    };
    if other || command || gpu.is_empty() {
        return Some(Parsed::Other);
    }
    Some(match (drain, reason) {
        (None, None) => Parsed::Undrain(gpu.clone()),
        (None, Some(_)) | (Some(_), None) => Parsed::Other,
        (Some(_), Some(r))
            if r.iter().all(u8::is_ascii_whitespace)
                || r.iter().any(|&b| b == b'\n' || b == b'\r')
                || r.len() > MAX_REASON =>
        {
            Parsed::Other
        }
        (Some(_), Some(r)) => Parsed::Drain(gpu.clone(), r.clone()),
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    Run {
        lock_dir: Option<Vec<u8>>,
        vendor: Option<Vec<u8>>,
        wait: Option<Vec<u8>>,
        lock_names: Option<Vec<u8>>,
        profile: Option<Vec<u8>>,
        visible: Option<Vec<u8>>,
        command: usize,
    },
    List,
    Status,
    Drain(Vec<u8>, Vec<u8>),
    Undrain(Vec<u8>),
    ListWithCommand,
    Help,
    Version,
    Unknown(Vec<u8>),
    Missing(&'static str),
    Other,
}

fn reference(words: &[Vec<u8>]) -> Parsed {
    let names: [&[u8]; 6] = [b"--lock-dir", b"--vendor", b"--wait", b"--lock-names", b"--profile", b"--visible"];
    let mut values: [Option<Vec<u8>>; 6] = [None, None, None, None, None, None];
    let service_names: [&[u8]; 3] = [b"--drain", b"--undrain", b"--reason"];
    let mut service: [Option<Vec<u8>>; 3] = [None, None, None];
    let mut i = 1;
    let mut list = false;
    let mut status = false;
    'words: while i < words.len() {
        let w = &words[i][..];
        for (k, name) in service_names.iter().enumerate() {
            if w == *name {
                // A next word that is an option is a missing value.
                let Some(v) = words.get(i + 1).filter(|v| !v.starts_with(b"--")) else { return Parsed::Other };
                // Each of them once: a second one is an error.
                if service[k].replace(v.clone()).is_some() {
                    return Parsed::Other;
                }
                i += 2;
                continue 'words;
            }
            if let Some(v) = w.strip_prefix(*name).and_then(|r| r.strip_prefix(b"=")) {
                if service[k].replace(v.to_vec()).is_some() {
                    return Parsed::Other;
                }
                i += 1;
                continue 'words;
            }
        }
        if w == b"--list" {
            list = true;
            i += 1;
            continue;
        }
        if let Some(format) = w.strip_prefix(b"--list=") {
            if ![&b"text"[..], b"json", b"count", b"gfx-targets", b"bazelrc"].contains(&format) {
                return Parsed::Other;
            }
            list = true;
            i += 1;
            continue;
        }
        if w == b"--status" {
            status = true;
            i += 1;
            continue;
        }
        if let Some(format) = w.strip_prefix(b"--status=") {
            if ![&b"text"[..], b"json", b"openmetrics"].contains(&format) {
                return Parsed::Other;
            }
            status = true;
            i += 1;
            continue;
        }
        if w == b"--" {
            i += 1;
            break;
        }
        if w == b"--help" || w == b"-h" {
            return Parsed::Help;
        }
        if w == b"--version" {
            return Parsed::Version;
        }
        if !w.starts_with(b"-") || w == b"-" {
            break;
        }
        let mut matched = false;
        for (k, name) in names.iter().enumerate() {
            if w == *name {
                let Some(v) = words.get(i + 1) else {
                    return Parsed::Missing(["--lock-dir", "--vendor", "--wait", "--lock-names", "--profile", "--visible"][k]);
                };
                values[k] = Some(v.clone());
                i += 1;
                matched = true;
            } else if let Some(v) = w.strip_prefix(*name).and_then(|r| r.strip_prefix(b"=")) {
                values[k] = Some(v.to_vec());
                matched = true;
            }
        }
        if !matched {
            return Parsed::Unknown(w.to_vec());
        }
        i += 1;
    }
    if let Some(parsed) = ref_service(&service, list || status, i < words.len()) {
        return parsed;
    }
    if list || status {
        return match (i < words.len(), list, status) {
            (true, _, _) => Parsed::ListWithCommand,
            (false, true, true) => Parsed::Other,
            (false, true, false) => Parsed::List,
            _ => Parsed::Status,
        };
    }
    // No test command (i past the end) is the caller's to report, once the
    // flags' values are checked.
    let [lock_dir, vendor, wait, lock_names, profile, visible] = values;
    Parsed::Run { lock_dir, vendor, wait, lock_names, profile, visible, command: i }
}

fn ref_needed(args: &[Vec<u8>]) -> u64 {
    // Not a decimal integer: 1; one past u64::MAX: u64::MAX; a zero product
    // is raised to 1.
    let positive_or_one = |v: &[u8]| match ref_parse_u64(v) {
        Some(n) => n,
        None if !v.is_empty() && v.iter().all(u8::is_ascii_digit) => u64::MAX,
        None => 1,
    };
    let mut values = [1u64; 2];
    for (j, arg) in args.iter().enumerate() {
        for (k, name) in [&b"--num_processes"[..], b"--gpus_per_process"].into_iter().enumerate() {
            if arg == name {
                values[k] = args.get(j + 1).map_or(1, |v| positive_or_one(v));
            } else if let Some(v) = arg.strip_prefix(name).and_then(|r| r.strip_prefix(b"=")) {
                values[k] = positive_or_one(v);
            }
        }
    }
    values[0].saturating_mul(values[1]).max(1)
}

fuzz_target!(|data: &[u8]| {
    let words = words(data);
    let raw: Vec<Vec<u8>> = words.iter().map(|w| w.to_bytes().to_vec()).collect();
    let want = reference(&raw);
    with_argv(&words, |argv| {
        let got = match parse(&argv) {
            Ok(Invocation::Run { flags, command }) => {
                assert!(command <= argv.len().max(1), "the command, or just past the end");
                if command < argv.len() {
                    let needed = gpus_needed(argv.iter_from(command + 1).map(|a| a.to_bytes()));
                    assert!(needed >= 1);
                    assert_eq!(needed, ref_needed(&raw[command + 1..]));
                }
                let own = |v: Option<&std::ffi::CStr>| v.map(|v| v.to_bytes().to_vec());
                Parsed::Run {
                    lock_dir: own(flags.lock_dir),
                    vendor: own(flags.vendor),
                    wait: own(flags.wait),
                    lock_names: own(flags.lock_names),
                    profile: own(flags.profile),
                    visible: own(flags.visible),
                    command,
                }
            }
            Ok(Invocation::List { .. }) => Parsed::List,
            Ok(Invocation::Status { .. }) => Parsed::Status,
            Ok(Invocation::Drain { gpu, reason, .. }) => Parsed::Drain(gpu.to_vec(), reason.to_vec()),
            Ok(Invocation::Undrain { gpu, .. }) => Parsed::Undrain(gpu.to_vec()),
            Ok(Invocation::Help) => Parsed::Help,
            Ok(Invocation::Version) => Parsed::Version,
            Err(e) => {
                let message = e.to_string();
                assert!(!message.contains('\n') && !message.contains('\r'), "{message:?}");
                assert_eq!(e.exit_code(), 2);
                match e {
                    Error::UnknownOption(o) => Parsed::Unknown(o.to_vec()),
                    Error::MissingValue(flag) => Parsed::Missing(flag.name()),
                    Error::ListWithCommand(_) => Parsed::ListWithCommand,
                    _ => Parsed::Other,
                }
            }
        };
        assert_eq!(got, want, "{raw:?}");
    });
});
