//! `--explain`: whether Bazel would select a target with the given tags
//! under the resulting filter, which tag decided, and the exit code.

mod common;

use common::{assert_usage_error, run};
use test_support::{TempDir, write_file};

#[track_caller]
fn assert_verdict(args: &[&str], code: i32, line: &str) {
    let out = run(args);
    out.assert_code(code).assert_stdout_eq(&format!("{line}\n"));
    assert_eq!(out.stderr, "", "stderr should be empty\n{}", out.explain());
}

#[test]
fn selected_by_an_included_tag() {
    assert_verdict(
        &["--config=ci_single_gpu", "--explain=gpu,requires-gpu-amd,requires-gpu-rocm"],
        0,
        "selected: tag 'requires-gpu-amd' is in the included tags",
    );
    assert_verdict(
        &["--explain", "gpu,xla", "--config", "ci_rocm_cpu"],
        0,
        "selected: tag 'gpu' is in the included tags",
    );
}

#[test]
fn excluded_by_a_negative_tag() {
    assert_verdict(
        &["--config=ci_single_gpu", "--explain=requires-gpu-rocm,no_oss,multi_gpu"],
        1,
        "not selected: tag 'no_oss' is excluded (-no_oss)",
    );
    assert_verdict(
        &["--config=ci_single_gpu", "--explain=requires-gpu-amd,multi_gpu"],
        1,
        "not selected: tag 'multi_gpu' is excluded (-multi_gpu)",
    );
    assert_verdict(&["--config=asan", "--explain=noasan"], 1, "not selected: tag 'noasan' is excluded (-noasan)");
    // Exclusion wins over inclusion: ci_rocm_cpu excludes what ci_single_gpu
    // includes.
    assert_verdict(
        &["--config=ci_single_gpu", "--config=ci_rocm_cpu", "--explain=requires-gpu-rocm"],
        1,
        "not selected: tag 'requires-gpu-rocm' is excluded (-requires-gpu-rocm)",
    );
}

#[test]
fn missing_an_included_tag() {
    assert_verdict(
        &["--config=ci_single_gpu", "--explain=gpu"],
        1,
        "not selected: none of its tags (gpu) is among the included tags \
         (requires-gpu-rocm, requires-gpu-amd)",
    );
    assert_verdict(
        &["--config=ci_rocm_cpu", "--explain=xla,cpu,xla"],
        1,
        "not selected: none of its tags (xla, cpu) is among the included tags (gpu)",
    );
    assert_verdict(
        &["--config=ci_multi_gpu", "--explain="],
        1,
        "not selected: it has no tags and needs one of the included tags (multi_gpu)",
    );
}

#[test]
fn base_list_only() {
    assert_verdict(
        &["--explain=gpu,requires-gpu-rocm"],
        0,
        "selected: none of its tags is excluded and the filter has no included tags",
    );
    assert_verdict(&["--explain="], 0, "selected: none of its tags is excluded and the filter has no included tags");
    assert_verdict(
        &["--explain=gpu,requires-gpu-sm80-only"],
        1,
        "not selected: tag 'requires-gpu-sm80-only' is excluded (-requires-gpu-sm80-only)",
    );
    assert_verdict(&["--config=tsan", "--explain=notsan"], 1, "not selected: tag 'notsan' is excluded (-notsan)");
}

#[test]
fn driver_arguments_around_explain_are_ignored() {
    assert_verdict(
        &["test", "--config=ci_multi_gpu", "--explain", "multi_gpu", "--", "//xla/..."],
        0,
        "selected: tag 'multi_gpu' is in the included tags",
    );
}

#[test]
fn bad_tag_lists() {
    assert_usage_error(&["--explain=a,,b"], "tag_filters: --explain: bad value 'a,,b': empty tag");
    assert_usage_error(&["--explain=gpu,"], "tag_filters: --explain: bad value 'gpu,': empty tag");
    assert_usage_error(
        &["--explain=gpu,-no_oss"],
        "tag_filters: --explain: bad value 'gpu,-no_oss': tag '-no_oss' starts with '-' \
         (give the target's own tags, not filter entries)",
    );
    assert_usage_error(&["--explain"], "tag_filters: --explain: missing value");
    // A two-word value cannot start with `-`: that is the next option.
    assert_usage_error(&["--explain", "-no_oss"], "tag_filters: --explain: missing value");
}

#[test]
fn explain_does_not_take_a_format() {
    assert_usage_error(
        &["--explain=gpu", "--format=flags"],
        "tag_filters: --explain: cannot be combined with --format (it prints a verdict)",
    );
}

#[test]
fn strict_still_applies() {
    assert_usage_error(
        &["--strict", "--config=rbe", "--explain=gpu"],
        "tag_filters: --config: unknown config 'rbe' under --strict \
         (known configs: ci_single_gpu, ci_multi_gpu, ci_rocm_cpu, asan, tsan)",
    );
}

/// Bazel reads a filter entry `+tag` as the included tag `tag`, and skips a
/// bare `manual` entry (`TestTargetUtils.sortTagsBySense`).
#[test]
fn plus_includes_and_a_bare_manual_is_ignored_as_bazel_reads_them() {
    let dir = TempDir::new("tf-explain-plus");
    let plus = dir.join("plus.conf");
    write_file(&plus, "base = -no_gpu,+gpu\n");
    let plus = format!("--table={}", plus.display());
    assert_verdict(&[&plus, "--explain=gpu"], 0, "selected: tag 'gpu' is in the included tags");
    assert_verdict(
        &[&plus, "--explain=cpu"],
        1,
        "not selected: none of its tags (cpu) is among the included tags (gpu)",
    );
    let manual = dir.join("manual.conf");
    write_file(&manual, "base = -no_gpu,manual\n");
    let manual = format!("--table={}", manual.display());
    assert_verdict(
        &[&manual, "--explain=gpu"],
        0,
        "selected: none of its tags is excluded and the filter has no included tags",
    );
    // `-manual` is an exclusion like any other.
    let minus = dir.join("minus.conf");
    write_file(&minus, "base = gpu,-manual\n");
    let minus = format!("--table={}", minus.display());
    assert_verdict(&[&minus, "--explain=gpu,manual"], 1, "not selected: tag 'manual' is excluded (-manual)");
}
