//! The tag table: the base list ROCm CI never attempts, and the tags each
//! `--config` appends. The compiled-in table below is the only place in the
//! crate where tags are written down; a table file (`--table=FILE`, or
//! `<argv0>.tag_filters.conf` beside the executable) replaces it whole.
//!
//! The compiled-in table mirrors openxla/xla main after PR #44105
//! (2026-06-11, "[ROCm] Fix multigpu filter for pr checks"): the base list of
//! `build_tools/rocm/rocm_tag_filters.sh` as consolidated by PR #37212, and
//! the `--config` loop of the ROCm CI drivers (`ci_single_gpu`,
//! `ci_multi_gpu`, `ci_rocm_cpu`; `asan`/`tsan` from
//! `build_tools/rocm/run_xla_ci_build.sh`).
//!
//! A tag with a leading `-` is excluded by the filter; one without is
//! included (Bazel's `--build_tag_filters`/`--test_tag_filters` syntax).

use std::path::{Path, PathBuf};

use crate::error::{Error, Quoted};

/// The compiled-in base list, in the order of the shell helper it replaces,
/// so that the printed list is byte-for-byte the same.
const BUILTIN_BASE: &[&str] = &[
    "-no_gpu",
    "-requires-gpu-intel",
    "-requires-gpu-nvidia",
    "-requires-gpu-cuda",
    "-cuda-only",
    "-oneapi-only",
    "-requires-gpu-sm60",
    "-requires-gpu-sm60-only",
    "-requires-gpu-sm70",
    "-requires-gpu-sm70-only",
    "-requires-gpu-sm80",
    "-requires-gpu-sm80-only",
    "-requires-gpu-sm86",
    "-requires-gpu-sm86-only",
    "-requires-gpu-sm89",
    "-requires-gpu-sm89-only",
    "-requires-gpu-sm90",
    "-requires-gpu-sm90-only",
    "-skip_rocprofiler_sdk",
    "-no_oss",
    "-oss_excluded",
    "-oss_serial",
];

/// The compiled-in configs, in the order `--help` and `--format=bazelrc`
/// list them.
const BUILTIN_CONFIGS: &[(&str, &[&str])] = &[
    ("ci_single_gpu", &["requires-gpu-rocm", "requires-gpu-amd", "-multi_gpu"]),
    // Only `multi_gpu` since openxla/xla#44105: requires-gpu-rocm and
    // requires-gpu-amd pulled every single-GPU test into multi-GPU runs.
    ("ci_multi_gpu", &["multi_gpu"]),
    ("ci_rocm_cpu", &["gpu", "-requires-gpu-rocm", "-requires-gpu-amd"]),
    ("asan", &["-noasan"]),
    ("tsan", &["-notsan"]),
];

/// The name of the base list's line in a table file.
pub const BASE: &str = "base";

/// Appended to argv[0] to name the table file beside the executable.
pub const CONF_SUFFIX: &str = ".tag_filters.conf";

/// One Bazel `--config` that changes the filter, and the tags it appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub name: String,
    pub tags: Vec<String>,
}

/// Where the table in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Builtin,
    File(PathBuf),
}

/// The table in force: the base list and every known config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub base: Vec<String>,
    pub configs: Vec<Config>,
    pub origin: Origin,
}

fn owned(tags: &[&str]) -> Vec<String> {
    tags.iter().map(|tag| tag.to_string()).collect()
}

impl Table {
    /// The compiled-in table (upstream main's).
    pub fn builtin() -> Table {
        Table {
            base: owned(BUILTIN_BASE),
            configs: BUILTIN_CONFIGS
                .iter()
                .map(|(name, tags)| Config { name: name.to_string(), tags: owned(tags) })
                .collect(),
            origin: Origin::Builtin,
        }
    }

    /// The config called `name`, if the table has it.
    pub fn find_config(&self, name: &str) -> Option<&Config> {
        self.configs.iter().find(|config| config.name == name)
    }

    /// The config names, comma-separated, for messages.
    pub fn known_configs(&self) -> String {
        self.configs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Reads a table file.
    pub fn read(file: &Path) -> Result<Table, Error> {
        let bytes = std::fs::read(file).map_err(|e| Error::TableUnreadable { file: file.to_path_buf(), error: e })?;
        Table::parse(&bytes, file)
    }

    /// Parses a table file's contents: one `NAME = TAG,TAG,...` definition
    /// per line (`base` for the base list, any other name for a config, in
    /// order); a line whose first non-blank character is `#` is a comment;
    /// blank lines are ignored; whitespace around `=`, the name and each tag
    /// is trimmed. An empty value defines a config that appends nothing.
    pub fn parse(bytes: &[u8], file: &Path) -> Result<Table, Error> {
        let mut base: Option<Vec<String>> = None;
        let mut configs: Vec<Config> = Vec::new();
        for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let bad = |problem: String| Error::TableLine { file: file.to_path_buf(), line: index + 1, problem };
            let Ok(text) = std::str::from_utf8(raw) else {
                return Err(bad("not valid UTF-8".to_string()));
            };
            let text = text.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let Some((name, value)) = text.split_once('=') else {
                return Err(bad(format!("expected NAME = TAG,TAG,... but found {}", Quoted(text))));
            };
            let name = name.trim();
            check_name(name).map_err(&bad)?;
            let tags = parse_tags(value).map_err(&bad)?;
            if name == BASE {
                if base.is_some() {
                    return Err(bad("a second 'base' line".to_string()));
                }
                base = Some(tags);
            } else {
                if configs.iter().any(|c| c.name == name) {
                    return Err(bad(format!("config {} is defined twice", Quoted(name))));
                }
                configs.push(Config { name: name.to_string(), tags });
            }
        }
        let Some(base) = base else {
            return Err(Error::TableNoBase { file: file.to_path_buf() });
        };
        Ok(Table { base, configs, origin: Origin::File(file.to_path_buf()) })
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty name before '='".to_string());
    }
    if name.starts_with('-') || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err(format!(
            "bad name {} (a config name is letters, digits, '_', '-' and '.', not starting with '-')",
            Quoted(name)
        ));
    }
    Ok(())
}

