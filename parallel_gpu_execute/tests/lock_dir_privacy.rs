//! A lock directory that coordinates nothing is never silent, and an
//! ordinary one never raises a false alarm: the built wrapper in real
//! mount set-ups made with bubblewrap and `unshare` (an action's own root,
//! shipped in its image or made by the wrapper; a container made for the
//! action; Bazel 7's per-action `/tmp`; the host's directory mounted in),
//! a top-level or relative lock directory on a host, a dangling
//! `/var/lock`, and a full file system at a lock file.

mod common;

use common::{Fixture, Record, bin, refused, said_private};
use test_support::{Cmd, Output, is_root};

/// Whether bubblewrap and root are here (in CI both must be).
fn have_bwrap(checks: &str) -> bool {
    test_support::prerequisite(is_root() && test_support::have_program("bwrap"), "root and bubblewrap (bwrap)", checks)
}

const SRCDIR: &str = "/bazel-out/k8-fastbuild/bin/pkg/gpu_test.runfiles";

/// The wrapper in a bubblewrap sandbox whose root is `root_args` (a
/// tmpfs, a bind), with the system's programs read-only, the runfiles tree
/// at `<input_root>/bazel-out/...` and `extra` mounts; TEST_SRCDIR as
/// Bazel sets it there.
fn sandboxed(f: &Fixture, root_args: &[&str], input_root: &str, extra: &[&str], gpus: &str) -> Cmd {
    let srcdir = format!("{}{SRCDIR}", input_root.trim_end_matches('/'));
    let mut c = Cmd::new("bwrap");
    c.args(root_args);
    c.args(["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"]);
    c.args(["--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev"]);
    c.args(["--ro-bind", bin(), "/wrapper"]);
    c.args(extra);
    c.arg("--ro-bind").arg(&f.runfiles.srcdir).arg(&srcdir);
    // The runfiles are links to the files where the fixture keeps them.
    let real = f.dir.join("execroot");
    c.arg("--ro-bind").arg(&real).arg(&real);
    c.args([
        "--chdir",
        &format!("{srcdir}/ws"),
        "--setenv",
        "TEST_SRCDIR",
        &srcdir,
        "--setenv",
        "TEST_WORKSPACE",
        "ws",
    ]);
    c.args(["--setenv", "TF_GPU_COUNT", gpus, "--setenv", "PARALLEL_GPU_EXECUTE_LOCK_DIR", "/var/lock"]);
    c.args(["--", "/wrapper", "./pkg/gpu_test"]);
    c
}

#[test]
fn an_action_root_lock_directory_is_refused_whether_the_image_ships_it_or_the_wrapper_makes_it() {
    if !have_bwrap("a lock directory in an action's own root") {
        return;
    }
    let f = Fixture::new("privacy-action-root");
    let root = ["--tmpfs", "/"];
    let place = "inside this action's own root";
    // The image has /var/lock (Debian's and most executors' images do):
    // nothing is created, and two actions at once would both get GPU 0.
    refused(&sandboxed(&f, &root, "/", &["--dir", "/var/lock"], "2").run(), place);
    // Only /var there, or nothing: the same.
    refused(&sandboxed(&f, &root, "/", &["--dir", "/var"], "2").run(), place);
    refused(&sandboxed(&f, &root, "/", &[], "2").run(), place);
    // One GPU: it runs, warned.
    let out = sandboxed(&f, &root, "/", &["--dir", "/var/lock"], "1").run();
    Record::of(out.assert_success());
    assert_eq!(said_private(&out, place), 1, "{}", out.explain());
    // PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR: `refuse` even with one GPU,
    // `run` even with two, `auto` spelled out as the default, and a bad
    // value one line.
    let policy = |value: &str, gpus: &str| {
        let env = ["--dir", "/var/lock", "--setenv", "PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR", value];
        sandboxed(&f, &root, "/", &env, gpus).run()
    };
    refused(&policy("refuse", "1"), place);
    refused(&policy("auto", "2"), place);
    let out = policy("run", "2");
    Record::of(out.assert_success());
    assert_eq!(said_private(&out, place), 1, "{}", out.explain());
    policy("sometimes", "2").assert_code(2).assert_one_error_line(
        "PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR: invalid value 'sometimes' (expected auto, run or refuse)",
    );
    // The host's lock directory mounted in: it coordinates, not a word.
    let host = f.dir.join("host-locks");
    std::fs::create_dir_all(&host).unwrap();
    let bind = ["--bind", host.to_str().unwrap(), "/var/lock"];
    let out = sandboxed(&f, &root, "/", &bind, "2").run();
    let r = Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    assert_eq!(r.locks(), ["gpulock0_0"], "{}", out.explain());
    assert!(host.join("gpulock0_0").exists(), "the lock file is not in the host's directory");
    // --list says what a test would meet.
    let mut list = Cmd::new("bwrap");
    list.args([
        "--tmpfs",
        "/",
        "--dir",
        "/var/lock",
        "--ro-bind",
        bin(),
        "/wrapper",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]);
    list.args(["--setenv", "TEST_SRCDIR", &format!("/{SRCDIR}"), "--setenv", "TF_GPU_COUNT", "2"]);
    list.args(["--", "/wrapper", "--list=json"]);
    let out = list.run();
    out.assert_success();
    assert!(out.stdout.contains("\"lock_dir_state\": \"private\""), "{}", out.explain());
}

