#!/usr/bin/env bash
# Runs the same invocations with two builds of the three binaries and fails
# when any differs in stdout, stderr, exit status or the annotation written:
#
#   tools/musl_parity.sh [--under=RUNNER] REF_DIR OTHER_DIR
#
# Each directory holds parallel_gpu_execute, sanitizer_wrapper and
# tag_filters. CI runs it twice on the release files (tools/release.sh):
#   - REF_DIR the static glibc build (target/x86_64-unknown-linux-gnu/release),
#     OTHER_DIR the x86_64 musl release files: the musl build alone allocates
#     from the bump arena in parallel_gpu_execute/src/sys/heap.rs;
#   - REF_DIR the x86_64 musl release files, OTHER_DIR the aarch64 ones, run
#     under --under=qemu-aarch64 (qemu-user; what they exec runs natively;
#     stdout is compared sorted, see outcome below).
# Each binary's own path is replaced by BIN in what it prints. Fixtures (an
# empty sysroot, KFD sysroots with 8 and 64 GPUs and one of 2 GPUs without
# /dev/kfd, an NVIDIA sysroot of 4 GPUs, a runfiles tree, two more that hold
# a rocminfo, suppression files) are made in a temporary directory, removed
# at the end. Slots: some runs find GPU 0's lock held by another process.
# Exit: 0 all alike, 1 some differ, 2 bad usage.
set -euo pipefail

usage() { echo "usage: musl_parity.sh [--under=RUNNER] REF_DIR OTHER_DIR" >&2; exit 2; }
runner=()
case "${1:-}" in
  --under=?*) read -r -a runner <<<"${1#--under=}"; shift ;;
  --*) usage ;;
