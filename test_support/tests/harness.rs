//! The harness's own promises: a run it kills at its timeout is never
//! reported as the exit a SIGKILL test expects, and a missing prerequisite
//! fails under CI and skips, saying what, elsewhere.

use std::time::Duration;
use test_support::{Cmd, Output, check_gpus_match_locks, parse_record, prerequisite};

#[test]
fn a_timed_out_run_is_reported_apart_from_a_sigkill() {
    let hung = Cmd::new("/bin/sleep").arg("30").timeout(Duration::from_millis(200)).run();
    assert!(hung.timed_out, "{}", hung.explain());
    assert_eq!(hung.code(), Output::TIMED_OUT, "{}", hung.explain());
    assert_ne!(hung.code(), 137, "a hang must not pass for a SIGKILL exit\n{}", hung.explain());
    assert!(hung.explain().contains("TIMED OUT"), "{}", hung.explain());

    let killed = Cmd::new("/bin/sh").args(["-c", "kill -9 $$"]).run();
    assert!(!killed.timed_out, "{}", killed.explain());
    assert_eq!(killed.code(), 137, "{}", killed.explain());
}

#[test]
fn a_missing_prerequisite_fails_under_ci_and_skips_with_one_line_elsewhere() {
    assert!(prerequisite(true, "anything", "nothing"));
    // The policy runs in a child process of this same test binary, with
    // CI set or not: under CI=true the child fails, naming the test.
    let exe = std::env::current_exe().unwrap();
    let child = |ci: Option<&str>| {
        let mut c = Cmd::new(&exe);
        c.args(["--exact", "child_missing_prerequisite", "--nocapture", "--test-threads=1"]).env("HARNESS_CHILD", "1");
        if let Some(v) = ci {
            c.env("CI", v);
        }
        c.run()
    };
    let ci = child(Some("true"));
    assert_ne!(ci.code(), 0, "CI=true: a missing prerequisite must fail\n{}", ci.explain());
    let both = format!("{}{}", ci.stdout, ci.stderr);
    assert!(
        both.contains("skipped child_missing_prerequisite: the widget check not checked (no a widget): a missing prerequisite fails under CI=true"),
        "{}",
        ci.explain()
    );
    let local = child(None);
    local
        .assert_success()
        .assert_stderr_contains("skipped child_missing_prerequisite: the widget check not checked (no a widget)\n");
    assert!(!local.stderr.contains("after the skip"), "{}", local.explain());
}

/// Run only as the child of the test above.
#[test]
fn child_missing_prerequisite() {
    if std::env::var_os("HARNESS_CHILD").is_none() {
        return;
    }
    if !prerequisite(false, "a widget", "the widget check") {
        return;
    }
    eprintln!("after the skip");
}

#[test]
fn the_gpu_check_compares_the_visible_ids_with_the_locks_held() {
    let index = |id: &str| id.to_string();
    let rec = |text: &str| parse_record(text);
    let ok = rec("ROCR_VISIBLE_DEVICES=2,3\nlocks=gpulock3_1 gpulock2_1\n");
    assert_eq!(check_gpus_match_locks(&ok, "ROCR_VISIBLE_DEVICES", index), Ok(()));
    // The mutation the check is for: ids 0..n-1 instead of the block's.
    let renumbered = rec("ROCR_VISIBLE_DEVICES=0,1\nlocks=gpulock2_1 gpulock3_1\n");
    let err = check_gpus_match_locks(&renumbered, "ROCR_VISIBLE_DEVICES", index).unwrap_err();
    assert!(err.contains("holds the lock files of"), "{err}");
    let split = rec("ROCR_VISIBLE_DEVICES=2,3\nlocks=gpulock2_0 gpulock3_1\n");
    assert!(check_gpus_match_locks(&split, "ROCR_VISIBLE_DEVICES", index).unwrap_err().contains("one slot"));
    let no_gpu = rec("ROCR_VISIBLE_DEVICES=\nlocks=\n");
    assert!(check_gpus_match_locks(&no_gpu, "ROCR_VISIBLE_DEVICES", index).unwrap_err().contains("no GPU"));
    let unset = rec("locks=gpulock0_0\n");
    assert!(check_gpus_match_locks(&unset, "ROCR_VISIBLE_DEVICES", index).unwrap_err().contains("no GPU"));
    let unlocked = rec("ROCR_VISIBLE_DEVICES=0\nlocks=\n");
    assert!(check_gpus_match_locks(&unlocked, "ROCR_VISIBLE_DEVICES", index).is_err());
    let physical = rec("ROCR_VISIBLE_DEVICES=0\nlocks=gpulockuid-501_0\n");
    assert_eq!(
        check_gpus_match_locks(&physical, "ROCR_VISIBLE_DEVICES", |id| format!(
            "uid-{}",
            501 + id.parse::<u32>().unwrap()
        )),
        Ok(())
    );
}