#[test]
fn a_container_made_for_the_action_is_told_by_its_mounted_input_root() {
    if !have_bwrap("a lock directory on a container's root") {
        return;
    }
    let f = Fixture::new("privacy-container");
    // An image's root (tmpfs), the input root mounted at /work.
    let inputs = f.dir.join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    let mount_input = ["--bind", inputs.to_str().unwrap(), "/work", "--dir", "/var/lock"];
    let out = sandboxed(&f, &["--tmpfs", "/"], "/work", &mount_input, "2").run();
    refused(&out, "on the root file system of a container made for this action");
    // Bazel run inside a container: the input root is a directory of the
    // container's root, not a mount, and its tests share the container's
    // /var/lock: not a word.
    let out = sandboxed(&f, &["--tmpfs", "/"], "/work", &["--dir", "/var/lock"], "2").run();
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    // Bazel's own sandbox also mounts the action's directory (bound onto
    // itself, under <output_base>/sandbox/linux-sandbox/), but over the
    // host's root (here a bind of a plain directory): not a word.
    let hostroot = f.dir.join("hostroot");
    std::fs::create_dir_all(hostroot.join("var/lock")).unwrap();
    let execroot = f.dir.join("output_base/sandbox/linux-sandbox/2/execroot/_main");
    std::fs::create_dir_all(&execroot).unwrap();
    let bind_root = ["--bind", hostroot.to_str().unwrap(), "/"];
    let (e, self_bind) =
        (execroot.to_str().unwrap(), ["--bind", execroot.to_str().unwrap(), execroot.to_str().unwrap()]);
    let out = sandboxed(&f, &bind_root, e, &self_bind, "2").run();
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    // An input root mounted in a container whose root is a plain
    // directory (Docker's vfs driver), without Bazel's sandbox: made for
    // the action, whatever its root's file system.
    let vfs_root = f.dir.join("vfs-root");
    std::fs::create_dir_all(vfs_root.join("var/lock")).unwrap();
    let vfs = ["--bind", vfs_root.to_str().unwrap(), "/"];
    let out = sandboxed(&f, &vfs, "/work", &["--bind", inputs.to_str().unwrap(), "/work"], "2").run();
    refused(&out, "on the root file system of a container made for this action");
}

