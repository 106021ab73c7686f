//! `--preset=NAME`: each compiled-in table's output for its configs, the
//! default preset being the table of old, its precedence against `--table`
//! and the table file beside the executable, an unknown preset, and --help.

mod common;

use common::{assert_prints, assert_usage_error, bin, run};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use test_support::{Cmd, TempDir, write_file};

/// XLA's ROCm base list (the default preset's), written out.
const XLA_BASE: &str = "-no_gpu,-requires-gpu-intel,-requires-gpu-nvidia,-requires-gpu-cuda,-cuda-only,\
    -oneapi-only,-requires-gpu-sm60,-requires-gpu-sm60-only,-requires-gpu-sm70,-requires-gpu-sm70-only,\
    -requires-gpu-sm80,-requires-gpu-sm80-only,-requires-gpu-sm86,-requires-gpu-sm86-only,-requires-gpu-sm89,\
    -requires-gpu-sm89-only,-requires-gpu-sm90,-requires-gpu-sm90-only,-skip_rocprofiler_sdk,-no_oss,\
    -oss_excluded,-oss_serial";

/// JAX's base list (jax-ml/jax ci/run_bazel_test_rocm_rbe.sh).
const JAX_BASE: &str = "jax_test_gpu,-config-cuda-only,-manual";

/// XLA's compile-only `rocm_tag_filter` (openxla/xla build_tools/ci/build.py).
const XLA_COMPILE: &str = "-no_gpu,-requires-gpu-intel,-requires-gpu-nvidia,-cuda-only,-oneapi-only,\
    -requires-gpu-sm60,-requires-gpu-sm60-only,-requires-gpu-sm70,-requires-gpu-sm70-only,-requires-gpu-sm80,\
    -requires-gpu-sm80-only,-requires-gpu-sm86,-requires-gpu-sm86-only,-requires-gpu-sm89,-requires-gpu-sm89-only,\
    -requires-gpu-sm90,-requires-gpu-sm90-only,-skip_rocprofiler_sdk,-no_oss,-oss_excluded,-oss_serial,gpu";

const KNOWN_PRESETS: &str = "(known presets: xla-rocm, jax-rocm, xla-rocm-compile, rocm-dev-infra)";

