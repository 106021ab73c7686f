//! A rootless container (or Bazel's `linux-sandbox` run by a user other
//! than root) sees the files of every owner its user namespace does not map
//! as the overflow id, 65534, and its own ids as the namespace numbers
//! them. What it cannot tell it neither trusts nor calls forged, its drains
//! name their drainer as the host has it, and its repairs name the host.

mod common;

use common::{Fixture, drained_line, on, shared_fixture};
use test_support::Cmd;
use test_support::hardware::hosts;

/// A rootless container of one user (root inside is uid 1001 outside,
/// then subordinate ids), as rootless Podman maps it.
const PODMAN: &str = "0 1001 1;1 200000 65536";
/// A rootless container whose root is the subordinate id 100000.
const SUBORDINATE: &str = "0 100000 65536";

/// The wrapper on the host, as root, with 2 GPUs of 1 slot.
fn host(f: &Fixture) -> Cmd {
    let mut c = f.cmd();
    on(&mut c, 2, 1);
    c
}

/// `--drain=GPU` as the host user `uid`.
fn drain_as(f: &Fixture, uid: u32, gpu: &str) {
    let mut c = host(f);
    let out = c.as_user(uid, uid).args([format!("--drain={gpu}"), "--reason=fan".into()]).run();
    out.assert_success();
}

/// Another user's `gpudrain/` looks the same from a container as root's
/// does (both 65534, as the lock directory): the container cannot tell
/// who may rename a drain there, so it writes none, in one line that says
/// so and where to drain instead, and its `--status` flags the drains
/// there. A build without the change wrote the drain into the other
/// user's directory (the owners compared equal), where that user could
/// move it onto another GPU unflagged; and where `gpudrain/` was root's it
/// refused with a repair (`chown root`) that was already done.
#[test]
fn a_container_writes_no_drain_where_it_cannot_tell_who_owns_gpudrain() {
    let f = shared_fixture("userns-drain-foreign");
    f.make_lock_dir_shared();
    let Some(container) = common::rootless(&f, PODMAN) else { return };
    let inside = || {
        let mut c = container();
        on(&mut c, 2, 1);
        c
    };
    let line = "gpudrain/ belongs to uid 65534, which stands for any user outside this user namespace, and a user who could rename or remove the drain cannot be told from root; drain it from the host's user namespace\n";
    for owner in [12345, 0] {
        let _ = std::fs::remove_dir_all(f.lock_dir.join("gpudrain"));
        drain_as(&f, owner, "1");
        let out = inside().args(["--drain=0", "--reason=bad"]).run();
        assert_eq!(out.code(), 2, "{}", out.explain());
        assert!(out.stderr.ends_with(line) && out.stderr.lines().count() == 1, "{}", out.explain());
        assert!(!f.lock_dir.join("gpudrain/0").exists(), "{}", out.explain());
        let out = inside().arg("--status").run();
        let drained = drained_line(out.assert_success(), "1");
        assert!(drained.contains("(which GPU it names cannot be trusted: gpudrain/ belongs to uid 65534, which stands for any user outside this user namespace"), "{}", out.explain());
        let out = inside().arg("--status=json").run();
        out.assert_success().assert_stdout_contains(
            r#""owner_uid": 65534, "disowned": false, "untrusted": "gpudrain/ belongs to uid 65534"#,
        );
    }
    // On the host, root's own directory is trusted, and the test passes
    // GPU 1 over.
    let out = host(&f).arg("--status").run();
    assert!(!drained_line(out.assert_success(), "1").contains("cannot be trusted"), "{}", out.explain());
}

