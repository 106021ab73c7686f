//! The tag tables: the only place in the crate where tags are written down.
//!
//! A tag with a leading `-` is excluded by the filter; one without is
//! included (Bazel's `--build_tag_filters`/`--test_tag_filters` syntax).

/// The tags ROCm CI never attempts, whatever the config. The order is the
/// order of the shell helper this binary replaces, and is kept so that the
/// printed list is byte-for-byte the same.
pub const BASE_TAGS: &[&str] = &[
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

/// One Bazel `--config` that changes the filter, and the tags it appends.
#[derive(Debug, PartialEq, Eq)]
pub struct Config {
    pub name: &'static str,
    pub tags: &'static [&'static str],
}

/// Every config this binary knows, in the order `--help` and
/// `--format=bazelrc` list them.
pub const CONFIGS: &[Config] = &[
    Config { name: "ci_single_gpu", tags: &["requires-gpu-rocm", "requires-gpu-amd", "-multi_gpu"] },
    Config { name: "ci_multi_gpu", tags: &["requires-gpu-rocm", "requires-gpu-amd", "multi_gpu"] },
    Config { name: "ci_rocm_cpu", tags: &["gpu", "-requires-gpu-rocm", "-requires-gpu-amd"] },
    Config { name: "asan", tags: &["-noasan"] },
    Config { name: "tsan", tags: &["-notsan"] },
];

/// The config called `name`, if this binary knows it.
pub fn find_config(name: &str) -> Option<&'static Config> {
    CONFIGS.iter().find(|config| config.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_well_formed(tags: &[&str], what: &str) {
        for (i, tag) in tags.iter().enumerate() {
            let name = tag.strip_prefix('-').unwrap_or(tag);
            assert!(!name.is_empty(), "{what}: empty tag");
            assert!(!name.starts_with('-'), "{what}: tag {tag:?} has two dashes");
            assert!(!tag.contains([',', ' ']), "{what}: tag {tag:?} breaks the list syntax");
            assert!(!tags[..i].contains(tag), "{what}: tag {tag:?} repeated");
        }
    }

    #[test]
    fn tables_are_well_formed() {
        assert_well_formed(BASE_TAGS, "base list");
        for (i, config) in CONFIGS.iter().enumerate() {
            assert!(!config.name.is_empty() && !config.name.starts_with('-'));
            assert!(CONFIGS[..i].iter().all(|c| c.name != config.name), "{} repeated", config.name);
            assert_well_formed(config.tags, config.name);
        }
    }

    #[test]
    fn find_config_matches_exact_names_only() {
        assert_eq!(find_config("asan").map(|c| c.name), Some("asan"));
        assert!(find_config("ASAN").is_none());
        assert!(find_config("").is_none());
    }
}
