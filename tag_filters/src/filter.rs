//! Composing the filter (base list, then each config's tags, each tag once)
//! and Bazel's rule for whether a filter selects a target.

use crate::tables::{Config, Table};
use std::collections::BTreeSet;

/// The one entry Bazel ignores in a filter.
const MANUAL: &str = "manual";

/// A tag filter as Bazel's `--test_tag_filters` takes it: an ordered list of
/// entries, `-tag` to exclude, `tag` or `+tag` to include; a bare `manual`
/// entry is no filter at all (Bazel's `TestTargetUtils.sortTagsBySense`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter<'t> {
    entries: Vec<&'t str>,
    /// The same entries, to tell one already present in constant time.
    present: BTreeSet<&'t str>,
}

impl<'t> TagFilter<'t> {
    /// The table's base list followed by the tags of `configs`, in the order
    /// given. An entry already present is not repeated, so a config given
    /// twice (or a later config sharing tags with an earlier one) adds
    /// nothing new. A config that replaces drops what came before it.
    pub fn compose(table: &'t Table, configs: impl IntoIterator<Item = &'t Config>) -> TagFilter<'t> {
        let mut filter = TagFilter { entries: Vec::new(), present: BTreeSet::new() };
        filter.append(&table.base);
        for config in configs {
            if config.replaces {
                filter.entries.clear();
                filter.present.clear();
            }
            filter.append(&config.tags);
        }
        filter
    }

    fn append(&mut self, tags: &'t [String]) {
        for tag in tags {
            if self.present.insert(tag) {
                self.entries.push(tag);
            }
        }
    }

    /// The entries, comma-joined: the value of `--test_tag_filters=`.
    pub fn joined(&self) -> String {
        self.entries.join(",")
    }

    /// Tags a target must carry one of (when there are any), each once, as
    /// Bazel reads the entries: `+tag` is `tag`, and a bare `manual` is
    /// skipped (Bazel ignores it: it is a property of a `test_suite`, not
    /// a filter). `-+tag` excludes `+tag` ([`excluded`](Self::excluded)).
    pub fn included(&self) -> impl Iterator<Item = &'t str> + '_ {
        let mut seen = BTreeSet::new();
        self.entries
            .iter()
            .filter(|entry| !entry.starts_with('-') && **entry != MANUAL)
            .map(|entry| entry.strip_prefix('+').unwrap_or(entry))
            .filter(move |tag| seen.insert(*tag))
    }

    /// Tags that rule a target out, without their `-`.
    pub fn excluded(&self) -> impl Iterator<Item = &'t str> + '_ {
        self.entries.iter().filter_map(|entry| entry.strip_prefix('-'))
    }

    /// Applies Bazel's rule to a target with `target_tags`: any excluded tag
    /// rules it out (exclusion wins even over an included tag); otherwise, if
    /// the filter includes any tags, the target needs at least one of them.
    /// The deciding tag is the first of the target's own tags, in its order.
    pub fn explain<'a>(&self, target_tags: &'a [String]) -> Verdict<'a, 't> {
        let first_target_tag_in = |set: &[&str]| target_tags.iter().map(String::as_str).find(|tag| set.contains(tag));
        let excluded: Vec<&'t str> = self.excluded().collect();
        if let Some(tag) = first_target_tag_in(&excluded) {
            return Verdict::Excluded { tag };
        }
        let included: Vec<&'t str> = self.included().collect();
        if included.is_empty() {
            return Verdict::NothingIncluded;
        }
        match first_target_tag_in(&included) {
            Some(tag) => Verdict::Included { tag },
            None => Verdict::MissingIncluded { included },
        }
    }
}

