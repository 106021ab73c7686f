#!/usr/bin/env bash
# Mutation testing with cargo-mutants: each mutant (an operator flipped, a
# function's body replaced by a default value, ...) is built and the tests
# that cover its file are run; a mutant that no test fails is "missed", a
# behaviour no test holds. Figures and the reasoning about the mutants left
# alive are in CONTRIBUTING.md ("Mutation testing").
#
# Usage:
#   tools/mutants.sh [FILE...]        the files named (default: the guarded
#                                     set below), one cargo-mutants run each
#   tools/mutants.sh --changed BASE   only the mutants on lines that differ
#                                     from BASE (git diff BASE), in the
#                                     guarded set: a change's own code
#   tools/mutants.sh --list [FILE...] count the mutants, run nothing
#
# Results go to target/mutants/<file>/mutants.out (outcomes.json,
# missed.txt, caught.txt, unviable.txt, timeout.txt); a summary line per file
# is printed. Exit status: 0 when no mutant was missed or timed out, 2 when
# some were, 1 on other errors.
#
# The tests run under CI=true, so that a missing prerequisite fails the
# baseline instead of skipping a test and letting its mutants live
# (test_support::prerequisite); with cargo-nextest installed they run with
# it, eight at a time (most of them wait on locks, not on a core), stopping
# at the first failure.
#
# Environment: MUTANTS_TIMEOUT (seconds a test run may take, default 90),
# MUTANTS_JOBS (mutants built and tested at once, default 1),
# MUTANTS_BUILD_TIMEOUT (seconds a build may take, default 300),
# REAL_HARDWARE_DIR (the published samples; default ../shared/real-hardware
# beside the repository, since cargo-mutants builds in a copy elsewhere).
#
# Needs cargo-mutants (cargo install cargo-mutants --locked). The machine's
# cores are shared by the build and the tests, so one mutant at a time (-j 1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

guarded=(
  parallel_gpu_execute/src/hardware/identity.rs
  parallel_gpu_execute/src/hardware/kfd.rs
  parallel_gpu_execute/src/launch.rs
  sanitizer_wrapper/src/environment.rs
  sanitizer_wrapper/src/locate.rs
  parallel_gpu_execute/src/slots/lockfile.rs
  parallel_gpu_execute/src/slots/exposure.rs
  parallel_gpu_execute/src/slots/locks.rs
  parallel_gpu_execute/src/slots/request.rs
  parallel_gpu_execute/src/slots/queue.rs
  parallel_gpu_execute/src/slots/record.rs
  parallel_gpu_execute/src/slots/take.rs
  parallel_gpu_execute/src/slots/wait.rs
  parallel_gpu_execute/src/slots/holders.rs
  parallel_gpu_execute/src/slots/proclocks.rs
  parallel_gpu_execute/src/slots/telemetry.rs
  parallel_gpu_execute/src/slots/privacy.rs
  parallel_gpu_execute/src/slots/naming.rs
  parallel_gpu_execute/src/slots/drain.rs
  parallel_gpu_execute/src/slots/outsiders.rs
  parallel_gpu_execute/src/report/queued.rs
  parallel_gpu_execute/src/sys/child.rs
  wrapper_common/src/runfiles.rs
)

