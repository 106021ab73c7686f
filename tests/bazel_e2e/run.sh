#!/usr/bin/env bash
# End-to-end test of the Bazel integration with a real Bazel: the wrappers of
# the Cargo release build, made into --run_under targets by the repository's
# defs.bzl, run sandboxed tests in this WORKSPACE-mode test workspace.
#
# Usage: tests/bazel_e2e/run.sh
#
# Needs:  the release binaries (cargo build --release) and a Bazel on PATH
#         (Debian's bazel-bootstrap 4.2.3 is what CI installs). Offline.
# Env:    BAZEL               the bazel command (default: bazel)
#         E2E_BINARY_DIR      where the binaries are
#                             (default: target/x86_64-unknown-linux-gnu/release)
#         E2E_SPAWN_STRATEGY  Bazel spawn strategy (default: linux-sandbox)
#         E2E_KEEP_OUTPUT=1   keep Bazel's output tree in .output/ afterwards
#
# Everything it writes goes to tests/bazel_e2e/.output/ (ignored by git and
# Bazel), emptied at the start; the logs stay there for inspection. The
# directories the tests share (locks, records, the sandbox probe) must lie
# where Bazel's linux-sandbox would refuse writes without
# --sandbox_writable_path: in .output/, unless the checkout is under /tmp or
# /dev/shm (which the sandbox leaves writable); then in a fresh directory
# under /var/tmp, removed at the end.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
bazel="${BAZEL:-bazel}"
binary_dir="${E2E_BINARY_DIR:-${repo}/target/x86_64-unknown-linux-gnu/release}"
strategy="${E2E_SPAWN_STRATEGY:-linux-sandbox}"
out="${here}/.output"
output_root="${out}/bazel_root"
shared="${out}/shared"
binaries=(parallel_gpu_execute sanitizer_wrapper tag_filters)

# The fake host: 2 GPUs (fake_rocm/bin/rocminfo) with 1 slot each, for 8 tests.
gpus=2
slots_per_gpu=1
gpu_tests=8
test_seconds=2

prefix=e2e
started=${SECONDS}
# shellcheck source=../bazel_lib.sh
source "${here}/../bazel_lib.sh"

cleanup() {
  local status=$?
  if [[ "${E2E_KEEP_OUTPUT:-0}" == 1 ]]; then stop_bazel keep; else stop_bazel; fi
  if [[ "${shared}" != "${out}/shared" ]]; then
    chmod -R u+w "${shared}" 2>/dev/null || true
    rm -rf "${shared}"
  fi
  if [[ ${status} -ne 0 ]]; then
    printf 'e2e: FAILED after %ds; logs in %s\n' $((SECONDS - started)) "${out}/logs" >&2
  fi
  exit "${status}"
}

# --- Preconditions ----------------------------------------------------------

command -v "${bazel}" >/dev/null ||
  die "'${bazel}' not found; install Bazel (CI: apt-get install -y bazel-bootstrap)"

for name in "${binaries[@]}"; do
  binary="${binary_dir}/${name}"
  [[ -x "${binary}" ]] ||
    die "${binary} is missing; build the release binaries first: cargo build --release"
  [[ "$(head -c 4 "${binary}" | od -An -c | tr -d ' ')" == '177ELF' ]] ||
    die "${binary} is not an ELF executable"
  linkage="$(LC_ALL=C ldd "${binary}" 2>&1 || true)"
  [[ "${linkage}" == *"not a dynamic executable"* || "${linkage}" == *"statically linked"* ]] ||
    die "${binary} is dynamically linked: ${linkage}"
done

# --- Fresh scratch tree -----------------------------------------------------

if [[ -d "${output_root}" ]]; then
  bazel_cmd shutdown >/dev/null 2>&1 || true
