//! Every way the wrapper can fail, each with its exit code and one line of
//! explanation (printed as `sanitizer_wrapper: <line>`).
//!
//! | code | meaning |
//! |------|---------|
//! | 2    | bad input: an unknown option, a missing value or test command, a bad configuration file (also one that is a symbolic link to nothing, or no regular file), a configured file (suppression list, symbolizer, chained wrapper) that does not resolve or cannot be reached, a suppression list or symbolizer that is not a regular file this user may read (a list) or run (the symbolizer), a working directory that cannot be named |
//! | 126  | the test (or the chained wrapper) exists but cannot be executed |
//! | 127  | the test (or the chained wrapper) does not exist |
//!
//! Anything else is the test's own exit status: the wrapper execs the test
//! and leaves no process of its own behind. In every error case the test is
//! not started.

use crate::opt::Opt;
use std::fmt;
use wrapper_common::diag::{Excerpt, Os};
use wrapper_common::exec::ExecFailure;

/// Appended to usage errors, so that they stay one line.
const USAGE_HINT: &str = "usage: sanitizer_wrapper [OPTIONS] [--] TEST [ARGS...] (see --help)";

pub const EXIT_USAGE: u8 = 2;

/// A path named in a message, on the heap: an error travels up through the
/// `Result` slot of every caller, and a 4 KiB `StackPath` there would put
/// 4 KiB on each of their frames, faulted in at start-up even on the
/// pass-through (README, "Where the time goes"). Built once, on the way out.
pub type Shown = Box<[u8]>;

#[derive(Debug)]
pub enum Error {
    /// An option the wrapper does not know, before the test command.
    UnknownOption(&'static [u8]),
    /// An option that needs a value came last.
    MissingValue(Opt),
    /// No test command after the options.
    NoCommand,
    /// The configuration file exists but cannot be read.
    ConfigRead { file: Shown, errno: rustix::io::Errno },
    /// The configuration file is a symbolic link to nothing (`target`): a
    /// runfiles tree without the file the macro wrote, whose options would
    /// otherwise be dropped without a word.
    ConfigDangling { file: Shown, target: Shown },
    /// The configuration file is no regular file (a FIFO would read as
    /// empty, and the test run with nothing set).
    ConfigNotAFile { file: Shown, kind: FileKind },
    /// A line of the configuration file that is not `--name=value`.
    ConfigLine { file: Shown, line: usize, problem: LineProblem },
    /// A configured file that does not resolve; `path` is the value as given.
    Unresolved { option: Opt, path: Shown, looked: Looked },
    /// A suppression list that resolves to something other than a regular
    /// file (a directory, a FIFO, a device...), which the sanitizer runtime
    /// would fail on, or block reading, after the test has started. `path`
    /// is the value as given; `resolved` the path it resolved to, when that
    /// is another.
    NotAFile { option: Opt, path: Shown, resolved: Option<Shown>, kind: FileKind },
    /// A suppression list this user may not read, or a symbolizer it may
    /// not run (`access`): the runtime would fail on it, or symbolize
    /// nothing, after the test has started.
    Refused { option: Opt, path: Shown, resolved: Option<Shown>, errno: rustix::io::Errno },
    /// A resolved path that a sanitizer option cannot carry: it needs quoting
    /// (it holds a space, `,` or `:`) and holds both quote characters.
    Unquotable { option: Opt, path: Shown },
    /// Any other failing system call, named.
    System { what: &'static str, errno: rustix::io::Errno },
    /// The test (or the chained wrapper) could not be executed.
    Exec(ExecFailure),
}

/// What is wrong with one configuration line. The file may allocate while it
/// is read, so offending text is kept as a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineProblem {
    /// `--something` that is no option.
    UnknownOption(Vec<u8>),
    /// A line that does not start with `-`.
    NotAnOption(Vec<u8>),
    /// `--name` without `=value` (the two-word form is for the command line).
    NeedsEquals(Opt),
    /// `--help`, `-h`, `--version` or `--`, which mean nothing in a file.
    CommandLineOnly(Vec<u8>),
    /// The line does not fit the read buffer (of which this many bytes).
    TooLong(usize),
    /// A NUL byte, which no option value can carry.
    Nul,
}

/// What a configured file is when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    Fifo,
    CharacterDevice,
    BlockDevice,
    Socket,
    /// Anything else `stat` may answer.
    Other,
}

