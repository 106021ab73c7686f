//! `--status=openmetrics`: what `--status` finds, as OpenMetrics text
//! (gauges, one `# HELP` and `# TYPE` per family, `# EOF` last), for
//! node_exporter's textfile collector or any scraper. Every sample carries
//! the lock directory as `lock_dir`, and the profile (`xla`, `jax`) as
//! `profile`, so that both profiles' reports of one shared directory can be
//! exported side by side. Label values are escaped losslessly:
//! `"` and a line break as OpenMetrics has it (`\"`, `\n`), a backslash
//! doubled (it reads back as `\\`), and a byte that is not UTF-8, or one of
//! a control or format character (ESC, U+2028), as `\\xHH` (it reads back
//! as `\xHH`), so that two names never share a label value and none
//! carries a terminal's escape sequence.
//! Only the GPUs of these settings have series, so the size of the output
//! is bounded by the host's GPUs, whatever other users put in the lock
//! directory.
//!
//! | family | labels | value |
//! |---|---|---|
//! | `parallel_gpu_execute_slots` | `lock_dir`, `profile`, `gpu`, `state` (`held`, `free`; `unknown` only where some slot's state is unknown; `skipped` only where some slot's lock path is one every test skips: a FIFO, a symbolic link; `held_beyond_settings` only for a GPU whose lock file at a slot these settings do not have is held: tests given more slots per GPU than this report) | slots of the settings in that state; from a PID namespace other than the host's, every slot with a lock file not seen held is `unknown` (one held from outside it cannot be told from a free one), never `free` |
//! | `parallel_gpu_execute_waiters` | `lock_dir`, `profile` | processes waiting for a slot (`--status`'s waiters) |
//! | `parallel_gpu_execute_oldest_wait_seconds` | `lock_dir`, `profile` | how long the oldest waiter has waited (from its record; from its start for a process blocked on a lock file), 0 without waiters |
//! | `parallel_gpu_execute_gpu_drained` | `lock_dir`, `profile`, `gpu`, `reason` | 1 when drained (`reason` its reason), else 0 (`reason` empty) |
//! | `parallel_gpu_execute_gpu_unhealthy` | `lock_dir`, `profile`, `gpu`, `health` | 1 when the kernel shows it unhealthy (`health` why), else 0 (`health` `ok`) |
//! | `parallel_gpu_execute_gpu_kernel_users` | `lock_dir`, `profile`, `gpu` | processes the kernel lists on it; only for GPUs where it tells |
//! | `parallel_gpu_execute_gpu_drain_untrusted` | `lock_dir`, `profile`, `gpu`, `why` | 1 for a drained GPU whose drain record another user could have renamed there (`why`, as `--status` says it); only then |
//! | `parallel_gpu_execute_lock_dir_other_owner` | `lock_dir`, `profile`, `dir`, `uid` | 1 for the lock directory or `gpuqueue/` where a user other than root and the caller owns it; only then |
//! | `parallel_gpu_execute_lock_dir_unsticky` | `lock_dir`, `profile`, `dir` | 1 for the lock directory or `gpuqueue/` where every user may write it and it has no sticky bit; only then |

use crate::prelude::*;
use crate::report::status_format::Report;
use crate::sys::clock::SystemTime;
use core::fmt::Write as _;

/// A label value, escaped losslessly (see the module's text).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                // Another control or format character (an escape sequence
                // for a terminal, a line separator), as its bytes.
                c if wrapper_common::diag::is_unshown(c) => {
                    for b in c.encode_utf8(&mut [0; 4]).bytes() {
                        let _ = write!(out, "\\\\x{b:02x}");
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\\\x{b:02x}");
        }
    }
    out
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

