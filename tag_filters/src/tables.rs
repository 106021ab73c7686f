//! The tag tables: a base list, and the tags each `--config` appends. The
//! compiled-in tables below, one per preset (`--preset=NAME`), are the only
//! place in the crate where tags are written down; a table file
//! (`--table=FILE`, or `<argv0>.tag_filters.conf` beside the executable)
//! replaces the table in force whole, or names a preset (`preset = NAME`).
//! A config defined with `:=` replaces the filter composed so far instead
//! of appending to it, as a driver that resets its variable does.
//!
//! Each preset cites the upstream file and commit its tags were read from.
//! A tag with a leading `-` is excluded by the filter; one without is
//! included (Bazel's `--build_tag_filters`/`--test_tag_filters` syntax).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Quoted};

/// A compiled-in table, selected by name.
#[derive(Debug, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// One line for `--help`: whose CI the table is.
    pub summary: &'static str,
    base: &'static [&'static str],
    configs: &'static [(&'static str, &'static [&'static str])],
    /// The configs that replace the filter composed so far.
    replacing: &'static [&'static str],
}

/// The preset in force when nothing else is chosen.
pub const DEFAULT_PRESET: &str = "xla-rocm";

/// Every preset, in the order `--help` lists them; the default first.
pub const PRESETS: &[Preset] = &[XLA_ROCM, JAX_ROCM, XLA_ROCM_COMPILE, XLA_ROCM_DEV_INFRA];