fi
chmod -R u+w "${out}" 2>/dev/null || true
rm -rf "${out}"
trap cleanup EXIT
case "${out}/" in
  /tmp/* | /dev/shm/*) shared="$(mktemp -d /var/tmp/gpu_ci_wrappers_e2e.XXXXXX)" ;;
esac
mkdir -p "${out}/binaries/bin" "${out}/sysroot" "${shared}/locks" "${shared}/records" \
  "${shared}/probe" "${out}/logs"

for name in "${binaries[@]}"; do
  cp "${binary_dir}/${name}" "${out}/binaries/bin/${name}"
done
for stub in rules_cc rules_java remote_coverage_tools; do
  printf 'build --override_repository=%s=%s/offline/%s\n' "${stub}" "${here}" "${stub}"
done >"${out}/offline.bazelrc"
say "static binaries from ${binary_dir}"
say "bazel: $(bazel_cmd --version 2>/dev/null || echo "${bazel}"), strategy ${strategy}, output in ${out}"

flags=(
  "--spawn_strategy=${strategy}"
  # Far above the 2 GPU slots: the tests must queue in parallel_gpu_execute,
  # not in Bazel (on 2 cores the default --jobs would run only 2 at a time).
  --jobs=16
  --local_test_jobs=16
)
# The wrapper must not see the host's GPUs: an empty sysroot hides /sys and
# /dev, so the GPU count comes from the fake rocminfo in the runfiles.
gpu_env=(
  "--test_env=PARALLEL_GPU_EXECUTE_SYSROOT=${out}/sysroot"
  "--test_env=TF_TESTS_PER_GPU=${slots_per_gpu}"
)

# --- 1. The sandbox confines tests ------------------------------------------

say "1. sandbox: a test may write outside its sandbox only through --sandbox_writable_path"
case "${strategy}:${shared}/" in
  linux-sandbox:/tmp/* | linux-sandbox:/dev/shm/*)
    say "  skipped the negative probe: ${shared} is under a directory the sandbox leaves writable"
    ;;
  linux-sandbox:*)
    run_bazel probe_readonly 3 test "${flags[@]}" //sandbox_probe:probe_test \
      "--test_env=E2E_PROBE_DIR=${shared}/probe"
    ok "without --sandbox_writable_path the test cannot write to ${shared}/probe"
    ;;
  *)
    say "  skipped the negative probe: ${strategy} does not confine writes"
    ;;
esac
run_bazel probe_writable 0 test "${flags[@]}" //sandbox_probe:probe_test \
  "--test_env=E2E_PROBE_DIR=${shared}/probe" "--sandbox_writable_path=${shared}/probe"
ok "with --sandbox_writable_path it can"

# --- 2. parallel_gpu_execute: no GPU slot is ever shared --------------------

say "2. ${gpu_tests} GPU tests under --run_under=//:pge, ${gpus} GPUs x ${slots_per_gpu} slot(s)"
mkdir -p "${shared}/records/gpu"
run_bazel gpu_tests 0 test "${flags[@]}" "${gpu_env[@]}" //gpu:all \
  "--run_under=//:pge --lock-dir=${shared}/locks" \
  "--test_env=E2E_RECORD_DIR=${shared}/records/gpu" \
  "--test_env=E2E_GPU_TEST_SECONDS=${test_seconds}" \
  "--sandbox_writable_path=${shared}/locks" \
  "--sandbox_writable_path=${shared}/records/gpu"
ok "all ${gpu_tests} GPU tests passed"

"${here}/check_gpu_records.sh" "${shared}/records/gpu" "${gpu_tests}" "${gpus}" "${slots_per_gpu}" ||
  die "the GPU slot check failed (records in ${shared}/records/gpu)"
ok "no GPU slot was shared, and tests ran in parallel"

testlogs="$(bazel_cmd info bazel-testlogs 2>/dev/null)"
for i in $(seq 0 $((gpu_tests - 1))); do
  log="${testlogs}/gpu/gpu_test_${i}/test.log"
  grep -q "Running test .* on GPU(s) " "${log}" ||
    die "${log} lacks parallel_gpu_execute's 'Running test ... on GPU(s) ...' line"
done
ok "every test log shows parallel_gpu_execute starting the test"

# Bazel times a test from the start of its --run_under command, so a test that
# took twice its own run time was started by Bazel and then queued for a slot.
for i in $(seq 0 $((gpu_tests - 1))); do
  annotations="${testlogs}/gpu/gpu_test_${i}/test.outputs_manifest/ANNOTATIONS"
  [[ -f "${annotations}" ]] || die "${annotations} is missing: no annotation reached Bazel"
  grep -Eq '^parallel_gpu_execute: GPU\(s\) [0-9]+ slot [0-9]+ mode rocm waited [0-9]+\.[0-9] s$' "${annotations}" ||
    die "${annotations} lacks the wrapper's annotation line: $(cat "${annotations}")"
done
ok "every test's annotations (test.outputs_manifest/ANNOTATIONS) name its GPU, slot, mode and wait"

queued=0
for i in $(seq 0 $((gpu_tests - 1))); do
  xml="${testlogs}/gpu/gpu_test_${i}/test.xml"
  duration="$(sed -n 's/.*<testcase [^>]*duration="\([0-9]*\)".*/\1/p' "${xml}" | head -n 1)"
  [[ -n "${duration}" ]] || die "no test duration in ${xml}"
  if ((duration >= 2 * test_seconds)); then
    queued=$((queued + 1))
  fi
