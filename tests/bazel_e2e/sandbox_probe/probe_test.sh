#!/usr/bin/env bash
set -euo pipefail
probe_dir="${E2E_PROBE_DIR:?E2E_PROBE_DIR is not set (run.sh passes it with --test_env)}"
if touch "${probe_dir}/probe.$$" 2>/dev/null; then
  echo "${probe_dir} is writable"
  exit 0
fi
echo "${probe_dir} is not writable"
exit 1