/// The base list of `build_tools/rocm/rocm_tag_filters.sh` on openxla/xla
/// main, in its order: last changed in 9060cb7f (2026-06-03, PR #43668) and
/// the same at main's tip 183fa00c (2026-08-22).
const ROCM_TAG_FILTERS_SH: &[&str] = &[
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

/// XLA's ROCm CI: the tags it never attempts and its drivers' `--config`
/// loop. Source: openxla/xla main, build_tools/rocm/rocm_tag_filters.sh
/// (the base list, in its order, so that the printed list is byte-for-byte
/// the shell helper's; last changed in 9060cb7f, 2026-06-03) and
/// build_tools/rocm/run_xla_ci_build.sh (ci_single_gpu, ci_multi_gpu,
/// ci_rocm_cpu; last changed in 329047a7, 2026-07-27), both the same at
/// main's tip 183fa00c (2026-08-22, `git log main` in the ROCm/xla mirror
/// of openxla/xla main); ci_multi_gpu is `multi_gpu` alone since PR #44105.
/// The same three configs are in ROCm/xla rocm-dev-infra's
/// execute_ci_build_upstream.sh (b62705b1, 2026-08-13), which main's
/// `.github/workflows/rocm_ci.yml` runs. asan and tsan are kept from the
/// ROCm CI drivers this table first mirrored; run_xla_ci_build.sh no longer
/// has them.
const XLA_ROCM: Preset = Preset {
    name: "xla-rocm",
    summary: "XLA's ROCm CI (openxla/xla build_tools/rocm)",
    base: ROCM_TAG_FILTERS_SH,
    configs: &[
        ("ci_single_gpu", &["requires-gpu-rocm", "requires-gpu-amd", "-multi_gpu"]),
        ("ci_multi_gpu", &["multi_gpu"]),
        ("ci_rocm_cpu", &["gpu", "-requires-gpu-rocm", "-requires-gpu-amd"]),
        ("asan", &["-noasan"]),
        ("tsan", &["-notsan"]),
    ],
    replacing: &[],
};

/// ROCm's XLA CI driver on the ROCm/xla branch `rocm-dev-infra` (tip
/// 966c66f1, 2026-08-21): build_tools/rocm/execute_ci_build.sh, last
/// changed in d17aa73a (2026-03-23, "Fix execute script order of args
/// (#728)"). It runs from an XLA checkout's build_tools/rocm, so its base
/// list is that checkout's rocm_tag_filters.sh (main's here);
/// `--config=ci_single_gpu` appends `gpu,-multi_gpu,-no_oss`, and
/// `--config=ci_multi_gpu` empties the filter (`TAG_FILTERS=""`: "in mgpu we
/// have a standard set of tests from the xla_mgpu config").
const XLA_ROCM_DEV_INFRA: Preset = Preset {
    name: "rocm-dev-infra",
    summary: "ROCm/xla rocm-dev-infra's execute_ci_build.sh",
    base: ROCM_TAG_FILTERS_SH,
    configs: &[("ci_single_gpu", &["gpu", "-multi_gpu", "-no_oss"]), ("ci_multi_gpu", &[])],
    replacing: &["ci_multi_gpu"],
};

/// JAX's ROCm tests on RBE: the TAG_FILTERS of its test script and the tags
/// its `--config` loop appends. Source: jax-ml/jax,
/// ci/run_bazel_test_rocm_rbe.sh, read at commit
/// cec06d116c05f0d52adfceee3d3b730fdbcb0ce5 (2026-08-08; the file last
/// changed in b0eb8fe080aa4cd1fa2a830741f51f1c070aa001). The split into
/// `multiaccelerator-only` (faf677af0abe) was reverted (3a99fe37b971).
const JAX_ROCM: Preset = Preset {
    name: "jax-rocm",
    summary: "JAX's ROCm tests (jax-ml/jax ci/run_bazel_test_rocm_rbe.sh)",
    base: &["jax_test_gpu", "-config-cuda-only", "-manual"],
    configs: &[("single_gpu", &["gpu", "-multiaccelerator"]), ("multi_gpu", &["multiaccelerator"])],
    replacing: &[],
};

/// XLA's compile-only ROCm build: `rocm_tag_filter`, which build.py uses as
/// both the build and the test filter, with no configs. Source: openxla/xla
/// main, build_tools/ci/build.py (`rocm_tag_filter` came in 4faa4058,
/// 2026-05-16, PR #41038; the file last changed in 64e21b84, 2026-08-19, and
/// is the same at main's tip 183fa00c, 2026-08-22): the shell helper's
/// base list without `-requires-gpu-cuda`, then `gpu`.
const XLA_ROCM_COMPILE: Preset = Preset {
    name: "xla-rocm-compile",
    summary: "XLA's compile-only ROCm build (build_tools/ci/build.py)",
    base: &[
        "-no_gpu",
        "-requires-gpu-intel",
        "-requires-gpu-nvidia",
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
        "gpu",
    ],
    configs: &[],
    replacing: &[],
};

impl Preset {
    /// The preset called `name`, if there is one.
    pub fn find(name: &str) -> Option<&'static Preset> {
        PRESETS.iter().find(|preset| preset.name == name)
    }

    /// The preset names, comma-separated, for messages.
    pub fn known() -> String {
        PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
    }

    /// This preset as the table in force; `file` is the table file that
    /// named it, if one did.
    pub fn table(&'static self, file: Option<&Path>) -> Table {
        Table {
            base: owned(self.base),
            configs: self
                .configs
                .iter()
                .map(|(name, tags)| Config {
                    name: name.to_string(),
                    tags: owned(tags),
                    replaces: self.replacing.contains(name),
                })
                .collect(),
            origin: Origin::Preset { name: self.name, file: file.map(Path::to_path_buf) },
        }
    }
}

/// The preset `--preset=NAME` names; an unknown name is an error that lists
/// the known ones.
pub fn preset_named(name: &str) -> Result<&'static Preset, Error> {
    Preset::find(name).ok_or_else(|| Error::UnknownPreset { name: name.to_string(), known: Preset::known() })
}

/// The name of the base list's line in a table file.
pub const BASE: &str = "base";

/// The name of the line that makes a table file name a preset instead.
pub const PRESET: &str = "preset";

/// Appended to argv[0] to name the table file beside the executable.
pub const CONF_SUFFIX: &str = ".tag_filters.conf";

/// One Bazel `--config` that changes the filter, and the tags it appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub name: String,
    pub tags: Vec<String>,
    /// Defined with `:=`: the filter composed so far is dropped first.
    pub replaces: bool,
}