/// A drain made in a container names its drainer as the host has it
/// (`uid 100000`, the namespace's root outside), and no name from the
/// container's `/etc/passwd`; the host's `--status` shows it as that
/// user's, named by the host's file, not as a forgery, and the container
/// names that host uid by none of its own. In the container, root's
/// drain on the host (its owner shown as 65534) is shown as its record
/// says, not as a forgery either, and its undrain is refused with the host
/// named; a record an older release wrote there (its namespace uid) is no
/// forgery there. A build without the change wrote `uid 0`, which the host
/// called "not written by whom it says", and the container called root's
/// drains so.
#[test]
fn a_drain_across_a_user_namespace_names_its_drainer_as_the_host_has_it() {
    let f = shared_fixture("userns-drain-claims");
    f.make_lock_dir_shared();
    test_support::write_file(
        f.sysroot.root.join("etc/passwd"),
        "root:x:0:0::/:/bin/sh\napp:x:100000:100000::/:/bin/sh\n",
    );
    let Some(container) = common::rootless(&f, SUBORDINATE) else { return };
    let inside = || {
        let mut c = container();
        on(&mut c, 2, 1);
        c
    };
    let out = inside().args(["--drain=0", "--reason=ECC"]).run();
    out.assert_success().assert_stdout_contains("drained GPU 0 in");
    let record = std::fs::read_to_string(f.lock_dir.join("gpudrain/0")).unwrap();
    assert!(record.contains("\nuid 100000\n") && !record.contains("user "), "{record}");
    for (out, by) in
        [(host(&f).arg("--status").run(), "app (uid 100000)"), (inside().arg("--status").run(), "uid 100000")]
    {
        let line = drained_line(out.assert_success(), "0");
        assert!(line.contains(&format!("by {by}: ECC")) && !line.contains("not written"), "{}", out.explain());
    }
    // As an older release wrote it there: the namespace's own uid.
    let old = "printf 'reason old\\ntime 1\\nuid 0\\nuser root\\n' > \"$0\"";
    let python = test_support::python_with("python3", &["ctypes"]).unwrap();
    let mut write = Cmd::new(python.to_string_lossy().as_ref());
    write.args(["-c", common::ROOTLESS, SUBORDINATE, "/bin/sh", "-c", old]).arg(f.lock_dir.join("gpudrain/0"));
    write.run().assert_success();
    let out = inside().arg("--status").run();
    let line = drained_line(out.assert_success(), "0");
    assert!(line.contains("by uid 0: old") && !line.contains("not written"), "{}", out.explain());
    // Root's drain, seen from the container.
    let _ = std::fs::remove_dir_all(f.lock_dir.join("gpudrain"));
    drain_as(&f, 0, "1");
    let out = inside().arg("--status").run();
    let line = drained_line(out.assert_success(), "1");
    assert!(
        line.contains("by uid 0, as its record says (its owner is uid 65534, which stands for any user outside this user namespace): fan")
            && !line.contains("not written"),
        "{}",
        out.explain()
    );
    inside()
        .arg("--status=json")
        .run()
        .assert_success()
        .assert_stdout_contains(r#""uid": 0, "user": null, "owner_uid": 65534, "disowned": false"#);
    let out = inside().arg("--undrain=1").run();
    assert_eq!(out.code(), 2, "{}", out.explain());
    out.assert_stderr_contains("it was drained by uid 65534, which stands for any user outside this user namespace (Operation not permitted (os error 1)), and only that user or root on the host may undrain it");
    assert!(f.lock_dir.join("gpudrain/1").exists(), "{}", out.explain());
}

/// The repairs said in a container name the host where only the host can
/// make them: a lock directory to be made in a directory of an owner
/// outside the namespace, a device node whose group is outside it. A
/// build without the change told the container's root to run them
/// ("root runs mkdir"), and to join group 'nogroup', gid 65534.
#[test]
fn repairs_said_in_a_container_name_the_host() {
    let mut f = shared_fixture("userns-repairs");
    // root:render 0600 /dev/kfd, its group outside the namespace.
    hosts::mi210x8_two_sockets(&mut f.sysroot);
    f.sysroot.restrict("kfd");
    f.sysroot.add_gpu_groups();
    let Some(container) = common::rootless(&f, SUBORDINATE) else { return };
    let mut c = container();
    let out = on(&mut c, 2, 1).args(["--wait=0", "./pkg/gpu_test"]).run();
    assert_eq!(out.code(), 2, "{}", out.explain());
    let d = f.lock_dir.parent().unwrap().display().to_string();
    let l = f.lock_dir.display();
    out.assert_stderr_contains(&format!(
        "({d} is uid 65534's, which stands for any user outside this user namespace: on the host, root runs mkdir -p {l} && chmod 1777 {l})"
    ));
    let out = container().arg("./pkg/gpu_test").run();
    out.assert_success().assert_stderr_contains(&format!(
        "cannot open {}/dev/kfd: Permission denied (os error 13): this user is not allowed to use it (its group, gid 65534 here, is outside this user namespace: give the container the group that owns it on the host, usually 'render' or 'video')",
        f.sysroot.root.display()
    ));
}

/// Without `/proc` (a bubblewrap sandbox that mounts none) the map cannot
/// be read, and an owner shown as 65534 cannot be told: root's 1777 lock
/// directory is no warning there. A build without the change took an
/// unreadable map for the host's and warned at every test.
#[test]
fn an_owner_seen_as_65534_without_proc_is_no_warning() {
    let f = shared_fixture("userns-noproc");
    f.make_lock_dir_shared();
    if !common::root("a user namespace of another user") {
        return;
    }
    let script = "mount -t tmpfs none /proc && exec \"$@\"";
    let mut c = f.cmd_under(
        "setpriv",
        ["--reuid=1000", "--regid=1000", "--clear-groups", "unshare", "-U", "-r", "-m", "sh", "-c", script, "sh"],
    );
    let out = on(&mut c, 2, 1).arg("./pkg/gpu_test").run();
    if out.stderr.contains("unshare: ") || out.stderr.contains("mount: ") {
        test_support::prerequisite(false, "user and mount namespaces", "a sandbox without /proc");
        return;
    }
    common::Record::of(out.assert_success());
    assert!(!out.stderr.contains("is owned by"), "{}", out.explain());
}

/// On the host without `/proc` (a mount namespace that hides it), where
/// `/dev/null` shows as root's, ids are the host's: a record of nobody's
/// that claims root is still called a forgery, and a lock directory of
/// 65534's (nobody, or NFS's `root_squash`) is still said. A build that
/// took every unreadable map for a user namespace's trusted the one and
/// dropped the other.
#[test]
fn without_proc_the_hosts_ids_are_still_told() {
    if !common::root("a mount namespace without /proc") {
        return;
    }
    let f = shared_fixture("userns-host-noproc");
    f.make_lock_dir_shared();
    let no_proc = || {
        let mut c = f.cmd_under("unshare", ["-m", "sh", "-c", "mount -t tmpfs none /proc && exec \"$@\"", "sh"]);
        on(&mut c, 2, 1);
        c
    };
    drain_as(&f, common::NOBODY, "0");
    let forged = "reason forged\ntime 1\nuid 0\n";
    test_support::write_file(f.lock_dir.join("gpudrain/1"), forged);
    std::os::unix::fs::chown(f.lock_dir.join("gpudrain/1"), Some(common::NOBODY), Some(common::NOBODY)).unwrap();
    let out = no_proc().arg("--status").run();
    if out.stderr.contains("unshare: ") || out.stderr.contains("mount: ") {
        test_support::prerequisite(false, "mount namespaces", "a host without /proc");
        return;
    }
    let line = drained_line(out.assert_success(), "1");
    assert!(line.contains("by uid 65534 (its record claims uid 0, but the file is uid 65534's"), "{}", out.explain());
    std::fs::remove_dir_all(f.lock_dir.join("gpudrain")).unwrap();
    std::os::unix::fs::chown(&f.lock_dir, Some(common::NOBODY), Some(common::NOBODY)).unwrap();
    let out = no_proc().args(["--wait=0", "./pkg/gpu_test"]).run();
    out.assert_success().assert_stderr_contains("is owned by uid 65534, neither root nor this user");
}