/// Whether a filter selects a target, and why.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a, 't> {
    /// Not selected: the target carries `tag`, which the filter excludes.
    Excluded { tag: &'a str },
    /// Selected: the target carries `tag`, which the filter includes.
    Included { tag: &'a str },
    /// Selected: nothing excluded, and the filter includes no tags at all, so
    /// every target passes the include check.
    NothingIncluded,
    /// Not selected: nothing excluded, but the target carries none of the
    /// filter's `included` tags.
    MissingIncluded { included: Vec<&'t str> },
}

impl Verdict<'_, '_> {
    pub fn is_selected(&self) -> bool {
        matches!(self, Verdict::Included { .. } | Verdict::NothingIncluded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    static TABLE: LazyLock<Table> = LazyLock::new(Table::builtin);

    fn compose(names: &[&str]) -> TagFilter<'static> {
        TagFilter::compose(&TABLE, names.iter().map(|name| TABLE.find_config(name).expect(name)))
    }

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|tag| tag.to_string()).collect()
    }

    #[test]
    fn base_only_is_the_base_list() {
        assert_eq!(compose(&[]).entries, TABLE.base);
    }

    #[test]
    fn configs_append_in_order_without_repeats() {
        let filter = compose(&["asan", "ci_single_gpu", "asan", "ci_multi_gpu"]);
        assert_eq!(
            filter.entries[TABLE.base.len()..],
            ["-noasan", "requires-gpu-rocm", "requires-gpu-amd", "-multi_gpu", "multi_gpu"]
        );
    }

    #[test]
    fn included_and_excluded_split_on_the_dash() {
        let filter = compose(&["ci_rocm_cpu"]);
        assert_eq!(filter.included().collect::<Vec<_>>(), ["gpu"]);
        let excluded: Vec<_> = filter.excluded().collect();
        assert_eq!(excluded[0], "no_gpu");
        assert_eq!(excluded[excluded.len() - 2..], ["requires-gpu-rocm", "requires-gpu-amd"]);
    }

    #[test]
    fn explain_follows_bazel() {
        let single = compose(&["ci_single_gpu"]);
        let target = tags(&["gpu", "requires-gpu-amd", "requires-gpu-rocm"]);
        assert_eq!(single.explain(&target), Verdict::Included { tag: "requires-gpu-amd" });

        // Exclusion wins over an included tag that comes first.
        let target = tags(&["requires-gpu-rocm", "no_oss", "multi_gpu"]);
        assert_eq!(single.explain(&target), Verdict::Excluded { tag: "no_oss" });

        let target = tags(&["gpu"]);
        assert_eq!(
            single.explain(&target),
            Verdict::MissingIncluded { included: vec!["requires-gpu-rocm", "requires-gpu-amd"] }
        );
        assert!(!single.explain(&[]).is_selected());

        let base = compose(&[]);
        assert_eq!(base.explain(&target), Verdict::NothingIncluded);
        assert_eq!(base.explain(&[]), Verdict::NothingIncluded);
        assert_eq!(base.explain(&tags(&["cuda-only"])), Verdict::Excluded { tag: "cuda-only" });
    }

    #[test]
    fn plus_includes_and_a_bare_manual_is_no_entry() {
        let table = Table::parse(b"base = -no_gpu,+gpu,gpu,manual,-manual,-+x\n", std::path::Path::new("t")).unwrap();
        let filter = TagFilter::compose(&table, []);
        assert_eq!(filter.included().collect::<Vec<_>>(), ["gpu"]);
        assert_eq!(filter.excluded().collect::<Vec<_>>(), ["no_gpu", "manual", "+x"]);
        assert_eq!(filter.explain(&tags(&["gpu"])), Verdict::Included { tag: "gpu" });
        assert_eq!(filter.explain(&tags(&["+x", "gpu"])), Verdict::Excluded { tag: "+x" });
        let only_manual = Table::parse(b"base = -no_gpu,manual\n", std::path::Path::new("t")).unwrap();
        let filter = TagFilter::compose(&only_manual, []);
        assert_eq!(filter.explain(&tags(&["gpu"])), Verdict::NothingIncluded);
    }

    #[test]
    fn a_tag_both_included_and_excluded_rules_the_target_out() {
        let filter = compose(&["ci_single_gpu", "ci_rocm_cpu"]);
        let target = tags(&["requires-gpu-rocm"]);
        assert_eq!(filter.explain(&target), Verdict::Excluded { tag: "requires-gpu-rocm" });
    }
}