done
((queued > 0)) ||
  die "no test waited for a GPU slot: Bazel never ran more tests than there are slots"
ok "${queued} of ${gpu_tests} tests were started by Bazel and waited in parallel_gpu_execute for a slot"

expected_locks=""
actual_locks="$(cd "${shared}/locks" && ls | grep -E '^gpulock[0-9]+_[0-9]+$' | sort | tr '\n' ' ')"
for ((gpu = 0; gpu < gpus; gpu++)); do
  for ((slot = 0; slot < slots_per_gpu; slot++)); do
    expected_locks+="gpulock${gpu}_${slot} "
  done
done
[[ "${actual_locks}" == "${expected_locks}" ]] ||
  die "lock files in ${shared}/locks: '${actual_locks}', want '${expected_locks}'"
ok "the slot locks are in the --lock-dir given with --run_under: ${actual_locks% }"

# The GPU test checks HIP_VISIBLE_DEVICES=0, which the jax profile leaves
# as it is (JAX's script does not set it): the test environment gives it.
say "2b. the jax profile: --run_under=//:jax_wrapper (parallel_accelerator_execute)"
mkdir -p "${shared}/records/jax"
run_bazel jax_tests 0 test "${flags[@]}" //gpu:gpu_test_0 \
  --run_under=//:jax_wrapper \
  "--test_env=JAX_LOCK_DIR=${shared}/locks" \
  "--test_env=PARALLEL_GPU_EXECUTE_SYSROOT=${out}/sysroot" \
  --test_env=JAX_ACCELERATOR_COUNT=2 \
  --test_env=HIP_VISIBLE_DEVICES=0 \
  "--test_env=E2E_RECORD_DIR=${shared}/records/jax" \
  --test_env=E2E_GPU_TEST_SECONDS=0 \
  --nocache_test_results \
  "--sandbox_writable_path=${shared}/locks" \
  "--sandbox_writable_path=${shared}/records/jax"
grep -q "Running test .* on accelerator 0" "${testlogs}/gpu/gpu_test_0/test.log" ||
  die "the jax wrapper's 'Running test ... on accelerator 0' line is missing from test.log"
[[ -f "${shared}/locks/jax_accelerator_lock_0_0" ]] ||
  die "no jax_accelerator_lock_0_0 in ${shared}/locks"
ok "the macro's executable name selects the jax profile: JAX's lock names, JAX_LOCK_DIR and wording"

# Bazel's command line under coverage is test-setup.sh, collect_coverage.sh,
# the --run_under command, the test (bazelbuild/bazel
# src/main/java/com/google/devtools/build/lib/exec/TestStrategy.java,
# expandedArgsFromAction); collect_coverage.sh changes to the test's runfiles
# directory, runs the rest as a child, then the LCOV merger (here the
# stand-in's offline/remote_coverage_tools/lcov_merger.sh).
say "2c. bazel coverage: the wrapper under Bazel's coverage runner"
mkdir -p "${shared}/records/coverage"
run_bazel coverage 0 coverage "${flags[@]}" "${gpu_env[@]}" //gpu:gpu_test_0 \
  "--run_under=//:pge --lock-dir=${shared}/locks" \
  "--test_env=E2E_RECORD_DIR=${shared}/records/coverage" \
  "--test_env=E2E_LOCK_DIR=${shared}/locks" \
  --test_env=E2E_GPU_TEST_SECONDS=0 \
  "--sandbox_writable_path=${shared}/locks" \
  "--sandbox_writable_path=${shared}/records/coverage"
log="${testlogs}/gpu/gpu_test_0/test.log"
grep -q "Running test .* on GPU(s) " "${log}" ||
  die "${log} lacks parallel_gpu_execute's 'Running test' line under bazel coverage"
