#!/usr/bin/env bash
# Checks that a release build is reproducible: builds the release files again
# from a copy of the clone's tracked files in another directory, with a fresh
# Cargo target directory, and compares the SHA256SUMS with those of DIST_DIR
# (written by tools/release.sh from this clone). A build path or time left in
# a binary makes the two differ. Users pin these hashes in their MODULE.bazel.
#
# Usage: tools/release_reproducible.sh DIST_DIR
# Env:   RELEASE_TARGETS as for tools/release.sh (default: its default)
# Exit:  0 the same, 1 they differ or the build failed, 2 bad usage.
set -euo pipefail

[[ $# -eq 1 && -f "$1/SHA256SUMS" ]] || { echo "usage: tools/release_reproducible.sh DIST_DIR (holding SHA256SUMS)" >&2; exit 2; }
first="$(cd "$1" && pwd)"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d /tmp/gpu-ci-wrappers-repro.XXXXXX)"
trap 'rm -rf "${work}"' EXIT

# The files git tracks, as they are in the working tree (so that a change not
# yet committed is built the same both times).
mkdir -p "${work}/clone"
(cd "${repo}" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "${work}/clone"
echo "reproducible: building again in ${work}/clone (target directory ${work}/target)"
RELEASE_TARGET_DIR="${work}/target" "${work}/clone/tools/release.sh" "${work}/dist" >"${work}/build.log" 2>&1 || {
  tail -n 30 "${work}/build.log" >&2
  echo "reproducible: FAIL: tools/release.sh in ${work}/clone failed (its log above)" >&2
  exit 1
}
if ! diff -u "${first}/SHA256SUMS" "${work}/dist/SHA256SUMS" >"${work}/sums.diff"; then
  echo "reproducible: FAIL: a second build from ${work}/clone gives other SHA256SUMS than ${first}:" >&2
  cat "${work}/sums.diff" >&2
  exit 1
fi
echo "reproducible: ok: $(wc -l <"${first}/SHA256SUMS") files, the same SHA256SUMS from ${repo} and from ${work}/clone"
