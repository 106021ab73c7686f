//! The text tag_filters prints: the filter in each format, the `--explain`
//! verdict, `--help` and `--version`. Every function returns whole lines,
//! each ending in a newline, so that `main` writes them in one go.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

use crate::cli::Format;
use crate::error::Quoted;
use crate::filter::{TagFilter, Verdict};
use crate::tables::{DEFAULT_PRESET, Origin, PRESETS, Table};
use wrapper_common::diag::Bytes;

/// The filter in `format`. `--format=bazelrc` does not depend on the given
/// configs: see [`bazelrc`].
pub fn filter(format: Format, table: &Table, filter: &TagFilter) -> String {
    let list = filter.joined();
    match format {
        Format::List => format!("{list}\n"),
        Format::Flags => format!("--build_tag_filters={list} --test_tag_filters={list}\n"),
        Format::Bazelrc => bazelrc(table),
    }
}

/// A `build:<config>` and a `test:<config>` line for every known config, in
/// table order, each filter being the base list plus that one config, ready
/// to paste into a `.bazelrc`.
fn bazelrc(table: &Table) -> String {
    let mut text = String::new();
    for config in &table.configs {
        let list = TagFilter::compose(table, [config]).joined();
        let name = &config.name;
        let _ = writeln!(text, "build:{name} --build_tag_filters={list}");
        let _ = writeln!(text, "test:{name} --test_tag_filters={list}");
    }
    text
}

/// The `--explain` answer: selected or not, and the tag that decided.
pub fn verdict(verdict: &Verdict<'_, '_>, target_tags: &[String]) -> String {
    match verdict {
        Verdict::Excluded { tag } => {
            format!("not selected: tag {} is excluded (-{})\n", Quoted(tag.as_bytes()), Bytes(tag.as_bytes()))
        }
        Verdict::Included { tag } => {
            format!("selected: tag {} is in the included tags\n", Quoted(tag.as_bytes()))
        }
        Verdict::NothingIncluded => {
            "selected: none of its tags is excluded and the filter has no included tags\n".to_string()
        }
        Verdict::MissingIncluded { included } if target_tags.is_empty() => {
            format!("not selected: it has no tags and needs one of the included tags ({})\n", included.join(", "))
        }
        Verdict::MissingIncluded { included } => {
            let mut tags = String::new();
            for (i, tag) in target_tags.iter().enumerate() {
                let separator = if i == 0 { "" } else { ", " };
                let _ = write!(tags, "{separator}{}", Bytes(tag.as_bytes()));
            }
            format!("not selected: none of its tags ({tags}) is among the included tags ({})\n", included.join(", "))
        }
    }
}

pub fn version() -> String {
    concat!("tag_filters ", env!("CARGO_PKG_VERSION"), "\n").to_string()
}

const USAGE: &str = "\
Usage: tag_filters [--table=FILE] [--config=NAME]... [--format=FORMAT]
                   [--preset=NAME] [--strict] [ARGS...]
       tag_filters [--table=FILE] [--config=NAME]... [--preset=NAME]
                   --explain=TAG[,TAG...]

Prints the base list of the table in force (by default the tags XLA's ROCm CI
never attempts), followed by the tags of each known --config given, in order;
a tag already listed is not repeated.

Options:
  --preset=NAME     use the compiled-in table NAME (see Presets below); it
                    wins over <executable>.tag_filters.conf, --table wins over
                    it (an unknown NAME is an error even then)
  --config=NAME     append the tags of config NAME
  --format=FORMAT   list: the tags, comma-joined (the default)
                    flags: --build_tag_filters=LIST --test_tag_filters=LIST
                    bazelrc: build:CONFIG and test:CONFIG lines for every
                    known config, each filter being the base list plus that
                    config alone (--config arguments do not change it)
  --explain=TAGS    the comma-separated tags of one target: say whether the
                    filter selects it and which tag decided
  --table=FILE      read the tag table from FILE instead of the compiled-in
                    one (also: <executable>.tag_filters.conf when present);
                    lines 'base = TAG,...' and 'CONFIG = TAG,...', '#' comments;
                    or a single line 'preset = NAME'; under bazel run, a
                    relative FILE is taken from where bazel run was started
                    ($BUILD_WORKING_DIRECTORY)
  --strict          reject unknown configs and other arguments (exit 2)
  -h, --help        print this help
  --version         print the version
  --                ignore every later argument (target patterns)

