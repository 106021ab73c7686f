//! Who drained a GPU, and who holds a slot, as `--status` says it, comes
//! from the kernel and `/etc/passwd`, never from what a record's text, a
//! file's path or a process's command line claims.

mod common;

use common::{Fixture, NOBODY, drained_line, shared_fixture};
use test_support::{Cmd, Output};

/// The wrapper as root with 2 GPUs of 1 slot, and `args`.
fn run(f: &Fixture, args: &[&str]) -> Output {
    let mut c = f.cmd();
    common::on(&mut c, 2, 1).args(args).run()
}

/// A root-owned file that is no drain record (a waiter's queue record,
/// from a `gpuqueue/` another user owns and so may rename out of) moved
/// into root's `gpudrain/` is shown as what it is, flagged, not as root's
/// drain. A build without the change showed `by uid 0`, `disowned` false,
/// nothing untrusted.
#[test]
fn a_file_that_holds_no_drain_record_is_no_ones_drain() {
    if !common::root("another user's gpuqueue/") {
        return;
    }
    let f = shared_fixture("drain-moved-in");
    f.make_lock_dir_shared();
    run(&f, &["--drain=1", "--reason=root's"]).assert_success();
    // nobody's gpuqueue/, with root's queue record in it.
    let queue = f.lock_dir.join("gpuqueue");
    let mut c = Cmd::new("sh");
    c.args(["-c", "mkdir -m 1777 \"$0\""]).arg(&queue).as_user(NOBODY, NOBODY);
    c.run().assert_success();
    let mut record = vec![0x5a; 32];
    record.extend_from_slice(b"name 0000000000000001.77\nneeded 1\nfiles gpulock0_0\ntest ./pkg/gpu_test\n");
    test_support::write_file(queue.join("0000000000000001.77"), record);
    let mut c = Cmd::new("mv");
    c.arg(queue.join("0000000000000001.77")).arg(f.lock_dir.join("gpudrain/0")).as_user(NOBODY, NOBODY);
    c.run().assert_success();
    let out = run(&f, &["--status"]);
    let line = drained_line(out.assert_success(), "0");
    assert!(line.contains("by uid 0 (its file holds no drain record: not written by --drain)"), "{}", out.explain());
    assert!(drained_line(&out, "1").contains("by uid 0: root's"), "{}", out.explain());
    let out = run(&f, &["--status=json"]);
    out.assert_success().assert_stdout_contains(r#""uid": null, "user": null, "owner_uid": 0, "disowned": true"#);
}

/// A record's `user` line is its writer's word: `--status` names the
/// drainer by the name `/etc/passwd` gives its uid. A build without the
/// change showed `by root (uid 0): ECC errors, RMA 1235 ... (uid 65534)`,
/// the record's text, first.
#[test]
fn the_drainer_is_named_by_etc_passwd_not_by_the_record() {
    if !common::root("another user's drain record") {
        return;
    }
    let f = shared_fixture("drain-name");
    test_support::write_file(
        f.sysroot.root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    );
    f.make_lock_dir_shared();
    let mut c = f.cmd();
    let out = common::on(&mut c, 2, 1).args(["--drain=0", "--reason=x"]).as_user(NOBODY, NOBODY).run();
    out.assert_success();
    let text = format!("reason bad fan\nuid {NOBODY}\nuser root (uid 0): ECC errors, RMA 1235{}\n", " ".repeat(150));
    let mut c = Cmd::new("sh");
    c.args(["-c", "printf '%s' \"$1\" > \"$0.new\" && mv -f \"$0.new\" \"$0\""])
        .arg(f.lock_dir.join("gpudrain/0"))
        .arg(text)
        .as_user(NOBODY, NOBODY);
    c.run().assert_success();
    let out = run(&f, &["--status"]);
    let line = drained_line(out.assert_success(), "0");
    assert!(line.contains("by nobody (uid 65534): bad fan") && !line.contains("root"), "{}", out.explain());
    let out = run(&f, &["--status=json"]);
    out.assert_success()
        .assert_stdout_contains(r#""uid": 65534, "user": "nobody", "owner_uid": 65534, "disowned": false"#);
}

/// A holder's command line is its own word (`exec -a` gives it any): the
/// JSON names its user as the kernel has it. A build without the change
/// showed another user's holder disguised as root's test exactly as the
/// test, with no user.
#[test]
fn a_holder_is_named_with_its_user_whatever_its_command_line() {
    if !common::root("another user's holder") {
        return;
    }
    let f = shared_fixture("holder-user");
    f.make_lock_dir_shared();
    let lock = f.lock("0", 0);
    // Perl keeps descriptors above `$^F` from the exec: raised first.
    let script = "use Fcntl qw(:flock); $^F = 255; open(my $f, '>>', $ARGV[0]) or die; flock($f, LOCK_EX) or die; \
        exec { '/bin/sleep' } '/root/bazel-out/k8-opt/bin/pkg/gpu_test', '30'";
    let mut c = Cmd::new("perl");
    c.args(["-e", script]).arg(&lock).as_user(NOBODY, NOBODY);
    let holder = c.timeout(std::time::Duration::from_secs(30)).spawn();
    let held = test_support::wait_until(std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{}/cmdline", holder.pid()))
            .is_ok_and(|c| c.starts_with("/root/bazel-out"))
    });
    let out = run(&f, &["--status=json"]);
    holder.signal(libc::SIGKILL);
    holder.wait();
    assert!(held, "the holder never ran");
    let slot = common::slot_json(out.assert_success(), &lock).to_string();
    assert!(slot.contains("\"command\": \"/root/bazel-out/k8-opt/bin/pkg/gpu_test 30\""), "{}", out.explain());
    assert!(slot.contains(&format!("\"uid\": {NOBODY}}}")), "{}", out.explain());
}
