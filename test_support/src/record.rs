//! The recording test (a shell script that writes down how it was run,
//! the GPU lock files among its descriptors included) and the checks on
//! what it recorded: above all, that the GPUs a test was given are the ones
//! whose lock files it holds.

/// A test program, written as a shell script, that records how it was run:
/// its argv, pid and parent pid, working directory, the descriptors it
/// inherited and the GPU lock files among them (their names, their
/// descriptor numbers as `lockfds`, and the access mode each was opened
/// with as `lockmodes`: 0 read-only, 2 read-write, the low octal digit of
/// its `/proc/self/fdinfo` flags), start and end times, and the
/// environment variables that matter to these wrappers, one `KEY=value` per
/// line, into `$RECORD_FILE` when set (else stdout). It sleeps `$SLEEP`
/// seconds in between (default 0) and exits with `$EXIT_CODE` (default 0).
/// `start` is its first act and `end` its last (after the rest is written),
/// so that the two bound the whole time it holds its slot: the work a load
/// test packs, and the interval its checker says no other test shares.
pub const RECORDING_TEST: &str = r#"#!/bin/sh
start=$(date +%s%N)
fds=""; locks=""; lockfds=""; lockmodes=""
for f in /proc/$$/fd/*; do
  n=${f##*/}
  l=$(readlink "$f" 2>/dev/null) || continue
  fds="$fds $n"
  case "$l" in */gpulock*|*/jax_accelerator_lock_*)
    locks="$locks ${l##*/}"; lockfds="$lockfds $n"
    fl=$(sed -n 's/^flags:[[:space:]]*//p' "/proc/$$/fdinfo/$n" 2>/dev/null)
    lockmodes="$lockmodes ${fl#"${fl%?}"}";;
  esac
done
[ -n "${SLEEP:-}" ] && sleep "$SLEEP"
record() {
  echo "argc=$#"
  i=0
  for a in "$@"; do echo "arg$i=$a"; i=$((i+1)); done
  echo "pid=$$"
  echo "ppid=$PPID"
  echo "cwd=$(pwd)"
  echo "fds=${fds# }"
  echo "locks=${locks# }"
  echo "lockfds=${lockfds# }"
  echo "lockmodes=${lockmodes# }"
  echo "start=$start"
  for v in ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES TF_PER_DEVICE_MEMORY_LIMIT_MB \
           TPU_VISIBLE_CHIPS TPU_CHIPS_PER_PROCESS_BOUNDS TPU_PROCESS_BOUNDS ONEAPI_VISIBLE_DEVICES \
           ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do
    eval "isset=\${$v+x}"
    if [ -n "$isset" ]; then eval "echo \"$v=\${$v}\""; else echo "$v unset"; fi
  done
}
if [ -n "${RECORD_FILE:-}" ]; then
  record "$@" > "$RECORD_FILE"; echo "end=$(date +%s%N)" >> "$RECORD_FILE"
else
  record "$@"; echo "end=$(date +%s%N)"
fi
exit "${EXIT_CODE:-0}"
"#;

/// Parses the `KEY=value` lines that [`RECORDING_TEST`] writes.
pub fn parse_record(text: &str) -> Vec<(String, String)> {
    text.lines().filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect()
}

/// Looks one key up in a parsed record; `None` when the record says unset.
pub fn record_value<'a>(record: &'a [(String, String)], key: &str) -> Option<&'a str> {
    record.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Checks that the GPUs a recorded test was given, the ids in its `var`
/// (`ROCR_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES`, ...), are the GPUs whose
/// lock files it holds (`locks`, read from its own descriptors, which it
/// inherited from the wrapper): one lock per id, all at one slot, the lock
/// of the id `id` being `gpulock<lock_name(id)>_<slot>`. A record without
/// the variable, with an empty one, or without locks fails: a test that
/// records a GPU says which.
///
/// `lock_name` maps an id as the test sees it to the GPU's name in the lock
/// file: the id itself for index names, a physical identity for
/// `--lock-names=physical`.
pub fn check_gpus_match_locks(
    record: &[(String, String)],
    var: &str,
    lock_name: impl Fn(&str) -> String,
) -> Result<(), String> {
    let ids: Vec<&str> = match record_value(record, var) {
        Some(v) if !v.is_empty() => v.split(',').collect(),
        Some(_) => return Err(format!("{var} is empty: the test recorded no GPU")),
        None => return Err(format!("{var} is not in the record: the test recorded no GPU")),
    };
    let locks: Vec<(String, String)> = record_value(record, "locks")
        .ok_or("no locks in the record")?
        .split_whitespace()
        .map(|l| {
            let l = l.strip_prefix("gpulock").ok_or_else(|| format!("{l}: not a gpulock file"))?;
            let (gpu, slot) = l.rsplit_once('_').ok_or_else(|| format!("gpulock{l}: no _<slot>"))?;
            Ok((gpu.to_string(), slot.to_string()))
        })
        .collect::<Result<_, String>>()?;
    let mut want: Vec<String> = ids.iter().map(|id| lock_name(id)).collect();
    let mut held: Vec<String> = locks.iter().map(|(gpu, _)| gpu.clone()).collect();
    want.sort();
    held.sort();
    if want != held {
        return Err(format!(
            "{var}={} names the GPUs {want:?}, but the test holds the lock files of {held:?}",
            ids.join(",")
        ));
    }
    if locks.iter().any(|(_, slot)| *slot != locks[0].1) {
        return Err(format!("the test's locks {locks:?} are not all at one slot"));
    }
    Ok(())
}
