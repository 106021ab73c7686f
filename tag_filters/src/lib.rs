//! tag_filters: prints the Bazel tag filter of ROCm CI.
//!
//! Usage: `tag_filters [--preset=NAME | --table=FILE] [--config=NAME]...
//! [--format=list|flags|bazelrc] [--strict] [ARGS...] [-- TARGETS...]`, or `... --explain=TAG,TAG,...` to
//! ask whether the filter selects a target with those tags (exit 0 when it
//! does, 1 when not). Exit 2 is bad usage; 3 is a failed write to stdout.
//!
//! It replaces a shell helper that echoed the tags ROCm CI must never attempt
//! and a driver loop that appended tags per `--config=`. Design goals:
//! - the same bytes as the shell helper for the same configs, with the tags
//!   kept as data in one place (`tables`), never in code or help text;
//!   `--preset=NAME` picks one of the compiled-in tables (XLA's ROCm CI by
//!   default, JAX's, XLA's compile-only build), and a table file
//!   (`--table=FILE`, or `<argv0>.tag_filters.conf`) replaces the table in
//!   force, so maintainers edit data, not Rust;
//! - a driver can pass its whole Bazel command line: what is not ours is
//!   ignored, as the loop did, unless `--strict` asks for an error;
//! - one clear stderr line per mistake, never a panic, even for non-UTF-8
//!   arguments or a closed stdout;
//! - std only, so that the static binary stays small.
//!
//! The library holds everything; the binary (`main.rs`) only hands it the
//! process's arguments and stdout. Being a library also lets the fuzz targets
//! in `fuzz/` drive the command-line parser directly.

pub mod cli;
pub mod error;
pub mod filter;
pub mod output;
pub mod tables;

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use cli::Request;
use error::Error;
use filter::TagFilter;
use tables::Table;

/// `<argv0>.tag_filters.conf`, when argv[0] names a path (not a bare name
/// found through `PATH`) and that file exists, or a symbolic link is there:
/// one that leads nowhere (a runfiles tree without the file it names) is
/// then an error to read, not the built-in table in its place.
pub fn conf_beside(argv0: &OsStr) -> Option<PathBuf> {
    if !argv0.as_bytes().contains(&b'/') {
        return None;
    }
    let mut path = argv0.to_os_string();
    path.push(tables::CONF_SUFFIX);
    let path = PathBuf::from(path);
    path.symlink_metadata().is_ok().then_some(path)
}

/// A path the user typed: `bazel run` starts the binary in its runfiles
/// directory and names the directory it was started in in
/// `$BUILD_WORKING_DIRECTORY`, so a relative path is taken from there when
/// that is set (and not empty); otherwise, and for an absolute path, the
/// path as given.
pub fn from_working_directory(path: &Path) -> PathBuf {
    match std::env::var_os("BUILD_WORKING_DIRECTORY") {
        Some(dir) if !dir.is_empty() && path.is_relative() => Path::new(&dir).join(path),
        _ => path.to_path_buf(),
    }
}

/// The table in force: `--table=FILE`, else `--preset=NAME`, else
/// `<argv0>.tag_filters.conf` when present, else the default preset. The
/// command line wins over the file beside the executable, and a table file
/// over a preset; a `--preset` that names no preset is an error even then.
pub fn load_table(argv0: Option<&OsStr>, args: &[OsString]) -> Result<Table, Error> {
    let choice = cli::table_choice(args)?;
    let preset = choice.preset.map(|name| tables::preset_named(&name.to_string_lossy())).transpose()?;
    if let Some(file) = choice.file {
        return Table::read(&from_working_directory(Path::new(file)));
    }
    if let Some(preset) = preset {
        return Ok(preset.table(None));
    }
    match argv0.and_then(conf_beside) {
        Some(file) => Table::read(&file),
        None => Ok(Table::builtin()),
    }
}

/// Does what `args` (without argv[0]) ask, writing to `stdout`; `argv0`
/// locates the table file beside the executable. Returns the exit code of
/// a run that went as asked: 0, or 1 when `--explain` finds the target not
/// selected.
pub fn run(argv0: Option<&OsStr>, args: &[OsString], stdout: &mut impl Write) -> Result<u8, Error> {
    let table = load_table(argv0, args)?;
    let mut code = 0;
    let text = match cli::parse(args, &table)? {
        Request::Help => output::help(&table),
        Request::Version => output::version(),
        Request::Print { format, configs } => output::filter(format, &table, &TagFilter::compose(&table, configs)),
        Request::Explain { configs, target_tags } => {
            let verdict = TagFilter::compose(&table, configs).explain(&target_tags);
            if !verdict.is_selected() {
                code = 1;
            }
            output::verdict(&verdict, &target_tags)
        }
    };
    // Flush too: a locked stdout buffers, and an error left in the buffer
    // would otherwise be lost when it is dropped. (A stdout that was never
    // open, `>&-`, is a sink to Rust's std: its EBADF reports success.)
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).map_err(Error::Stdout)?;
    Ok(code)
}
