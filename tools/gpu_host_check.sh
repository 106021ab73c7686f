#!/usr/bin/env bash
# Acceptance check for a real GPU host, or a container given GPUs: does
# parallel_gpu_execute count the GPUs the test's runtime enumerates, and does
# each of several tests run under it at once see exactly the one GPU it was
# given, a different one each?
#
#   tools/gpu_host_check.sh [BINARY]
#
# BINARY           parallel_gpu_execute to check (default: the release build,
#                  target/x86_64-unknown-linux-gnu/release/parallel_gpu_execute)
# GPU_CHECK_QUERY  a shell command run inside each test that prints how many
#                  GPUs the test's runtime sees (default: PyTorch's count,
#                  which is HIP's on a ROCm build of torch)
# GPU_CHECK_TESTS  how many tests at once (default: the count, at most 8)
#
# Steps: `--list` and `--list=json` are printed; the query is run once
# without the wrapper, and must see as many GPUs as `--list=count`; then that
# many tests start at once, each under the wrapper with one slot per GPU
# (TF_TESTS_PER_GPU=1) and `--wait=0`, in a lock directory of this script's
# own; each must see exactly one GPU, and no two the same id; while they hold
# every GPU, one more must be refused (exit 1). Nothing outside a temporary
# directory is written.
#
# Exit: 0 every check passed; 1 a check failed (each failure is one line,
# `gpu_host_check: FAIL: ...`); 2 bad usage or a binary that does not run.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-${repo}/target/x86_64-unknown-linux-gnu/release/parallel_gpu_execute}"
query="${GPU_CHECK_QUERY:-python3 -c 'import torch; print(torch.cuda.device_count())'}"
failures=0

say() { printf 'gpu_host_check: %s\n' "$*"; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }

[[ -x "${bin}" ]] || { say "not an executable: ${bin} (usage: tools/gpu_host_check.sh [BINARY])" >&2; exit 2; }
"${bin}" --version >/dev/null || { say "cannot run ${bin}" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

say "${bin} --list:"
"${bin}" --list || fail "--list exited $?"
say "${bin} --list=json:"
"${bin}" --list=json || fail "--list=json exited $?"
count="$("${bin}" --list=count)" || { fail "--list=count exited $?"; count=0; }
say "counted: ${count}"
if ! [[ "${count}" =~ ^[0-9]+$ ]] || ((count == 0)); then
  fail "the wrapper counts no GPU here ('${count}'); see --list above"
  exit 1
fi

seen="$(sh -c "${query}" 2>"${work}/query.err")"
status=$?
if ((status != 0)) || ! [[ "${seen}" =~ ^[0-9]+$ ]]; then
  fail "the device query failed (exit ${status}, output '${seen}'): ${query}; set GPU_CHECK_QUERY"
  sed 's/^/  query: /' "${work}/query.err" | tail -n 5
  exit 1
fi
say "the runtime enumerates, without the wrapper: ${seen}"
((seen == count)) || fail "the runtime enumerates ${seen} GPU(s), the wrapper counted ${count}"

tests="${GPU_CHECK_TESTS:-$((count < 8 ? count : 8))}"
[[ "${tests}" =~ ^[1-9][0-9]*$ ]] || { say "GPU_CHECK_TESTS: not a positive number: ${tests}" >&2; exit 2; }
((tests <= count)) || { say "GPU_CHECK_TESTS=${tests} is more than the ${count} GPU(s) counted" >&2; exit 2; }

# Each test prints its variables and what its runtime sees, then holds its
# GPU until every test has printed (or 60 s pass), so that all hold at once.
cat >"${work}/test.sh" <<'EOF'
#!/bin/sh
seen="$(sh -c "$GPU_CHECK_QUERY" 2>/dev/null)" || seen="query-failed"
printf '%s %s %s %s\n' "${ROCR_VISIBLE_DEVICES-unset}" "${HIP_VISIBLE_DEVICES-unset}" "${CUDA_VISIBLE_DEVICES-unset}" "${seen}" >"$GPU_CHECK_OUT"
# The extra test should never start; if it does, it does not wait.
[ -z "${GPU_CHECK_EXTRA-}" ] || exit 0
i=0
while [ "$(find "$GPU_CHECK_DIR" -name '*.out' | wc -l)" -lt "$GPU_CHECK_TESTS" ] && [ "$i" -lt 600 ]; do
  sleep 0.1
  i=$((i + 1))
done
# The extra test runs while every slot is held.
while [ ! -e "$GPU_CHECK_DIR/release" ] && [ "$i" -lt 600 ]; do
  sleep 0.1
  i=$((i + 1))
done
EOF
chmod +x "${work}/test.sh"
mkdir "${work}/out" "${work}/locks"

run_one() {
  GPU_CHECK_QUERY="${query}" GPU_CHECK_OUT="$2" GPU_CHECK_DIR="${work}/out" GPU_CHECK_TESTS="${tests}" \
    GPU_CHECK_EXTRA="${3-}" TF_TESTS_PER_GPU=1 "${bin}" --lock-dir="${work}/locks" --wait=0 "${work}/test.sh" 2>"$1.err"
}

pids=()
for ((i = 0; i < tests; i++)); do
  run_one "${work}/t${i}" "${work}/out/${i}.out" &
  pids+=($!)
done
for ((w = 0; w < 600; w++)); do
  (($(find "${work}/out" -name '*.out' | wc -l) >= tests)) && break
  sleep 0.1
done
if ((tests == count)); then
  run_one "${work}/extra" "${work}/extra.out" yes
  status=$?
  if ((status == 1)); then
    say "one more test while all ${count} GPU(s) are held: refused (exit 1), as it should be"
  else
    fail "one more test while all ${count} GPU(s) are held exited ${status}, not 1: $(head -c 300 "${work}/extra.err")"
  fi
fi
: >"${work}/out/release"
for ((i = 0; i < tests; i++)); do
  wait "${pids[i]}" || fail "test ${i} exited $?: $(head -c 300 "${work}/t${i}.err")"
done

ids=()
for ((i = 0; i < tests; i++)); do
  read -r rvd hvd cvd got <"${work}/out/${i}.out" 2>/dev/null || { fail "test ${i} printed nothing"; continue; }
  id="ROCR_VISIBLE_DEVICES=${rvd} HIP_VISIBLE_DEVICES=${hvd} CUDA_VISIBLE_DEVICES=${cvd}"
  say "test ${i}: ${id}, its runtime sees ${got}"
  [[ "${got}" == 1 ]] || fail "test ${i} sees '${got}' GPU(s), not 1"
  # One id in each variable the wrapper set (HIP's or CUDA's index, or
  # ROCR's id); a preset ROCR_VISIBLE_DEVICES pool may hold several.
  given="${hvd}"
  [[ "${given}" == unset ]] && given="${cvd}"
  [[ "${given}" == unset ]] && given="${rvd}"
  [[ "${given}" == unset || "${given}" == *,* ]] && fail "test ${i} was not given exactly one GPU id (${id})"
  ids+=("${id}")
done
dups="$(printf '%s\n' "${ids[@]}" | sort | uniq -d)"
[[ -z "${dups}" ]] || fail "two tests were given the same GPU: ${dups//$'\n'/ }"

if ((failures)); then
  say "${failures} check(s) failed"
  exit 1
fi
say "all checks passed: ${count} GPU(s) counted as the runtime enumerates them; ${tests} tests at once, one GPU each"
