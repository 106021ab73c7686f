#!/usr/bin/env bash
# Lints every Bazel file of the repository (BUILD, MODULE.bazel, .bzl, WORKSPACE,
# tracked or new but not ignored) with the buildifier pinned in package-lock.json:
# `buildifier --mode=check --lint=warn`. Fails on any finding; prints the fix
# command. Installs the pinned buildifier with `npm ci` when it is missing.
#
# Usage: tools/buildifier/lint.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(git -C "${here}" rev-parse --show-toplevel)"
buildifier="${here}/node_modules/.bin/buildifier"

if [[ ! -x "${buildifier}" ]]; then
  echo "lint: installing the pinned buildifier (npm ci in ${here})"
  (cd "${here}" && npm ci --no-audit --no-fund)
fi

files=()
while IFS= read -r -d '' file; do
  case "${file##*/}" in
    BUILD | BUILD.bazel | *.BUILD | MODULE.bazel | *.bzl | WORKSPACE | WORKSPACE.bazel)
      [[ -f "${repo}/${file}" ]] && files+=("${file}")
      ;;
  esac
done < <(git -C "${repo}" ls-files -z --cached --others --exclude-standard)

if [[ ${#files[@]} -eq 0 ]]; then
  echo "lint: no Bazel files found" >&2
  exit 1
fi

echo "lint: $("${buildifier}" --version | head -n 1 | sed "s/ *$//"), ${#files[@]} files"
if ! (cd "${repo}" && "${buildifier}" --mode=check --lint=warn "${files[@]}"); then
  echo "lint: FAIL; to fix what can be fixed automatically, run:" >&2
  echo "  (cd ${repo} && ${buildifier} --lint=fix <file>...)" >&2
  exit 1
fi
echo "lint: ok"
