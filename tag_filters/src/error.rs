//! Every way tag_filters can fail, each with its exit code and its one-line
//! message (printed by `main` after `tag_filters: `).

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// `--config`, `--format`, `--explain`, `--table` or `--preset` last, or
    /// followed by an option.
    MissingValue { flag: &'static str },
    /// `--format=` with a value other than list, flags or bazelrc.
    UnknownFormat { value: Vec<u8> },
    /// `--explain=` with a tag that is empty, starts with `-` or is not
    /// UTF-8; `problem` says which.
    BadExplainTag { value: Vec<u8>, problem: String },
    /// `--preset=` names no compiled-in table; `known` lists the presets.
    UnknownPreset { name: String, known: String },
    /// `--explain` together with `--format`, which it would silently ignore.
    ExplainWithFormat,
    /// Under `--strict`: `--config=` names a config the table does not
    /// have; `known` lists the table's configs.
    UnknownConfig { name: Vec<u8>, known: String },
    /// Under `--strict`: an argument that is not an option of tag_filters.
    UnexpectedArgument { arg: Vec<u8>, known: String },
    /// The table file cannot be read.
    TableUnreadable { file: PathBuf, error: io::Error },
    /// A line of the table file is not a definition (1-based `line`).
    TableLine { file: PathBuf, line: usize, problem: String },
    /// The table file has no `base = ...` line.
    TableNoBase { file: PathBuf },
    /// stdout could not be written; a closed pipe is reported by the exit
    /// code alone (see `is_quiet`).
    Stdout(io::Error),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            // 1 is taken by `--explain`'s "not selected", so a driver that
            // tests it cannot mistake a failed write for an answer.
            Error::Stdout(_) => 3,
            _ => 2,
        }
    }

    /// Whether the message is worth printing: a reader that closed the pipe
    /// early (`| head -c1`) wanted no more output, and no error either.
    pub fn is_quiet(&self) -> bool {
        matches!(self, Error::Stdout(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::MissingValue { flag } => write!(f, "{flag}: missing value"),
            Error::UnknownFormat { value } => {
                write!(f, "--format: unknown value {} (expected list, flags or bazelrc)", Quoted(value))
            }
            Error::BadExplainTag { value, problem } => {
                write!(f, "--explain: bad value {}: {problem}", Quoted(value))
            }
            Error::UnknownPreset { name, known } => {
                write!(f, "--preset: unknown preset {} (known presets: {known})", Quoted(name.as_bytes()))
            }
            Error::ExplainWithFormat => {
                f.write_str("--explain: cannot be combined with --format (it prints a verdict)")
            }
            Error::UnknownConfig { name, known } => {
                write!(f, "--config: unknown config {} under --strict (known configs: {known})", Quoted(name))
            }
            Error::UnexpectedArgument { arg, known } => {
                write!(f, "--strict: unexpected argument {} (known configs: {known})", Quoted(arg))
            }
            Error::TableUnreadable { file, error } => {
                write!(f, "{}: cannot read the tag table: {error}", Shown(file))
            }
            Error::TableLine { file, line, problem } => {
                write!(f, "{}:{line}: {problem}", Shown(file))
            }
            Error::TableNoBase { file } => {
                write!(f, "{}: no 'base = TAG,TAG,...' line", Shown(file))
            }
            Error::Stdout(e) => write!(f, "cannot write to stdout: {e}"),
        }
    }
}

/// A value from the command line or the table in single quotes, its bytes
/// as they are (`\xNN` for what is not UTF-8 and for control characters,
/// so that it stays on one line), cut after 1 KiB so that what is wrong
/// with it still ends the line ([`wrapper_common::diag::Excerpt`]).
pub struct Quoted<'a>(pub &'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", wrapper_common::diag::Excerpt(self.0))
    }
}

/// A file's path, its bytes as they are: one that is not UTF-8 is shown
/// with `\xNN` escapes, not `\u{fffd}`, and control and format characters
/// escaped too.
struct Shown<'a>(&'a std::path::Path);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use std::os::unix::ffi::OsStrExt;
        write!(f, "{}", wrapper_common::diag::Excerpt(self.0.as_os_str().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_stay_on_one_line() {
        let e = Error::UnknownFormat { value: "a\nb\tc'".into() };
        assert_eq!(e.to_string(), "--format: unknown value 'a\\x0ab\\x09c'' (expected list, flags or bazelrc)");
        let bom = Error::TableLine {
            file: "t.conf".into(),
            line: 1,
            problem: format!("bad name {}", Quoted("\u{feff}base".as_bytes())),
        };
        assert_eq!(bom.to_string(), "t.conf:1: bad name '\\u{feff}base'");
        use std::os::unix::ffi::OsStrExt;
        let odd = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b"/t\xff\n.conf"));
        let unreadable = Error::TableNoBase { file: odd };
        assert_eq!(unreadable.to_string(), "/t\\xff\\x0a.conf: no 'base = TAG,TAG,...' line");
    }

    #[test]
    fn strict_messages_list_the_known_configs() {
        // `known` as `Table::known_configs` writes it (tested in `tables`).
        let known = "ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan".to_string();
        let e = Error::UnexpectedArgument { arg: "-c".into(), known };
        assert_eq!(
            e.to_string(),
            "--strict: unexpected argument '-c' (known configs: ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan)"
        );
    }

    #[test]
    fn an_unknown_preset_names_itself_and_the_known_ones() {
        let e = Error::UnknownPreset { name: "jax".into(), known: "a, b".into() };
        assert_eq!(e.to_string(), "--preset: unknown preset 'jax' (known presets: a, b)");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Error::ExplainWithFormat.exit_code(), 2);
        let broken = Error::Stdout(io::ErrorKind::BrokenPipe.into());
        assert_eq!(broken.exit_code(), 3);
        assert!(broken.is_quiet());
        assert!(!Error::Stdout(io::ErrorKind::StorageFull.into()).is_quiet());
    }
}
