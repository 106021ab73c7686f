//! The `ASAN_OPTIONS`, `LSAN_OPTIONS` and `TSAN_OPTIONS` the test sees.
//!
//! Each is `<base>:suppressions=<path>:external_symbolizer_path=<path>:<the
//! value it already had>`, empty parts left out. The sanitizers read their
//! options left to right and keep the last value of a repeated key, so what
//! the user set (`--test_env=ASAN_OPTIONS=...`) wins over the wrapper's
//! defaults. A variable the wrapper adds nothing to is not touched at all,
//! and when none changes, the environment is passed on as it is.

use crate::cli::Options;
use crate::error::Error;
use crate::opt::Opt;
use std::ffi::CString;
use wrapper_common::env::{self, EnvBuilder};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sanitizer {
    Asan,
    Lsan,
    Tsan,
}

impl Sanitizer {
    pub const ALL: [Sanitizer; 3] = [Sanitizer::Asan, Sanitizer::Lsan, Sanitizer::Tsan];

    pub fn variable(self) -> &'static [u8] {
        match self {
            Sanitizer::Asan => b"ASAN_OPTIONS",
            Sanitizer::Lsan => b"LSAN_OPTIONS",
            Sanitizer::Tsan => b"TSAN_OPTIONS",
        }
    }

    /// The option with the base option string.
    pub fn options(self) -> Opt {
        match self {
            Sanitizer::Asan => Opt::AsanOptions,
            Sanitizer::Lsan => Opt::LsanOptions,
            Sanitizer::Tsan => Opt::TsanOptions,
        }
    }

    /// The option naming the suppression list.
    pub fn suppressions(self) -> Opt {
        match self {
            Sanitizer::Asan => Opt::AsanSuppressions,
            Sanitizer::Lsan => Opt::LsanSuppressions,
            Sanitizer::Tsan => Opt::TsanSuppressions,
        }
    }

    /// LSan symbolizes through the sanitizer it runs inside of (or, alone,
    /// finds llvm-symbolizer in PATH), so only ASan and TSan get the path.
    pub fn uses_symbolizer(self) -> bool {
        self != Sanitizer::Lsan
    }
}

/// The configured files, resolved to absolute paths. On the heap: this
/// path builds a new environment there anyway, and five 4 KiB buffers in
/// one frame were twenty stack pages faulted in on every configured run.
#[derive(Debug, Default)]
pub struct Files {
    /// Indexed like [`Sanitizer::ALL`].
    pub suppressions: [Option<CString>; 3],
    pub symbolizer: Option<CString>,
    pub run_under: Option<CString>,
}

/// Characters that end a value in a sanitizer option string.
const SEPARATORS: &[u8] = b" ,:\t\n\r";

/// Appends `key=path` to `out`, quoting the path when a separator in it
/// would otherwise cut it short (the sanitizers' parser takes `'...'` and
/// `"..."`). `Err` when it would need quoting and has both quote characters.
fn push_path_option(out: &mut Vec<u8>, key: &[u8], path: &[u8]) -> Result<(), ()> {
    push_part(out, key);
    out.push(b'=');
    if !path.iter().any(|b| SEPARATORS.contains(b)) {
        out.extend_from_slice(path);
        return Ok(());
    }
    let quote = [b'"', b'\''].into_iter().find(|q| !path.contains(q)).ok_or(())?;
    out.push(quote);
    out.extend_from_slice(path);
    out.push(quote);
    Ok(())
}

/// Starts a new `:`-separated part.
fn push_part(out: &mut Vec<u8>, part: &[u8]) {
    if !out.is_empty() {
        out.push(b':');
    }
    out.extend_from_slice(part);
}