#[test]
fn jax_rocm_for_each_config() {
    for spelling in [&["--preset=jax-rocm"][..], &["--preset", "jax-rocm"]] {
        let with = |extra: &[&'static str]| [spelling, extra].concat();
        assert_prints(&with(&[]), &format!("{JAX_BASE}\n"));
        assert_prints(&with(&["--config=single_gpu"]), &format!("{JAX_BASE},gpu,-multiaccelerator\n"));
        assert_prints(&with(&["--config=multi_gpu"]), &format!("{JAX_BASE},multiaccelerator\n"));
        assert_prints(
            &with(&["--config=multi_gpu", "--config=single_gpu"]),
            &format!("{JAX_BASE},multiaccelerator,gpu,-multiaccelerator\n"),
        );
    }
    assert_prints(
        &["--preset=jax-rocm", "--format=flags", "--config=single_gpu"],
        &format!(
            "--build_tag_filters={JAX_BASE},gpu,-multiaccelerator --test_tag_filters={JAX_BASE},gpu,-multiaccelerator\n"
        ),
    );
    assert_prints(
        &["--preset=jax-rocm", "--format=bazelrc"],
        &format!(
            "build:single_gpu --build_tag_filters={JAX_BASE},gpu,-multiaccelerator\n\
             test:single_gpu --test_tag_filters={JAX_BASE},gpu,-multiaccelerator\n\
             build:multi_gpu --build_tag_filters={JAX_BASE},multiaccelerator\n\
             test:multi_gpu --test_tag_filters={JAX_BASE},multiaccelerator\n"
        ),
    );
    // XLA's configs mean nothing to JAX's table: ignored, as unknown configs are.
    assert_prints(&["--preset=jax-rocm", "--config=ci_single_gpu"], &format!("{JAX_BASE}\n"));
    assert_usage_error(
        &["--preset=jax-rocm", "--config=ci_single_gpu", "--strict"],
        "tag_filters: --config: unknown config 'ci_single_gpu' under --strict (known configs: single_gpu, multi_gpu)",
    );
}

#[test]
fn jax_rocm_explain() {
    let out = run(&["--preset=jax-rocm", "--config=single_gpu", "--explain=jax_test_gpu,multiaccelerator"]);
    out.assert_code(1).assert_stdout_eq("not selected: tag 'multiaccelerator' is excluded (-multiaccelerator)\n");
    let out = run(&["--preset=jax-rocm", "--config=single_gpu", "--explain=gpu"]);
    out.assert_success().assert_stdout_eq("selected: tag 'gpu' is in the included tags\n");
}

#[test]
fn xla_rocm_compile_has_no_configs() {
    assert_prints(&["--preset=xla-rocm-compile"], &format!("{XLA_COMPILE}\n"));
    assert_prints(
        &["--preset=xla-rocm-compile", "--config=ci_single_gpu", "test", "//xla/..."],
        &format!("{XLA_COMPILE}\n"),
    );
    assert_prints(
        &["--preset=xla-rocm-compile", "--format=flags"],
        &format!("--build_tag_filters={XLA_COMPILE} --test_tag_filters={XLA_COMPILE}\n"),
    );
    assert_prints(&["--preset=xla-rocm-compile", "--format=bazelrc"], "");
    assert_usage_error(
        &["--strict", "--preset=xla-rocm-compile", "--config=ci_single_gpu"],
        "tag_filters: --config: unknown config 'ci_single_gpu' under --strict (known configs: none)",
    );
}

#[test]
fn xla_rocm_is_the_default_table_unchanged() {
    let configs = ["ci_single_gpu", "ci_multi_gpu", "ci_rocm_cpu", "asan", "tsan"];
    let mut cases: Vec<Vec<String>> = vec![vec![], vec!["--format=bazelrc".into()], vec!["--format=flags".into()]];
    cases.extend(configs.iter().map(|c| vec![format!("--config={c}")]));
    cases.push(configs.iter().map(|c| format!("--config={c}")).collect());
    for case in cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        let default = run(&args);
        default.assert_success();
        let preset = run(&[&["--preset=xla-rocm"][..], &args].concat());
        preset.assert_success().assert_stdout_eq(&default.stdout);
    }
    assert_prints(&["--preset=xla-rocm"], &format!("{XLA_BASE}\n"));
    assert_prints(&["--preset=xla-rocm", "--config=ci_multi_gpu"], &format!("{XLA_BASE},multi_gpu\n"));
}

#[test]
fn the_last_preset_given_counts() {
    assert_prints(&["--preset=xla-rocm", "--preset=jax-rocm"], &format!("{JAX_BASE}\n"));
    // After `--` it is a target pattern.
    assert_prints(&["--preset=jax-rocm", "--", "--preset=xla-rocm"], &format!("{JAX_BASE}\n"));
}

#[test]
fn an_unknown_preset_is_a_usage_error() {
    let line = format!("tag_filters: --preset: unknown preset 'jax' {KNOWN_PRESETS}");
    assert_usage_error(&["--preset=jax"], &line);
    assert_usage_error(&["--preset", "jax", "--config=single_gpu"], &line);
    // Even with a --table that wins over it, and for --help.
    let dir = TempDir::new("tf-preset-unknown");
    let table = dir.join("t.conf");
    write_file(&table, "base = -x\n");
    assert_usage_error(&[&format!("--table={}", table.display()), "--preset=jax"], &line);
    assert_usage_error(&["--help", "--preset=jax"], &line);
    assert_usage_error(&["--preset="], "tag_filters: --preset: missing value");
    assert_usage_error(&["--preset"], "tag_filters: --preset: missing value");
    let out = Cmd::new(bin()).arg(OsStr::from_bytes(b"--preset=jax\xff")).run();
    out.assert_code(2)
        .assert_stdout_eq("")
        .assert_one_error_line(&format!("tag_filters: --preset: unknown preset 'jax\u{fffd}' {KNOWN_PRESETS}"));
}

