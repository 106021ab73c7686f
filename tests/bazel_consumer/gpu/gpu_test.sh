#!/usr/bin/env bash
# Passes when parallel_gpu_execute gave this test a GPU (rocm mode), and with
# --want-asan when sanitizer_wrapper set ASAN_OPTIONS from its configuration.
set -euo pipefail
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -n "${ROCR_VISIBLE_DEVICES:-}" ]] || fail "ROCR_VISIBLE_DEVICES is not set: not run under parallel_gpu_execute"
[[ "${HIP_VISIBLE_DEVICES:-}" == "0" ]] || fail "HIP_VISIBLE_DEVICES is '${HIP_VISIBLE_DEVICES:-}', want 0"
if [[ "${1:-}" == "--want-asan" ]]; then
  [[ "${ASAN_OPTIONS:-}" == *detect_leaks=1* ]] || fail "ASAN_OPTIONS is '${ASAN_OPTIONS:-}': not run under sanitizer_wrapper"
fi
echo "ok: GPU ${ROCR_VISIBLE_DEVICES}"
