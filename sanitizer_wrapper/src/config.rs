//! The configuration file, `<argv[0]>.sanitizer_wrapper.conf`.
//!
//! Bazel ignores the `args` of a `--run_under` target, so the Bazel macro
//! writes the wrapper's options into this file beside the `<name>` symlink it
//! runs as, and ships both as runfiles. One option per line, exactly as on
//! the command line but only in the `--name=value` form; blank lines and
//! lines starting with `#` are ignored; surrounding ASCII whitespace is
//! trimmed; the value runs to the end of the line, unquoted. Command-line
//! options given as well replace the file's (see `cli::Options`).
//!
//! Finding it costs at most two `access`/`stat` calls when the runfiles tree
//! exists, with no 4 KiB path buffer on the stack, and reads nothing: the
//! pass-through stays free of the heap and of manifest scans. Only in a
//! manifest-only layout (no runfiles directory) is the file looked up in the
//! manifest, under the rlocation of argv[0].
//! Reading a file that exists may allocate (the values are kept as copies).

use crate::cli::{self, Options, Word};
use crate::error::{Error, FileKind, LineProblem};
use crate::locate;
use crate::opt::Opt;
use rustix::fs::{AtFlags, CWD};
use rustix::io::Errno;
use std::ffi::CStr;
use std::ops::ControlFlow;
use wrapper_common::lines::{Line, for_each_line, open_for_reading, with_read_buffer};
use wrapper_common::runfiles::{manifest_lookup, rlocation_from_cwd};
use wrapper_common::{StackPath, env};

/// Appended to argv[0] to name the file.
pub const SUFFIX: &[u8] = b".sanitizer_wrapper.conf";

/// The read buffer; a line must be shorter (room for a `PATH_MAX` path and
/// any option string a person would write).
pub const LINE_BUFFER: usize = 8 * 1024;

/// The options a configuration file gives.
#[derive(Debug, Default)]
pub struct Config {
    values: [Option<Vec<u8>>; Opt::COUNT],
}

impl Config {
    pub fn options(&self) -> Options<'_> {
        let mut options = Options::default();
        for (opt, value) in Opt::ALL.into_iter().zip(&self.values) {
            if let Some(value) = value {
                options.set(opt, value);
            }
        }
        options
    }
}

/// Reads the configuration file of the wrapper started as `argv0`, if it
/// has one: beside argv[0] when it exists there; else, when there is no
/// runfiles directory, wherever the manifest says.
///
/// The first two looks use short path buffers (`with_joined`) and the
/// variables' own strings, so the pass-through carries no 4 KiB path on its
/// stack; the manifest lookup, for manifest-only layouts, is out of line.
pub fn load(argv0: &[u8]) -> Result<Option<Config>, Error> {
    // A symbolic link there counts, where it leads nowhere too: a runfiles
    // tree that lacks the file is said, not run as if nothing was set.
    let present = |path: &CStr| rustix::fs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW).is_ok();
    let beside = locate::with_beside_argv0(argv0, SUFFIX, |path| present(path).then(|| read(path)));
    if let Some(Some(config)) = beside {
        return config.map(Some);
    }
    if locate::runfiles_dir_is_directory(argv0) {
        return Ok(None);
    }
    match in_manifest(argv0) {
        Some(file) => read(file.as_cstr()).map(Some),
        None => Ok(None),
    }
}

/// The configuration file's entry in the runfiles manifest, under the
/// rlocation of argv[0].
#[inline(never)]
fn in_manifest(argv0: &[u8]) -> Option<StackPath> {
    let dir = locate::runfiles_dir(argv0);
    let manifest = locate::manifest(dir.as_ref(), argv0)?;
    let workspace = env::var_nonempty(b"TEST_WORKSPACE").unwrap_or(b"");
    let mut rlocation = argv0_rlocation(argv0, dir.as_ref().map(StackPath::as_bytes), workspace)?;
    rlocation.push(SUFFIX).ok()?;
    manifest_lookup(manifest.as_cstr(), rlocation.as_bytes()).ok().flatten()
}

/// The rlocation of the wrapper, started as `argv0` from the test's working
/// directory (`$TEST_SRCDIR/<workspace>`): a relative path as that directory
/// sees it, an absolute one by its place under the runfiles directory `dir`.
pub fn argv0_rlocation(argv0: &[u8], dir: Option<&[u8]>, workspace: &[u8]) -> Option<StackPath> {
    if argv0.first() != Some(&b'/') {
        return rlocation_from_cwd(argv0, workspace);
    }
    let dir = dir?;
    let dir = dir.strip_suffix(b"/").unwrap_or(dir);
    let below = argv0.strip_prefix(dir)?.strip_prefix(b"/")?;
    (!below.is_empty()).then(|| StackPath::from_bytes(below).ok()).flatten()
}

/// One line of the file: `None` for a blank line or a comment.
pub fn parse_line(line: &[u8]) -> Result<Option<(Opt, &[u8])>, LineProblem> {
    let line = line.trim_ascii();
    if line.is_empty() || line[0] == b'#' {
        return Ok(None);
    }
    if line.contains(&0) {
        return Err(LineProblem::Nul);
    }
    match cli::classify(line) {
        Word::WithValue(opt, value) => Ok(Some((opt, value))),
        Word::Bare(opt) => Err(LineProblem::NeedsEquals(opt)),
        Word::Help | Word::Version | Word::EndOfOptions => Err(LineProblem::CommandLineOnly(line.to_vec())),
        Word::Command => Err(LineProblem::NotAnOption(line.to_vec())),
        Word::Unknown => {
            let name = line.split(|&b| b == b'=').next().unwrap_or(line);
            Err(LineProblem::UnknownOption(name.to_vec()))
        }
    }
}

