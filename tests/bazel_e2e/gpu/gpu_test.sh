#!/usr/bin/env bash
# A GPU test: holds its GPU slot for a while and records which GPU it got and when.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

record_dir="${E2E_RECORD_DIR:?E2E_RECORD_DIR is not set (run.sh passes it with --test_env)}"
# rocm mode (the xla profile) sets XLA main's variables: HIP_VISIBLE_DEVICES
# and CUDA_VISIBLE_DEVICES to the GPU's index, no ROCR_VISIBLE_DEVICES. The
# jax profile sets ROCR_VISIBLE_DEVICES, beside which HIP must see index 0.
if [[ -n "${ROCR_VISIBLE_DEVICES:-}" ]]; then
  gpu="${ROCR_VISIBLE_DEVICES}"
  [[ "${HIP_VISIBLE_DEVICES:-}" == "0" ]] ||
    fail "HIP_VISIBLE_DEVICES is '${HIP_VISIBLE_DEVICES:-}' beside ROCR_VISIBLE_DEVICES=${gpu}, want '0'"
else
  gpu="${HIP_VISIBLE_DEVICES:-}"
  [[ -n "${gpu}" ]] ||
    fail "neither HIP_VISIBLE_DEVICES nor ROCR_VISIBLE_DEVICES is set: not run under parallel_gpu_execute"
  [[ "${CUDA_VISIBLE_DEVICES:-}" == "${gpu}" ]] ||
    fail "CUDA_VISIBLE_DEVICES is '${CUDA_VISIBLE_DEVICES:-}', want HIP_VISIBLE_DEVICES' '${gpu}'"
fi
[[ "${gpu}" =~ ^[0-9]+$ ]] || fail "given '${gpu}', want exactly one GPU"

start="$(date +%s.%N)"
sleep "${E2E_GPU_TEST_SECONDS:-2}"
end="$(date +%s.%N)"

name="${TEST_TARGET:-$0}"
record="${record_dir}/$(printf '%s' "${name}" | tr -c 'A-Za-z0-9_.-' '_').rec"
printf '%s %s %s %s\n' "${name}" "${gpu}" "${start}" "${end}" >"${record}.tmp"
mv "${record}.tmp" "${record}"
echo "${name}: GPU ${gpu} from ${start} to ${end}"
# What Bazel's coverage runner set (run.sh's `bazel coverage` step reads it).
echo "${name}: coverage ${COVERAGE:-0} profile ${LLVM_PROFILE_FILE:-none} in $(pwd)"