/// Bazel's hermetic sandbox (`--experimental_use_hermetic_linux_sandbox`)
/// pivots into `<sandbox base>/linux-sandbox/<id>`, a directory made for
/// the action, with the execroot bound onto itself inside it: a lock
/// directory on that `/` is the action's own (a build without the rule
/// ran two such actions at once on GPU 0). The host's directory mounted
/// in, as the advice says, is shared: not a word.
#[test]
fn bazels_hermetic_sandbox_root_is_the_actions_own() {
    if !have_bwrap("a lock directory on the root of Bazel's hermetic sandbox") {
        return;
    }
    let f = Fixture::new("privacy-hermetic");
    // A sandbox directory of its own for each action, as Bazel makes them
    // (bubblewrap leaves its mount points in it).
    let mut next = 0;
    let mut action = |extra: &[&str], gpus: &str| {
        next += 1;
        let sandbox = f.dir.join(format!("output_base/sandbox/linux-sandbox/{next}"));
        let execroot = sandbox.join("execroot/_main");
        std::fs::create_dir_all(&execroot).unwrap();
        let mut mounts = vec!["--bind".to_string(), execroot.to_str().unwrap().into(), "/execroot/_main".into()];
        mounts.extend(extra.iter().map(|a| a.to_string()));
        let mounts: Vec<&str> = mounts.iter().map(String::as_str).collect();
        sandboxed(&f, &["--bind", sandbox.to_str().unwrap(), "/"], "/execroot/_main", &mounts, gpus).run()
    };
    let place = "Bazel's hermetic sandbox";
    for shipped in [&[][..], &["--dir", "/var/lock"][..]] {
        refused(&action(shipped, "2"), place);
        let out = action(shipped, "1");
        Record::of(out.assert_success());
        assert_eq!(said_private(&out, place), 1, "{}", out.explain());
        assert!(out.stderr.contains("--sandbox_add_mount_pair=/var/lock"), "{}", out.explain());
    }
    // Bazel's ordinary sandbox in a container whose root happens to be a
    // directory so named: the execroot is where the output base puts it,
    // not at `/execroot/<workspace>`, and `/` is shared: not a word.
    let outer = f.dir.join("ci/linux-sandbox/7");
    let inner = "/ob/sandbox/linux-sandbox/1/execroot/_main";
    let execroot = outer.join(inner.trim_start_matches('/'));
    std::fs::create_dir_all(&execroot).unwrap();
    let bind = ["--bind", execroot.to_str().unwrap(), inner];
    let out = sandboxed(&f, &["--bind", outer.to_str().unwrap(), "/"], inner, &bind, "2").run();
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    let host = f.dir.join("host-locks");
    std::fs::create_dir_all(&host).unwrap();
    let out = action(&["--bind", host.to_str().unwrap(), "/var/lock"], "2");
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    assert!(host.join("gpulock0_0").exists(), "the lock file is not in the host's directory");
}

