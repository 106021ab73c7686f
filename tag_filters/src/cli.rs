//! The command line: a small hand-written parser over raw `OsString`s, so
//! that a non-UTF-8 argument in a driver's Bazel command line is ignored (or
//! reported) instead of crashing the binary.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::error::{Error, Quoted};
use crate::tables::{Config, Table};

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request<'t> {
    Help,
    Version,
    /// Print the filter built from `configs` in `format`.
    Print {
        format: Format,
        configs: Vec<&'t Config>,
    },
    /// Say whether the filter built from `configs` selects a target that
    /// carries `target_tags`.
    Explain {
        configs: Vec<&'t Config>,
        target_tags: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `tag,tag,...`
    List,
    /// `--build_tag_filters=... --test_tag_filters=...`
    Flags,
    /// `build:<config>`/`test:<config>` lines for every known config.
    Bazelrc,
}

/// Options of ours that take a value, as `--x=V` or `--x V`.
const CONFIG: &str = "--config";
const FORMAT: &str = "--format";
/// Bazel has an `--explain=<logfile>` of its own: a driver that forwards its
/// whole command line must drop that one, or it is read as target tags.
const EXPLAIN: &str = "--explain";
/// A tag table file replacing the compiled-in table.
const TABLE: &str = "--table";
/// The compiled-in table to use (see `tables::PRESETS`).
const PRESET: &str = "--preset";

/// Everything after this is a target pattern of the driver's Bazel command.
const END_OF_OPTIONS: &[u8] = b"--";

/// Parses the arguments (without argv[0]).
///
/// A driver passes its whole Bazel command line, so anything that is not an
/// option of ours (`test`, `-c opt`, `//xla/...`, `--jobs=8`) and any config
/// we do not know is skipped, as the shell loop did; `--strict` turns the
/// first of them into an error. Everything after `--` is skipped in both
/// modes: those are target patterns, not options.
pub fn parse<'t>(args: &[OsString], table: &'t Table) -> Result<Request<'t>, Error> {
    let options = options(args);
    // --help and --version win wherever they are, so that asking for help
    // works even on a command line with a mistake in it. No value of ours
    // starts with `-`, so neither can be a value of another option.
    for arg in options {
        match arg.as_bytes() {
            b"--help" | b"-h" => return Ok(Request::Help),
            b"--version" => return Ok(Request::Version),
            _ => {}
        }
    }

    let mut strict = false;
    let mut format = None;
    let mut explain = None;
    let mut configs = Vec::new();
    // The first argument --strict would reject, kept until we know whether
    // --strict is given (it may come last).
    let mut first_rejected = None;

    // The configs by name, once: each `--config` is then found in time
    // logarithmic in the table, whatever the number of both.
    let by_name: std::collections::BTreeMap<&str, &Config> =
        table.configs.iter().map(|config| (config.name.as_str(), config)).collect();
    let mut rest = options.iter();
    while let Some(arg) = rest.next() {
        if arg.as_bytes() == b"--strict" {
            strict = true;
        } else if let Some(value) = option_value(CONFIG, arg, &mut rest)? {
            match value.to_str().and_then(|name| by_name.get(name)) {
                Some(config) => configs.push(*config),
                None => {
                    let name = value.as_bytes().to_vec();
                    first_rejected.get_or_insert_with(|| Error::UnknownConfig { name, known: table.known_configs() });
                }
            }
        } else if option_value(TABLE, arg, &mut rest)?.is_some() || option_value(PRESET, arg, &mut rest)?.is_some() {
            // Read before parsing (see `table_choice`).
        } else if let Some(value) = option_value(FORMAT, arg, &mut rest)? {
            format = Some(parse_format(value)?);
        } else if let Some(value) = option_value(EXPLAIN, arg, &mut rest)? {
            explain = Some(parse_target_tags(value)?);
        } else {
            let arg = arg.as_bytes().to_vec();
            first_rejected.get_or_insert(Error::UnexpectedArgument { arg, known: table.known_configs() });
        }
    }

    if let (true, Some(error)) = (strict, first_rejected) {
        return Err(error);
    }
    match (explain, format) {
        (Some(_), Some(_)) => Err(Error::ExplainWithFormat),
        (Some(target_tags), None) => Ok(Request::Explain { configs, target_tags }),
        (None, format) => Ok(Request::Print { format: format.unwrap_or(Format::List), configs }),
    }
}

/// The arguments before `--`: ours and the driver's; the rest are target
/// patterns.
fn options(args: &[OsString]) -> &[OsString] {
    match args.iter().position(|arg| arg.as_bytes() == END_OF_OPTIONS) {
        Some(end) => &args[..end],
        None => args,
    }
}

/// Which table the command line asks for: the table must be read before the
/// configs can be looked up in it, and before `--help` can list them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TableChoice<'a> {
    /// The file of the last `--table=FILE` (or `--table FILE`).
    pub file: Option<&'a OsStr>,
    /// The name of the last `--preset=NAME` (or `--preset NAME`).
    pub preset: Option<&'a OsStr>,
}

