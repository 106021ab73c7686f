#!/usr/bin/env bash
# Builds the release binaries and writes, for every target built,
#   OUT_DIR/<binary>-<version>-<target>
# plus OUT_DIR/SHA256SUMS (sha256sum format), the files that
# //bazel:binaries.bzl downloads. <version> is what `<binary> --version`
# prints; <target> the Rust target triple.
#
# Targets: RELEASE_TARGETS (space-separated) when set; else the musl targets
# whose standard library is installed (x86_64-unknown-linux-musl,
# aarch64-unknown-linux-musl: the release pipeline installs both); else the
# static glibc build of this machine, x86_64-unknown-linux-gnu. A binary that
# is not statically linked fails the release.
#
# Usage: tools/release.sh OUT_DIR
set -euo pipefail

out="${1:?usage: tools/release.sh OUT_DIR}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binaries=(parallel_gpu_execute sanitizer_wrapper tag_filters)

if [[ -n "${RELEASE_TARGETS:-}" ]]; then
  read -r -a targets <<<"${RELEASE_TARGETS}"
else
  installed="$(rustup target list --installed 2>/dev/null || true)"
  targets=()
  for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    if grep -qx "${t}" <<<"${installed}"; then targets+=("${t}"); fi
  done
  ((${#targets[@]})) || targets=(x86_64-unknown-linux-gnu)
fi

# The version every binary must print; from Cargo.toml's [workspace.package].
version="$(sed -n '/^\[workspace.package\]/,/^\[/{s/^version *= *"\(.*\)"/\1/p}' "${repo}/Cargo.toml")"
[[ -n "${version}" ]] || { echo "release: no version in Cargo.toml" >&2; exit 1; }

mkdir -p "${out}"
out="$(cd "${out}" && pwd)"
files=()
host="$(rustc -vV | sed -n 's/^host: //p')"
for target in "${targets[@]}"; do
  echo "release: cargo build --release --locked --target ${target}"
  (cd "${repo}" && cargo build --release --locked --target "${target}" --bins \
    -p parallel_gpu_execute -p sanitizer_wrapper -p tag_filters)
  for bin in "${binaries[@]}"; do
    built="${repo}/target/${target}/release/${bin}"
    [[ -x "${built}" ]] || { echo "release: ${built} is missing" >&2; exit 1; }
    info="$(file -b "${built}")"
    case "${info}" in
      *"statically linked"* | *"static-pie linked"*) ;;
      *) echo "release: ${built} is not statically linked: ${info}" >&2; exit 1 ;;
    esac
    # A binary for this machine's architecture must say the version itself.
    if [[ "${target}" == "${host%%-*}"-* ]]; then
      printed="$("${built}" --version | awk '{print $2}')"
      [[ "${printed}" == "${version}" ]] ||
        { echo "release: ${bin} --version says '${printed}', Cargo.toml '${version}'" >&2; exit 1; }
    fi
    name="${bin}-${version}-${target}"
    cp "${built}" "${out}/${name}"
    chmod 0755 "${out}/${name}"
    files+=("${name}")
  done
done
(cd "${out}" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release: ${#files[@]} files and SHA256SUMS in ${out}"