/// `TAG,TAG,...`: each tag trimmed, none empty, none repeated, no space or
/// comma inside, at most one leading `-`.
fn parse_tags(value: &str) -> Result<Vec<String>, String> {
    let value = value.trim();
    let mut tags: Vec<String> = Vec::new();
    if value.is_empty() {
        return Ok(tags);
    }
    for tag in value.split(',') {
        let tag = tag.trim();
        let bare = tag.strip_prefix('-').unwrap_or(tag);
        if bare.is_empty() {
            return Err(format!("empty tag in {}", Quoted(value)));
        }
        if bare.starts_with('-') || tag.chars().any(|c| c.is_whitespace() || c.is_control() || c == '=') {
            return Err(format!("bad tag {}", Quoted(tag)));
        }
        if tags.iter().any(|seen| seen == tag) {
            return Err(format!("tag {} is listed twice", Quoted(tag)));
        }
        tags.push(tag.to_string());
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Table, String> {
        Table::parse(text.as_bytes(), Path::new("t.conf")).map_err(|e| e.to_string())
    }

    #[test]
    fn the_builtin_table_is_well_formed() {
        // The compiled-in table must pass the same checks as a file.
        let table = Table::builtin();
        let mut text = format!("base = {}\n", table.base.join(","));
        for config in &table.configs {
            text.push_str(&format!("{} = {}\n", config.name, config.tags.join(",")));
        }
        let reparsed = parse(&text).unwrap();
        assert_eq!(reparsed.base, table.base);
        assert_eq!(reparsed.configs, table.configs);
    }

    #[test]
    fn ci_multi_gpu_appends_only_multi_gpu() {
        assert_eq!(Table::builtin().find_config("ci_multi_gpu").unwrap().tags, ["multi_gpu"]);
    }

    #[test]
    fn a_file_with_comments_blanks_and_whitespace() {
        let table =
            parse("# ours\n\n  base =  -no_gpu , -no_oss\n\tci_x=a,-b  \n  # indented comment\nempty =\n").unwrap();
        assert_eq!(table.base, ["-no_gpu", "-no_oss"]);
        assert_eq!(table.configs[0], Config { name: "ci_x".into(), tags: vec!["a".into(), "-b".into()] });
        assert_eq!(table.configs[1], Config { name: "empty".into(), tags: vec![] });
        assert_eq!(table.origin, Origin::File("t.conf".into()));
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let cases = [
            ("base = a\nnonsense\n", "t.conf:2: expected NAME = TAG,TAG,... but found 'nonsense'"),
            ("base = a,,b\n", "t.conf:1: empty tag in 'a,,b'"),
            ("base = a,-\n", "t.conf:1: empty tag in 'a,-'"),
            ("base = a,--b\n", "t.conf:1: bad tag '--b'"),
            ("base = a b\n", "t.conf:1: bad tag 'a b'"),
            ("base = a,a\n", "t.conf:1: tag 'a' is listed twice"),
            ("base = a\nbase = b\n", "t.conf:2: a second 'base' line"),
            ("base = a\nx = b\n\nx = c\n", "t.conf:4: config 'x' is defined twice"),
            (" = a\n", "t.conf:1: empty name before '='"),
            (
                "base = a\n-x = a\n",
                "t.conf:2: bad name '-x' (a config name is letters, digits, '_', '-' and '.', not starting with '-')",
            ),
            ("ci = a\n", "t.conf: no 'base = TAG,TAG,...' line"),
        ];
        for (text, message) in cases {
            assert_eq!(parse(text).unwrap_err(), message, "{text:?}");
        }
        let err = Table::parse(b"base = a\nx = \xff\n", Path::new("t.conf")).unwrap_err();
        assert_eq!(err.to_string(), "t.conf:2: not valid UTF-8");
    }

    #[test]
    fn find_config_matches_exact_names_only() {
        let table = Table::builtin();
        assert_eq!(table.find_config("asan").map(|c| c.name.as_str()), Some("asan"));
        assert!(table.find_config("ASAN").is_none());
        assert!(table.find_config("").is_none());
        assert_eq!(table.known_configs(), "ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan");
    }
}