impl FileKind {
    /// What a file of mode `mode` is; `None` for a regular file.
    pub fn of(mode: u32) -> Option<FileKind> {
        use rustix::fs::FileType;
        Some(match FileType::from_raw_mode(mode) {
            FileType::RegularFile => return None,
            FileType::Directory => FileKind::Directory,
            FileType::Fifo => FileKind::Fifo,
            FileType::CharacterDevice => FileKind::CharacterDevice,
            FileType::BlockDevice => FileKind::BlockDevice,
            FileType::Socket => FileKind::Socket,
            _ => FileKind::Other,
        })
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO",
            FileKind::CharacterDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "a special file",
        })
    }
}

/// Where a configured runfiles path was looked for, for the message.
#[derive(Debug)]
pub enum Looked {
    /// The path is absolute and does not exist (`None`), or cannot be
    /// reached (a directory on the way this user may not enter).
    Absolute(Option<rustix::io::Errno>),
    /// `dir_path` is `<runfiles dir>/<path>`; either may be missing;
    /// `unreadable`: why the manifest could not be read, where it could not.
    Runfiles { dir_path: Option<Shown>, manifest: Option<Shown>, unreadable: Option<rustix::io::Errno> },
    /// The manifest names a file that does not exist.
    ManifestTarget { manifest: Shown, target: Shown },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Exec(e) => e.exit_code(),
            _ => EXIT_USAGE,
        }
    }
}

fn show(p: &[u8]) -> Excerpt<'_> {
    Excerpt(p)
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineProblem::UnknownOption(word) => {
                write!(f, "unknown option '{}' (expected --NAME=VALUE, see --help)", Excerpt(word))
            }
            LineProblem::NotAnOption(line) => write!(f, "expected --NAME=VALUE, found '{}'", Excerpt(line)),
            LineProblem::NeedsEquals(opt) => {
                write!(f, "{0} needs its value on the same line, as {0}=VALUE", opt.name())
            }
            LineProblem::CommandLineOnly(word) => {
                write!(f, "'{}' is not allowed in a configuration file", Excerpt(word))
            }
            LineProblem::TooLong(limit) => write!(f, "line longer than {limit} bytes"),
            LineProblem::Nul => write!(f, "line contains a NUL byte"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownOption(o) => write!(f, "unknown option '{}'; {USAGE_HINT}", Excerpt(o)),
            Error::MissingValue(opt) => write!(f, "{} needs a value; {USAGE_HINT}", opt.name()),
            Error::NoCommand => write!(f, "no test command given; {USAGE_HINT}"),
            Error::ConfigRead { file, errno } => {
                write!(f, "cannot read configuration file {}: {}", show(file), Os(*errno))
            }
            Error::ConfigDangling { file, target } => write!(
                f,
                "configuration file {} is a symbolic link to {}, which leads nowhere",
                show(file),
                show(target)
            ),
            Error::ConfigNotAFile { file, kind } => {
                write!(f, "configuration file {} is {kind}, not a regular file", show(file))
            }
            Error::ConfigLine { file, line, problem } => write!(f, "{}:{line}: {problem}", show(file)),
            Error::Unresolved { option, path, looked } => {
                let option = option.name();
                match looked {
                    Looked::Absolute(None) => write!(f, "{option}: {} does not exist", show(path)),
                    Looked::Absolute(Some(errno)) => {
                        write!(f, "{option}: cannot reach {}: {}", show(path), Os(*errno))
                    }
                    Looked::Runfiles { dir_path, manifest, unreadable } => {
                        write!(f, "{option}: cannot find runfile {} (", show(path))?;
                        match (dir_path, manifest) {
                            (Some(d), Some(m)) => write!(f, "looked for {} and in manifest {}", show(d), show(m))?,
                            (Some(d), None) => write!(f, "looked for {}; no manifest", show(d))?,
                            (None, Some(m)) => write!(f, "no runfiles directory; looked in manifest {}", show(m))?,
                            (None, None) => write!(f, "no runfiles directory or manifest")?,
                        }
                        if let Some(errno) = unreadable {
                            write!(f, ", which cannot be read: {}", Os(*errno))?;
                        }
                        write!(f, ")")
                    }
                    Looked::ManifestTarget { manifest, target } => write!(
                        f,
                        "{option}: runfile {} is {} in manifest {}, which does not exist",
                        show(path),
                        show(target),
                        show(manifest)
                    ),
                }
            }
            Error::NotAFile { option, path, resolved: None, kind } => {
                write!(f, "{}: {} is {kind}, not a regular file", option.name(), show(path))
            }
            Error::NotAFile { option, path, resolved: Some(resolved), kind } => {
                write!(f, "{}: runfile {} is {}, {kind}, not a regular file", option.name(), show(path), show(resolved))
            }
            Error::Refused { option, path, resolved, errno } => {
                let can = if *option == Opt::Symbolizer { "run" } else { "read" };
                match resolved {
                    None => write!(f, "{}: {} cannot be {can} by this user: {}", option.name(), show(path), Os(*errno)),
                    Some(resolved) => write!(
                        f,
                        "{}: runfile {} is {}, which cannot be {can} by this user: {}",
                        option.name(),
                        show(path),
                        show(resolved),
                        Os(*errno)
                    ),
                }
            }
            Error::Unquotable { option, path } => write!(
                f,
                "{}: {} holds a space, ',' or ':' and both quote characters, so no sanitizer option can carry it",
                option.name(),
                show(path)
            ),
            Error::System { what, errno } => write!(f, "{what}: {}", Os(*errno)),
            Error::Exec(e) => write!(f, "{e}"),
        }
    }
}

