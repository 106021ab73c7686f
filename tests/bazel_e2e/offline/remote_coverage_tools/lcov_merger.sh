#!/usr/bin/env bash
# A stand-in for Bazel's LCOV merger: collect_coverage.sh runs it once the
# test has exited. It writes the (empty) coverage report Bazel expects. With
# E2E_LOCK_DIR set (run.sh's `bazel coverage` step), it also records whether
# each GPU slot lock there could be taken at that moment: the wrapper's slot
# must already be free, not held through the coverage post-processing.
set -euo pipefail

output_file=""
for arg in "$@"; do
  case "${arg}" in
    --output_file=*) output_file="${arg#--output_file=}" ;;
  esac
done
[[ -n "${output_file}" ]] || {
  echo "lcov_merger: no --output_file among: $*" >&2
  exit 1
}
: >"${output_file}"

[[ -n "${E2E_LOCK_DIR:-}" ]] || exit 0
lock_dir="${E2E_LOCK_DIR}"
record="${E2E_RECORD_DIR:?E2E_RECORD_DIR is not set}/lcov_merger.txt"
shopt -s nullglob
{
  for lock in "${lock_dir}"/gpulock*_*; do
    if flock -n -E 75 "${lock}" true; then
      echo "$(basename "${lock}") free"
    else
      echo "$(basename "${lock}") held"
    fi
  done
} >"${record}.tmp"
mv "${record}.tmp" "${record}"
