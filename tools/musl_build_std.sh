#!/usr/bin/env bash
# Builds the three wrappers for x86_64-unknown-linux-musl where rustup's
# musl standard library is not installed, so that their size and start-up
# can be measured (`WRAPPER_BENCH_MUSL_BINS=<dir> cargo bench --bench
# wrapper_cost`). Prints the directory the binaries are in.
#
# A measurement build, not the release build: the release pipeline
# (tools/release.sh, .github/workflows/release.yml) uses rustup's
# x86_64-unknown-linux-musl target with its own musl and libunwind. This
# script instead compiles the standard library from source (nightly
# `-Z build-std`, with the nightly toolchain's rust-src component) and links
# with Debian's musl (`musl-gcc`, package musl-tools). The unwinder the
# musl target links (`-lunwind`) comes from GCC's libgcc_eh.a, plus a stub
# for glibc's `_dl_find_object`, which that archive calls and musl lacks:
# with panic=abort nothing ever unwinds, and a backtrace only loses its
# frames. Our code, the standard library's code and musl are those of a
# release build; the standard library is compiled with this project's
# release profile (size-optimised, LTO) instead of rustup's prebuilt one.
#
# Needs: rustup's nightly toolchain with rust-src
#   (rustup component add rust-src --toolchain nightly), musl-tools, gcc.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="x86_64-unknown-linux-musl"
work="${repo}/target/musl-build-std"
mkdir -p "${work}/unwind"

command -v musl-gcc >/dev/null || { echo "musl_build_std: musl-gcc not found (apt-get install musl-tools)" >&2; exit 2; }
libgcc_eh="$(gcc -print-file-name=libgcc_eh.a)"
[[ -f "${libgcc_eh}" ]] || { echo "musl_build_std: gcc's libgcc_eh.a not found" >&2; exit 2; }

cp "${libgcc_eh}" "${work}/unwind/libunwind.a"
cat >"${work}/unwind/dl_find_object.c" <<'EOF'
/* musl has no _dl_find_object; -1 tells libgcc's unwinder "not found". */
int _dl_find_object(void *pc, void *result) { (void)pc; (void)result; return -1; }
EOF
musl-gcc -O2 -c "${work}/unwind/dl_find_object.c" -o "${work}/unwind/dl_find_object.o"
ar rs "${work}/unwind/libunwind.a" "${work}/unwind/dl_find_object.o" 2>/dev/null

# The flags of .cargo/config.toml for musl, and the Debian linker set-up.
export RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static -C link-self-contained=no -C linker=musl-gcc -L ${work}/unwind"
(cd "${repo}" && cargo +nightly build --release --locked -Z build-std=std,panic_abort \
  --target "${target}" --target-dir "${work}" \
  -p parallel_gpu_execute -p sanitizer_wrapper -p tag_filters >&2)

out="${work}/${target}/release"
for bin in parallel_gpu_execute sanitizer_wrapper tag_filters; do
  [[ -x "${out}/${bin}" ]] || { echo "musl_build_std: ${out}/${bin} was not built" >&2; exit 1; }
done
echo "${out}"
