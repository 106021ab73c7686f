//! A lock directory made by another (unprivileged) user: its owner is
//! exempt from the sticky bit and can rename a held lock file away, so
//! that the slot shows free and the next test is given its GPU. The
//! wrapper warns when it takes a slot there, and `--status` and `--list`
//! say so in every format. Root's directory and the caller's own are no
//! warning. A lock directory every user may write without the sticky bit
//! is said the same way: any user can do what its owner could.

mod common;

use common::{NOBODY, on, root, shared_fixture};
use std::os::unix::fs::PermissionsExt;
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

/// `--list` says `note`, and `--list=json` has `json`.
fn list_says(f: &common::Fixture, note: &str, json: &str) {
    let mut c = f.cmd();
    let list = on(&mut c, 2, 1).arg("--list").run();
    list.assert_success();
    assert!(list.stdout.contains(note), "{}", list.explain());
    let mut c = f.cmd();
    let list = on(&mut c, 2, 1).arg("--list=json").run();
    list.assert_success();
    assert!(list.stdout.contains(json), "{}", list.explain());
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
    let sample = format!(
        "parallel_gpu_execute_lock_dir_other_owner{{lock_dir=\"{dir}\",profile=\"xla\",dir=\"{dir}\",uid=\"{NOBODY}\"}} 1\n"
    );
    assert!(metrics.stdout.contains(&sample), "{}", metrics.explain());
    list_says(&f, &note, &format!(", \"lock_dir_other_owner\": {NOBODY}}}"));

    // As nobody, its own directory is no note.
    let own = nobody(&f).arg("--status").run();
    own.assert_success();
    assert!(!own.stdout.contains("is owned by"), "{}", own.explain());
}

/// A lock directory every user may write without the sticky bit (root's,
/// `chmod 777` where 1777 was meant): any user can rename a held lock
/// file away, as its owner could. Said where a slot is taken, as root and
/// as another user, and by `--status` and `--list` in every format; the
/// same directory made sticky is no warning.
#[test]
fn a_lock_directory_without_the_sticky_bit_is_said_where_a_slot_is_taken_and_in_status() {
    if !root("a lock directory without the sticky bit") {
        return;
    }
    let f = shared_fixture("lock-dir-mode");
    f.make_lock_dir_shared();
    let set_mode = |mode| std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(mode)).unwrap();
    set_mode(0o777);
    let dir = f.lock_dir.display().to_string();
    let said = format!(
        "{dir} may be written by every user and has no sticky bit: any user can rename a held lock file away, so that its slot shows free and its GPU is given to another test; as root: chmod 1777 {dir}\n"
    );
    let warning = format!("parallel_gpu_execute: warning: lock directory {said}");
    for who in ["root", "nobody"] {
        let mut c = if who == "root" { f.cmd() } else { nobody(&f) };
        let out = on(&mut c, 2, 1).arg("./pkg/gpu_test").run();
        out.assert_success();
        assert_eq!(out.stderr.matches("no sticky bit").count(), 1, "{who}\n{}", out.explain());
        assert!(out.stderr.contains(&warning), "{who}\n{}", out.explain());
    }

    // Root holds GPU 0; nobody, who owns nothing there, renames its lock file away.
    let _held = hold_lock(f.lock("0", 0));
    as_nobody(&["mv", &f.lock("0", 0).display().to_string(), &f.lock_dir.join(".hidden0").display().to_string()]);
    let note = format!("note: {said}");
    let text = common::status(&f, 2, 1, "text");
    assert!(text.stdout.contains(&note), "{}", text.explain());
    assert!(!text.stdout.contains("is owned by"), "{}", text.explain());
    let json = common::status(&f, 2, 1, "json");
    assert!(json.stdout.contains(&format!("\"unsticky_dirs\": [\"{dir}\"]")), "{}", json.explain());
    assert!(!json.stdout.contains("other_owners"), "{}", json.explain());
    let metrics = common::status(&f, 2, 1, "openmetrics");
    let sample =
        format!("parallel_gpu_execute_lock_dir_unsticky{{lock_dir=\"{dir}\",profile=\"xla\",dir=\"{dir}\"}} 1\n");
    assert!(metrics.stdout.contains(&sample), "{}", metrics.explain());
    list_says(&f, &note, ", \"lock_dir_unsticky\": true}");

    // A `gpuqueue/` without it: its records can be removed by anyone.
    let queue = f.lock_dir.join("gpuqueue");
    std::fs::create_dir(&queue).unwrap();
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o777)).unwrap();
    let text = common::status(&f, 2, 1, "text");
    let q = queue.display();
    assert!(
        text.stdout.contains(&format!("note: {q} may be written by every user and has no sticky bit: any user can remove a waiting test's record, so that later tests are served first; as root: chmod 1777 {q}\n")),
        "{}",
        text.explain()
    );

    // Made sticky: nothing said.
    set_mode(0o1777);
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mut c = nobody(&f);
    let out = on(&mut c, 2, 1).arg("./pkg/gpu_test").run();
    out.assert_success();
    assert!(!out.stderr.contains("no sticky bit"), "{}", out.explain());
    for format in ["text", "json", "openmetrics"] {
        let out = common::status(&f, 2, 1, format);
        assert!(
            !out.stdout.contains("no sticky bit") && !out.stdout.contains("unsticky"),
            "{format}\n{}",
            out.explain()
        );
    }
}

