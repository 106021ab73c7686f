#!/usr/bin/env bash
# Makes sure a Python virtual environment with prometheus_client exists and
# prints its python: the OpenMetrics parser that checks
# `parallel_gpu_execute --status=openmetrics` (tests/openmetrics.rs of the
# parallel_gpu_execute crate). Installs only when the environment is missing
# or holds another version.
#
# Usage: tools/prometheus_client_venv.sh [VENV_DIR]
#   VENV_DIR defaults to $PROMETHEUS_CLIENT_VENV, else
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gpu_ci_wrappers/prometheus_client-<version>,
#   outside the checkout so that CI runs on the same machine reuse it; the
#   test looks there too.
set -euo pipefail

version=0.21.1
venv="${1:-${PROMETHEUS_CLIENT_VENV:-${XDG_CACHE_HOME:-${HOME}/.cache}/gpu_ci_wrappers/prometheus_client-${version}}}"

installed() {
  [[ -x "${venv}/bin/python" ]] &&
    [[ "$("${venv}/bin/python" -c 'import importlib.metadata as m; print(m.version("prometheus_client"))' 2>/dev/null)" == "${version}" ]]
}

if ! installed; then
  echo "prometheus_client_venv: installing prometheus_client==${version} into ${venv}" >&2
  rm -rf "${venv}"
  mkdir -p "$(dirname "${venv}")"
  python3 -m venv "${venv}"
  "${venv}/bin/pip" install --quiet --disable-pip-version-check "prometheus_client==${version}" >&2
  installed || { echo "prometheus_client_venv: prometheus_client ${version} is not importable from ${venv}" >&2; exit 1; }
fi
echo "${venv}/bin/python"