#[test]
fn a_per_action_tmp_does_not_hold_the_jax_locks_silently() {
    // Bazel 7+ mounts <sandbox>/_hermetic_tmp at /tmp in each action; the
    // jax profile's default lock directory is under /tmp.
    if !test_support::prerequisite(
        is_root() && test_support::have_program("unshare"),
        "root and unshare",
        "the jax locks in a per-action /tmp",
    ) {
        return;
    }
    let f = Fixture::new("privacy-hermetic-tmp");
    let hermetic = f.dir.join("sandbox/linux-sandbox/7/_hermetic_tmp");
    let here = f.dir.path().strip_prefix("/tmp").map(|p| p.to_path_buf()).ok();
    let Some(here) = here else {
        test_support::prerequisite(
            false,
            "a fixture under /tmp (TMPDIR elsewhere)",
            "the jax locks in a per-action /tmp",
        );
        return;
    };
    std::fs::create_dir_all(hermetic.join(&here)).unwrap();
    // The wrapper from inside the fixture, which stays in sight under the
    // new /tmp wherever the binary under test lives.
    let wrapper = f.dir.join("wrapper");
    std::fs::copy(bin(), &wrapper).unwrap();
    // The host's /tmp gets /tmp/jax_accelerator_locks_<user> in the last
    // case: a name of this run's own, removed at the end.
    let user = format!("gpuci-{}", std::process::id());
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(format!("/tmp/jax_accelerator_locks_{user}").into());
    let cmd = |mount: &str, gpus: &str| {
        // The fixture stays where it was inside the new /tmp.
        let script =
            format!("set -e; mount --bind \"$1\" \"$2/{here}\"; {mount}; shift 2; exec \"$@\"", here = here.display());
        let mut u = Cmd::new("unshare");
        f.runfiles.apply(&mut u);
        u.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root).env("PARALLEL_GPU_EXECUTE_PROFILE", "jax");
        u.env("USER", &user).env("JAX_ACCELERATOR_COUNT", gpus);
        u.args(["-m", "--propagation", "private", "sh", "-c", &script, "sh"]);
        u.arg(f.dir.path()).arg(&hermetic).arg(&wrapper).arg("./pkg/gpu_test");
        u
    };
    let run = |mount: &str, gpus: &str| cmd(mount, gpus).run();
    let run_spawned = |mount: &str| cmd(mount, "2").spawn();
    // Bazel 7.0 to 7.3 (and 6 with --incompatible_sandbox_hermetic_tmp):
    // <sandbox>/_hermetic_tmp bound at /tmp (bazelbuild/bazel e2c0276d,
    // 2023-11-10, made it the default in 7.0.0). --rbind: the fixture's own
    // bind inside it comes along.
    let mount_hermetic = format!("mount --rbind {} /tmp", hermetic.display());
    let place = "in a /tmp of this action's own";
    refused(&run(&mount_hermetic, "2"), place);
    // Bazel 7.4 and later with --sandbox_writable_path=/tmp/jax_accelerator_locks_<user>,
    // as an earlier refusal advised: the directory is made inside
    // _hermetic_tmp and bound onto itself (765d5e0a, PR #23755,
    // 2024-09-25), so the host's is never seen. (7.0 to 7.3 fail the action
    // instead: the bind finds no directory, bazelbuild/bazel#23754.)
    let writable = format!(
        "{mount_hermetic}; mkdir -p /tmp/jax_accelerator_locks_{user}; mount --bind /tmp/jax_accelerator_locks_{user} /tmp/jax_accelerator_locks_{user}"
    );
    let out = run(&writable, "2");
    refused(&out, place);
    assert!(out.stderr.contains("--sandbox_writable_path=/var/lock/gpu"), "{}", out.explain());
    assert!(!out.stderr.contains("--sandbox_writable_path=/tmp"), "advice under /tmp\n{}", out.explain());
    let out = run(&mount_hermetic, "1");
    Record::of(out.assert_success());
    assert_eq!(said_private(&out, place), 1, "{}", out.explain());
    assert!(out.stderr.contains("--sandbox_add_mount_pair=/tmp"), "{}", out.explain());
    // The host's /tmp (Bazel 6's default; --sandbox_add_mount_pair=/tmp
    // from 7): not a word.
    let out = run("true", "2");
    Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    // The advice followed under 7.4's hermetic /tmp: a lock directory
    // outside /tmp, made once on the host, bound onto itself as
    // --sandbox_writable_path does. Two tests at once: two accelerators.
    let host_dir = std::path::PathBuf::from(format!("/var/lock/{user}"));
    let _remove_host = Remove(host_dir.clone());
    std::fs::create_dir_all(&host_dir).unwrap();
    let followed =
        format!("{mount_hermetic}; mount --bind {d} {d}; export JAX_LOCK_DIR={d} SLEEP=1", d = host_dir.display());
    let both: Vec<Output> = [0, 1].map(|_| run_spawned(&followed)).into_iter().map(|r| r.wait()).collect();
    let mut held: Vec<String> = both
        .iter()
        .map(|out| {
            let r = Record::of(out.assert_success());
            assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
            r.locks().join(" ")
        })
        .collect();
    held.sort();
    assert_eq!(held, ["jax_accelerator_lock_0_0", "jax_accelerator_lock_1_0"]);
}

