#!/usr/bin/env bash
# Passes when parallel_gpu_execute gave this test a GPU (rocm mode), and with
# --want-asan when sanitizer_wrapper set ASAN_OPTIONS from its configuration.
set -euo pipefail
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# rocm mode: XLA main's variables (HIP_ and CUDA_VISIBLE_DEVICES the index).
[[ "${HIP_VISIBLE_DEVICES:-}" =~ ^[0-9]+$ ]] ||
  fail "HIP_VISIBLE_DEVICES is '${HIP_VISIBLE_DEVICES:-}', want one GPU index: not run under parallel_gpu_execute"
[[ "${CUDA_VISIBLE_DEVICES:-}" == "${HIP_VISIBLE_DEVICES}" ]] ||
  fail "CUDA_VISIBLE_DEVICES is '${CUDA_VISIBLE_DEVICES:-}', want '${HIP_VISIBLE_DEVICES}'"
[[ -z "${ROCR_VISIBLE_DEVICES+set}" ]] || fail "ROCR_VISIBLE_DEVICES is set; rocm mode leaves it unset"
if [[ "${1:-}" == "--want-asan" ]]; then
  [[ "${ASAN_OPTIONS:-}" == *detect_leaks=1* ]] || fail "ASAN_OPTIONS is '${ASAN_OPTIONS:-}': not run under sanitizer_wrapper"
fi
echo "ok: GPU ${HIP_VISIBLE_DEVICES}"
