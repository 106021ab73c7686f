//! Every sandbox and container layout a review rebuilt, run for real with
//! bubblewrap over overlay, btrfs, tmpfs and plain-directory roots: a lock
//! directory that coordinates nothing is refused, one that is shared is
//! never refused, and the advice of each refusal, followed, runs two tests
//! at once on two GPUs.
//!
//! Bazel's own sandbox is emulated from its source (bazelbuild/bazel
//! `src/main/tools/linux-sandbox.cc` and `linux-sandbox-pid1.cc`, the same
//! in 4.2.3 and at 0a161aac: PID 1 of a new PID namespace is the cloned
//! `linux-sandbox`, `/proc` is mounted fresh, the working directory
//! `<output_base>/sandbox/linux-sandbox/<n>/execroot/<ws>` is bound onto
//! itself, each `--sandbox_tmpfs_path` is a fresh tmpfs, and `TEST_TMPDIR`
//! is made by Bazel before the sandbox starts, `TestStrategy.java`). Here
//! a copy of bubblewrap named `linux-sandbox` with `--unshare-pid` gives the
//! same PID 1, `/proc` and mounts.

mod common;

use common::{Fixture, Record, bin, refused, said_private};
use std::path::{Path, PathBuf};
use test_support::mounts::Mounted;
use test_support::{Cmd, Output, is_root};

fn have_bwrap(checks: &str) -> bool {
    test_support::prerequisite(is_root() && test_support::have_program("bwrap"), "root and bubblewrap (bwrap)", checks)
}

const RUNFILES: &str = "bazel-out/k8-fastbuild/bin/pkg/gpu_test.runfiles";

/// One action's view: a root, the input root mounted at `input_at` from
/// `input_host`, more mounts, and the variables Bazel sets.
struct Action<'a> {
    f: &'a Fixture,
    /// bubblewrap's arguments that make `/`.
    root: Vec<String>,
    /// PID 1 is `linux-sandbox` (Bazel's sandbox).
    linux_sandbox: bool,
    /// `/` is remounted read-only once everything is mounted.
    read_only: bool,
    input_host: PathBuf,
    input_at: String,
    /// Mounts made before the input root, then after it.
    before: Vec<String>,
    after: Vec<String>,
    env: Vec<(String, String)>,
}