#[test]
fn a_lock_directory_made_on_an_ordinary_host_is_no_alarm_even_at_the_top_or_relative() {
    // `--lock-dir=/gpu-locks`, or a relative `locks` outside Bazel, that
    // does not exist yet: the first test used to be refused, the second ran.
    let f = Fixture::new("privacy-ordinary");
    for dir in ["locks", "locks2/nested", "../outside"] {
        for round in 0..2 {
            let mut c = f.cmd();
            c.env_remove("TEST_SRCDIR").env("PARALLEL_GPU_EXECUTE_LOCK_DIR", dir).env("TF_GPU_COUNT", "2");
            let out = c.arg("./pkg/gpu_test").run();
            Record::of(out.assert_success());
            assert!(out.stderr.lines().count() <= 1, "{dir}, round {round}\n{}", out.explain());
        }
    }
    // Under Bazel, a relative path is taken from the test's working
    // directory, in its own runfiles tree: each test target would lock
    // files of its own (a build without the rule ran both tests on GPU 0).
    // The tree is told by its directories, not by names: an absolute path
    // into it, a climb that stays in it, `TEST_SRCDIR` spelled through a
    // link or with a trailing `//`.
    let place = "inside this test's runfiles tree";
    // The fixture's tree is `runfiles/`; Bazel names it `<target>.runfiles`,
    // here a link to it (the tree is told by its directories).
    let real = f.runfiles.srcdir.clone();
    std::fs::create_dir_all(real.join("ws/sub")).unwrap();
    let srcdir = f.dir.join("gpu_test.runfiles");
    std::os::unix::fs::symlink(&real, &srcdir).unwrap();
    let run = |dir: &str, gpus: &str, test_srcdir: &std::path::Path| {
        let mut c = f.cmd();
        c.env("TEST_SRCDIR", test_srcdir).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", dir).env("TF_GPU_COUNT", gpus);
        c.arg("./pkg/gpu_test").run()
    };
    let trailing = std::path::PathBuf::from(format!("{}//", srcdir.display()));
    let inside = srcdir.join("ws/locks4");
    let cases = [
        ("locks", &srcdir),
        ("./locks2/nested", &srcdir),
        ("sub/../locks3", &srcdir),
        (inside.to_str().unwrap(), &srcdir),
        ("locks", &trailing),
    ];
    for (dir, test_srcdir) in cases {
        let out = run(dir, "2", test_srcdir);
        refused(&out, place);
        assert!(out.stderr.contains("give an absolute lock directory every test sees"), "{}", out.explain());
        let out = run(dir, "1", test_srcdir);
        Record::of(out.assert_success());
        assert_eq!(said_private(&out, place), 1, "{}", out.explain());
    }
    // One that climbs out of the tree, leads out of it through a link (a
    // shared directory the tree links to) or to nothing, is bound into it
    // from elsewhere, or a TEST_SRCDIR that is no runfiles tree (a harness
    // that sets it to a repository, or `/`): no evidence, it runs, not a
    // word (a first version of the rule refused the link by its name).
    let shared = f.dir.join("shared-locks");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, real.join("ws/shared")).unwrap();
    std::os::unix::fs::symlink(f.dir.join("nowhere"), real.join("ws/dangling")).unwrap();
    for dir in ["../../up", "new/../../../up2", "shared", "shared/sub"] {
        let out = run(dir, "2", &srcdir);
        Record::of(out.assert_success());
        assert_eq!(said_private(&out, "coordinates"), 0, "{dir}\n{}", out.explain());
    }
    let out = run("dangling/locks", "2", &srcdir);
    assert_eq!(said_private(&out, "coordinates"), 0, "{}", out.explain());
    for test_srcdir in [real.as_path(), f.dir.path()] {
        let out = run("locks", "2", test_srcdir);
        Record::of(out.assert_success());
        assert_eq!(said_private(&out, "coordinates"), 0, "{}", out.explain());
    }
    if is_root() {
        let bound = real.join("ws/bound");
        std::fs::create_dir_all(&bound).unwrap();
        let _mounted = test_support::mounts::Mounted::bind(&shared.join("sub"), &bound);
        let out = run("bound", "2", &srcdir);
        Record::of(out.assert_success());
        assert_eq!(said_private(&out, "coordinates"), 0, "{}", out.explain());
    }
    assert!(shared.join("gpulock0_0").exists() && shared.join("sub/gpulock0_0").exists());
    if !have_bwrap("a new /gpu-locks on a host's root") {
        return;
    }
    // A host's root with no /gpu-locks yet (a bind of a plain directory).
    let hostroot = f.dir.join("hostroot");
    std::fs::create_dir_all(&hostroot).unwrap();
    for dir in ["bin", "lib", "lib64"] {
        std::os::unix::fs::symlink(format!("usr/{dir}"), hostroot.join(dir)).unwrap();
    }
    for round in 0..2 {
        let mut c = Cmd::new("bwrap");
        c.args(["--bind", hostroot.to_str().unwrap(), "/", "--ro-bind", "/usr", "/usr"]);
        c.args(["--proc", "/proc", "--dev", "/dev", "--ro-bind", bin(), "/wrapper"]);
        c.arg("--ro-bind").arg(&f.runfiles.srcdir).arg("/home/u/execroot/ws/bazel-out/k8/bin/pkg/t.runfiles");
        let real = f.dir.join("execroot");
        c.arg("--ro-bind").arg(&real).arg(&real);
        c.args(["--chdir", "/home/u/execroot/ws/bazel-out/k8/bin/pkg/t.runfiles/ws"]);
        c.args(["--setenv", "TEST_SRCDIR", "/home/u/execroot/ws/bazel-out/k8/bin/pkg/t.runfiles"]);
        c.args(["--setenv", "TF_GPU_COUNT", "2", "--setenv", "PARALLEL_GPU_EXECUTE_LOCK_DIR", "/gpu-locks"]);
        c.args(["--", "/wrapper", "./pkg/gpu_test"]);
        let out = c.run();
        Record::of(out.assert_success());
        assert!(!out.stderr.contains("coordinates with no other test"), "round {round}\n{}", out.explain());
    }
    assert!(hostroot.join("gpu-locks/gpulock0_0").exists());
}