--config, --format, --explain, --table and --preset also take their value as
the next argument (--config NAME). Other arguments (a driver's Bazel command
line: test, -c opt, --jobs=8, //xla/..., unknown configs) are ignored unless
--strict is given.
";

const EXIT_STATUS: &str = "\
Exit status: 0 printed (--explain: selected), 1 --explain: not selected,
2 bad usage or value, 3 stdout could not be written.
";

/// Wraps help lines at this width, so the base list reads in a terminal.
const HELP_WIDTH: usize = 80;

pub fn help(table: &Table) -> String {
    let mut text =
        String::from(concat!("tag_filters ", env!("CARGO_PKG_VERSION"), ": the Bazel tag filters of ROCm CI\n\n"));
    text.push_str(USAGE);
    text.push_str("\nPresets (--preset=NAME):\n");
    let name_width = PRESETS.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for preset in PRESETS {
        let default = if preset.name == DEFAULT_PRESET { ", the default" } else { "" };
        let _ = writeln!(text, "  {:name_width$}  {}{default}", preset.name, preset.summary);
    }
    match &table.origin {
        Origin::Preset { name, file: None } => {
            let _ = writeln!(text, "\nTable: preset {name} (compiled in)");
        }
        Origin::Preset { name, file: Some(file) } => {
            let _ = writeln!(text, "\nTable: preset {name} (named in {})", Bytes(file.as_os_str().as_bytes()));
        }
        Origin::File(file) => {
            let _ = writeln!(text, "\nTable: {}", Bytes(file.as_os_str().as_bytes()));
        }
    }
    text.push_str("\nBase list:\n");
    push_wrapped_list(&mut text, &table.base);
    text.push_str("\nConfigs:\n");
    if table.configs.is_empty() {
        text.push_str("  (none)\n");
    }
    let name_width = table.configs.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for config in &table.configs {
        if config.replaces {
            let tags =
                if config.tags.is_empty() { "(nothing: no tag filter)".to_string() } else { config.tags.join(",") };
            let _ = writeln!(text, "  {:name_width$}  replaces the filter with {tags}", config.name);
        } else {
            let _ = writeln!(text, "  {:name_width$}  {}", config.name, config.tags.join(","));
        }
    }
    text.push('\n');
    text.push_str(EXIT_STATUS);
    text
}

/// Writes `tags` comma-joined, indented by two spaces, breaking lines after
/// a comma so that a line stays within [`HELP_WIDTH`].
fn push_wrapped_list(text: &mut String, tags: &[String]) {
    let mut line_len = 0;
    for (i, tag) in tags.iter().enumerate() {
        let comma = if i + 1 < tags.len() { "," } else { "" };
        let item_len = tag.len() + comma.len();
        if line_len > 0 && line_len + item_len > HELP_WIDTH {
            text.push('\n');
            line_len = 0;
        }
        if line_len == 0 {
            text.push_str("  ");
            line_len = 2;
        }
        text.push_str(tag);
        text.push_str(comma);
        line_len += item_len;
    }
    text.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lines_fit_the_width() {
        for preset in PRESETS {
            for line in help(&preset.table(None)).lines() {
                assert!(line.len() <= HELP_WIDTH, "{}: {line:?} is too long", preset.name);
            }
        }
    }

    #[test]
    fn wrapped_list_joins_back_to_the_list() {
        let mut text = String::new();
        let base = Table::builtin().base;
        push_wrapped_list(&mut text, &base);
        assert!(text.lines().count() > 1);
        let joined: String = text.lines().map(str::trim_start).collect();
        assert_eq!(joined, base.join(","));
    }

    #[test]
    fn a_target_tag_with_a_newline_stays_on_one_line() {
        let tags = vec!["a\nb".to_string()];
        let text = verdict(&Verdict::Excluded { tag: &tags[0] }, &tags);
        assert_eq!(text, "not selected: tag 'a\\x0ab' is excluded (-a\\x0ab)\n");
        // Its tags listed when none is included: escaped the same way.
        let text = verdict(&Verdict::MissingIncluded { included: vec!["gpu"] }, &tags);
        assert_eq!(text, "not selected: none of its tags (a\\x0ab) is among the included tags (gpu)\n");
    }
}