/// The value `sanitizer`'s variable gets, or `None` when the wrapper adds
/// nothing to it (the variable is then left as it is).
pub fn options_value(
    sanitizer: Sanitizer,
    options: &Options<'_>,
    files: &Files,
    existing: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, Error> {
    let base = options.get(sanitizer.options());
    let suppressions = files.suppressions[sanitizer as usize].as_ref();
    let symbolizer = files.symbolizer.as_ref().filter(|_| sanitizer.uses_symbolizer());
    if base.is_none() && suppressions.is_none() && symbolizer.is_none() {
        return Ok(None);
    }
    let mut value = Vec::new();
    if let Some(base) = base {
        push_part(&mut value, base);
    }
    for (opt, key, path) in [
        (sanitizer.suppressions(), &b"suppressions"[..], suppressions),
        (Opt::Symbolizer, b"external_symbolizer_path", symbolizer),
    ] {
        if let Some(path) = path {
            push_path_option(&mut value, key, path.as_bytes())
                .map_err(|()| Error::Unquotable { option: opt, path: path.as_bytes().into() })?;
        }
    }
    if let Some(existing) = existing.filter(|v| !v.is_empty()) {
        push_part(&mut value, existing);
    }
    Ok(Some(value))
}

/// The test's environment, or `None` when it is the wrapper's own unchanged.
pub fn test_environment(options: &Options<'_>, files: &Files) -> Result<Option<EnvBuilder>, Error> {
    let mut environment: Option<EnvBuilder> = None;
    for sanitizer in Sanitizer::ALL {
        let variable = sanitizer.variable();
        if let Some(value) = options_value(sanitizer, options, files, env::var(variable))? {
            environment.get_or_insert_with(EnvBuilder::from_current).set(variable, &value);
        }
    }
    Ok(environment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Option<CString> {
        Some(CString::new(p).unwrap())
    }

    fn value(s: Sanitizer, options: &Options<'_>, files: &Files, existing: Option<&str>) -> Option<String> {
        options_value(s, options, files, existing.map(str::as_bytes)).unwrap().map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn base_then_paths_then_existing() {
        let mut options = Options::default();
        options.set(Opt::AsanOptions, b"detect_leaks=0:a=1");
        let files = Files {
            suppressions: [path("/s/asan.txt"), None, path("/s/tsan.txt")],
            symbolizer: path("/bin/llvm-symbolizer"),
            run_under: None,
        };
        assert_eq!(
            value(Sanitizer::Asan, &options, &files, Some("detect_leaks=1")).as_deref(),
            Some(
                "detect_leaks=0:a=1:suppressions=/s/asan.txt:external_symbolizer_path=/bin/llvm-symbolizer:detect_leaks=1"
            )
        );
        assert_eq!(
            value(Sanitizer::Tsan, &options, &files, None).as_deref(),
            Some("suppressions=/s/tsan.txt:external_symbolizer_path=/bin/llvm-symbolizer")
        );
        assert_eq!(value(Sanitizer::Lsan, &options, &files, Some("x=1")), None, "nothing configured for LSan");
    }

    #[test]
    fn empty_parts_are_skipped() {
        let mut options = Options::default();
        options.set(Opt::LsanOptions, b"");
        let files = Files { suppressions: [None, path("/l.txt"), None], ..Files::default() };
        assert_eq!(value(Sanitizer::Lsan, &options, &files, Some("")).as_deref(), Some("suppressions=/l.txt"));
        options.set(Opt::TsanOptions, b"history_size=3");
        assert_eq!(value(Sanitizer::Tsan, &options, &files, Some("")).as_deref(), Some("history_size=3"));
    }

    #[test]
    fn paths_with_separators_are_quoted() {
        let files = Files { suppressions: [path("/a b/s:t.txt"), path("/a\"b/c d"), None], ..Files::default() };
        let options = Options::default();
        assert_eq!(value(Sanitizer::Asan, &options, &files, None).as_deref(), Some("suppressions=\"/a b/s:t.txt\""));
        assert_eq!(value(Sanitizer::Lsan, &options, &files, None).as_deref(), Some("suppressions='/a\"b/c d'"));
        let files = Files { suppressions: [path("/a\"b'c d"), None, None], ..Files::default() };
        let err = options_value(Sanitizer::Asan, &options, &files, None).unwrap_err();
        assert!(matches!(err, Error::Unquotable { option: Opt::AsanSuppressions, .. }), "{err:?}");
        // Quote characters alone need no quoting.
        let files = Files { symbolizer: path("/o'k/llvm-symbolizer"), ..Files::default() };
        assert_eq!(
            value(Sanitizer::Tsan, &options, &files, None).as_deref(),
            Some("external_symbolizer_path=/o'k/llvm-symbolizer")
        );
    }
}