/// The `--table` and `--preset` given before `--`, the last of each.
pub fn table_choice(args: &[OsString]) -> Result<TableChoice<'_>, Error> {
    let mut choice = TableChoice::default();
    let mut rest = options(args).iter();
    while let Some(arg) = rest.next() {
        for (flag, slot) in [(TABLE, &mut choice.file), (PRESET, &mut choice.preset)] {
            if let Some(value) = option_value(flag, arg, &mut rest)? {
                if value.is_empty() {
                    return Err(Error::MissingValue { flag });
                }
                *slot = Some(value);
                break;
            }
        }
    }
    Ok(choice)
}

/// The value of option `name` if `arg` is that option: the text after `=`,
/// or else the next argument, which it then consumes. A next argument that
/// starts with `-` is another option, not a value (no value of ours starts
/// with `-`), so the value counts as missing.
fn option_value<'a>(
    name: &'static str,
    arg: &'a OsString,
    rest: &mut std::slice::Iter<'a, OsString>,
) -> Result<Option<&'a OsStr>, Error> {
    let Some(tail) = arg.as_bytes().strip_prefix(name.as_bytes()) else {
        return Ok(None);
    };
    if let Some(value) = tail.strip_prefix(b"=") {
        return Ok(Some(OsStr::from_bytes(value)));
    }
    if !tail.is_empty() {
        // `--configs`, `--formatter=x`: someone else's option.
        return Ok(None);
    }
    match rest.as_slice().first() {
        Some(next) if !next.as_bytes().starts_with(b"-") => {
            rest.next();
            Ok(Some(next.as_os_str()))
        }
        _ => Err(Error::MissingValue { flag: name }),
    }
}

fn parse_format(value: &OsStr) -> Result<Format, Error> {
    match value.as_bytes() {
        b"list" => Ok(Format::List),
        b"flags" => Ok(Format::Flags),
        b"bazelrc" => Ok(Format::Bazelrc),
        _ => Err(Error::UnknownFormat { value: value.as_bytes().to_vec() }),
    }
}