impl Config {
    /// How a table file defines it: `=`, or `:=` when it replaces.
    pub fn operator(&self) -> &'static str {
        if self.replaces { ":=" } else { "=" }
    }
}

/// Where the table in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A compiled-in table; `file` is the table file that named it, if any.
    Preset {
        name: &'static str,
        file: Option<PathBuf>,
    },
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

/// The most a tag table file may hold (the compiled-in ones are a few
/// KiB).
pub const MAX_TABLE: u64 = 1 << 20;

impl Table {
    /// The default preset's table: the one in force when nothing else is
    /// chosen.
    pub fn builtin() -> Table {
        PRESETS[0].table(None)
    }

    /// The config called `name`, if the table has it.
    pub fn find_config(&self, name: &str) -> Option<&Config> {
        self.configs.iter().find(|config| config.name == name)
    }

    /// The config names, comma-separated, for messages; `none` when the
    /// table has no configs.
    pub fn known_configs(&self) -> String {
        if self.configs.is_empty() {
            return "none".to_string();
        }
        self.configs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Reads a table file: a file, or a pipe (`--table=<(...)`), never a
    /// device (`/dev/zero` would be read without end), and at most
    /// [`MAX_TABLE`] bytes. A FIFO nobody writes reads as empty rather than
    /// blocking the open.
    pub fn read(file: &Path) -> Result<Table, Error> {
        use std::io::Read;
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let unreadable = |error| Error::TableUnreadable { file: file.to_path_buf(), error };
        let invalid = |what: &str| unreadable(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(file).map_err(unreadable)?;
        let kind = f.metadata().map_err(unreadable)?.file_type();
        if kind.is_char_device() || kind.is_block_device() {
            return Err(invalid("it is a device, not a file"));
        }
        // Reads block from here: a pipe's writer may not have written yet.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns.
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) & !libc::O_NONBLOCK) };
        let mut bytes = Vec::new();
        f.take(MAX_TABLE + 1).read_to_end(&mut bytes).map_err(unreadable)?;
        if bytes.len() as u64 > MAX_TABLE {
            return Err(invalid("it is over 1 MiB, which no tag table is"));
        }
        Table::parse(&bytes, file)
    }

    /// Parses a table file's contents: one `NAME = TAG,TAG,...` definition
    /// per line (`base` for the base list, any other name for a config, in
    /// order); a line whose first non-blank character is `#` is a comment;
    /// blank lines are ignored; whitespace around `=`, the name and each tag
    /// is trimmed. An empty value defines a config that appends nothing.
    /// `NAME := TAG,...` defines a config that replaces the filter composed
    /// so far (an empty value: no filter at all).
    /// Instead of definitions, the file may hold one `preset = NAME` line:
    /// it then stands for that compiled-in table.
    pub fn parse(bytes: &[u8], file: &Path) -> Result<Table, Error> {
        let mut base: Option<Vec<String>> = None;
        let mut configs: Vec<Config> = Vec::new();
        // The names defined so far: a table of 1 MiB is checked in time
        // linear in its size, not in the square of its lines.
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let mut preset: Option<&'static Preset> = None;
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
                return Err(bad(format!("expected NAME = TAG,TAG,... but found {}", Quoted(text.as_bytes()))));
            };
            let (name, replaces) = match name.trim_end().strip_suffix(':') {
                Some(name) => (name.trim(), true),
                None => (name.trim(), false),
            };
            check_name(name).map_err(&bad)?;
            if replaces && (name == BASE || name == PRESET) {
                return Err(bad(format!("{} takes '=', not ':='", Quoted(name.as_bytes()))));
            }
            if preset.is_some() || (name == PRESET && (base.is_some() || !configs.is_empty())) {
                return Err(bad("a 'preset' line must be the only definition in the file".to_string()));
            }
            if name == PRESET {
                let value = value.trim();
                let found = Preset::find(value).ok_or_else(|| {
                    bad(format!("unknown preset {} (known presets: {})", Quoted(value.as_bytes()), Preset::known()))
                })?;
                preset = Some(found);
                continue;
            }
            let tags = parse_tags(value).map_err(&bad)?;
            if name == BASE {
                if base.is_some() {
                    return Err(bad("a second 'base' line".to_string()));
                }
                base = Some(tags);
            } else {
                if !names.insert(name) {
                    return Err(bad(format!("config {} is defined twice", Quoted(name.as_bytes()))));
                }
                configs.push(Config { name: name.to_string(), tags, replaces });
            }
        }
        if let Some(preset) = preset {
            return Ok(preset.table(Some(file)));
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
            Quoted(name.as_bytes())
        ));
    }
    Ok(())
}