/// A waiter judges `gpuqueue/` when it makes its record there: one any
/// user may write without the sticky bit (any user can remove the record,
/// so that later tests are served first) is said in one line, once a
/// wait. Another user's 1777 one is not (whichever user's waiter comes
/// first makes it, so that is routine; `--status` says it), and root's
/// 0777 one is given its sticky bit by root's waiter, which then says
/// nothing.
#[test]
fn a_waiter_says_so_where_any_user_may_remove_its_record() {
    if !root("another user's gpuqueue/") {
        return;
    }
    let f = shared_fixture("queue-dir-mode");
    f.make_lock_dir_shared();
    let _held = [hold_lock(f.lock("0", 0)), hold_lock(f.lock("1", 0))];
    let queue = f.lock_dir.join("gpuqueue");
    let q = queue.display().to_string();
    let wait = |c: &mut Cmd| {
        let out = on(c, 2, 1).args(["--wait=0.3", "./pkg/gpu_test"]).run();
        out.assert_code(1);
        out
    };

    // nobody's gpuqueue/, 1777: root waits in it, and nothing is said.
    as_nobody(&["sh", "-c", &format!("mkdir {q} && chmod 1777 {q}")]);
    let out = wait(&mut f.cmd());
    assert!(!out.stderr.contains("queue directory"), "{}", out.explain());
    let _ = std::fs::remove_dir_all(&queue);

    // Root's, 0777: nobody's waiter says so; root's gives it the sticky bit.
    let unsticky = || {
        std::fs::create_dir_all(&queue).unwrap();
        std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o777)).unwrap();
    };
    unsticky();
    let out = wait(&mut nobody(&f));
    let warning = format!(
        "parallel_gpu_execute: warning: queue directory {q} may be written by every user and has no sticky bit: any user can remove a waiting test's record, so that later tests are served first; as root: chmod 1777 {q}\n"
    );
    assert!(out.stderr.contains(&warning), "{}", out.explain());
    assert_eq!(out.stderr.matches("queue directory").count(), 1, "{}", out.explain());
    unsticky();
    let out = wait(&mut f.cmd());
    assert!(!out.stderr.contains("queue directory"), "{}", out.explain());
}

