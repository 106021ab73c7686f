#!/usr/bin/env bash
# Consumer end-to-end test: a separate workspace that uses this repository as
# a user does (local_repository), with the wrappers from release files
# (tools/release.sh) through gpu_ci_wrappers_binaries with file:// URLs and
# the real SHA256SUMS, defined with the macros as docs/bazel.md shows them. Checks, with Bazel
# 4.2.3 in WORKSPACE mode (offline, the stand-ins of tests/bazel_e2e):
#   1. GPU tests under --run_under=//:pge with --nolegacy_external_runfiles
#      and `-c dbg --copt=-fsanitize=address --linkopt=-fsanitize=address`;
#   2. the wrapper's build ignores those flags and --collect_code_coverage
#      (cquery, build_options);
#   3. the prebuilt @gpu_ci_wrappers_bin//:parallel_gpu_execute directly as
#      --run_under;
#   4. sanitizer_wrapper chained to parallel_gpu_execute;
#   5. tag_filters with the project's own table (bazel run);
#   6. a wrong sha256, and a missing one, refused.
#
# Usage: tests/bazel_consumer/run.sh (BAZEL=... to pick the binary)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
bazel="${BAZEL:-bazel}"
out="${here}/.output"
output_root="${out}/bazel_root"
prefix=consumer
started=${SECONDS}
# shellcheck source=../bazel_lib.sh
source "${here}/../bazel_lib.sh"

cleanup() {
  local status=$?
  stop_bazel
  ((status == 0)) || printf 'consumer: FAILED after %ds; logs in %s\n' $((SECONDS - started)) "${out}/logs" >&2
  exit "${status}"
}

command -v "${bazel}" >/dev/null || die "'${bazel}' not found (CI: apt-get install -y bazel-bootstrap)"
chmod -R u+w "${out}" 2>/dev/null || true
rm -rf "${out}"
trap cleanup EXIT
mkdir -p "${out}/logs" "${out}/release" "${out}/release_info" "${out}/locks"

release_files \
  "BAD_SHA256S = dict(SHA256S, parallel_gpu_execute = \"$(printf '0%.0s' {1..64})\")" \
  'PARTIAL_SHA256S = {"parallel_gpu_execute": SHA256S["parallel_gpu_execute"]}'
ok "${version} for ${target}: $(wc -l <"${sums}") files in SHA256SUMS"

offline=()
for stub in rules_cc rules_java remote_coverage_tools; do
  offline+=("--override_repository=${stub}=${repo}/tests/bazel_e2e/offline/${stub}")
done
user_flags=(-c dbg --copt=-fsanitize=address --linkopt=-fsanitize=address --features=asan --nolegacy_external_runfiles)
gpu=(
  --test_env=TF_GPU_COUNT=2
  --test_env=PARALLEL_GPU_EXECUTE_VENDOR=rocm
  "--test_env=PARALLEL_GPU_EXECUTE_SYSROOT=${out}/empty_sysroot"
  "--sandbox_writable_path=${out}/locks"
)
mkdir -p "${out}/empty_sysroot"

say "1. GPU tests under --run_under=//:pge, with the user's -c dbg and ASan flags"
run_bazel gpu 0 test "${offline[@]}" "${user_flags[@]}" "${gpu[@]}" //gpu:gpu_test_0 //gpu:gpu_test_1 \
  "--run_under=//:pge --lock-dir=${out}/locks"
ok "both GPU tests passed under the prebuilt wrapper"
grep -q "Running test .* on GPU(s) " "$(bazel_cmd info "${offline[@]}" "${user_flags[@]}" bazel-testlogs 2>/dev/null)/gpu/gpu_test_0/test.log" ||
  die "test.log lacks parallel_gpu_execute's 'Running test' line"
ok "test.log shows the wrapper starting the test"

say "2. the wrapper's build does not inherit the test's flags"
# --collect_code_coverage as `bazel coverage` sets it.
run_bazel cquery 0 cquery "${offline[@]}" "${user_flags[@]}" --collect_code_coverage 'deps(//:pge, 1)' --output=starlark \
  --starlark:expr='" ".join([str(target.label)] + [str(build_options(target)["//command_line_option:" + o]) for o in ["compilation_mode", "copt", "linkopt", "features", "collect_code_coverage"]]) if build_options(target) else str(target.label) + " (no configuration)"'
grep -E '^(@|//)' "${out}/logs/cquery.log" | sed 's/^/consumer:     | /'
grep -Eq '^//:pge dbg \["-fsanitize=address"\] \["-fsanitize=address"\] \["asan"\] True$' "${out}/logs/cquery.log" ||
  die "//:pge itself should be in the user's configuration (dbg, ASan, coverage): see ${out}/logs/cquery.log"
grep -Eq '^@gpu_ci_wrappers_bin//:parallel_gpu_execute opt \[\] \[\] \[\] False$' "${out}/logs/cquery.log" ||
  die "the wrapper binary is not built with compilation_mode=opt, no copt/linkopt/features and no coverage: see ${out}/logs/cquery.log"
ok "the binary edge: compilation_mode=opt, copt=[], linkopt=[], features=[], collect_code_coverage=False"

say "3. the prebuilt binary itself as --run_under"
run_bazel direct 0 test "${offline[@]}" "${user_flags[@]}" "${gpu[@]}" //gpu:gpu_test_0 --nocache_test_results \
  "--run_under=@gpu_ci_wrappers_bin//:parallel_gpu_execute --lock-dir=${out}/locks"
ok "--run_under=@gpu_ci_wrappers_bin//:parallel_gpu_execute"

say "4. sanitizer_wrapper chained to parallel_gpu_execute"
run_bazel asan 0 test "${offline[@]}" "${user_flags[@]}" "${gpu[@]}" //gpu:asan_gpu_test \
  --run_under=//:asan_gpu "--test_env=PARALLEL_GPU_EXECUTE_LOCK_DIR=${out}/locks"
ok "ASAN_OPTIONS from the macro's configuration, and a GPU from the chained wrapper"

say "5. tag_filters with the project's own table"
got="$(bazel_cmd run "${offline[@]}" //:tags -- --config=ci_single_gpu 2>"${out}/logs/tags.log")" ||
  die "bazel run //:tags failed (log: ${out}/logs/tags.log)"
[[ "${got}" == "-no_gpu,requires-gpu-amd,-multi_gpu" ]] || die "bazel run //:tags printed '${got}'"
ok "bazel run //:tags -- --config=ci_single_gpu: ${got}"

say "6. downloads without a matching sha256 are refused"
run_bazel wrong_sha256 1 build "${offline[@]}" @wrong_sha256//:parallel_gpu_execute
grep -q "Checksum was" "${out}/logs/wrong_sha256.log" || die "a wrong sha256 failed for another reason (log: ${out}/logs/wrong_sha256.log)"
ok "a wrong sha256: Bazel's checksum error"
run_bazel missing_sha256 1 build "${offline[@]}" @missing_sha256//:parallel_gpu_execute
grep -q "no sha256 for sanitizer_wrapper in sha256s; refusing an unverified download" "${out}/logs/missing_sha256.log" ||
  die "a missing sha256 failed for another reason (log: ${out}/logs/missing_sha256.log)"
ok "a missing sha256: refused before any download"

say "all ${checks} checks passed in $((SECONDS - started))s"