/// `TAG,TAG,...`: each tag trimmed, none empty, none repeated, no space or
/// comma inside, at most one leading `-`.
fn parse_tags(value: &str) -> Result<Vec<String>, String> {
    let value = value.trim();
    let mut tags: Vec<String> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    if value.is_empty() {
        return Ok(tags);
    }
    for tag in value.split(',') {
        let tag = tag.trim();
        let bare = tag.strip_prefix('-').unwrap_or(tag);
        if bare.is_empty() {
            return Err(format!("empty tag in {}", Quoted(value.as_bytes())));
        }
        // `$(tag_filters --format=flags)`, unquoted, splits its output on
        // whitespace and globs `*`, `?` and `[`; Bazel reads a `.bazelrc`
        // line (`--format=bazelrc`) as ending at `#`, takes quotes and `\`
        // away and expands `${...}`: no tag holds one.
        let bad = |c: char| {
            c.is_whitespace() || c.is_control() || matches!(c, '=' | '*' | '?' | '[' | '#' | '\'' | '"' | '\\' | '$')
        };
        if bare.starts_with('-') || tag.chars().any(bad) {
            return Err(format!("bad tag {} ({BAD_TAG})", Quoted(tag.as_bytes())));
        }
        if !seen.insert(tag) {
            return Err(format!("tag {} is listed twice", Quoted(tag.as_bytes())));
        }
        tags.push(tag.to_string());
    }
    Ok(tags)
}