/// Reads and checks the whole file; the first bad line is the error. Read
/// through the shared static read buffer (its first [`LINE_BUFFER`] bytes).
pub fn read(file: &CStr) -> Result<Config, Error> {
    let mut config = Config::default();
    let mut number = 0;
    let mut problem = None;
    let shown = || file.to_bytes().into();
    let fd = open_for_reading(file).map_err(|errno| match rustix::fs::readlink(file, Vec::new()) {
        Ok(target) if errno == Errno::NOENT => {
            Error::ConfigDangling { file: shown(), target: target.as_bytes().into() }
        }
        _ => Error::ConfigRead { file: shown(), errno },
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|errno| Error::ConfigRead { file: shown(), errno })?;
    // A character device is read as a file (`/dev/null`: a configuration
    // blanked on purpose); a FIFO, which reads as empty where nobody
    // writes, a directory or a socket is refused.
    match FileKind::of(st.st_mode) {
        None | Some(FileKind::CharacterDevice) => {}
        Some(kind) => return Err(Error::ConfigNotAFile { file: shown(), kind }),
    }
    let read = with_read_buffer(|buf| {
        for_each_line(&fd, &mut buf[..LINE_BUFFER], |Line { bytes, complete }| {
            number += 1;
            let parsed = if complete { parse_line(bytes) } else { Err(LineProblem::TooLong(LINE_BUFFER - 1)) };
            match parsed {
                Ok(Some((opt, value))) => config.values[opt as usize] = Some(value.to_vec()),
                Ok(None) => {}
                Err(p) => {
                    problem = Some(p);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
    });
    if let Some(problem) = problem {
        return Err(Error::ConfigLine { file: shown(), line: number, problem });
    }
    read.map_err(|errno| Error::ConfigRead { file: shown(), errno })?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(parse_line(b""), Ok(None));
        assert_eq!(parse_line(b"  \t\r"), Ok(None));
        assert_eq!(parse_line(b"# --asan-options=x"), Ok(None));
        assert_eq!(parse_line(b"   # indented comment"), Ok(None));
        assert_eq!(parse_line(b"--asan-options=a=1:b=2"), Ok(Some((Opt::AsanOptions, &b"a=1:b=2"[..]))));
        assert_eq!(
            parse_line(b"  --symbolizer=ws/bin/llvm-symbolizer \r"),
            Ok(Some((Opt::Symbolizer, &b"ws/bin/llvm-symbolizer"[..])))
        );
        assert_eq!(
            parse_line(b"--tsan-options=a b # not a comment"),
            Ok(Some((Opt::TsanOptions, &b"a b # not a comment"[..])))
        );
        assert_eq!(parse_line(b"--run-under="), Ok(Some((Opt::RunUnder, &b""[..]))));
    }

    #[test]
    fn bad_lines() {
        assert_eq!(parse_line(b"--asan-options"), Err(LineProblem::NeedsEquals(Opt::AsanOptions)));
        assert_eq!(parse_line(b"--asan-options a=1"), Err(LineProblem::UnknownOption(b"--asan-options a".to_vec())));
        assert_eq!(parse_line(b"--asan-opts=a=1"), Err(LineProblem::UnknownOption(b"--asan-opts".to_vec())));
        assert_eq!(parse_line(b"--help"), Err(LineProblem::CommandLineOnly(b"--help".to_vec())));
        assert_eq!(parse_line(b"--version"), Err(LineProblem::CommandLineOnly(b"--version".to_vec())));
        assert_eq!(parse_line(b"--"), Err(LineProblem::CommandLineOnly(b"--".to_vec())));
        assert_eq!(parse_line(b"detect_leaks=1"), Err(LineProblem::NotAnOption(b"detect_leaks=1".to_vec())));
        assert_eq!(parse_line(b"--asan-options=a\0b"), Err(LineProblem::Nul));
    }

    #[test]
    fn rlocation_of_argv0() {
        let get = |argv0: &[u8], dir: Option<&[u8]>| argv0_rlocation(argv0, dir, b"ws").map(|p| p.as_bytes().to_vec());
        assert_eq!(get(b"pkg/w", None), Some(b"ws/pkg/w".to_vec()));
        assert_eq!(get(b"./pkg/w", Some(b"/rf")), Some(b"ws/pkg/w".to_vec()));
        assert_eq!(get(b"../other/pkg/w", None), Some(b"other/pkg/w".to_vec()));
        assert_eq!(get(b"/rf/ws/pkg/w", Some(b"/rf")), Some(b"ws/pkg/w".to_vec()));
        assert_eq!(get(b"/rf/ws/pkg/w", Some(b"/rf/")), Some(b"ws/pkg/w".to_vec()));
        assert_eq!(get(b"/rfx/ws/pkg/w", Some(b"/rf")), None);
        assert_eq!(get(b"/rf/ws/pkg/w", None), None);
        assert_eq!(get(b"/rf/", Some(b"/rf")), None);
    }
}