/// Inside a user namespace that maps the caller alone (Bazel's
/// `linux-sandbox` for a user other than root, a rootless container), the
/// kernel shows root's files as owned by the overflow id, 65534: root's
/// 1777 lock directory is no warning there, nor a note of `--status` or
/// `--list`. A build without the change warned at every test.
#[test]
fn roots_lock_directory_seen_from_a_user_namespace_is_no_warning() {
    const USER: u32 = 1000;
    let userns = std::process::Command::new("setpriv")
        .args([format!("--reuid={USER}"), format!("--regid={USER}"), "--clear-groups".into()])
        .args(["unshare", "-U", &format!("--map-user={USER}"), &format!("--map-group={USER}"), "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !root("a user namespace of another user")
        || !test_support::prerequisite(userns, "unprivileged user namespaces", "root's files seen as 65534")
    {
        return;
    }
    let f = shared_fixture("lock-dir-userns");
    f.make_lock_dir_shared();
    let inside = || {
        let mut c = f.cmd_under(
            "setpriv",
            [
                format!("--reuid={USER}"),
                format!("--regid={USER}"),
                "--clear-groups".into(),
                "unshare".into(),
                "-U".into(),
                format!("--map-user={USER}"),
                format!("--map-group={USER}"),
            ],
        );
        on(&mut c, 2, 1);
        c
    };
    // What the kernel shows there: root's directory as 65534's.
    let mut c = Cmd::new("setpriv");
    c.args([format!("--reuid={USER}"), format!("--regid={USER}"), "--clear-groups".into()]);
    c.args(["unshare", "-U", &format!("--map-user={USER}"), "stat", "-c", "%u"]).arg(&f.lock_dir);
    let seen = c.run();
    assert_eq!(seen.assert_success().stdout.trim(), "65534", "{}", seen.explain());
    let out = inside().arg("./pkg/gpu_test").run();
    common::Record::of(out.assert_success());
    assert!(!out.stderr.contains("is owned by"), "{}", out.explain());
    for args in [&["--status"][..], &["--status=json"], &["--list"], &["--list=json"]] {
        let out = inside().args(args).run();
        out.assert_success();
        assert!(!out.stdout.contains("65534") && out.stderr.is_empty(), "{}", out.explain());
    }
}

/// A lock file is its maker's (the first test that used it), and its owner
/// may rename it in any directory: root's test that takes `nobody`'s lock
/// file says so in one line, with the repair; once root owns it, nothing
/// is said. `nobody`'s test on its own file, and root's on root's, say
/// nothing. A build without the change was silent, and `nobody`'s rename
/// of the held file gave its GPU to the next test unsaid.
#[test]
fn a_lock_file_another_user_owns_is_said_where_it_is_taken() {
    if !root("a lock file another user made") {
        return;
    }
    let f = shared_fixture("lock-file-owner");
    f.make_lock_dir_shared();
    let own = nobody(&f).args(["--wait=0", "./pkg/gpu_test"]).run();
    common::Record::of(own.assert_success());
    assert!(!own.stderr.contains("who can rename it away"), "{}", own.explain());
    let file = f.lock("0", 0);
    let warning = format!(
        "parallel_gpu_execute: warning: lock file {p} is uid {NOBODY}'s, who can rename it away while this test holds it (its GPU then given again); as root: chown root:root {p}\n",
        p = file.display()
    );
    let mut c = f.cmd();
    let out = on(&mut c, 2, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
    let r = common::Record::of(out.assert_success());
    assert_eq!(r.locks(), ["gpulock0_0"], "{}", out.explain());
    assert_eq!(out.stderr.matches("who can rename it away").count(), 1, "{}", out.explain());
    assert!(out.stderr.contains(&warning), "{}", out.explain());
    std::os::unix::fs::chown(&file, Some(0), Some(0)).unwrap();
    let mut c = f.cmd();
    let out = on(&mut c, 2, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
    common::Record::of(out.assert_success());
    assert!(!out.stderr.contains("who can rename it away"), "{}", out.explain());
    // nobody's file in root's 0755 directory: nobody may rename nothing there.
    std::os::unix::fs::chown(&file, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&f.lock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = f.cmd();
    let out = on(&mut c, 2, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
    assert_eq!(common::Record::of(out.assert_success()).locks(), ["gpulock0_0"], "{}", out.explain());
    assert!(!out.stderr.contains("who can rename it away"), "{}", out.explain());
}

/// A rootless container's map (root inside is uid 1000 outside, and ids 1
/// to 65536 are subordinate ones): 65534 is mapped there too, yet root's
/// files outside still show as 65534, the overflow id. Root's 1777 lock
/// directory is no warning there either. A build that looked at the map's
/// ranges alone still warned.
#[test]
fn roots_lock_directory_seen_from_a_rootless_container_is_no_warning() {
    let f = shared_fixture("lock-dir-rootless");
    f.make_lock_dir_shared();
    let Some(container) = common::rootless(&f, "0 1000 1;1 100000 65536") else { return };
    let inside = || {
        let mut c = container();
        on(&mut c, 2, 1);
        c
    };
    let out = inside().arg("./pkg/gpu_test").run();
    common::Record::of(out.assert_success());
    assert!(!out.stderr.contains("is owned by") && !out.stderr.contains("who can rename"), "{}", out.explain());
    for args in [&["--status"][..], &["--list=json"]] {
        let out = inside().args(args).run();
        out.assert_success();
        assert!(!out.stdout.contains("65534") && out.stderr.is_empty(), "{}", out.explain());
    }
}
