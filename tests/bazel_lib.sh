# Helpers of the real-Bazel end-to-end scripts (tests/bazel_e2e/run.sh,
# tests/bazel_consumer/run.sh). Source it after setting:
#   prefix       the word every line starts with ("e2e", "consumer")
#   here         the Bazel workspace directory
#   bazel        the Bazel binary
#   out          the output directory (logs in ${out}/logs)
#   output_root  Bazel's --output_user_root
# It defines checks (the number of passed checks), say, ok, die, show_log,
# bazel_cmd, run_bazel, stop_bazel and release_files.

checks=0

say() { printf '%s: %s\n' "${prefix}" "$*"; }
ok() {
  checks=$((checks + 1))
  printf '%s:   ok: %s\n' "${prefix}" "$*"
}
die() {
  printf '%s: FAIL: %s\n' "${prefix}" "$*" >&2
  exit 1
}

# Shows the end of a Bazel log after a failure.
show_log() {
  printf '%s: ---- last lines of %s ----\n' "${prefix}" "$1" >&2
  tail -n 80 "$1" >&2 || true
  printf '%s: ----\n' "${prefix}" >&2
}

bazel_cmd() {
  (cd "${here}" && "${bazel}" --nohome_rc --max_idle_secs=300 \
    --output_user_root="${output_root}" "$@")
}

# run_bazel LOG EXPECTED_STATUS ARGS...: runs Bazel into LOG and checks its
# exit status (0 success, 1 build failure, 3 test failure).
run_bazel() {
  local log="${out}/logs/$1.log" want="$2" status=0
  shift 2
  printf '$ bazel %s\n' "$*" >"${log}"
  bazel_cmd "$@" >>"${log}" 2>&1 || status=$?
  if [[ ${status} -ne ${want} ]]; then
    show_log "${log}"
    die "'bazel $1 ...' exited with ${status}, want ${want} (log: ${log})"
  fi
}

# stop_bazel [keep]: stops the Bazel server and, unless "keep" is
# given, removes its output root (read-only files included).
stop_bazel() {
  [[ -d "${output_root}" ]] || return 0
  bazel_cmd shutdown >/dev/null 2>&1 || true
  if [[ "${1:-}" != keep ]]; then
    chmod -R u+w "${output_root}" 2>/dev/null || true
    rm -rf "${output_root}"
  fi
}

# release_files [LINE...]: the x86_64 musl release files, as a user
# downloads them (tools/release.sh, RELEASE_TARGETS=x86_64-unknown-linux-musl),
# in ${out}/release, and the repository ${out}/release_info whose release.bzl
# names them for gpu_ci_wrappers_binaries (BASE_URL, VERSION, TARGET,
# SHA256S), followed by each LINE. Sets version, target and sums.
release_files() {
  target=x86_64-unknown-linux-musl
  say "release files (RELEASE_TARGETS=${target} tools/release.sh ${out}/release)"
  RELEASE_TARGETS="${target}" "${repo}/tools/release.sh" "${out}/release" >"${out}/logs/release.log" 2>&1 || {
    tail -n 30 "${out}/logs/release.log" >&2
    die "RELEASE_TARGETS=${target} tools/release.sh ${out}/release failed (log: ${out}/logs/release.log)"
  }
  sums="${out}/release/SHA256SUMS"
  local first b
  first="$(head -n 1 "${sums}" | awk '{print $2}')"
  version="$(sed -E 's/^parallel_gpu_execute-([^-]+)-.*/\1/' <<<"${first}")"
  [[ "${first}" == "parallel_gpu_execute-${version}-${target}" ]] ||
    die "the first file of ${sums} is ${first}, not parallel_gpu_execute-${version}-${target}"
  mkdir -p "${out}/release_info"
  {
    echo "BASE_URL = \"file://${out}/release\""
    echo "VERSION = \"${version}\""
    echo "TARGET = \"${target}\""
    echo "SHA256S = {"
    for b in parallel_gpu_execute sanitizer_wrapper tag_filters; do
      echo "    \"${b}\": \"$(awk -v f="${b}-${version}-${target}" '$2 == f {print $1}' "${sums}")\","
    done
    echo "}"
    ((${#} == 0)) || printf '%s\n' "$@"
  } >"${out}/release_info/release.bzl"
  : >"${out}/release_info/BUILD.bazel"
  echo 'workspace(name = "release_info")' >"${out}/release_info/WORKSPACE"
}
