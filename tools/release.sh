#!/usr/bin/env bash
# Builds the release binaries and writes, for every target built,
#   OUT_DIR/<binary>-<version>-<target>
# plus OUT_DIR/SHA256SUMS (sha256sum format), the files that
# //bazel:binaries.bzl downloads. <version> is what `<binary> --version`
# prints; <target> the Rust target triple.
#
# Targets: RELEASE_TARGETS (space-separated) when set, else the two that are
# released: x86_64-unknown-linux-musl and aarch64-unknown-linux-musl, built
# with rustup's musl standard library (`rustup target add ...`) and linked by
# rust-lld (.cargo/config.toml). The release workflow and CI run this script
# as it is.
#
# Every file is checked before it is written:
#   - statically linked (`file`);
#   - `<binary> --version` prints Cargo.toml's version: run directly for this
#     machine's architecture, under `qemu-<arch>` (qemu-user) for another;
#   - no build path in it: the clone's directory, CARGO_HOME and HOME are
#     remapped (--remap-path-prefix), and `strings` must not find them;
# and SHA256SUMS must verify (`sha256sum -c`). The binaries hold no build
# time and no build path, so two clean builds of one commit give the same
# SHA256SUMS (CI builds twice, from two directories, and compares).
#
# Usage: tools/release.sh OUT_DIR
# Env:   RELEASE_TARGETS     the targets (default: both musl targets)
#        RELEASE_TARGET_DIR  Cargo's target directory (default:
#                            <clone>/target/release-files)
# Exit:  0 done, 1 a build or a check failed, 2 bad usage.
set -euo pipefail

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: tools/release.sh OUT_DIR" >&2; exit 2; }
out="$1"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binaries=(parallel_gpu_execute sanitizer_wrapper tag_filters)
read -r -a targets <<<"${RELEASE_TARGETS:-x86_64-unknown-linux-musl aarch64-unknown-linux-musl}"
((${#targets[@]})) || { echo "release: RELEASE_TARGETS names no target" >&2; exit 2; }
target_dir="${RELEASE_TARGET_DIR:-${repo}/target/release-files}"
cargo_home="${CARGO_HOME:-${HOME}/.cargo}"

fail() {
  echo "release: FAIL: $*" >&2
  exit 1
}

# The version every binary must print; from Cargo.toml's [workspace.package].
version="$(sed -n '/^\[workspace.package\]/,/^\[/{s/^version *= *"\(.*\)"/\1/p}' "${repo}/Cargo.toml")"
[[ -n "${version}" ]] || fail "no version in ${repo}/Cargo.toml"

installed="$(rustup target list --installed 2>/dev/null || true)"
for target in "${targets[@]}"; do
  grep -qx "${target}" <<<"${installed}" ||
    fail "the Rust target ${target} is not installed (rustup target add ${target})"
done

mkdir -p "${out}"
out="$(cd "${out}" && pwd)"
files=()
host_arch="$(uname -m)"
# The paths a build could leave in a binary (panic locations name source
# files). rustc applies the last prefix that matches, so the widest comes
# first: CARGO_HOME and the clone are often inside HOME.
remap=()
[[ "${HOME:-/}" == / ]] || remap+=("${HOME}=/home")
remap+=("${cargo_home}=/cargo" "${repo}=.")
for target in "${targets[@]}"; do
  flags=""
  for r in "${remap[@]}"; do flags+="\"--remap-path-prefix=${r}\", "; done
  cmd=(cargo build --release --locked --target "${target}" --target-dir "${target_dir}" --bins
    -p parallel_gpu_execute -p sanitizer_wrapper -p tag_filters
    --config "target.${target}.rustflags = [${flags%, }]")
  echo "release: (cd ${repo} && ${cmd[*]})"
  (cd "${repo}" && "${cmd[@]}") || fail "cargo build for ${target} failed (command above)"

  arch="${target%%-*}"
  runner=()
  if [[ "${arch}" != "${host_arch}" ]]; then
    command -v "qemu-${arch}" >/dev/null ||
      fail "qemu-${arch} not found: it runs the ${arch} binaries' --version check (apt-get install qemu-user)"
    runner=("qemu-${arch}")
  fi
  for bin in "${binaries[@]}"; do
    built="${target_dir}/${target}/release/${bin}"
    [[ -x "${built}" ]] || fail "${built} is missing after the build"
    info="$(file -b "${built}")"
    case "${info}" in
      *"statically linked"* | *"static-pie linked"*) ;;
      *) fail "${built} is not statically linked: file says '${info}'" ;;
    esac
    printed="$(${runner[@]+"${runner[@]}"} "${built}" --version)" ||
      fail "'${runner[*]:+${runner[*]} }${built} --version' failed"
    [[ "$(awk '{print $2}' <<<"${printed}")" == "${version}" ]] ||
      fail "'${runner[*]:+${runner[*]} }${built} --version' printed '${printed}'; Cargo.toml says ${version}"
    for path in "${repo}" "${cargo_home}" ${HOME:+"${HOME}"}; do
      [[ "${path}" == / ]] && continue
      if strings -n 8 "${built}" | grep -qF "${path}/"; then
        fail "${built} holds the build path ${path}/ (strings -n 8 ${built} | grep -F ${path}/): $(strings -n 8 "${built}" | grep -F "${path}/" | head -n 1)"
      fi
    done
    name="${bin}-${version}-${target}"
    cp "${built}" "${out}/${name}"
    chmod 0755 "${out}/${name}"
    files+=("${name}")
    printf 'release: %-52s %8d bytes\n' "${name}" "$(stat -c %s "${out}/${name}")"
  done
done
(cd "${out}" && sha256sum "${files[@]}" >SHA256SUMS)
(cd "${out}" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS in ${out} does not verify (sha256sum -c)"
echo "release: ${#files[@]} files and SHA256SUMS in ${out}"