impl<'a> Action<'a> {
    fn new(f: &'a Fixture, root: &[&str], input_host: &Path, input_at: &str) -> Action<'a> {
        Action {
            f,
            root: root.iter().map(|s| s.to_string()).collect(),
            linux_sandbox: false,
            read_only: false,
            input_host: input_host.to_path_buf(),
            input_at: input_at.to_string(),
            before: Vec::new(),
            after: Vec::new(),
            env: vec![("TF_GPU_COUNT".into(), "2".into())],
        }
    }

    fn before(mut self, args: &[&str]) -> Self {
        self.before.extend(args.iter().map(|s| s.to_string()));
        self
    }

    fn after(mut self, args: &[&str]) -> Self {
        self.after.extend(args.iter().map(|s| s.to_string()));
        self
    }

    fn env(mut self, k: &str, v: &str) -> Self {
        self.env.retain(|(key, _)| key != k);
        self.env.push((k.into(), v.into()));
        self
    }

    fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    fn in_linux_sandbox(mut self) -> Self {
        self.linux_sandbox = true;
        self
    }

    fn srcdir(&self) -> String {
        format!("{}/{RUNFILES}", self.input_at.trim_end_matches('/'))
    }

    fn cmd(&self) -> Cmd {
        self.cmd_holding(false)
    }

    /// `hold`: the test holds its GPUs a second.
    fn cmd_holding(&self, hold: bool) -> Cmd {
        let program = if self.linux_sandbox {
            let copy = self.f.dir.join("bin/linux-sandbox");
            if !copy.exists() {
                std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
                std::fs::copy(test_support::find_program("bwrap").unwrap(), &copy).unwrap();
            }
            copy
        } else {
            PathBuf::from("bwrap")
        };
        let mut c = Cmd::new(program);
        if self.linux_sandbox {
            c.arg("--unshare-pid");
        }
        c.args(&self.root);
        c.args(["--ro-bind", "/usr", "/usr"]);
        match self.root.first().map(String::as_str) {
            Some("--bind" | "--ro-bind") => {
                // A directory kept between runs: its links made once.
                let dir = Path::new(&self.root[1]);
                for name in ["bin", "lib", "lib64"] {
                    if dir.join(name).symlink_metadata().is_err() {
                        std::os::unix::fs::symlink(format!("usr/{name}"), dir.join(name)).unwrap();
                    }
                }
            }
            _ => {
                c.args(["--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"]);
                c.args(["--symlink", "usr/lib64", "/lib64"]);
            }
        }
        c.args(["--proc", "/proc", "--dev", "/dev"]);
        c.args(&self.before);
        c.arg("--bind").arg(&self.input_host).arg(&self.input_at);
        c.args(&self.after);
        c.args(["--ro-bind", bin(), "/wrapper"]);
        c.arg("--ro-bind").arg(&self.f.runfiles.srcdir).arg(self.srcdir());
        // The runfiles are links to the files where the fixture keeps them.
        let real = self.f.dir.join("execroot");
        c.arg("--ro-bind").arg(&real).arg(&real);
        if self.read_only {
            c.args(["--remount-ro", "/"]);
        }
        c.args(["--chdir", &format!("{}/ws", self.srcdir())]);
        c.args(["--setenv", "TEST_SRCDIR", &self.srcdir(), "--setenv", "TEST_WORKSPACE", "ws"]);
        for (k, v) in &self.env {
            c.args(["--setenv", k, v]);
        }
        if hold {
            c.args(["--setenv", "SLEEP", "1"]);
        }
        c.args(["--", "/wrapper", "./pkg/gpu_test"]);
        c
    }

    fn run(&self) -> Output {
        self.cmd().run()
    }

    /// Two of it at once, each test holding its GPU a while: the lock
    /// files they held, in order.
    #[track_caller]
    fn two_at_once(&self) -> Vec<String> {
        let held = |out: &Output| not_refused(out).locks().join(" ");
        let c = self.cmd_holding(true);
        let (a, b) = (c.spawn(), c.spawn());
        let (a, b) = (a.wait(), b.wait());
        let mut locks = vec![held(&a), held(&b)];
        locks.sort();
        locks
    }
}

#[track_caller]
fn not_refused(out: &Output) -> Record {
    let r = Record::of(out.assert_success());
    assert!(!out.stderr.contains("coordinates with no other test"), "{}", out.explain());
    r
}

const BOTH_GPUS: [&str; 2] = ["gpulock0_0", "gpulock1_0"];

/// A worker's input roots, on a tmpfs of their own (whose files have birth
/// times whatever the disk's file system).
fn worker(f: &Fixture) -> (Mounted, PathBuf) {
    let at = f.dir.join("worker");
    let mounted = Mounted::tmpfs(&at, "size=4m");
    let input = at.join("action-1");
    std::fs::create_dir_all(&input).unwrap();
    (mounted, input)
}

#[test]
fn a_container_root_of_any_file_system_is_refused_and_the_hosts_directory_mounted_in_runs_two_tests_on_two_gpus() {
    if !have_bwrap("container roots of every storage driver") {
        return;
    }
    let f = Fixture::new("layouts-container-roots");
    let (_worker, input) = worker(&f);
    let place = "on the root file system of a container made for this action";
    // Docker's vfs driver (and systemd-nspawn -D): a plain directory.
    let plain = f.dir.join("vfs-root");
    std::fs::create_dir_all(plain.join("var/lock")).unwrap();
    // overlay2.
    let overlay = Mounted::overlay(&f.dir.join("overlay-root"));
    std::fs::create_dir_all(overlay.path().join("var/lock")).unwrap();
    // A tmpfs root.
    let mut roots: Vec<(String, Vec<String>)> = vec![
        ("vfs".into(), vec!["--bind".into(), plain.display().to_string(), "/".into()]),
        ("overlay".into(), vec!["--bind".into(), overlay.path().display().to_string(), "/".into()]),
        ("tmpfs".into(), vec!["--tmpfs".into(), "/".into(), "--dir".into(), "/var/lock".into()]),
    ];
    // Docker's btrfs driver: a subvolume of the host's btrfs.
    let btrfs = Mounted::btrfs_image(&f.dir.join("btrfs.img"), &f.dir.join("btrfs"));
    match &btrfs {
        Ok(fs) => {
            let sub = fs.path().join("sub");
            std::fs::create_dir_all(sub.join("var/lock")).unwrap();
            roots.push(("btrfs".into(), vec!["--bind".into(), sub.display().to_string(), "/".into()]));
        }
        Err(why) => {
            test_support::prerequisite(false, why, "a container root on a btrfs subvolume");
        }
    }
    let host_locks = f.dir.join("host-locks");
    for (name, root) in &roots {
        let root: Vec<&str> = root.iter().map(String::as_str).collect();
        let action = Action::new(&f, &root, &input, "/work");
        let out = action.run();
        refused(&out, place);
        assert!(out.stderr.contains("mount the host's lock directory there"), "{name}\n{}", out.explain());
        // One GPU: it runs, warned.
        let out = Action::new(&f, &root, &input, "/work").env("TF_GPU_COUNT", "1").run();
        Record::of(out.assert_success());
        assert_eq!(said_private(&out, place), 1, "{name}\n{}", out.explain());
        // The advice: the host's lock directory mounted in. Two containers
        // at once share it: two GPUs.
        std::fs::create_dir_all(&host_locks).unwrap();
        let host = host_locks.display().to_string();
        let fixed = Action::new(&f, &root, &input, "/work").after(&["--bind", &host, "/var/lock"]);
        assert_eq!(fixed.two_at_once(), BOTH_GPUS, "{name}");
        std::fs::remove_dir_all(&host_locks).unwrap();
    }
}

#[test]
fn a_fresh_run_per_action_is_refused_and_an_older_shared_one_is_not() {
    if !have_bwrap("a fresh /run per action") {
        return;
    }
    let f = Fixture::new("layouts-fresh-run");
    // A long-lived container's /run, made before the worker's actions.
    let shared_run = Mounted::tmpfs(&f.dir.join("shared-run"), "size=1m");
    std::fs::create_dir_all(shared_run.path().join("lock")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (_worker, input) = worker(&f);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let root = ["--tmpfs", "/", "--dir", "/var", "--symlink", "../run/lock", "/var/lock"];
    let place = "on a mount made after this action's input root";
    // systemd-nspawn and `docker run --tmpfs /run`: /run fresh, /run/lock
    // a directory in it; podman --systemd: /run/lock a tmpfs of its own.
    for fresh in [&["--tmpfs", "/run", "--dir", "/run/lock"][..], &["--tmpfs", "/run", "--tmpfs", "/run/lock"]] {
        let out = Action::new(&f, &root, &input, "/work").after(fresh).run();
        refused(&out, place);
        assert!(out.stderr.contains("mount the host's lock directory there"), "{}", out.explain());
    }
    // The same /run made before the action: shared by every action of the
    // container, two GPUs.
    let run = shared_run.path().display().to_string();
    let older = Action::new(&f, &root, &input, "/work").after(&["--bind", &run, "/run"]);
    assert_eq!(older.two_at_once(), BOTH_GPUS);
}

#[test]
fn a_per_action_tmpfs_at_tmp_in_bazels_sandbox_is_refused_and_the_hosts_tmpfs_is_not() {
    // --sandbox_tmpfs_path=/tmp with the jax profile, whose lock directory
    // is under /tmp: each action its own empty tmpfs there, born after
    // Bazel made TEST_TMPDIR.
    if !have_bwrap("--sandbox_tmpfs_path=/tmp") {
        return;
    }
    let f = Fixture::new("layouts-sandbox-tmpfs");
    let user = format!("gpuci-{}", std::process::id());
    // The host's own tmpfs /tmp, older than the action.
    let host_tmp = Mounted::tmpfs(&f.dir.join("host-tmp"), "size=4m,mode=1777");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (_worker, base) = worker(&f);
    let execroot = base.join("sandbox/linux-sandbox/3/execroot/_main");
    let tmpdir = execroot.join("_tmp/9fa25aed");
    std::fs::create_dir_all(&tmpdir).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let host_root = f.dir.join("host-root");
    std::fs::create_dir_all(host_root.join("var/lock")).unwrap();
    let root = ["--bind", host_root.to_str().unwrap(), "/"];
    let exec = execroot.display().to_string();
    let jax = |tmp: &[&str]| {
        Action::new(&f, &root, &execroot, &exec)
            .in_linux_sandbox()
            .before(tmp)
            .env("PARALLEL_GPU_EXECUTE_PROFILE", "jax")
            .env("JAX_ACCELERATOR_COUNT", "2")
            .env("USER", &user)
            .env("TEST_TMPDIR", tmpdir.to_str().unwrap())
    };
    let out = jax(&["--tmpfs", "/tmp"]).run();
    refused(&out, "on a mount made after this action began");
    assert!(out.stderr.contains("--sandbox_writable_path=/var/lock/gpu"), "{}", out.explain());
    assert!(!out.stderr.contains("--sandbox_writable_path=/tmp"), "advice under /tmp\n{}", out.explain());
    // TEST_TMPDIR made within the clock tick the tmpfs is mounted in, as
    // a fast sandbox start does (birth times are stamped from a clock that
    // moves every few milliseconds): made by bubblewrap just before it
    // mounts the tmpfs, which shares its tick most of the time. Equal
    // times are the action's too.
    for n in 0..8 {
        let fresh = format!("/fresh-tmpdir/{n}");
        let out = jax(&["--dir", &fresh, "--tmpfs", "/tmp"]).env("TEST_TMPDIR", &fresh).run();
        refused(&out, "on a mount made after this action began");
    }
    // The host's tmpfs /tmp, shared by every sandbox: two GPUs.
    let shared = host_tmp.path().display().to_string();
    let locks = jax(&["--bind", &shared, "/tmp"]).two_at_once();
    let jax_names: Vec<String> = (0..2).map(|g| format!("jax_accelerator_lock_{g}_0")).collect();
    assert_eq!(locks, jax_names);
    // The advice followed: a lock directory outside /tmp, made writable
    // in the sandbox (here the host root's /var/lock/gpu, bound onto
    // itself as --sandbox_writable_path does).
    std::fs::create_dir_all(host_root.join("var/lock/gpu")).unwrap();
    let followed = jax(&["--tmpfs", "/tmp"])
        .after(&["--bind", host_root.join("var/lock/gpu").to_str().unwrap(), "/var/lock/gpu"])
        .env("JAX_LOCK_DIR", "/var/lock/gpu");
    assert_eq!(followed.two_at_once(), jax_names);
    assert!(host_root.join("var/lock/gpu/jax_accelerator_lock_1_0").exists());
}

#[test]
fn bazel_in_a_container_with_its_own_sandbox_is_never_refused() {
    // Most CI images: Bazel inside a container whose root is an overlay,
    // its tests in linux-sandbox, whose working directory (the one that
    // holds bazel-out) is bound onto itself, and /var/lock read-only
    // there, with the lock files made beforehand (docs/operations.md).
    if !have_bwrap("Bazel's sandbox inside a container") {
        return;
    }
    let f = Fixture::new("layouts-bazel-in-container");
    let overlay = Mounted::overlay(&f.dir.join("container-root"));
    let locks = overlay.path().join("var/lock");
    std::fs::create_dir_all(&locks).unwrap();
    let inside = "/root/.cache/bazel/_bazel_root/4f1c/sandbox/linux-sandbox/3/execroot/_main";
    let execroot = overlay.path().join(inside.trim_start_matches('/'));
    std::fs::create_dir_all(&execroot).unwrap();
    let root = ["--bind", overlay.path().to_str().unwrap(), "/"];
    // Without the lock files made beforehand: the read-only directory is
    // what is said, with Bazel's flag, and no word of a container.
    let action = Action::new(&f, &root, &execroot, inside).in_linux_sandbox().read_only();
    let out = action.run();
    out.assert_code(2);
    assert!(out.stderr.contains("Read-only file system"), "{}", out.explain());
    assert!(out.stderr.contains("--sandbox_writable_path"), "{}", out.explain());
    assert!(!out.stderr.contains("container"), "{}", out.explain());
    for name in BOTH_GPUS {
        std::fs::write(locks.join(name), "").unwrap();
    }
    assert_eq!(action.two_at_once(), BOTH_GPUS);
    // Told by the working directory's mount alone, too (a sandbox whose
    // PID 1 is something else).
    let mut plain_pid = Action::new(&f, &root, &execroot, inside).read_only();
    plain_pid.linux_sandbox = false;
    assert_eq!(plain_pid.two_at_once(), BOTH_GPUS);
    // The same root with the input root mounted elsewhere, no sandbox: a
    // container made for the action, refused, the read-only directory said
    // first.
    let (_worker, input) = worker(&f);
    let out = Action::new(&f, &root, &input, "/work").read_only().run();
    refused(&out, "on the root file system of a container made for this action");
    assert!(out.stderr.contains("lock directory /var/lock is read-only, and is on the root"), "{}", out.explain());
}

#[test]
fn a_missing_directory_that_cannot_be_made_is_said_first() {
    if !have_bwrap("a missing lock directory on a read-only action root") {
        return;
    }
    let f = Fixture::new("layouts-missing");
    let (_worker, input) = worker(&f);
    let root = ["--tmpfs", "/", "--dir", "/var"];
    let out = Action::new(&f, &root, &input, "/").read_only().run();
    refused(&out, "inside this action's own root");
    assert!(
        out.stderr.contains(
            "lock directory /var/lock does not exist and cannot be made (read-only file system), and is inside"
        ),
        "{}",
        out.explain()
    );
}

#[test]
fn an_existing_test_srcdir_layout_without_bazel_out_makes_no_judgement() {
    // No bazel-out in TEST_SRCDIR and a lock directory outside /tmp: the
    // judgement makes no system call and says nothing, whatever the root.
    if !have_bwrap("a runfiles tree without bazel-out") {
        return;
    }
    let f = Fixture::new("layouts-no-bazel-out");
    let mut c = Cmd::new("bwrap");
    c.args(["--tmpfs", "/", "--dir", "/var/lock", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin"]);
    c.args(["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev"]);
    c.args(["--ro-bind", bin(), "/wrapper"]);
    c.arg("--ro-bind").arg(&f.runfiles.srcdir).arg("/runfiles");
    let real = f.dir.join("execroot");
    c.arg("--ro-bind").arg(&real).arg(&real);
    c.args(["--chdir", "/runfiles/ws", "--setenv", "TEST_SRCDIR", "/runfiles", "--setenv", "TF_GPU_COUNT", "2"]);
    c.args(["--", "/wrapper", "./pkg/gpu_test"]);
    not_refused(&c.run());
}
