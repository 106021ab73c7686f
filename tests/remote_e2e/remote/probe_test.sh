#!/usr/bin/env bash
# Prints what a test action sees where it runs (run.sh saves it): the file
# system root, /dev, /var, the variables that locate it and its runfiles.
# With --no-gpu it also fails when a GPU wrapper gave it a GPU.
set -uo pipefail

show() { printf '%-24s %s\n' "$1" "$2"; }
show "uid:" "$(id -u 2>/dev/null || echo '?')"
show "cwd:" "$(pwd)"
show "/ entries:" "$(cd / && ls -A | tr '\n' ' ')"
show "/ is writable:" "$(if touch /.probe 2>/dev/null; then rm -f /.probe; echo yes; else echo no; fi)"
show "/dev entries:" "$(ls -A /dev 2>/dev/null | tr '\n' ' ')"
for d in /var /var/lock /var/tmp /tmp /sys /proc /bazel-out /home /root; do
  if [[ -L "${d}" ]]; then
    show "${d}:" "symlink to $(readlink "${d}")"
  elif [[ -d "${d}" ]]; then
    show "${d}:" "directory$( [[ -w "${d}" ]] && echo ', writable')"
  else
    show "${d}:" "absent"
  fi
done
for v in PATH HOME USER TMPDIR TEST_TMPDIR TEST_SRCDIR RUNFILES_DIR RUNFILES_MANIFEST_FILE \
  RUNFILES_MANIFEST_ONLY TEST_WORKSPACE TEST_BINARY PARALLEL_GPU_EXECUTE_SYSROOT ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES; do
  show "${v}:" "${!v-<unset>}"
done
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  show "TEST_SRCDIR/MANIFEST:" "$([[ -e "${TEST_SRCDIR}/MANIFEST" ]] && echo present || echo absent)"
  show "TEST_SRCDIR entries:" "$(ls -A "${TEST_SRCDIR}" 2>/dev/null | tr '\n' ' ')"
fi
show "mounts:" ""
# mountinfo: mount point, its options, the source's root, after " - " the type.
awk '{ for (i = 7; $i != "-"; i++) {}; print "  " $5 " " $6 " (" $(i + 1) " " $4 ")" }' /proc/self/mountinfo 2>/dev/null | sort -u

if [[ "${1:-}" == "--no-gpu" && -n "${ROCR_VISIBLE_DEVICES:-}${CUDA_VISIBLE_DEVICES:-}${HIP_VISIBLE_DEVICES:-}" ]]; then
  echo "FAIL: a GPU was given: ROCR=${ROCR_VISIBLE_DEVICES:-} CUDA=${CUDA_VISIBLE_DEVICES:-} HIP=${HIP_VISIBLE_DEVICES:-}" >&2
  exit 1
fi
echo "probe done"
