//! sanitizer_wrapper's command line (cli::parse over an argv made of the
//! input split at NUL bytes; cli::classify on every word) against a
//! reference, and the merging of option sets.

#![no_main]

use gpu_ci_wrappers_fuzz::{with_argv, words};
use libfuzzer_sys::fuzz_target;
use sanitizer_wrapper::cli::{Invocation, Options, Word, classify, parse};
use sanitizer_wrapper::error::Error;
use sanitizer_wrapper::opt::Opt;

fn ref_classify(w: &[u8]) -> Word<'_> {
    match w {
        b"--" => Word::EndOfOptions,
        b"--help" | b"-h" => Word::Help,
        b"--version" => Word::Version,
        _ if !w.starts_with(b"-") || w == b"-" => Word::Command,
        _ => Opt::ALL
            .into_iter()
            .find_map(|opt| {
                let name = opt.name().as_bytes();
                if w == name {
                    Some(Word::Bare(opt))
                } else {
                    w.strip_prefix(name).and_then(|r| r.strip_prefix(b"=")).map(|v| Word::WithValue(opt, v))
                }
            })
            .unwrap_or(Word::Unknown),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    Run { values: Vec<Option<Vec<u8>>>, command: usize },
    Help,
    Version,
    Unknown(Vec<u8>),
    Missing(Opt),
    NoCommand,
    Other,
}

fn reference(words: &[Vec<u8>]) -> Parsed {
    let mut values: Vec<Option<Vec<u8>>> = vec![None; Opt::COUNT];
    let mut i = 1;
    while i < words.len() {
        match ref_classify(&words[i]) {
            Word::WithValue(opt, v) => values[opt as usize] = Some(v.to_vec()),
            Word::Bare(opt) => {
                let Some(v) = words.get(i + 1) else { return Parsed::Missing(opt) };
                values[opt as usize] = Some(v.clone());
                i += 1;
            }
            Word::Help => return Parsed::Help,
            Word::Version => return Parsed::Version,
            Word::EndOfOptions => {
                i += 1;
                break;
            }
            Word::Command => break,
            Word::Unknown => return Parsed::Unknown(words[i].clone()),
        }
        i += 1;
    }
    if i >= words.len() {
        return Parsed::NoCommand;
    }
    // `get` reports an empty value as not configured.
    let values = values.into_iter().map(|v| v.filter(|v| !v.is_empty())).collect();
    Parsed::Run { values, command: i }
}

fuzz_target!(|data: &[u8]| {
    let words = words(data);
    let raw: Vec<Vec<u8>> = words.iter().map(|w| w.to_bytes().to_vec()).collect();
    for w in &raw {
        assert_eq!(classify(w), ref_classify(w), "{w:?}");
    }
    let want = reference(&raw);
    with_argv(&words, |argv| {
        let got = match parse(&argv) {
            Ok(Invocation::Run { options, command }) => {
                assert!(command < argv.len());
                let values = Opt::ALL.into_iter().map(|o| options.get(o).map(<[u8]>::to_vec)).collect();
                // Merging: a later set's options (even empty) replace the
                // earlier's; merging with an empty set changes nothing.
                let merged = Options::default().overridden_by(&options);
                let again = options.overridden_by(&Options::default());
                for opt in Opt::ALL {
                    assert_eq!(merged.get(opt), options.get(opt));
                    assert_eq!(again.get(opt), options.get(opt));
                }
                assert_eq!(options.is_empty(), Opt::ALL.iter().all(|&o| options.get(o).is_none()));
                Parsed::Run { values, command }
            }
            Ok(Invocation::Help) => Parsed::Help,
            Ok(Invocation::Version) => Parsed::Version,
            Err(e) => {
                let message = e.to_string();
                assert!(!message.contains('\n') && !message.contains('\r'), "{message:?}");
                assert_eq!(e.exit_code(), 2);
                match e {
                    Error::UnknownOption(o) => Parsed::Unknown(o.to_vec()),
                    Error::MissingValue(opt) => Parsed::Missing(opt),
                    Error::NoCommand => Parsed::NoCommand,
                    _ => Parsed::Other,
                }
            }
        };
        assert_eq!(got, want, "{raw:?}");
    });
});
