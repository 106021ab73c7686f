//! A lock directory made by another (unprivileged) user: its owner is
//! exempt from the sticky bit and can rename a held lock file away, so
//! that the slot shows free and the next test is given its GPU. The
//! wrapper warns when it takes a slot there, and `--status` and `--list`
//! say so in every format. Root's directory and the caller's own are no
//! warning.

mod common;

use common::{NOBODY, on, root, shared_fixture};
use test_support::{Cmd, hold_lock};

/// `cmd` run as `nobody`.
fn nobody(f: &common::Fixture) -> Cmd {
    let mut c =
        f.cmd_under("setpriv", [format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"), "--clear-groups".into()]);
    on(&mut c, 2, 1);
    c
}

/// Runs `args` as `nobody`; it must succeed.
fn as_nobody(args: &[&str]) {
    let mut c = Cmd::new("setpriv");
    c.args([format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"), "--clear-groups".into()]).args(args);
    c.run().assert_success();
}

#[test]
fn a_lock_directory_another_user_owns_is_said_where_a_slot_is_taken_and_in_status() {
    if !root("a lock directory another user owns") {
        return;
    }
    let f = shared_fixture("lock-dir-owner");
    // nobody's directory and queue (its first test, and first waiter, would make them), 1777.
    f.make_lock_dir_shared();
    std::os::unix::fs::chown(&f.lock_dir, Some(NOBODY), Some(NOBODY)).unwrap();
    let queue = f.lock_dir.join("gpuqueue");
    as_nobody(&["sh", "-c", &format!("mkdir {0} && chmod 1777 {0}", queue.display())]);
    let dir = f.lock_dir.display().to_string();
    let warning = format!(
        "parallel_gpu_execute: warning: lock directory {dir} is owned by uid {NOBODY}, neither root nor this user: uid {NOBODY} can rename a held lock file away, so that its slot shows free and its GPU is given to another test; as root: chown root:root {dir} && chmod 1777 {dir}\n"
    );

    // Root's test there: one warning line, and it runs.
    let out = f.run_test(
        |c| {
            on(c, 2, 1);
        },
        &[],
    );
    out.assert_success();
    assert_eq!(out.stderr.matches(" is owned by uid ").count(), 1, "{}", out.explain());
    assert!(out.stderr.contains(&warning), "{}", out.explain());
    // nobody's own test in its own directory: none.
    let mut c = nobody(&f);
    let own = c.arg("./pkg/gpu_test").run();
    own.assert_success();
    assert!(!own.stderr.contains("is owned by"), "{}", own.explain());

    // Root holds GPU 0; nobody renames its lock file away.
    let _held = hold_lock(f.lock("0", 0));
    as_nobody(&["mv", &f.lock("0", 0).display().to_string(), &f.lock_dir.join(".hidden0").display().to_string()]);
    let text = common::status(&f, 2, 1, "text");
    let note = format!(
        "note: {dir} is owned by uid {NOBODY}, neither root nor this user: uid {NOBODY} can rename a held lock file away, so that its slot shows free and its GPU is given to another test; as root: chown root:root {dir} && chmod 1777 {dir}\n"
    );
    assert!(text.stdout.contains(&note), "{}", text.explain());
    let json = common::status(&f, 2, 1, "json");
    let entry = format!(
        "\"other_owners\": [{{\"dir\": \"{dir}\", \"uid\": {NOBODY}}}, {{\"dir\": \"{dir}/gpuqueue\", \"uid\": {NOBODY}}}]"
    );
    assert!(json.stdout.contains(&entry), "{}", json.explain());
    let metrics = common::status(&f, 2, 1, "openmetrics");
    let sample =
        format!("parallel_gpu_execute_lock_dir_other_owner{{lock_dir=\"{dir}\",dir=\"{dir}\",uid=\"{NOBODY}\"}} 1\n");
    assert!(metrics.stdout.contains(&sample), "{}", metrics.explain());
    let mut c = f.cmd();
    let list = on(&mut c, 2, 1).arg("--list").run();
    list.assert_success();
    assert!(list.stdout.contains(&note), "{}", list.explain());
    let mut c = f.cmd();
    let list = on(&mut c, 2, 1).arg("--list=json").run();
    assert!(list.stdout.contains(&format!(", \"lock_dir_other_owner\": {NOBODY}}}")), "{}", list.explain());

    // As nobody, its own directory is no note.
    let own = nobody(&f).arg("--status").run();
    own.assert_success();
    assert!(!own.stdout.contains("is owned by"), "{}", own.explain());
}
