#!/usr/bin/env bash
# Checks ASAN_OPTIONS, LSAN_OPTIONS and TSAN_OPTIONS as sanitizer_wrapper set them
# up from the <name>.sanitizer_wrapper.conf in its runfiles.
#
#   --asan-base=A:B         base ASan options to expect (default: those of //:asan_wrapper)
#   --reject-asan=OPT       an ASan option that must be absent
#   --asan-last=OPT         the last ASan option (the user's own, which must win)
#   --gpu                   also expect to run under parallel_gpu_execute
#   --no-lsan               nothing configured for LSan: LSAN_OPTIONS stays unset
#   --no-tsan-suppressions  the wrapper has no TSan suppressions
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

asan_base="detect_leaks=1:check_initialization_order=1"
tsan_base="history_size=3"
reject_asan=()
asan_last=""
gpu=0
lsan=1
tsan_suppressions=1
for arg in "$@"; do
  case "${arg}" in
    --asan-base=*) asan_base="${arg#*=}" ;;
    --reject-asan=*) reject_asan+=("${arg#*=}") ;;
    --asan-last=*) asan_last="${arg#*=}" ;;
    --gpu) gpu=1 ;;
    --no-lsan) lsan=0 ;;
    --no-tsan-suppressions) tsan_suppressions=0 ;;
    *) fail "unknown argument ${arg}" ;;
  esac
done

echo "ASAN_OPTIONS=${ASAN_OPTIONS:-}"
echo "LSAN_OPTIONS=${LSAN_OPTIONS-<unset>}"
echo "TSAN_OPTIONS=${TSAN_OPTIONS:-}"
echo "ROCR_VISIBLE_DEVICES=${ROCR_VISIBLE_DEVICES:-}"

# has_option VAR OPTION: OPTION is one of the ':'-separated items of $VAR.
has_option() {
  [[ ":${!1:-}:" == *":$2:"* ]]
}

# option_value VAR KEY: the value of the last KEY=... item of $VAR.
option_value() {
  local item value=""
  local -a items
  IFS=: read -r -a items <<<"${!1:-}"
  for item in "${items[@]}"; do
    if [[ "${item}" == "$2="* ]]; then
      value="${item#*=}"
    fi
  done
  printf '%s' "${value}"
}

# expect_suppressions VAR MARKER: an absolute, existing suppressions file.
expect_suppressions() {
  local path
  path="$(option_value "$1" suppressions)"
  [[ -n "${path}" ]] || fail "$1 has no suppressions=: ${!1:-}"
  [[ "${path}" == /* ]] || fail "$1 suppressions path is not absolute: ${path}"
  [[ -f "${path}" ]] || fail "$1 suppressions file does not exist: ${path}"
  grep -q "e2e-marker: $2\$" "${path}" || fail "$1 suppressions ${path} is not $2"
  echo "ok: $1 suppressions=${path}"
}

# expect_symbolizer VAR: an absolute, executable llvm-symbolizer.
expect_symbolizer() {
  local path
  path="$(option_value "$1" external_symbolizer_path)"
  [[ -n "${path}" ]] || fail "$1 has no external_symbolizer_path=: ${!1:-}"
  [[ "${path}" == /* ]] || fail "$1 symbolizer path is not absolute: ${path}"
  [[ -x "${path}" ]] || fail "$1 symbolizer is not an executable file: ${path}"
  [[ "${path##*/}" == "llvm-symbolizer" ]] || fail "$1 symbolizer is not llvm-symbolizer: ${path}"
  echo "ok: $1 external_symbolizer_path=${path}"
}

IFS=: read -r -a base <<<"${asan_base}"
for option in "${base[@]}"; do
  has_option ASAN_OPTIONS "${option}" || fail "ASAN_OPTIONS lacks ${option}"
done
for option in ${reject_asan[@]+"${reject_asan[@]}"}; do
  ! has_option ASAN_OPTIONS "${option}" || fail "ASAN_OPTIONS still has ${option}"
done
if [[ -n "${asan_last}" ]]; then
  [[ "${ASAN_OPTIONS:-}" == *":${asan_last}" ]] ||
    fail "ASAN_OPTIONS does not end with the user's ${asan_last}"
  echo "ok: the user's ${asan_last} comes last, so it wins"
fi
has_option TSAN_OPTIONS "${tsan_base}" || fail "TSAN_OPTIONS lacks ${tsan_base}"

expect_suppressions ASAN_OPTIONS asan_ignore
expect_symbolizer ASAN_OPTIONS
expect_symbolizer TSAN_OPTIONS
if ((lsan)); then
  expect_suppressions LSAN_OPTIONS lsan_ignore
elif [[ -n "${LSAN_OPTIONS+set}" ]]; then
  fail "LSAN_OPTIONS is set although the wrapper has nothing for LSan: ${LSAN_OPTIONS}"
fi
if ((tsan_suppressions)); then
  expect_suppressions TSAN_OPTIONS tsan_ignore
fi

if ((gpu)); then
  # rocm mode: XLA main's variables.
  [[ "${HIP_VISIBLE_DEVICES:-}" =~ ^[01]$ ]] ||
    fail "HIP_VISIBLE_DEVICES is '${HIP_VISIBLE_DEVICES:-}', want one of the two fake GPUs"
  [[ "${CUDA_VISIBLE_DEVICES:-}" == "${HIP_VISIBLE_DEVICES}" ]] ||
    fail "CUDA_VISIBLE_DEVICES is '${CUDA_VISIBLE_DEVICES:-}', want '${HIP_VISIBLE_DEVICES}'"
  [[ -z "${ROCR_VISIBLE_DEVICES+set}" ]] ||
    fail "ROCR_VISIBLE_DEVICES is set ('${ROCR_VISIBLE_DEVICES}'); rocm mode leaves it unset"
  echo "ok: runs on GPU ${HIP_VISIBLE_DEVICES} through the chained parallel_gpu_execute"
elif [[ -n "${ROCR_VISIBLE_DEVICES:-}${HIP_VISIBLE_DEVICES:-}" ]]; then
  fail "a GPU variable is set without a GPU wrapper (ROCR='${ROCR_VISIBLE_DEVICES:-}' HIP='${HIP_VISIBLE_DEVICES:-}')"
fi
echo "PASS"