#[test]
fn a_table_file_wins_over_a_preset() {
    let dir = TempDir::new("tf-preset-table");
    let table = dir.join("t.conf");
    write_file(&table, "base = -x\nsingle_gpu = y\n");
    let table = format!("--table={}", table.display());
    for args in
        [[&table, "--preset=jax-rocm", "--config=single_gpu"], ["--preset=jax-rocm", &table, "--config=single_gpu"]]
    {
        assert_prints(&args, "-x,y\n");
    }
}

#[test]
fn a_preset_wins_over_the_table_beside_the_executable() {
    let dir = TempDir::new("tf-preset-beside");
    let exe = dir.join("tags");
    symlink(bin(), &exe).unwrap();
    write_file(dir.join("tags.tag_filters.conf"), "base = -x\nsingle_gpu = y\n");
    let out = Cmd::new(&exe).arg("--config=single_gpu").run();
    out.assert_success().assert_stdout_eq("-x,y\n");
    let out = Cmd::new(&exe).args(["--preset=jax-rocm", "--config=single_gpu"]).run();
    out.assert_success().assert_stdout_eq(&format!("{JAX_BASE},gpu,-multiaccelerator\n"));
}

/// What the Bazel macro writes for `preset = "jax-rocm"`.
#[test]
fn a_table_file_that_names_a_preset() {
    let dir = TempDir::new("tf-preset-file");
    let exe = dir.join("jax_tags");
    symlink(bin(), &exe).unwrap();
    let conf = dir.join("jax_tags.tag_filters.conf");
    write_file(&conf, "# tag_filters table for //:jax_tags\npreset = jax-rocm\n");
    let out = Cmd::new(&exe).arg("--config=multi_gpu").run();
    out.assert_success().assert_stdout_eq(&format!("{JAX_BASE},multiaccelerator\n"));
    let out = Cmd::new(&exe).arg("--help").run();
    out.assert_success().assert_stdout_contains(&format!("\nTable: preset jax-rocm (named in {})\n", conf.display()));
    // The command line still wins over the file.
    let out = Cmd::new(&exe).args(["--preset=xla-rocm", "--config=ci_multi_gpu"]).run();
    out.assert_success().assert_stdout_eq(&format!("{XLA_BASE},multi_gpu\n"));

    write_file(&conf, "preset = jax\n");
    let out = Cmd::new(&exe).run();
    out.assert_code(2).assert_stdout_eq("");
    assert_eq!(
        out.stderr,
        format!("tag_filters: {}:1: unknown preset 'jax' {KNOWN_PRESETS}\n", conf.display()),
        "{}",
        out.explain()
    );
}

#[test]
fn help_lists_the_presets_and_the_one_in_force() {
    let presets = "\nPresets (--preset=NAME):\n\
        \x20 xla-rocm          XLA's ROCm CI (openxla/xla build_tools/rocm), the default\n\
        \x20 jax-rocm          JAX's ROCm tests (jax-ml/jax ci/run_bazel_test_rocm_rbe.sh)\n\
        \x20 xla-rocm-compile  XLA's compile-only ROCm build (build_tools/ci/build.py)\n";
    for (args, table, configs) in [
        (&["--help"][..], "xla-rocm", "\n  ci_single_gpu  requires-gpu-rocm,requires-gpu-amd,-multi_gpu\n"),
        (&["--preset=jax-rocm", "--help"], "jax-rocm", "\nConfigs:\n  single_gpu  gpu,-multiaccelerator\n"),
        (&["-h", "--preset", "xla-rocm-compile"], "xla-rocm-compile", "\nConfigs:\n  (none)\n"),
    ] {
        let out = run(args);
        out.assert_success()
            .assert_stdout_contains(presets)
            .assert_stdout_contains(&format!("\nTable: preset {table} (compiled in)\n"))
            .assert_stdout_contains(configs)
            .assert_stdout_contains("\n  --preset=NAME     use the compiled-in table NAME");
        assert_eq!(out.stderr, "", "{}", out.explain());
    }
}