grep -Eq "^//gpu:gpu_test_0: coverage 1 profile [^ ]+\.profraw in .*/bazel_e2e$" "${log}" ||
  die "the test did not see Bazel's coverage variables, or ran outside its runfiles directory: ${log}"
[[ -f "${shared}/records/coverage/__gpu_gpu_test_0.rec" ]] ||
  die "no GPU record from the test under bazel coverage in ${shared}/records/coverage"
merger="${shared}/records/coverage/lcov_merger.txt"
[[ -s "${merger}" ]] || die "the LCOV merger did not run after the test (no ${merger})"
sed 's/^/e2e:     | /' "${merger}"
if grep -q ' held$' "${merger}"; then
  die "a GPU slot was still held when the LCOV merger ran: $(tr '\n' ' ' <"${merger}")"
fi
ok "under bazel coverage the test gets its GPU and Bazel's coverage variables, and its slot is free before the LCOV merger runs"

# `bazel run` of a test builds the command line `bazel test` would
# (RunCommand.getTestCommandLine calls TestStrategy.getArgs), with the test's
# environment and the terminal as its stdin: how one GPU test is debugged.
say "2d. bazel run of a GPU test under --run_under=//:pge"
mkdir -p "${shared}/records/run"
run_bazel run_test 0 run "${flags[@]}" "${gpu_env[@]}" //gpu:gpu_test_0 \
  "--run_under=//:pge --lock-dir=${shared}/locks" \
  "--test_env=E2E_RECORD_DIR=${shared}/records/run" \
  --test_env=E2E_GPU_TEST_SECONDS=0
grep -q "^Running test .*/gpu/gpu_test_0 on GPU(s) [01]$" "${out}/logs/run_test.log" ||
  die "bazel run printed no 'Running test ... on GPU(s) ...' line (log: ${out}/logs/run_test.log)"
[[ -f "${shared}/records/run/__gpu_gpu_test_0.rec" ]] ||
  die "no GPU record from the test under bazel run in ${shared}/records/run"
ok "bazel run of a test goes through the wrapper as bazel test does, and the test gets a GPU"