# The tests that cover a file: its crate's unit tests and the integration
# tests that drive that part (a mutant survives only what runs).
# (Test targets of the file's own crate; the workspace's load tests in
# tests/ are left to `cargo test`, being too slow to run per mutant.)
tests_for() {
  case "$1" in
    parallel_gpu_execute/src/hardware/*)
      echo "--lib --test gpu_count --test real_hosts --test published_samples --test kfd_device --test shared_hosts --test gpu_host_check" ;;
    parallel_gpu_execute/src/launch.rs)
      echo "--lib --test test_and_environment --test slots --test jax_profile --test flags_and_bad_input --test classic_fidelity --test shared_hosts" ;;
    parallel_gpu_execute/src/slots/*)
      echo "--lib --test slots --test slot_contract --test queue_stalls --test queue_sharing --test queue_faults --test queue_limits --test lock_dir_faults --test lock_dir_owner --test queue_records --test others_files --test shared_hosts --test one_name_per_gpu --test lock_dir_layouts --test operator_truth --test status --test status_truth --test drain --test gpu_kernel --test lock_dir_privacy --test sizing --test classic_fidelity --test flags_and_bad_input --test jax_profile --test test_and_environment" ;;
    parallel_gpu_execute/src/report/queued.rs)
      echo "--lib --test status --test status_truth --test operator_truth" ;;
    parallel_gpu_execute/src/sys/child.rs)
      echo "--lib --test gpu_count --test queue_stalls --test queue_faults" ;;
    wrapper_common/src/runfiles.rs)
      # How both wrappers find their test and their files in the runfiles.
      echo "-p wrapper_common -p parallel_gpu_execute -p sanitizer_wrapper --lib --test test_and_environment --test passthrough --test config" ;;
    *) echo "--lib --tests" ;;
  esac
}

# `--cargo-test-arg=<word>` for each word.
as_test_args() { for w in "$@"; do printf -- '--cargo-test-arg=%s\n' "${w}"; done; }

command -v cargo-mutants >/dev/null || {
  echo "tools/mutants.sh: cargo-mutants is needed: cargo install cargo-mutants --locked" >&2
  exit 1
}
if [[ -z "${REAL_HARDWARE_DIR:-}" && -d ../shared/real-hardware ]]; then
  REAL_HARDWARE_DIR="$(cd ../shared/real-hardware && pwd)"
  export REAL_HARDWARE_DIR
fi

mode=run base=""
case "${1:-}" in
  --list) mode=list; shift ;;
  --changed)
    mode=changed
    base="${2:?--changed needs a base (a commit or branch)}"
    shift 2
    ;;
esac
files=("$@")
((${#files[@]})) || files=("${guarded[@]}")

timeout="${MUTANTS_TIMEOUT:-90}"
build_timeout="${MUTANTS_BUILD_TIMEOUT:-300}"
common=(--jobs "${MUTANTS_JOBS:-1}" --timeout "${timeout}" --build-timeout "${build_timeout}" --copy-target=false --no-shuffle --cap-lints=true)
export CI=true
# --cap-lints goes to rustc through RUSTFLAGS, and RUSTFLAGS replaces the
# target's rustflags in .cargo/config.toml: without these the binaries are
# dynamic, and the tests that run them in an empty sandbox root fail.
export RUSTFLAGS="${RUSTFLAGS:-"-C target-feature=+crt-static -C relocation-model=static"}"
runner=()
if cargo nextest --version >/dev/null 2>&1; then
  runner=(--test-tool=nextest --cargo-test-arg=--test-threads=8)
fi

summary() { # <file> <outcomes.json>
  python3 - "$1" "$2" <<'EOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
counts = {}
for o in json.load(open(path))["outcomes"]:
    if o["scenario"] == "Baseline":
        continue
    counts[o["summary"]] = counts.get(o["summary"], 0) + 1
total = sum(counts.values())
print(f"{name}: {total} mutants, {counts.get('CaughtMutant', 0)} caught, {counts.get('MissedMutant', 0)} missed, "
      f"{counts.get('Unviable', 0)} unviable, {counts.get('Timeout', 0)} timeouts")
sys.exit(2 if counts.get("MissedMutant", 0) or counts.get("Timeout", 0) else 0)
EOF
}

status=0
if [[ "${mode}" == changed ]]; then
  diff="target/mutants/changed.diff"
  mkdir -p target/mutants
  git diff "${base}" -- "${files[@]}" >"${diff}"
  if [[ ! -s "${diff}" ]]; then
    echo "no change to the guarded files since ${base}: nothing to mutate"
    exit 0
  fi
  crates=$(git diff --name-only "${base}" -- "${files[@]}" | cut -d/ -f1 | sort -u)
  for crate in ${crates}; do
    out="target/mutants/changed-${crate}"
    mkdir -p "${out}"
    # The union of the test targets of the files changed in this crate.
    words=$(git diff --name-only "${base}" -- "${files[@]}" | grep "^${crate}/" | while read -r f; do tests_for "${f}"; done |
      tr ' ' '\n' | awk '/^--test$/ {t=1; next} t {print "--test " $0; t=0; next} NF {print}' | sort -u | tr '\n' ' ')
    mapfile -t test_args < <(as_test_args ${words})
    rc=0
    cargo mutants "${common[@]}" "${runner[@]}" --in-diff "${diff}" -p "${crate}" --output "${out}" "${test_args[@]}" || rc=$?
    case "${rc}" in
      0 | 2 | 3) summary "changes to ${crate}" "${out}/mutants.out/outcomes.json" || status=$? ;;
      4) echo "tools/mutants.sh: the tests fail without any mutant (${crate})" >&2; exit 1 ;;
      *) echo "tools/mutants.sh: cargo mutants failed on ${crate} (exit ${rc})" >&2; exit 1 ;;
    esac
  done
  exit "${status}"
fi

for file in "${files[@]}"; do
  crate="${file%%/*}"
  if [[ "${mode}" == list ]]; then
    printf '%-48s %4d mutants\n' "${file}" "$(cargo mutants --list -p "${crate}" -f "${file}" | wc -l)"
    continue
  fi
  # shellcheck disable=SC2046 # the words of tests_for, one argument each
  mapfile -t test_args < <(as_test_args $(tests_for "${file}"))
  out="target/mutants/$(echo "${file}" | tr / _)"
  mkdir -p "${out}"
  # cargo-mutants exits 2 when a mutant was missed, 3 on a timeout: the
  # summary says which; anything else (no baseline, a broken build) stops.
  rc=0
  cargo mutants "${common[@]}" "${runner[@]}" -p "${crate}" -f "${file}" --output "${out}" "${test_args[@]}" || rc=$?
  if [[ "${rc}" == 4 ]]; then
    # The unmutated tree failed its tests: once more, in case a timing test
    # lost to a loaded machine (the log of the first try is in ${out}).
    echo "tools/mutants.sh: the tests failed without a mutant (${file}); trying once more" >&2
    rc=0
    cargo mutants "${common[@]}" "${runner[@]}" -p "${crate}" -f "${file}" --output "${out}" "${test_args[@]}" || rc=$?
  fi
  case "${rc}" in
    0 | 2 | 3) ;;
    *) echo "tools/mutants.sh: cargo mutants failed on ${file} (exit ${rc})" >&2; exit 1 ;;
  esac
  summary "${file}" "${out}/mutants.out/outcomes.json" || status=$?
done
exit "${status}"