/// ROCm/xla rocm-dev-infra's `build_tools/rocm/execute_ci_build.sh` (last
/// changed in d17aa73a), modelled: the base list, then for each argument in
/// order `--config=ci_multi_gpu` empties the filter and
/// `--config=ci_single_gpu` appends `,gpu,-multi_gpu,-no_oss`.
const DEV_INFRA_MODEL: &str = r#"
filters=$BASE
for arg in "$@"; do
  [ "$arg" = --config=ci_multi_gpu ] && filters=""
  [ "$arg" = --config=ci_single_gpu ] && filters="${filters},gpu,-multi_gpu,-no_oss"
done
printf '%s\n' "$filters"
"#;

/// A filter as Bazel reads it: the entries in order, empty ones and repeats
/// dropped (`,gpu` and `-no_oss` twice mean what `gpu` and `-no_oss` once do).
fn as_bazel_reads(filter: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in filter.trim_end().split(',').filter(|e| !e.is_empty()) {
        if !out.iter().any(|seen| seen == entry) {
            out.push(entry.to_string());
        }
    }
    out
}

#[test]
fn rocm_dev_infra_matches_its_execute_ci_build_sh() {
    let cases: [&[&str]; 5] = [
        &[],
        &["--config=ci_single_gpu"],
        &["--config=ci_multi_gpu"],
        &["--config=ci_single_gpu", "--config=ci_multi_gpu"],
        &["--config=ci_multi_gpu", "--config=ci_single_gpu", "//xla/..."],
    ];
    for args in cases {
        let ours = run(&[&["--preset=rocm-dev-infra"][..], args].concat());
        ours.assert_success();
        let theirs =
            Cmd::new("/bin/bash").env("BASE", XLA_BASE).args(["-c", DEV_INFRA_MODEL, "model"]).args(args).run();
        theirs.assert_success();
        assert_eq!(
            as_bazel_reads(&ours.stdout),
            as_bazel_reads(&theirs.stdout),
            "{args:?}: ours (left) against the script (right)\nours:\n{}\nscript:\n{}",
            ours.explain(),
            theirs.explain()
        );
    }
    assert_prints(&["--preset=rocm-dev-infra", "--config=ci_single_gpu"], &format!("{XLA_BASE},gpu,-multi_gpu\n"));
    assert_prints(&["--preset=rocm-dev-infra", "--config=ci_multi_gpu"], "\n");
    assert_prints(
        &["--preset=rocm-dev-infra", "--config=ci_multi_gpu", "--format=flags"],
        "--build_tag_filters= --test_tag_filters=\n",
    );
    assert_prints(
        &["--preset=rocm-dev-infra", "--format=bazelrc"],
        &format!(
            "build:ci_single_gpu --build_tag_filters={XLA_BASE},gpu,-multi_gpu\n\
             test:ci_single_gpu --test_tag_filters={XLA_BASE},gpu,-multi_gpu\n\
             build:ci_multi_gpu --build_tag_filters=\n\
             test:ci_multi_gpu --test_tag_filters=\n"
        ),
    );
    let help = run(&["--preset=rocm-dev-infra", "--help"]);
    help.assert_success()
        .assert_stdout_contains("  rocm-dev-infra    ROCm/xla rocm-dev-infra's execute_ci_build.sh\n")
        .assert_stdout_contains("  ci_multi_gpu   replaces the filter with (nothing: no tag filter)\n");
}
