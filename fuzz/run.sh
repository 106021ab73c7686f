#!/usr/bin/env bash
# Runs every fuzz target for SECONDS_PER_TARGET seconds (default 10) and
# fails on the first crash, leak, timeout or broken invariant.
#
#   fuzz/run.sh            # CI: about 10 s a target, plus the build
#   fuzz/run.sh 600        # a longer run: 10 minutes a target
#   fuzz/run.sh 60 numbers manifest   # only some targets
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz
# --locked`). Writes only under fuzz/: the build in fuzz/target/, the
# growing corpus in fuzz/target/corpus/<target>/ (seeded from the committed
# fuzz/corpus/<target>/, which is never modified), crash inputs in
# fuzz/artifacts/<target>/. Reproduce a crash with
# `cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>` from fuzz/.
# FUZZ_SEED=N fixes libFuzzer's seed (CI: the same inputs in the same order
# on every run, so what it finds a developer finds too); unset or 0, random.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

seconds="${1:-10}"
shift || true
all_targets=(numbers pool_list kfd_properties rocminfo_output manifest pge_cli sanitizer_cli sanitizer_config tag_filters_cli)
if (($#)); then targets=("$@"); else targets=("${all_targets[@]}"); fi

# Longer inputs where the parser has long-line handling worth reaching: the
# manifest's 16 KiB and the configuration file's 8 KiB line buffers.
max_len() {
  case "$1" in
    manifest) echo 40000 ;;
    sanitizer_config) echo 20000 ;;
    *) echo 4096 ;;
  esac
}

# cargo-fuzz sets RUSTFLAGS for the sanitizer build, which replaces the
# workspace's crt-static target rustflags (a static ASan build cannot link),
# and builds for the same explicit target that .cargo/config.toml names.
cargo +nightly fuzz build --release

status=0
for t in "${targets[@]}"; do
  work="target/corpus/${t}"
  mkdir -p "${work}" "artifacts/${t}"
  printf '==== %s: %ss\n' "${t}" "${seconds}"
  log="target/fuzz-${t}.log"
  if cargo +nightly fuzz run --release "${t}" "${work}" "corpus/${t}" -- \
      -max_total_time="${seconds}" -max_len="$(max_len "${t}")" -timeout=10 \
      -rss_limit_mb=2048 -seed="${FUZZ_SEED:-0}" -print_final_stats=1 >"${log}" 2>&1; then
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "${log}" | tr '\n' ' '
    echo
  else
    status=1
    tail -n 60 "${log}"
    echo "FAIL: fuzz target ${t} crashed; input in fuzz/artifacts/${t}/" >&2
  fi
done
exit "${status}"
