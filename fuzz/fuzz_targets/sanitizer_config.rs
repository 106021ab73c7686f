//! sanitizer_wrapper's configuration file (`<argv[0]>.sanitizer_wrapper.conf`):
//! `config::parse_line` on every line, and `config::read` over the whole
//! input as a file (in memory), against a reference: the last value of each
//! option wins, and the first bad line is the one reported, with its number,
//! on one line.

#![no_main]

use gpu_ci_wrappers_fuzz::{MemFile, ref_lines};
use libfuzzer_sys::fuzz_target;
use sanitizer_wrapper::config::{LINE_BUFFER, parse_line, read};
use sanitizer_wrapper::error::Error;
use sanitizer_wrapper::opt::Opt;

/// Reference for one line: `Ok(None)` blank or comment, `Ok(Some)` an
/// option, `Err(())` anything else.
fn ref_line(line: &[u8]) -> Result<Option<(Opt, &[u8])>, ()> {
    let line = line.trim_ascii();
    if line.is_empty() || line.starts_with(b"#") {
        return Ok(None);
    }
    if line.contains(&0) {
        return Err(());
    }
    for opt in Opt::ALL {
        if let Some(value) = line.strip_prefix(opt.name().as_bytes()).and_then(|r| r.strip_prefix(b"=")) {
            return Ok(Some((opt, value)));
        }
    }
    Err(())
}

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        let got = parse_line(line);
        assert_eq!(got.as_ref().map_err(|_| ()).copied(), ref_line(line), "{line:?}");
    }

    // The whole input as a configuration file.
    let mut values: Vec<Option<Vec<u8>>> = vec![None; Opt::COUNT];
    let mut first_bad = None;
    for (number, (line, complete)) in ref_lines(data, LINE_BUFFER).into_iter().enumerate() {
        match (complete, ref_line(&line)) {
            (true, Ok(Some((opt, value)))) => values[opt as usize] = Some(value.to_vec()),
            (true, Ok(None)) => {}
            _ => {
                first_bad = Some(number + 1);
                break;
            }
        }
    }
    let file = MemFile::new(data);
    match read(file.path()) {
        Ok(config) => {
            assert_eq!(first_bad, None, "accepted a bad line");
            let options = config.options();
            for opt in Opt::ALL {
                let want = values[opt as usize].as_deref().filter(|v| !v.is_empty());
                assert_eq!(options.get(opt), want, "{}", opt.name());
            }
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains('\n') && !message.contains('\r'), "{message:?}");
            assert_eq!(e.exit_code(), 2);
            match e {
                Error::ConfigLine { line, .. } => assert_eq!(Some(line), first_bad),
                other => panic!("unexpected error {other:?}"),
            }
        }
    }
});
