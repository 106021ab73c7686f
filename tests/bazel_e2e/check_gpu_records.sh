#!/usr/bin/env bash
# check_gpu_records.sh RECORD_DIR TESTS GPUS SLOTS_PER_GPU
#
# Reads the records of gpu/gpu_test.sh ("<test> <gpu> <start> <end>") and
# proves that every one of TESTS tests ran, each on one of GPUS GPUs, that no
# GPU ever had more than SLOTS_PER_GPU tests at once (no slot was shared), and
# that tests did run in parallel (more than one at a time).
set -euo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 RECORD_DIR TESTS GPUS SLOTS_PER_GPU" >&2
  exit 2
fi
record_dir="$1"
tests="$2"
gpus="$3"
slots="$4"

shopt -s nullglob
records=("${record_dir}"/*.rec)
if [[ ${#records[@]} -ne ${tests} ]]; then
  echo "FAIL: ${#records[@]} test records in ${record_dir}, want ${tests}" >&2
  exit 1
fi

cat "${records[@]}" | sort -k3,3g | awk -v gpus="${gpus}" -v slots="${slots}" '
  {
    if (NF != 4 || $2 !~ /^[0-9]+$/ || $2 + 0 >= gpus || !($3 < $4)) {
      printf "FAIL: bad record: %s\n", $0
      bad = 1
      next
    }
    n++
    name[n] = $1; gpu[n] = $2 + 0; start[n] = $3; end[n] = $4
    if (n == 1) t0 = $3
    printf "  %-28s GPU %s  %6.3fs .. %6.3fs\n", $1, $2, $3 - t0, $4 - t0
  }
  END {
    if (bad) exit 1
    # Load at each start: how many tests were running then, in all and per GPU.
    max_all = 0
    for (i = 1; i <= n; i++) {
      all = 0
      delete per_gpu
      for (j = 1; j <= n; j++) {
        if (start[j] <= start[i] && start[i] < end[j]) {
          all++
          per_gpu[gpu[j]]++
        }
      }
      if (all > max_all) max_all = all
      for (g in per_gpu) {
        if (per_gpu[g] > slots) {
          printf "FAIL: %d tests on GPU %s at once (when %s started), only %d slot(s) per GPU\n", per_gpu[g], g, name[i], slots
          bad = 1
        }
      }
    }
    if (bad) exit 1
    used = 0
    for (i = 1; i <= n; i++) seen[gpu[i]] = 1
    for (g in seen) used++
    printf "  %d tests on %d GPU(s); at most %d at once; never more than %d per GPU\n", n, used, max_all, slots
    if (max_all < 2) {
      print "FAIL: the tests never ran in parallel, so the slot check proves nothing"
      exit 1
    }
  }
'