/// What a tag may not hold, as a bad one is told.
const BAD_TAG: &str = "no whitespace, '=', '*', '?', '[', '#', '$', '\\' or quote in a tag";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Table, String> {
        Table::parse(text.as_bytes(), Path::new("t.conf")).map_err(|e| e.to_string())
    }

    #[test]
    fn every_preset_is_well_formed() {
        // A compiled-in table must pass the same checks as a file.
        for preset in PRESETS {
            check_name(preset.name).unwrap();
            assert_ne!(preset.name, BASE);
            let table = preset.table(None);
            let mut text = format!("base = {}\n", table.base.join(","));
            for config in &table.configs {
                text.push_str(&format!("{} {} {}\n", config.name, config.operator(), config.tags.join(",")));
            }
            let reparsed = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", preset.name));
            assert_eq!(reparsed.base, table.base, "{}", preset.name);
            assert_eq!(reparsed.configs, table.configs, "{}", preset.name);
            assert!(table.configs.iter().all(|c| c.name != PRESET), "{}", preset.name);
        }
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        assert_eq!(names, ["xla-rocm", "jax-rocm", "xla-rocm-compile", "rocm-dev-infra"]);
        assert_eq!(PRESETS[0].name, DEFAULT_PRESET);
        assert_eq!(Table::builtin().origin, Origin::Preset { name: DEFAULT_PRESET, file: None });
    }

    #[test]
    fn the_compile_only_list_is_the_base_list_without_cuda_plus_gpu() {
        let mut expected: Vec<&str> = XLA_ROCM.base.iter().copied().filter(|t| *t != "-requires-gpu-cuda").collect();
        expected.push("gpu");
        assert_eq!(XLA_ROCM_COMPILE.base, expected);
        assert!(XLA_ROCM_COMPILE.configs.is_empty());
    }

    #[test]
    fn a_file_may_name_a_preset_instead() {
        let table = parse("# JAX's table\n  preset =  jax-rocm \n\n").unwrap();
        assert_eq!(table.base, ["jax_test_gpu", "-config-cuda-only", "-manual"]);
        assert_eq!(table.origin, Origin::Preset { name: "jax-rocm", file: Some("t.conf".into()) });
        let known = "(known presets: xla-rocm, jax-rocm, xla-rocm-compile, rocm-dev-infra)";
        assert_eq!(parse("preset = jax\n").unwrap_err(), format!("t.conf:1: unknown preset 'jax' {known}"));
        let only = "a 'preset' line must be the only definition in the file";
        assert_eq!(parse("base = a\npreset = jax-rocm\n").unwrap_err(), format!("t.conf:2: {only}"));
        assert_eq!(parse("preset = jax-rocm\nx = a\n").unwrap_err(), format!("t.conf:2: {only}"));
        assert_eq!(parse("preset = jax-rocm\npreset = xla-rocm\n").unwrap_err(), format!("t.conf:2: {only}"));
    }

    #[test]
    fn preset_named_lists_the_known_presets() {
        assert_eq!(preset_named("xla-rocm-compile").unwrap().name, "xla-rocm-compile");
        assert_eq!(
            preset_named("XLA-ROCM").unwrap_err().to_string(),
            "--preset: unknown preset 'XLA-ROCM' (known presets: xla-rocm, jax-rocm, xla-rocm-compile, rocm-dev-infra)"
        );
        assert_eq!(XLA_ROCM_COMPILE.table(None).known_configs(), "none");
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
        assert_eq!(
            table.configs[0],
            Config { name: "ci_x".into(), tags: vec!["a".into(), "-b".into()], replaces: false }
        );
        assert_eq!(table.configs[1], Config { name: "empty".into(), tags: vec![], replaces: false });
        assert_eq!(table.origin, Origin::File("t.conf".into()));
    }

    #[test]
    fn a_config_defined_with_colon_equals_replaces() {
        let table = parse(
            "base = a
mgpu := \nnarrow:=b,-c
",
        )
        .unwrap();
        assert_eq!(table.configs[0], Config { name: "mgpu".into(), tags: vec![], replaces: true });
        assert_eq!(
            table.configs[1],
            Config { name: "narrow".into(), tags: vec!["b".into(), "-c".into()], replaces: true }
        );
        assert_eq!(parse("base := a\n").unwrap_err(), "t.conf:1: 'base' takes '=', not ':='");
        assert_eq!(parse("preset := xla-rocm\n").unwrap_err(), "t.conf:1: 'preset' takes '=', not ':='");
        let dev_infra = XLA_ROCM_DEV_INFRA.table(None);
        assert!(dev_infra.find_config("ci_multi_gpu").unwrap().replaces);
        assert!(!dev_infra.find_config("ci_single_gpu").unwrap().replaces);
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let cases = [
            ("base = a\nnonsense\n", "t.conf:2: expected NAME = TAG,TAG,... but found 'nonsense'"),
            ("base = a,,b\n", "t.conf:1: empty tag in 'a,,b'"),
            ("base = a,-\n", "t.conf:1: empty tag in 'a,-'"),
            (
                "base = a,--b\n",
                "t.conf:1: bad tag '--b' (no whitespace, '=', '*', '?', '[', '#', '$', '\\' or quote in a tag)",
            ),
            (
                "base = a b\n",
                "t.conf:1: bad tag 'a b' (no whitespace, '=', '*', '?', '[', '#', '$', '\\' or quote in a tag)",
            ),
            (
                "base = a,g[pu]\n",
                "t.conf:1: bad tag 'g[pu]' (no whitespace, '=', '*', '?', '[', '#', '$', '\\' or quote in a tag)",
            ),
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
        // What Bazel's rc parser would read otherwise (`--format=bazelrc`):
        // a `#` ends the line, quotes and `\` go, `${...}` is expanded.
        for tag in ["keep#me", "a\"b", "it's", "${HOME}", "d\\e", "$x"] {
            let err = parse(&format!("base = -no_gpu\nx = {tag},-c\n")).unwrap_err();
            assert!(err.starts_with("t.conf:2: bad tag ") && err.ends_with(&format!("({BAD_TAG})")), "{tag}: {err}");
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