#[test]
fn a_dangling_lock_directory_link_is_named_with_its_repair() {
    let f = Fixture::new("privacy-dangling");
    let var = f.dir.join("var");
    std::fs::create_dir_all(&var).unwrap();
    std::fs::create_dir_all(f.dir.join("run")).unwrap();
    std::os::unix::fs::symlink("../run/lock", var.join("lock")).unwrap();
    let lock_dir = var.join("lock");
    let out =
        f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir).env("TF_GPU_COUNT", "2").arg("./pkg/gpu_test").run();
    out.assert_one_error_line(&format!(
        "lock directory {l}: {l} is a symbolic link to ../run/lock, which does not exist",
        l = lock_dir.display()
    ));
    assert!(!out.stderr.contains("--sandbox_writable_path"), "{}", out.explain());
    assert_eq!(out.status.code(), Some(2));
    // --list says so too, instead of "the first test creates it".
    let out = f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir).env("TF_GPU_COUNT", "2").arg("--list").run();
    out.assert_success();
    assert!(out.stdout.contains("is a symbolic link to ../run/lock, which does not exist"), "{}", out.explain());
    let out = f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &lock_dir).env("TF_GPU_COUNT", "2").arg("--list=json").run();
    assert!(out.stdout.contains("\"lock_dir_state\": \"dangling\""), "{}", out.explain());
    // A dangling link further up the path is the one named.
    let deeper = lock_dir.join("gpu");
    let out =
        f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &deeper).env("TF_GPU_COUNT", "2").arg("./pkg/gpu_test").run();
    out.assert_code(2).assert_one_error_line(&format!(
        "lock directory {}: {} is a symbolic link to ../run/lock, which does not exist",
        deeper.display(),
        lock_dir.display()
    ));
    // Its target made, the test runs, also in a directory made through it.
    std::fs::create_dir_all(f.dir.join("run/lock")).unwrap();
    for dir in [&lock_dir, &deeper] {
        let out =
            f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", dir).env("TF_GPU_COUNT", "2").arg("./pkg/gpu_test").run();
        Record::of(out.assert_success());
    }
    assert!(f.dir.join("run/lock/gpu").is_dir());
}