esac
[[ $# -eq 2 && -d "$1" && -d "$2" ]] || usage
glibc="$(cd "$1" && pwd)"
musl="$(cd "$2" && pwd)"
if ((${#runner[@]})); then
  command -v "${runner[0]}" >/dev/null || { echo "musl_parity: ${runner[0]} not found (--under)" >&2; exit 2; }
fi
for bin in parallel_gpu_execute sanitizer_wrapper tag_filters; do
  for dir in "${glibc}" "${musl}"; do
    [[ -x "${dir}/${bin}" ]] || { echo "musl_parity: ${dir}/${bin} missing" >&2; exit 2; }
  done
done

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# A KFD sysroot: node 0 a CPU, nodes 1..N GPUs with render nodes 128...,
# and /dev/kfd unless NO_KFD_DEVICE is set (a container given its render
# nodes only: no GPU, one warning).
kfd_sysroot() {
  local root="$1" gpus="$2" i dir
  mkdir -p "${root}/dev/dri"
  [[ -n "${NO_KFD_DEVICE:-}" ]] || : >"${root}/dev/kfd"
  for ((i = 0; i <= gpus; i++)); do
    dir="${root}/sys/class/kfd/kfd/topology/nodes/${i}"
    mkdir -p "${dir}"
    if ((i == 0)); then
      printf 'cpu_cores_count 64\nsimd_count 0\n' >"${dir}/properties"
    else
      printf 'cpu_cores_count 0\nsimd_count 304\ngfx_target_version 90402\ndrm_render_minor %d\nunique_id %d\n' \
        $((127 + i)) $((5000 + i)) >"${dir}/properties"
      : >"${root}/dev/dri/renderD$((127 + i))"
    fi
  done
}
mkdir -p "${work}/empty"
kfd_sysroot "${work}/kfd8" 8
kfd_sysroot "${work}/kfd64" 64
NO_KFD_DEVICE=1 kfd_sysroot "${work}/kfd_nodev" 2
# An NVIDIA host: 4 GPUs in /proc/driver/nvidia/gpus, their /dev/nvidia<N>
# and the control nodes, which are not GPUs.
for ((i = 0; i < 4; i++)); do
  dir="${work}/nvidia4/proc/driver/nvidia/gpus/0000:0$((i + 1)):00.0"
  mkdir -p "${dir}" "${work}/nvidia4/dev"
  printf 'Model: \t\t Fake GPU\nGPU UUID: \t GPU-%08x-0000-4000-8000-%012x\nBus Location: \t 0000:0%d:00.0\nDevice Minor: \t %d\nGPU Excluded:\t No\n' \
    "${i}" $((i + 1)) $((i + 1)) "${i}" >"${dir}/information"
  : >"${work}/nvidia4/dev/nvidia${i}"
done
for node in nvidiactl nvidia-uvm nvidia-uvm-tools nvidia-modeset; do : >"${work}/nvidia4/dev/${node}"; done
chmod 0666 "${work}"/nvidia4/dev/*
mkdir -p "${work}/runfiles/ws/pkg" "${work}/runfiles/ws/sanitizers"
# The test: its arguments and the environment it was given.
printf '#!/bin/sh\necho "args: $*"\nexec /usr/bin/env\n' >"${work}/runfiles/ws/pkg/env_test"
chmod +x "${work}/runfiles/ws/pkg/env_test"
printf 'leak:libfoo\n' >"${work}/runfiles/ws/sanitizers/lsan.supp"
printf 'race:bar\n' >"${work}/runfiles/ws/sanitizers/tsan.supp"
printf 'ws/pkg/env_test %s\n' "${work}/runfiles/ws/pkg/env_test" >"${work}/runfiles/MANIFEST"
printf 'base = -no_gpu\nci_x = gpu\n' >"${work}/table.conf"
# Runfiles trees (no MANIFEST, so they are walked) holding a rocminfo: one
# that lists two GPU agents, one that fails and says why in colour on stdout.
mkdir -p "${work}/rocm_ok/rocm/bin" "${work}/rocm_fail/rocm/bin"
cat >"${work}/rocm_ok/rocm/bin/rocminfo" <<'ROCMINFO'
#!/bin/sh
printf 'Agent 1\n  Name: gfx942\n  Device Type: GPU\nAgent 2\n  Name: gfx942\n  Device Type: GPU\n'
ROCMINFO
cat >"${work}/rocm_fail/rocm/bin/rocminfo" <<'ROCMINFO'
#!/bin/sh
printf '\033[37mROCk module is loaded\n\033[31mUnable to open /dev/kfd read-write: Permission denied\n\033[0m'
exit 8
ROCMINFO
chmod +x "${work}/rocm_ok/rocm/bin/rocminfo" "${work}/rocm_fail/rocm/bin/rocminfo"

# The outcome of one invocation: status, stdout, stderr, annotation. With
# HOLD=<lock file name> set, another process holds that lock meanwhile.
outcome() {
  local dir="$1" bin="$2"; shift 2
  local env=() run=()
  [[ "${dir}" == "${musl}" ]] && run=(${runner[@]+"${runner[@]}"})
  while [[ "$1" != "--" ]]; do env+=("$1"); shift; done
  shift
  rm -rf "${work}/locks" "${work}/ann" "${work}/held"
  mkdir -p "${work}/ann" "${work}/locks"
  local holder=""
  if [[ -n "${HOLD:-}" ]]; then
    # The holder keeps no descriptor of ours open (this runs inside a
    # command substitution, which would otherwise wait for it).
    (
      exec 9>"${work}/locks/${HOLD}"
      flock 9
      : >"${work}/held"
      exec sleep 60
    ) </dev/null >/dev/null 2>&1 &
    holder=$!
    for _ in $(seq 100); do [[ -e "${work}/held" ]] && break; sleep 0.02; done
    [[ -e "${work}/held" ]] || { echo "musl_parity: could not hold ${work}/locks/${HOLD}" >&2; exit 2; }
  fi
  local status=0
  (cd "${work}/runfiles/ws" && env -i PATH=/usr/bin:/bin TEST_SRCDIR="${work}/runfiles" TEST_WORKSPACE=ws \
    PARALLEL_GPU_EXECUTE_LOCK_DIR="${work}/locks" TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR="${work}/ann" \
    "${env[@]}" ${run[@]+"${run[@]}"} "${dir}/${bin}" "$@" >"${work}/out" 2>"${work}/err") || status=$?
  if [[ -n "${holder}" ]]; then
    kill "${holder}" 2>/dev/null || true
    wait "${holder}" 2>/dev/null || true
  fi
  echo "status ${status}"
  # qemu-user hands the program it runs its environment in reverse order, so
  # with --under the lines of stdout (where the tests print `env`) are
  # compared sorted; the x86_64 comparison and the test suite keep the order.
  if ((${#runner[@]})); then
    sed "s#${dir}/${bin}#BIN#g" "${work}/out" | LC_ALL=C sort
  else
    sed "s#${dir}/${bin}#BIN#g" "${work}/out"
  fi
  echo "-- stderr"
  sed "s#${dir}/${bin}#BIN#g" "${work}/err"
  echo "-- annotation"
  cat "${work}/ann/"* 2>/dev/null || true
}

runs=0
differ=0
same() {
  local bin="$1"; shift
  runs=$((runs + 1))
  local a b
  a="$(outcome "${glibc}" "${bin}" "$@")"
  b="$(outcome "${musl}" "${bin}" "$@")"
  if [[ "${a}" != "${b}" ]]; then
    differ=$((differ + 1))
    echo "musl_parity: DIFFERS: ${HOLD:+(gpu lock ${HOLD} held) }${bin} $* (< ${glibc}, > ${runner[*]:+${runner[*]} }${musl})" >&2
    diff <(echo "${a}") <(echo "${b}") | head -20 >&2 || true
  fi
}

for root in empty kfd8 kfd64 kfd_nodev nvidia4; do
  for count in "" 2; do
    e=(PARALLEL_GPU_EXECUTE_SYSROOT="${work}/${root}")
    [[ -n "${count}" ]] && e+=(TF_GPU_COUNT="${count}")
    for flag in --list --list=text --list=json --list=count --list=gfx-targets --list=yaml \
      --status --status=json --status=yaml --wait=x --lock-dir=/proc/nope/locks --help --version; do
      same parallel_gpu_execute "${e[@]}" -- "${flag}"
    done
    same parallel_gpu_execute "${e[@]}" -- ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" -- ./pkg/env_test --num_processes=2
    same parallel_gpu_execute "${e[@]}" -- --lock-names=physical ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" -- --vendor=cuda ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" -- --profile=jax ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" TF_PER_DEVICE_MEMORY_LIMIT_MB=1000 -- ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" -- ./pkg/missing_test
    same parallel_gpu_execute "${e[@]}" -- /etc/hostname
    # Pool variables that hide every GPU, or end early.
    same parallel_gpu_execute "${e[@]}" ROCR_VISIBLE_DEVICES= -- ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" ROCR_VISIBLE_DEVICES=1,-1,0 -- --list=json
    same parallel_gpu_execute "${e[@]}" CUDA_VISIBLE_DEVICES=-1 -- --vendor=cuda ./pkg/env_test
    # CUDA's MIG form: its lock file name, and a malformed one refused.
    same parallel_gpu_execute "${e[@]}" CUDA_VISIBLE_DEVICES=MIG-GPU-8932f937/1/0,MIG-GPU-8932f937/2/0 -- --vendor=cuda ./pkg/env_test
    same parallel_gpu_execute "${e[@]}" CUDA_VISIBLE_DEVICES=MIG-GPU-8932f937/1/0/0 -- --vendor=cuda ./pkg/env_test
  done
done

# Slots: GPU 0's first slot held by another process; the test gets the next
# GPU, or with one GPU its second slot, or with one slot and --wait=0 is
# refused.
for root in kfd8 nvidia4; do
  e=(PARALLEL_GPU_EXECUTE_SYSROOT="${work}/${root}")
  HOLD=gpulock0_0 same parallel_gpu_execute "${e[@]}" -- ./pkg/env_test
  HOLD=gpulock0_0 same parallel_gpu_execute "${e[@]}" -- ./pkg/env_test --num_processes=2
  HOLD=gpulock0_0 same parallel_gpu_execute "${e[@]}" TF_GPU_COUNT=1 -- --wait=0 ./pkg/env_test
  HOLD=gpulock0_0 same parallel_gpu_execute "${e[@]}" TF_GPU_COUNT=1 TF_TESTS_PER_GPU=1 -- --wait=0 ./pkg/env_test
done

# The rocminfo source (the later TEST_SRCDIR wins): a count, a failure.
for tree in rocm_ok rocm_fail; do
  e=(PARALLEL_GPU_EXECUTE_SYSROOT="${work}/empty" TEST_SRCDIR="${work}/${tree}")
  same parallel_gpu_execute "${e[@]}" -- --list
  same parallel_gpu_execute "${e[@]}" -- ./pkg/env_test
done

for args in "" "--config=ci_single_gpu" "--config=ci_multi_gpu --config=asan" "--format=flags --config=tsan" \
  "--format=bazelrc" "--explain=gpu,requires-gpu-rocm --config=ci_single_gpu" "--explain=no_gpu" \
  "--strict --config=nope" "--format=yaml" "--table=${work}/table.conf --config=ci_x" "--table=${work}/none.conf" \
  "test -c opt //xla/... --config=ci_multi_gpu" "--preset=jax-rocm --config=single_gpu" "--preset=nope" \
  "--help" "--version"; do
  # shellcheck disable=SC2086 # the flags are meant to be split
  same tag_filters -- ${args}
done

supp=(--lsan-suppressions=ws/sanitizers/lsan.supp --tsan-suppressions=ws/sanitizers/tsan.supp)
same sanitizer_wrapper -- /usr/bin/env
same sanitizer_wrapper -- --asan-options=detect_leaks=1 "${supp[@]}" /usr/bin/env
same sanitizer_wrapper ASAN_OPTIONS=verbosity=1 -- --asan-options=detect_leaks=1 /usr/bin/env
same sanitizer_wrapper -- --asan-suppressions=ws/sanitizers/missing.supp /usr/bin/env
same sanitizer_wrapper -- --lsan-suppressions=ws/sanitizers /usr/bin/env
same sanitizer_wrapper -- --bad-flag /usr/bin/env
same sanitizer_wrapper -- "${supp[@]}" ./pkg/missing_test
same sanitizer_wrapper -- --run-under="${glibc}/parallel_gpu_execute" "${supp[@]}" ./pkg/env_test
same sanitizer_wrapper -- --help
same sanitizer_wrapper -- --version

echo "musl_parity: ${runs} invocations, ${differ} differ"
((differ == 0))