/// The comma-separated tags of one target. An empty value is a target with
/// no tags; an empty tag inside the list or a tag with a leading `-` (a
/// filter entry, not a target's tag) is a mistake. A repeated tag is kept
/// once.
fn parse_target_tags(value: &OsStr) -> Result<Vec<String>, Error> {
    let bad = |problem: String| Error::BadExplainTag { value: value.as_bytes().to_vec(), problem };
    let Some(text) = value.to_str() else {
        return Err(bad("not valid UTF-8".to_string()));
    };
    let mut tags: Vec<String> = Vec::new();
    if text.is_empty() {
        return Ok(tags);
    }
    for tag in text.split(',') {
        if tag.is_empty() {
            return Err(bad("empty tag".to_string()));
        }
        if tag.starts_with('-') {
            let message = format!(
                "tag {} starts with '-' (give the target's own tags, not filter entries)",
                Quoted(tag.as_bytes())
            );
            return Err(bad(message));
        }
        if !tags.iter().any(|seen| seen == tag) {
            tags.push(tag.to_string());
        }
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    static TABLE: LazyLock<Table> = LazyLock::new(Table::builtin);

    fn parse(args: &[OsString]) -> Result<Request<'static>, Error> {
        super::parse(args, &TABLE)
    }

    fn parse_strs(args: &[&str]) -> Result<Request<'static>, Error> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse(&args)
    }

    fn config_names(request: &Request) -> Vec<String> {
        match request {
            Request::Print { configs, .. } | Request::Explain { configs, .. } => {
                configs.iter().map(|c| c.name.clone()).collect()
            }
            _ => panic!("no configs in {request:?}"),
        }
    }

    fn message(result: Result<Request, Error>) -> String {
        result.expect_err("should fail").to_string()
    }

    #[test]
    fn no_arguments_prints_the_list() {
        assert_eq!(parse_strs(&[]).unwrap(), Request::Print { format: Format::List, configs: vec![] });
    }

    #[test]
    fn both_spellings_of_our_options() {
        let request = parse_strs(&["--config=asan", "--config", "tsan", "--format", "flags"]).unwrap();
        assert_eq!(config_names(&request), ["asan", "tsan"]);
        assert!(matches!(request, Request::Print { format: Format::Flags, .. }));
        let request = parse_strs(&["--explain", "gpu,b", "--config=asan"]).unwrap();
        assert!(matches!(request, Request::Explain { ref target_tags, .. } if target_tags == &["gpu", "b"]));
    }

    #[test]
    fn driver_arguments_are_skipped() {
        let request = parse_strs(&[
            "test",
            "-c",
            "opt",
            "--jobs=8",
            "--config=ci_multi_gpu",
            "--configs=x",
            "--config=nonexistent",
            "//xla/...",
            "--",
            "--config=asan",
            "--format=bad",
        ])
        .unwrap();
        assert_eq!(config_names(&request), ["ci_multi_gpu"]);
    }

    #[test]
    fn strict_rejects_the_first_foreign_argument_wherever_strict_is() {
        let known = "(known configs: ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan)";
        assert_eq!(
            message(parse_strs(&["--config=nope", "test", "--strict"])),
            format!("--config: unknown config 'nope' under --strict {known}")
        );
        assert_eq!(
            message(parse_strs(&["--strict", "-c", "opt"])),
            format!("--strict: unexpected argument '-c' {known}")
        );
        assert!(parse_strs(&["--strict", "--config=asan", "--", "//xla/...", "-c"]).is_ok());
    }

    #[test]
    fn missing_values() {
        assert_eq!(message(parse_strs(&["--config"])), "--config: missing value");
        assert_eq!(message(parse_strs(&["--format", "--strict"])), "--format: missing value");
        assert_eq!(message(parse_strs(&["--explain", "--"])), "--explain: missing value");
    }

    #[test]
    fn help_and_version_win_before_the_end_of_options() {
        assert_eq!(parse_strs(&["--format=yaml", "-h"]).unwrap(), Request::Help);
        assert_eq!(parse_strs(&["--version", "--help"]).unwrap(), Request::Version);
        assert!(parse_strs(&["--", "--help"]).is_ok_and(|r| r != Request::Help));
    }

    #[test]
    fn explain_tags() {
        let tags = |value: &str| parse_target_tags(OsStr::new(value));
        assert_eq!(tags("a,b,a").unwrap(), ["a", "b"]);
        assert!(tags("").unwrap().is_empty());
        assert_eq!(tags("a,,b").unwrap_err().to_string(), "--explain: bad value 'a,,b': empty tag");
        assert_eq!(tags("a,").unwrap_err().to_string(), "--explain: bad value 'a,': empty tag");
        assert_eq!(
            tags("a,-b").unwrap_err().to_string(),
            "--explain: bad value 'a,-b': tag '-b' starts with '-' (give the target's own tags, not filter entries)"
        );
        let non_utf8 = parse_target_tags(OsStr::from_bytes(b"a\xff")).unwrap_err();
        assert_eq!(non_utf8.to_string(), "--explain: bad value 'a\\xff': not valid UTF-8");
    }

    #[test]
    fn explain_and_format_do_not_mix() {
        assert_eq!(
            message(parse_strs(&["--explain=gpu", "--format=list"])),
            "--explain: cannot be combined with --format (it prints a verdict)"
        );
    }

    #[test]
    fn every_config_is_reachable_by_name() {
        for config in &TABLE.configs {
            let request = parse_strs(&[&format!("--config={}", config.name)]).unwrap();
            assert_eq!(config_names(&request), std::slice::from_ref(&config.name));
        }
    }

    /// The `--table` and `--preset` values `table_choice` finds in `words`.
    fn choice(words: &[&str]) -> Result<(Option<String>, Option<String>), String> {
        let args: Vec<OsString> = words.iter().map(OsString::from).collect();
        let owned = |value: Option<&OsStr>| value.map(|v| v.to_string_lossy().into_owned());
        table_choice(&args).map(|c| (owned(c.file), owned(c.preset))).map_err(|e| e.to_string())
    }

    #[test]
    fn the_table_option_is_found_before_the_end_of_options_only() {
        let table_file = |words: &[&str]| choice(words).map(|(file, _)| file);
        assert_eq!(table_file(&["--table=a", "--config=x", "--table", "b"]).unwrap().as_deref(), Some("b"));
        assert_eq!(table_file(&["--config=x", "--", "--table=a"]).unwrap(), None);
        assert_eq!(table_file(&["--table"]).unwrap_err(), "--table: missing value");
        assert_eq!(table_file(&["--table="]).unwrap_err(), "--table: missing value");
        // parse() skips it and its value, also under --strict.
        assert!(parse_strs(&["--strict", "--table", "t.conf", "--config=asan"]).is_ok());
    }

    #[test]
    fn the_preset_option_is_found_like_the_table_option() {
        let both = choice(&["--preset=a", "--table=t", "--preset", "b", "--", "--preset=c"]).unwrap();
        assert_eq!(both, (Some("t".to_string()), Some("b".to_string())));
        assert_eq!(choice(&["--presets=x", "--config=y"]).unwrap(), (None, None));
        assert_eq!(choice(&["--preset"]).unwrap_err(), "--preset: missing value");
        assert_eq!(choice(&["--preset="]).unwrap_err(), "--preset: missing value");
        assert_eq!(choice(&["--preset", "--strict"]).unwrap_err(), "--preset: missing value");
        assert!(parse_strs(&["--strict", "--preset", "jax-rocm", "--preset=x", "--config=asan"]).is_ok());
    }

    #[test]
    fn non_utf8_arguments_do_not_panic() {
        let args = [OsString::from("--config=asan"), OsStr::from_bytes(b"\xff\xfe").into()];
        assert_eq!(config_names(&parse(&args).unwrap()), ["asan"]);
        let args = [OsStr::from_bytes(b"--config=\xff").into(), OsString::from("--strict")];
        assert_eq!(
            parse(&args).unwrap_err().to_string(),
            "--config: unknown config '\\xff' under --strict (known configs: ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan)"
        );
        let args = [OsStr::from_bytes(b"--format=\xff").into()];
        assert!(matches!(parse(&args), Err(Error::UnknownFormat { .. })));
    }
}
