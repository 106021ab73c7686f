#!/usr/bin/env bash
#
# COMPARISON BASELINE ONLY. Not part of the product and not to be deployed.
#
# The classic `bazel test --run_under` GPU wrapper algorithm, the one that
# XLA's and TensorFlow's build_tools/rocm/parallel_gpu_execute.sh implement,
# written anew for benches/wrapper_cost.rs so that the benchmark compares
# parallel_gpu_execute with what it replaces, step for step:
#
#   1. without TF_GPU_COUNT: look for `*/bin/rocminfo` anywhere in the runfiles
#      tree with `find -L | head -1` (find walks the whole tree all the same:
#      its output is buffered, and head's exit would only stop it at a later
#      write), run it, and count its `Name: *gfx*` lines with grep and wc;
#   2. resolve the test with an `rlocation` function, in a command
#      substitution: $TEST_SRCDIR/$TEST_WORKSPACE/<test>, else its line in
#      $TEST_SRCDIR/MANIFEST;
#   3. no GPU: say so and run the test as it is;
#   4. try `flock -n` on <lockdir>/gpulock<gpu>_<slot>, slot by slot (all
#      GPUs at slot 0, then at slot 1, ...), counting with `seq`;
#   5. run the test in a subshell with CUDA_VISIBLE_DEVICES and
#      HIP_VISIBLE_DEVICES set to the GPU, and exit with its status;
#   6. every slot busy: fail the test (exit 1) at once.
#
# The one change: the lock directory is $CLASSIC_LOCK_DIR (default
# /var/lock), so that the benchmark can use a private one.

TF_TESTS_PER_GPU=${TF_TESTS_PER_GPU:-8}
lock_dir=${CLASSIC_LOCK_DIR:-/var/lock}

if [[ -z "${TF_GPU_COUNT:-}" ]]; then
  rocminfo_bin=$(find -L "$TEST_SRCDIR" -name rocminfo -path '*/bin/rocminfo' | head -1)
  if [[ -n "$rocminfo_bin" ]]; then
    TF_GPU_COUNT=$("$rocminfo_bin" | grep "Name: *gfx*" | wc -l)
  else
    TF_GPU_COUNT=0
  fi
fi
export TF_PER_DEVICE_MEMORY_LIMIT_MB=${TF_PER_DEVICE_MEMORY_LIMIT_MB:-4096}

is_absolute() {
  [[ "$1" == /* ]]
}

# The runfiles lookup: the tree first, then the manifest.
rlocation() {
  if is_absolute "$1"; then
    echo "$1"
  elif [[ -e "$TEST_SRCDIR/$1" ]]; then
    echo "$TEST_SRCDIR/$1"
  elif [[ -e "$TEST_SRCDIR/MANIFEST" ]]; then
    local key target
    while read -r key target; do
      if [[ "$key" == "$1" ]]; then
        echo "$target"
        return
      fi
    done <"$TEST_SRCDIR/MANIFEST"
  fi
}

test_binary=$(rlocation "$TEST_WORKSPACE/${1#./}")
shift

if ((TF_GPU_COUNT == 0)); then
  echo "Execute with no GPU support"
  "$test_binary" "$@"
  exit $?
fi

mkdir -p "$lock_dir"
for slot in $(seq 0 $((TF_TESTS_PER_GPU - 1))); do
  for gpu in $(seq 0 $((TF_GPU_COUNT - 1))); do
    exec {lock_fd}>"$lock_dir/gpulock${gpu}_${slot}" || exit 1
    if flock -n "$lock_fd"; then
      (
        export CUDA_VISIBLE_DEVICES=$gpu
        export HIP_VISIBLE_DEVICES=$gpu
        echo "Running test $test_binary $* on GPU $gpu"
        "$test_binary" "$@"
      )
      status=$?
      flock -u "$lock_fd"
      exit $status
    fi
  done
done

echo "Cannot find a free GPU to run the test $* on, exiting with failure..."
exit 1