# --- 2e. The lock directory judged under Bazel's own sandbox ----------------
# linux-sandbox's PID 1, its mounts and a tmpfs per action
# (--sandbox_tmpfs_path=/tmp), as the wrapper meets them: the jax profile's
# default lock directory under /tmp is then the action's own, born after
# Bazel made TEST_TMPDIR (docs/remote-execution.md). A read-only lock
# directory with its lock files made beforehand is shared, and never refused.
if [[ "${strategy}" == linux-sandbox ]]; then
  case "${out}/" in
    /tmp/*)
      say "2e. skipped: the output tree is under /tmp, which --sandbox_tmpfs_path=/tmp would hide from the sandbox"
      ;;
    *)
      say "2e. --sandbox_tmpfs_path=/tmp with the jax profile's default lock directory: refused, and the advice works"
      mkdir -p "${shared}/records/tmpfs"
      jax_tmpfs=(test "${flags[@]}" //gpu:gpu_test_0 --run_under=//:jax_wrapper
        "--test_env=PARALLEL_GPU_EXECUTE_SYSROOT=${out}/sysroot" --test_env=JAX_ACCELERATOR_COUNT=2
        --test_env=HIP_VISIBLE_DEVICES=0 "--test_env=E2E_RECORD_DIR=${shared}/records/tmpfs"
        --test_env=E2E_GPU_TEST_SECONDS=0 --nocache_test_results --sandbox_tmpfs_path=/tmp
        "--sandbox_writable_path=${shared}/records/tmpfs")
      run_bazel tmpfs_refused 3 "${jax_tmpfs[@]}"
      log="${testlogs}/gpu/gpu_test_0/test.log"
      grep -q "is on a mount made after this action began .* coordinates with no other test" "${log}" ||
        die "the per-action tmpfs at /tmp was not refused: ${log}"
      grep -q -- "--sandbox_writable_path=/var/lock/gpu" "${log}" || die "no advice outside /tmp in ${log}"
      if grep -q -- "--sandbox_writable_path=/tmp" "${log}"; then
        die "the advice points under the per-action /tmp: ${log}"
      fi
      ok "a per-action tmpfs at /tmp is refused, with advice outside /tmp"
      run_bazel tmpfs_advice 0 "${jax_tmpfs[@]}" "--test_env=JAX_LOCK_DIR=${shared}/locks" \
        "--sandbox_writable_path=${shared}/locks"
      ok "the advice followed (a lock directory outside /tmp, made writable): the test runs"
      ;;
  esac

  say "2f. a read-only lock directory with its lock files made beforehand: two tests on two GPUs"
  mkdir -p "${shared}/ro-locks" "${shared}/records/ro"
  : >"${shared}/ro-locks/gpulock0_0"
  : >"${shared}/ro-locks/gpulock1_0"
  # Each holds its GPU twice as long, so that the two overlap (what the
  # check asks) even when Bazel starts them seconds apart.
  run_bazel ro_locks 0 test "${flags[@]}" "${gpu_env[@]}" //gpu:gpu_test_0 //gpu:gpu_test_1 \
    "--run_under=//:pge --lock-dir=${shared}/ro-locks" \
    "--test_env=E2E_RECORD_DIR=${shared}/records/ro" \
    "--test_env=E2E_GPU_TEST_SECONDS=$((test_seconds * 2))" \
    --nocache_test_results \
    "--sandbox_writable_path=${shared}/records/ro"
  "${here}/check_gpu_records.sh" "${shared}/records/ro" 2 "${gpus}" 1 ||
    die "the read-only lock directory's check failed (records in ${shared}/records/ro)"
  for i in 0 1; do
    if grep -q "coordinates with no other test" "${testlogs}/gpu/gpu_test_${i}/test.log"; then
      die "a shared read-only lock directory was judged private: ${testlogs}/gpu/gpu_test_${i}/test.log"
    fi
  done
  ok "Bazel's sandbox over a read-only lock directory: not refused, two tests at once on GPUs 0 and 1"
fi

# --- 3. sanitizer_wrapper: configured through its runfiles ------------------

say "3. sanitizer_wrapper configured by the macro's runfiles config"
bazel_bin="$(bazel_cmd info bazel-bin 2>/dev/null)"
run_bazel sanitizer 0 test "${flags[@]}" //sanitizer:sanitizer_test --run_under=//:asan_wrapper
sed 's/^/e2e:     | /' "${bazel_bin}/asan_wrapper.sanitizer_wrapper.conf"
ok "ASan/LSan/TSan options, absolute existing suppressions and symbolizer paths from the config"

run_bazel sanitizer_override 0 test "${flags[@]}" //sanitizer:sanitizer_test \
  "--run_under=//:asan_wrapper --asan-options=malloc_context_size=7" \
  --test_env=ASAN_OPTIONS=detect_leaks=0 \
  --test_arg=--asan-base=malloc_context_size=7 \
  --test_arg=--reject-asan=check_initialization_order=1 \
  --test_arg=--asan-last=detect_leaks=0
ok "an option given with --run_under overrides the config's; the user's ASAN_OPTIONS come last"

# --noenable_runfiles: no runfiles tree, only the manifest, and Bazel names the
# test by its runfiles path from an empty $TEST_SRCDIR/bazel_e2e. Run locally:
# linux-sandbox stages a runfiles tree into the sandbox all the same.
run_bazel sanitizer_manifest_only 0 test "${flags[@]}" //sanitizer:sanitizer_test \
  --run_under=//:asan_wrapper --noenable_runfiles --spawn_strategy=local --nocache_test_results
ok "with a runfiles manifest only, the wrapper finds its config, its files and the test through it"

run_bazel sanitizer_gpu 0 test "${flags[@]}" "${gpu_env[@]}" //sanitizer:sanitizer_gpu_test \
  --run_under=//:asan_gpu_wrapper \
  "--test_env=PARALLEL_GPU_EXECUTE_LOCK_DIR=${shared}/locks" \
  "--sandbox_writable_path=${shared}/locks"
ok "sanitizer_wrapper runs the test through its run_under, parallel_gpu_execute"

run_bazel bad_config 1 build //bad_config:newline_in_options
grep -q "must fit on one line" "${out}/logs/bad_config.log" ||
  die "//bad_config:newline_in_options failed for another reason (log: ${out}/logs/bad_config.log)"
ok "a value with a line break fails the analysis"

# The tag_filters macro checks config names with the binary's own rule.
for bad in colon_in_config_name:weird: slash_in_config_name:ci/x leading_dash_in_config_name:-dash; do
  target="${bad%%:*}" name="${bad#*:}"
  run_bazel "bad_${target}" 1 build "//bad_config:${target}"
  grep -qF "bad config name \"${name}\"" "${out}/logs/bad_${target}.log" ||
    die "//bad_config:${target} failed for another reason (log: ${out}/logs/bad_${target}.log)"
done
ok "a config name tag_filters would not read as written fails the analysis"

for bad in 'hash_in_tag:"#"' 'dollar_in_tag:"$"'; do
  target="${bad%%:*}" char="${bad#*:}"
  run_bazel "bad_${target}" 1 build "//bad_config:${target}"
  grep -qF "must not contain ${char}" "${out}/logs/bad_${target}.log" ||
    die "//bad_config:${target} failed for another reason (log: ${out}/logs/bad_${target}.log)"
done
ok "a tag a .bazelrc line would read otherwise fails the analysis"

for target in vtab_in_tag nul_in_tag nbsp_in_tag; do
  run_bazel "bad_${target}" 1 build "//bad_config:${target}"
  grep -qF "must not contain whitespace or a control character" "${out}/logs/bad_${target}.log" ||
    die "//bad_config:${target} failed for another reason (log: ${out}/logs/bad_${target}.log)"
done
ok "a tag with a control character or Unicode whitespace fails the analysis, as the table file refuses it"

# --- 4. tag_filters through bazel run --------------------------------------

say "4. bazel run //:tag_filters"
base="-no_gpu,-requires-gpu-intel,-requires-gpu-nvidia,-requires-gpu-cuda,-cuda-only,-oneapi-only"
base+=",-requires-gpu-sm60,-requires-gpu-sm60-only,-requires-gpu-sm70,-requires-gpu-sm70-only"
base+=",-requires-gpu-sm80,-requires-gpu-sm80-only,-requires-gpu-sm86,-requires-gpu-sm86-only"
base+=",-requires-gpu-sm89,-requires-gpu-sm89-only,-requires-gpu-sm90,-requires-gpu-sm90-only"
base+=",-skip_rocprofiler_sdk,-no_oss,-oss_excluded,-oss_serial"

check_tag_filters() {
  local log="$1" want="$2" got
  shift 2
  got="$(bazel_cmd run "$@" 2>"${out}/logs/${log}.log")" || {
    show_log "${out}/logs/${log}.log"
    die "bazel run $* failed"
  }
  if [[ "${got}" != "${want}" ]]; then
    printf 'e2e: got:  %s\ne2e: want: %s\n' "${got}" "${want}" >&2
    die "bazel run $* printed the wrong list"
  fi
  ok "bazel run $*"
}
check_tag_filters tag_filters "${base}" //:tag_filters
check_tag_filters tag_filters_single_gpu "${base},requires-gpu-rocm,requires-gpu-amd,-multi_gpu" \
  //:tag_filters -- --config=ci_single_gpu
check_tag_filters tag_filters_multi_gpu "${base},multi_gpu" //:tag_filters -- --config=ci_multi_gpu
# The tag_filters macro: the project's table, found beside the executable.
check_tag_filters project_tags "-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu" \
  //:project_tags -- --config=ci_single_gpu
check_tag_filters project_tags_bazelrc "$(printf '%s\n' \
  "build:ci_single_gpu --build_tag_filters=-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu" \
  "test:ci_single_gpu --test_tag_filters=-no_gpu,-requires-gpu-nvidia,requires-gpu-amd,-multi_gpu" \
  "build:nightly --build_tag_filters=-no_gpu,-requires-gpu-nvidia,-flaky" \
  "test:nightly --test_tag_filters=-no_gpu,-requires-gpu-nvidia,-flaky")" \
  //:project_tags -- --format=bazelrc
# A relative --table is the user's path: bazel run starts the binary in its
# runfiles directory, and names where it was started in BUILD_WORKING_DIRECTORY.
printf 'base = -no_gpu\nnightly = -flaky\n' >"${out}/relative.conf"
check_tag_filters tag_filters_relative_table "-no_gpu,-flaky" \
  //:tag_filters -- --table=.output/relative.conf --config=nightly
# The tag_filters macro naming a preset: JAX's table.
check_tag_filters jax_tags "jax_test_gpu,-config-cuda-only,-manual,gpu,-multiaccelerator" \
  //:jax_tags -- --config=single_gpu

say "all ${checks} checks passed in $((SECONDS - started))s"