impl From<ExecFailure> for Error {
    fn from(e: ExecFailure) -> Error {
        Error::Exec(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Shown {
        p.as_bytes().into()
    }

    fn unresolved(looked: Looked) -> String {
        Error::Unresolved { option: Opt::AsanSuppressions, path: path("ws/supp.txt"), looked }.to_string()
    }

    #[test]
    fn unresolved_names_option_path_and_places() {
        assert_eq!(
            unresolved(Looked::Runfiles {
                dir_path: Some(path("/rf/ws/supp.txt")),
                manifest: Some(path("/rf/MANIFEST")),
                unreadable: None,
            }),
            "--asan-suppressions: cannot find runfile ws/supp.txt (looked for /rf/ws/supp.txt and in manifest /rf/MANIFEST)"
        );
        assert_eq!(
            unresolved(Looked::Runfiles { dir_path: Some(path("/rf/ws/supp.txt")), manifest: None, unreadable: None }),
            "--asan-suppressions: cannot find runfile ws/supp.txt (looked for /rf/ws/supp.txt; no manifest)"
        );
        assert_eq!(
            unresolved(Looked::Runfiles { dir_path: None, manifest: Some(path("/m")), unreadable: None }),
            "--asan-suppressions: cannot find runfile ws/supp.txt (no runfiles directory; looked in manifest /m)"
        );
        assert_eq!(
            unresolved(Looked::Runfiles {
                dir_path: None,
                manifest: Some(path("/m")),
                unreadable: Some(rustix::io::Errno::NOENT)
            }),
            "--asan-suppressions: cannot find runfile ws/supp.txt (no runfiles directory; looked in manifest /m, which cannot be read: No such file or directory (os error 2))"
        );
        assert_eq!(
            unresolved(Looked::Runfiles { dir_path: None, manifest: None, unreadable: None }),
            "--asan-suppressions: cannot find runfile ws/supp.txt (no runfiles directory or manifest)"
        );
        assert_eq!(
            unresolved(Looked::ManifestTarget { manifest: path("/m"), target: path("/gone") }),
            "--asan-suppressions: runfile ws/supp.txt is /gone in manifest /m, which does not exist"
        );
    }

    #[test]
    fn not_a_file_names_option_path_and_kind() {
        let e = |resolved: Option<&str>, kind| Error::NotAFile {
            option: Opt::TsanSuppressions,
            path: path("ws/supp"),
            resolved: resolved.map(path),
            kind,
        };
        assert_eq!(e(None, FileKind::Fifo).to_string(), "--tsan-suppressions: ws/supp is a FIFO, not a regular file");
        assert_eq!(
            e(Some("/rf/ws/supp"), FileKind::Directory).to_string(),
            "--tsan-suppressions: runfile ws/supp is /rf/ws/supp, a directory, not a regular file"
        );
        assert_eq!(e(None, FileKind::CharacterDevice).exit_code(), 2);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Error::NoCommand.exit_code(), 2);
        assert_eq!(Error::MissingValue(Opt::RunUnder).exit_code(), 2);
        let line = Error::ConfigLine { file: path("w.conf"), line: 3, problem: LineProblem::TooLong(10) };
        assert_eq!(line.exit_code(), 2);
        assert_eq!(line.to_string(), "w.conf:3: line longer than 10 bytes");
    }
}
