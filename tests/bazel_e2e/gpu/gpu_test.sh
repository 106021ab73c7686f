#!/usr/bin/env bash
# A GPU test: holds its GPU slot for a while and records which GPU it got and when.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

record_dir="${E2E_RECORD_DIR:?E2E_RECORD_DIR is not set (run.sh passes it with --test_env)}"
[[ -n "${ROCR_VISIBLE_DEVICES:-}" ]] ||
  fail "ROCR_VISIBLE_DEVICES is not set: not run under parallel_gpu_execute in ROCm mode"
[[ "${HIP_VISIBLE_DEVICES:-}" == "0" ]] ||
  fail "HIP_VISIBLE_DEVICES is '${HIP_VISIBLE_DEVICES:-}', want '0' for one visible GPU"

start="$(date +%s.%N)"
sleep "${E2E_GPU_TEST_SECONDS:-2}"
end="$(date +%s.%N)"

name="${TEST_TARGET:-$0}"
record="${record_dir}/$(printf '%s' "${name}" | tr -c 'A-Za-z0-9_.-' '_').rec"
printf '%s %s %s %s\n' "${name}" "${ROCR_VISIBLE_DEVICES}" "${start}" "${end}" >"${record}.tmp"
mv "${record}.tmp" "${record}"
echo "${name}: GPU ${ROCR_VISIBLE_DEVICES} from ${start} to ${end}"
# What Bazel's coverage runner set (run.sh's `bazel coverage` step reads it).
echo "${name}: coverage ${COVERAGE:-0} profile ${LLVM_PROFILE_FILE:-none} in $(pwd)"