#[test]
fn a_full_file_system_at_a_lock_file_is_named_as_such() {
    if !test_support::prerequisite(is_root(), "root", "a full file system at a lock file") {
        return;
    }
    let f = Fixture::new("privacy-enospc");
    let mnt = f.dir.join("small");
    // The root and the lock directory, no more.
    let _mounted = test_support::mounts::Mounted::tmpfs(&mnt, "size=64k,nr_inodes=2");
    let locks = mnt.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let out = f.cmd().env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &locks).env("TF_GPU_COUNT", "1").arg("./pkg/gpu_test").run();
    out.assert_one_error_line(&format!(
        "cannot create lock file {}/gpulock0_0: No space left on device (os error 28) (its file system is full",
        locks.display()
    ));
    assert!(!out.stderr.contains("--sandbox_writable_path"), "{}", out.explain());
}

/// An executor that mounts each action's workspace on the host itself (an
/// overlayfs workspace, as BuildBuddy's bare runner makes), running the
/// test there over the host's root: the directory holding `bazel-out` is a
/// mount of its own, as in a container made for the action, yet the lock
/// directory is the host's and shared. No refusal, no warning; `--list`
/// does not call it private. A build without the change refused a 2-GPU
/// test (exit 2, "a container made for this action").
///
/// The same layout in a PID and mount namespace of their own, entered
/// with `nsenter` after its first process (so that its pid 2 has its
/// parent outside, shown as 0, as `docker exec` makes it), is a container:
/// refused, as before.
#[test]
fn a_workspace_mounted_on_the_host_is_no_container_and_a_container_still_is() {
    let f = Fixture::new("privacy-host-workspace");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let dev = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| std::os::unix::fs::MetadataExt::dev(&m));
    // This process's root mount, as PID 1 sees it: the same mount namespace.
    let root_line = |pid: &str| {
        let m = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        m.lines().find(|l| l.split(' ').nth(4) == Some("/")).map(|l| l.split(' ').next().unwrap_or("").to_string())
    };
    let hosts = std::fs::read_to_string("/proc/2/stat").is_ok_and(|s| s.starts_with("2 (kthreadd) S 0 "));
    let tools = test_support::have_program("unshare") && test_support::have_program("nsenter");
    if !test_support::prerequisite(
        is_root() && tools && hosts && root_line("self").is_some() && root_line("self") == root_line("1"),
        "root, unshare and nsenter, the host's PID namespace and PID 1's mounts",
        "a workspace mounted on the host",
    ) || !test_support::prerequisite(
        dev(&f.lock_dir) == dev(std::path::Path::new("/")),
        "the fixture on /'s file system",
        "a workspace mounted on the host",
    ) {
        return;
    }
    let ws = f.dir.join("workspace");
    let _mounted = test_support::mounts::Mounted::tmpfs(&ws, "size=1m");
    let srcdir = ws.join("bazel-out/k8-fastbuild/bin/pkg/gpu_test.runfiles");
    std::fs::create_dir_all(&srcdir).unwrap();
    let test = ["/bin/sh", "-c", "echo ran on $CUDA_VISIBLE_DEVICES", "--num_processes=2"];
    let env = |c: &mut Cmd| {
        c.env("TEST_SRCDIR", &srcdir).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir).env("TF_GPU_COUNT", "2");
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &f.sysroot.root);
    };
    let mut c = Cmd::new(bin());
    env(&mut c);
    let out = c.args(test).run();
    out.assert_success().assert_stdout_contains("ran on 0,1");
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    let mut c = Cmd::new(bin());
    env(&mut c);
    let list = c.arg("--list=json").run();
    list.assert_success();
    assert!(!list.stdout.contains("\"lock_dir_state\": \"private\""), "{}", list.explain());

    // A container: its first process, then pid 2 entered from outside.
    let container = common::EnteredNamespace::new();
    let mut c = Cmd::new("nsenter");
    c.args(container.enter()).arg(bin()).args(test);
    env(&mut c);
    let out = c.run();
    drop(container);
    refused(&out, "on the root file system of a container made for this action");
}