pub fn render(r: &Report, profile: &str) -> String {
    // The lock directory and the profile: the xla and jax profiles' reports
    // of one shared directory are exported side by side.
    let at = format!("lock_dir=\"{}\",profile=\"{profile}\"", escape(&r.lock_dir));
    let mut out = String::new();
    family(&mut out, "parallel_gpu_execute_slots", "GPU slots of the lock directory, by state.");
    let mut gpus: Vec<&str> = Vec::new();
    let named = r.slots.iter().filter(|s| s.configured).map(|s| s.gpu.as_str());
    for gpu in named.chain(r.unlisted.iter().map(|(g, _)| g.as_str())) {
        if !gpus.contains(&gpu) {
            gpus.push(gpu);
        }
    }
    for gpu in &gpus {
        let of = || r.slots.iter().filter(|s| s.configured && s.gpu == *gpu);
        let held = of().filter(|s| s.held()).count();
        // From a PID namespace of its own, a slot held from outside it
        // shows as free (its lock is left out of /proc/locks): only a slot
        // without a lock file is counted free there, where a metric would
        // say it as fact (the text says so in a note, JSON by
        // `host_pid_namespace`). A `/proc` that hides pid 2 (`hidepid`) on
        // the host is no such namespace.
        let unlisted = r.unlisted.iter().filter(|(g, _)| g == gpu).map(|(_, n)| n).sum::<usize>();
        let free = of().filter(|s| s.free() && (!r.own_namespace || !s.file_exists)).count() + unlisted;
        let g = escape(gpu.as_bytes());
        let _ = writeln!(out, "parallel_gpu_execute_slots{{{at},gpu=\"{g}\",state=\"held\"}} {held}");
        let _ = writeln!(out, "parallel_gpu_execute_slots{{{at},gpu=\"{g}\",state=\"free\"}} {free}");
        // Not held, and skipped by every test (a FIFO, a link at its path).
        let skipped = of().filter(|s| !s.held() && s.skipped.is_some()).count();
        if r.slots.iter().any(|s| s.skipped.is_some()) {
            let _ = writeln!(out, "parallel_gpu_execute_slots{{{at},gpu=\"{g}\",state=\"skipped\"}} {skipped}");
        }
        // Held at slots these settings do not have (the tests were given
        // more slots per GPU than this report): the GPU is in use all the same.
        let beyond = r.slots.iter().filter(|s| !s.configured && s.profile == profile && s.gpu == *gpu && s.held());
        let n = beyond.count();
        if n > 0 {
            let _ = writeln!(out, "parallel_gpu_execute_slots{{{at},gpu=\"{g}\",state=\"held_beyond_settings\"}} {n}");
        }
        if !r.locks_readable || r.own_namespace || r.slots.iter().any(|s| s.unknown) {
            // Neither held nor free: `/proc/locks` cannot be read, or a
            // PID namespace's leaves out the locks taken outside it.
            let unknown = (of().count() + unlisted).saturating_sub(held + free + skipped);
            let _ = writeln!(out, "parallel_gpu_execute_slots{{{at},gpu=\"{g}\",state=\"unknown\"}} {unknown}");
        }
    }
    family(&mut out, "parallel_gpu_execute_waiters", "Processes waiting for a GPU slot.");
    let _ = writeln!(out, "parallel_gpu_execute_waiters{{{at}}} {}", r.waiters.len());
    let now = SystemTime::now();
    let oldest = r
        .waiters
        .iter()
        .filter_map(|w| w.since())
        .filter_map(|t| now.duration_since(t))
        .map(|d| d.as_secs())
        .max()
        .unwrap_or(0);
    family(
        &mut out,
        "parallel_gpu_execute_oldest_wait_seconds",
        "How long the oldest waiter has waited, in seconds; 0 without waiters.",
    );
    let _ = writeln!(out, "parallel_gpu_execute_oldest_wait_seconds{{{at}}} {oldest}");
    family(&mut out, "parallel_gpu_execute_gpu_drained", "1 when the GPU is taken out of service (--drain).");
    for g in r.gpus.iter().filter(|g| g.configured) {
        let reason = g.drained.as_ref().map_or_else(String::new, |d| escape(&d.reason));
        let _ = writeln!(
            out,
            "parallel_gpu_execute_gpu_drained{{{at},gpu=\"{}\",reason=\"{reason}\"}} {}",
            escape(g.gpu.as_bytes()),
            u8::from(g.drained.is_some())
        );
    }
    family(&mut out, "parallel_gpu_execute_gpu_unhealthy", "1 when the kernel shows the GPU unhealthy (RAS).");
    for g in r.gpus.iter().filter(|g| g.configured) {
        let _ = writeln!(
            out,
            "parallel_gpu_execute_gpu_unhealthy{{{at},gpu=\"{}\",health=\"{}\"}} {}",
            escape(g.gpu.as_bytes()),
            escape(g.health.as_bytes()),
            u8::from(g.health != "ok")
        );
    }
    family(&mut out, "parallel_gpu_execute_gpu_kernel_users", "Processes the kernel lists as using the GPU (KFD).");
    for g in r.gpus.iter().filter(|g| g.configured) {
        if let Some(users) = &g.kernel_users {
            let _ = writeln!(
                out,
                "parallel_gpu_execute_gpu_kernel_users{{{at},gpu=\"{}\"}} {}",
                escape(g.gpu.as_bytes()),
                users.len()
            );
        }
    }
    let untrusted: Vec<_> =
        r.gpus.iter().filter(|g| g.configured).filter_map(|g| Some((g, g.drained.as_ref()?.doubt?))).collect();
    if !untrusted.is_empty() {
        family(
            &mut out,
            "parallel_gpu_execute_gpu_drain_untrusted",
            "1 for a drained GPU whose drain record another user could have renamed there.",
        );
        for (g, why) in untrusted {
            let _ = writeln!(
                out,
                "parallel_gpu_execute_gpu_drain_untrusted{{{at},gpu=\"{}\",why=\"{}\"}} 1",
                escape(g.gpu.as_bytes()),
                escape(why.describe().as_bytes())
            );
        }
    }
    if r.exposed.iter().any(|(_, uid, _)| uid.is_some()) {
        family(
            &mut out,
            "parallel_gpu_execute_lock_dir_other_owner",
            "1 where the lock directory (or gpuqueue/) is owned by a user other than root and the caller.",
        );
        for (path, uid) in r.exposed.iter().filter_map(|(p, uid, _)| Some((p, (*uid)?))) {
            let _ = writeln!(
                out,
                "parallel_gpu_execute_lock_dir_other_owner{{{at},dir=\"{}\",uid=\"{uid}\"}} 1",
                escape(path)
            );
        }
    }
    if r.exposed.iter().any(|(_, uid, _)| uid.is_none()) {
        family(
            &mut out,
            "parallel_gpu_execute_lock_dir_unsticky",
            "1 where every user may write the lock directory (or gpuqueue/) and it has no sticky bit.",
        );
        for (path, ..) in r.exposed.iter().filter(|(_, uid, _)| uid.is_none()) {
            let _ = writeln!(out, "parallel_gpu_execute_lock_dir_unsticky{{{at},dir=\"{}\"}} 1", escape(path));
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_losslessly() {
        assert_eq!(escape(b"a\\b\"c\nd\xff"), "a\\\\\\\\b\\\"c\\nd\\\\xff");
        // Two names that differ only in bytes that are not UTF-8 differ.
        assert_ne!(escape(b"\xfe"), escape(b"\xff"));
        // A name that spells the escape itself differs from the byte.
        assert_ne!(escape(b"\\xff"), escape(b"\xff"));
        assert_eq!(escape("GPU-\u{e9}".as_bytes()), "GPU-\u{e9}");
        assert_eq!(escape("a\x1b[31mb\u{2028}".as_bytes()), "a\\\\x1b[31mb\\\\xe2\\\\x80\\\\xa8");
        assert_ne!(escape(b"\x1b"), escape(b"\\x1b"));
    }
}
