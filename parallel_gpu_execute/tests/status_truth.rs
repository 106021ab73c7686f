//! `--status` tells the operator the truth: a holder it can see is never
//! called hidden (root in the host's PID namespace, while tests start and
//! end by the hundred), and a file name reaches the text escaped.

mod common;

use common::{Fixture, status};
use std::time::{Duration, Instant};
use test_support::hold_lock;

/// Root in the host's PID namespace sees every process: while tests start
/// and end by the hundred, no held row may call its holder hidden (a lock
/// let go between the read of /proc/locks and the scan of the processes
/// once was).
#[test]
fn root_in_the_host_namespace_never_calls_a_holder_hidden_while_tests_churn() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let in_host = std::fs::read_to_string("/proc/2/stat").is_ok_and(|s| s.contains("kthreadd"));
    if !test_support::prerequisite(
        test_support::is_root() && in_host,
        "root in the host's PID namespace",
        "no holder called hidden by one who sees every process",
    ) {
        return;
    }
    let f = Fixture::new("status-churn");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let stop = AtomicBool::new(false);
    let (mut held_rows, mut hidden_rows, mut looks) = (0, Vec::new(), 0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let out = f
                        .cmd()
                        .env("TF_GPU_COUNT", "2")
                        .env("TF_TESTS_PER_GPU", "2")
                        .args(["/bin/sleep", "0.02"])
                        .run();
                    out.assert_success();
                }
            });
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(4) {
            let out = status(&f, 2, 2, "text");
            looks += 1;
            for line in out.stdout.lines().filter(|l| l.contains(" held ")) {
                held_rows += 1;
                if line.contains("not visible from here") {
                    hidden_rows.push(line.to_string());
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(held_rows >= 20, "too few held rows to tell: {held_rows} in {looks} looks");
    assert!(
        hidden_rows.is_empty(),
        "{} of {held_rows} held rows called a holder hidden:\n{}",
        hidden_rows.len(),
        hidden_rows.join("\n")
    );
}

/// Any user may name a file in a 1777 lock directory: a terminal escape or
/// a newline in a lock file's name reaches the text as `\xNN`, never raw,
/// so it can neither drive the operator's terminal nor forge a row.
#[test]
fn the_text_escapes_what_comes_from_a_file_name() {
    let f = Fixture::new("status-escapes");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let escape = f.lock_dir.join("gpulock\x1b]0;owned\x07\x1b[2J_0");
    let forged = f.lock_dir.join("gpulock7_0\nxla      9    0  held  1 running -     fake_1");
    for p in [&escape, &forged] {
        test_support::write_file(p, "");
    }
    let _held = hold_lock(&escape);
    let out = status(&f, 1, 1, "text");
    assert!(!out.stdout.contains('\x1b') && !out.stdout.contains('\x07'), "a raw control character\n{}", out.explain());
    assert!(out.stdout.contains("\\x1b]0;owned\\x07\\x1b[2J"), "the escaped name is missing\n{}", out.explain());
    assert!(
        !out.stdout.lines().any(|l| l.starts_with("xla      9")),
        "a newline in a file name forged a row\n{}",
        out.explain()
    );
    assert!(out.stdout.contains("7_0\\x0axla"), "the newline is not shown escaped\n{}", out.explain());
}
