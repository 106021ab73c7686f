//! Integration-test harness shared by every crate of the workspace.
//!
//! Tests drive the real, built binaries the way Bazel does: from a temporary
//! runfiles tree, with a scrubbed environment that names every variable the
//! binary sees, against fake hardware (a sysroot prefix with KFD nodes, render
//! nodes and NVIDIA entries) and fake `rocminfo` scripts. When an assertion
//! fails, the panic message carries the command, its working directory, its
//! whole environment, its exit status, stdout and stderr.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub mod bins;
pub mod cmd;
pub mod freezer;
pub mod hardware;
pub mod mounts;
pub use bins::{TEST_BINS_ENV, bin_from_env, bin_under_test, workspace_bin};
pub mod prerequisite;
pub mod proc_locks;
pub mod record;
pub use cmd::{Cmd, Output, Running, children};
pub use freezer::Freezer;
pub use hardware::Sysroot;
pub use prerequisite::{find_program, have_program, in_ci, prerequisite, python_with};
pub use proc_locks::{QueueFaults, Queued, queued_pids, records};
pub use record::{RECORDING_TEST, check_gpus_match_locks, parse_record, record_value};

/// A directory removed when the test passes and kept (and named on stderr)
/// when it fails, so that the tree a failing test built can be inspected.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = std::env::var_os("CARGO_TARGET_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let path = base.join(format!("gpuci-{label}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.path.display());
        } else {
            make_writable(&self.path);
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Gives back write permission that a test took away, so that cleanup works.
fn make_writable(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
    for entry in entries.flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            make_writable(&entry.path());
        }
    }
}

/// Creates the directories above `path`.
fn create_parent(path: &Path) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("create parent dir");
    }
}

/// Writes `contents` to `path`, creating parent directories.
pub fn write_file(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
    let path = path.as_ref();
    create_parent(path);
    fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Writes an executable (mode 0755) that the test may exec at once.
///
/// A child that another test thread forks while the file is open for
/// writing inherits that descriptor until its own `execve`, and while any
/// process holds the file open for writing, exec'ing it fails with ETXTBSY
/// ("Text file busy"; rust-lang/rust#114554, which `O_CLOEXEC` does not
/// prevent). So the writing descriptor carries a shared `flock`, which
/// belongs to the open file description and so to every inherited copy,
/// and this returns only once an exclusive lock on a fresh descriptor can
/// be had: when no copy of the writing one is left anywhere. That covers
/// every forker in the process, std's `Command` included.
pub fn write_executable(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
    use std::io::Write as _;
    let path = path.as_ref();
    create_parent(path);
    let mut file = fs::File::create(path).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    assert!(flock(&file, libc::LOCK_SH), "flock {}", path.display());
    file.write_all(contents.as_ref()).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    file.set_permissions(fs::Permissions::from_mode(0o755)).expect("chmod");
    drop(file);
    let barrier = fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    assert!(flock(&barrier, libc::LOCK_EX), "flock {}", path.display());
}

/// Copies an executable to `to` as [`write_executable`] writes one.
pub fn copy_executable(from: impl AsRef<Path>, to: impl AsRef<Path>) {
    let from = from.as_ref();
    let bytes = fs::read(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    write_executable(to, bytes);
}

/// `cc <flags> -o <out> <source>`: a C program (or library) a test needs,
/// with the command in the panic when it fails.
pub fn compile_c(flags: &[&str], source: impl AsRef<Path>, out: impl AsRef<Path>) {
    let (source, out) = (source.as_ref(), out.as_ref());
    let status = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(source)
        .status()
        .expect("run cc (gcc and the static glibc, libc6-dev, are needed for this test)");
    assert!(status.success(), "cc {} -o {} {} failed", flags.join(" "), out.display(), source.display());
}

/// Reads a file that the test expects to exist, with the path in the panic.
pub fn read_to_string(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A temporary runfiles tree laid out as Bazel lays one out for a test:
/// `<root>/<srcdir>/` with `MANIFEST` and `<workspace>/...`, the test's
/// working directory being `<srcdir>/<workspace>`.
pub struct Runfiles {
    pub srcdir: PathBuf,
    pub workspace: String,
    manifest: Vec<(String, PathBuf)>,
}

impl Runfiles {
    pub fn new(dir: &TempDir, workspace: &str) -> Runfiles {
        let srcdir = dir.join("runfiles");
        fs::create_dir_all(srcdir.join(workspace)).expect("create runfiles");
        Runfiles { srcdir, workspace: workspace.to_string(), manifest: Vec::new() }
    }

    /// The test's working directory, `$TEST_SRCDIR/$TEST_WORKSPACE`.
    pub fn cwd(&self) -> PathBuf {
        self.srcdir.join(&self.workspace)
    }

    /// Adds a file at runfiles path `rlocation` (`<repo>/<path>`) as a symlink
    /// to a real file kept outside the tree, as Bazel does, and records it for
    /// the manifest.
    pub fn add(&mut self, rlocation: &str, contents: &str, executable: bool) -> PathBuf {
        let real = self.srcdir.parent().unwrap().join("execroot").join(rlocation);
        if executable {
            write_executable(&real, contents);
        } else {
            write_file(&real, contents);
        }
        let link = self.srcdir.join(rlocation);
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&link);
        symlink(&real, &link).expect("symlink runfile");
        self.manifest.push((rlocation.to_string(), real.clone()));
        real
    }

    /// Records an entry in the manifest only (no file in the tree), as in a
    /// manifest-only runfiles layout.
    pub fn add_manifest_only(&mut self, rlocation: &str, real: &Path) {
        self.manifest.push((rlocation.to_string(), real.to_path_buf()));
    }

    /// Writes `<srcdir>/MANIFEST` and returns its path.
    pub fn write_manifest(&self) -> PathBuf {
        let mut text = String::new();
        for (rloc, real) in &self.manifest {
            let _ = writeln!(text, "{rloc} {}", real.display());
        }
        let path = self.srcdir.join("MANIFEST");
        write_file(&path, text);
        path
    }

    /// Applies the variables Bazel sets for a test and its working directory.
    pub fn apply(&self, cmd: &mut Cmd) {
        cmd.env("TEST_SRCDIR", &self.srcdir)
            .env("RUNFILES_DIR", &self.srcdir)
            .env("TEST_WORKSPACE", &self.workspace)
            .current_dir(self.cwd());
    }
}

/// A fake `rocminfo` that prints `gpus` agent blocks the way the real tool
/// does (plus a CPU agent and ISA lines that must not be counted).
pub fn fake_rocminfo_script(gpus: usize) -> String {
    let mut s = String::from("#!/bin/sh\ncat <<'EOF'\nROCk module is loaded\n");
    s.push_str("*******\nAgent 1\n*******\n  Name:                    AMD EPYC 7763 64-Core Processor\n  Marketing Name:          AMD EPYC 7763 64-Core Processor\n");
    for i in 0..gpus {
        let _ = write!(
            s,
            "*******\nAgent {}\n*******\n  Name:                    gfx90a\n  Marketing Name:          AMD Instinct MI210\n  ISA Info:\n    ISA 1\n      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-\n",
            i + 2
        );
    }
    s.push_str("EOF\n");
    s
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

/// An exclusive `flock` held on a file (created if missing) until dropped,
/// as another test or the classic script would hold a GPU slot.
pub struct HeldLock {
    _file: fs::File,
}

fn flock(file: &fs::File, op: i32) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock(2) on a descriptor owned by `file`.
    unsafe { libc::flock(file.as_raw_fd(), op) == 0 }
}

fn open_lock(path: &Path) -> fs::File {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// Takes an exclusive lock on `path`, blocking until it is free.
pub fn hold_lock(path: impl AsRef<Path>) -> HeldLock {
    let file = open_lock(path.as_ref());
    assert!(flock(&file, libc::LOCK_EX), "flock {}", path.as_ref().display());
    HeldLock { _file: file }
}

/// Whether an exclusive lock on `path` could be taken right now (it is
/// released again at once). It takes the lock for that moment: a wrapper
/// choosing a slot then sees it busy. To watch a lock that wrappers may be
/// taking, use [`lock_is_free`].
pub fn can_flock(path: impl AsRef<Path>) -> bool {
    let file = open_lock(path.as_ref());
    flock(&file, libc::LOCK_EX | libc::LOCK_NB)
}

/// Whether the kernel lists no `flock(2)` lock held on the file at `path`
/// (`/proc/locks`, by device and inode; a missing file is free). Unlike
/// [`can_flock`] it takes nothing, so polling it never makes a wrapper that
/// chooses a slot at that moment pass this one by. Sees every lock from the
/// host's PID namespace, where the tests run. (Not for btrfs, whose files
/// stat with another device than `/proc/locks` shows.)
pub fn lock_is_free(path: impl AsRef<Path>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = fs::metadata(path.as_ref()) else { return true };
    let key = format!("{:02x}:{:02x}:{}", libc::major(m.dev()), libc::minor(m.dev()), m.ino());
    let locks = fs::read_to_string("/proc/locks").unwrap_or_default();
    // "1: FLOCK ADVISORY WRITE <pid> <maj:min:inode> 0 EOF"; a waiter's
    // line has "->" after the number.
    !locks.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.get(1) == Some(&"FLOCK") && w.get(5) == Some(&key.as_str())
    })
}

/// How many times a live process has gone to sleep (its voluntary context
/// switches, from /proc): its wake-ups, to tell waiting from spinning.
pub fn voluntary_switches(pid: i32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).unwrap_or("0");
    line.trim().parse().unwrap_or(0)
}

/// The descriptors (their `/proc/<pid>/fd/<n>` paths) of a live process
/// that are inotify instances.
pub fn inotify_fds(pid: i32) -> Vec<PathBuf> {
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten();
    fds.map(|fd| fd.path()).filter(|p| fs::read_link(p).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify")).collect()
}

/// Whether a live process has an inotify instance open: a wrapper that
/// found no free slot and now watches for a release (its wait begun, with
/// or without a record in the queue).
pub fn watching(pid: i32) -> bool {
    !inotify_fds(pid).is_empty()
}

/// Removes the tree at `path` as a cleaner's `rm -rf` does, running it
/// again while a process adds to it meanwhile (a waiter making its record
/// again), for up to two seconds; whether it is gone.
pub fn remove_tree_as_a_cleaner(path: &Path) -> bool {
    wait_until(Duration::from_secs(2), || match fs::remove_dir_all(path) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    })
}

/// Waits (up to ten seconds) until `pid` [`watching`]; whether it did.
pub fn begins_to_wait(pid: i32) -> bool {
    wait_until(Duration::from_secs(10), || watching(pid))
}

/// `/proc`'s state letter of `pid` (`T` stopped, `S` sleeping: a frozen
/// process reads `S` or `D`); `None` where it is gone.
pub fn process_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
}

/// CPU time (user + system) a live process has used, from /proc.
pub fn cpu_time(pid: i32) -> Duration {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // Fields after the command name (which may contain spaces) in parentheses.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// Whether this process runs as root (some tests switch to another user).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A tiny reproducible PRNG (xorshift64) for tests that feed random bytes:
/// the same seed gives the same bytes on every machine, so a failure names
/// its seed and can be replayed.
#[derive(Debug, Clone)]
pub struct XorShift64(u64);

impl XorShift64 {
    pub fn new(seed: u64) -> XorShift64 {
        // Zero is the one state xorshift never leaves; scramble the seed so
        // that small seeds (0, 1, 2, ...) give unrelated streams.
        XorShift64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// Random bytes that look a little like text: mostly printable ASCII,
    /// with newlines, spaces, NULs, backslashes and high bytes mixed in, so
    /// that line-based parsers see many short lines rather than one long one.
    pub fn texty_bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| match self.below(16) {
                0 => b'\n',
                1 => b' ',
                2 => [0u8, b'\\', b'\t', b'\r', b'=', b':', b'/', 0xff][self.below(8) as usize],
                3 => 0x80 + self.below(128) as u8,
                _ => 0x21 + self.below(94) as u8,
            })
            .collect()
    }
}

/// What a tree of files looks like: one line per entry (path relative to
/// the root, type, and for files their size, mode, modification time and a
/// checksum of the contents; for symlinks their target). Two snapshots
/// that compare equal mean nothing was created, removed, renamed or
/// written below the root (outside the excluded paths).
pub fn snapshot_tree(root: &Path, exclude: &[&Path]) -> std::collections::BTreeMap<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if exclude.iter().any(|e| path == *e) {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let Ok(meta) = fs::symlink_metadata(&path) else { continue };
            let kind = meta.file_type();
            let line = if kind.is_symlink() {
                format!("symlink -> {}", fs::read_link(&path).map(|t| t.display().to_string()).unwrap_or_default())
            } else if kind.is_dir() {
                stack.push(path.clone());
                format!("dir mode {:o}", meta.mode())
            } else if kind.is_file() {
                let sum = fs::read(&path).map(|b| fnv1a(&b)).unwrap_or(0);
                format!(
                    "file {} bytes mode {:o} mtime {}.{:09} sum {sum:016x}",
                    meta.len(),
                    meta.mode(),
                    meta.mtime(),
                    meta.mtime_nsec()
                )
            } else {
                format!("special mode {:o}", meta.mode())
            };
            out.insert(rel, line);
        }
    }
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The differences between two [`snapshot_tree`]s, one line each (empty
/// when they are the same).
pub fn snapshot_diff(
    before: &std::collections::BTreeMap<PathBuf, String>,
    after: &std::collections::BTreeMap<PathBuf, String>,
) -> String {
    let mut diff = String::new();
    for (path, was) in before {
        match after.get(path) {
            None => {
                let _ = writeln!(diff, "removed {}: {was}", path.display());
            }
            Some(now) if now != was => {
                let _ = writeln!(diff, "changed {}: {was} => {now}", path.display());
            }
            Some(_) => {}
        }
    }
    for (path, now) in after {
        if !before.contains_key(path) {
            let _ = writeln!(diff, "created {}: {now}", path.display());
        }
    }
    diff
}

/// The program interpreter (`PT_INTERP`, the dynamic loader) an ELF
/// executable asks for, or `None` for a static executable (static-pie
/// included: it has a dynamic section but no interpreter, and runs where
/// there is no loader at all).
pub fn elf_interpreter(path: &Path) -> Result<Option<String>, String> {
    let bytes = fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let at = |off: usize, len: usize| -> Result<&[u8], String> {
        bytes.get(off..off + len).ok_or_else(|| format!("{}: truncated ELF file", path.display()))
    };
    if at(0, 4)? != b"\x7fELF" || at(4, 1)? != [2] || at(5, 1)? != [1] {
        return Err(format!("{}: not a 64-bit little-endian ELF file", path.display()));
    }
    let u16_at = |off| at(off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u64_at = |off| at(off, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = u32::from_le_bytes(at(ph, 4)?.try_into().unwrap());
        if p_type == PT_INTERP {
            let (offset, size) = (u64_at(ph + 8)?, u64_at(ph + 32)?);
            let interp = at(offset, size)?;
            let interp = interp.strip_suffix(b"\0").unwrap_or(interp);
            return Ok(Some(String::from_utf8_lossy(interp).into_owned()));
        }
    }
    Ok(None)
}

/// Everything parallel_gpu_execute needs to run as Bazel runs it, inside one
/// temporary directory (the sandbox root): a runfiles tree with the
/// recording test at `ws/pkg/gpu_test`, an empty fake sysroot (so the real
/// machine's hardware never answers) and a private lock directory, not yet
/// created. For tests outside the wrapper's own crate.
pub struct GpuSandbox {
    pub dir: TempDir,
    pub runfiles: Runfiles,
    pub sysroot: Sysroot,
    pub lock_dir: PathBuf,
}

impl GpuSandbox {
    pub fn new(label: &str) -> GpuSandbox {
        let dir = TempDir::new(label);
        let mut runfiles = Runfiles::new(&dir, "ws");
        runfiles.add("ws/pkg/gpu_test", RECORDING_TEST, true);
        let sysroot = Sysroot::new(&dir);
        let lock_dir = dir.join("locks");
        GpuSandbox { dir, runfiles, sysroot, lock_dir }
    }

    /// The wrapper from the test's working directory, with the Bazel
    /// variables, the fake sysroot and the private lock directory.
    pub fn cmd(&self) -> Cmd {
        let mut c = Cmd::new(workspace_bin("parallel_gpu_execute"));
        self.runfiles.apply(&mut c);
        c.env("PARALLEL_GPU_EXECUTE_SYSROOT", &self.sysroot.root).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &self.lock_dir);
        c
    }

    /// [`cmd`](Self::cmd) with `TF_GPU_COUNT=gpus`, `TF_TESTS_PER_GPU=slots`
    /// and rocm-mode variables.
    pub fn cmd_with_gpus(&self, gpus: u32, slots: u32) -> Cmd {
        let mut c = self.cmd();
        c.env("TF_GPU_COUNT", gpus.to_string())
            .env("TF_TESTS_PER_GPU", slots.to_string())
            .env("PARALLEL_GPU_EXECUTE_VENDOR", "rocm");
        c
    }

    /// `<lock dir>/gpulock<gpu>_<slot>`.
    pub fn lock(&self, gpu: &str, slot: u32) -> PathBuf {
        self.lock_dir.join(format!("gpulock{gpu}_{slot}"))
    }

    /// `<lock dir>/gpuqueue`, the waiters' records.
    pub fn queue(&self) -> PathBuf {
        self.lock_dir.join("gpuqueue")
    }

    /// The PIDs of the waiters with a record, earliest first.
    pub fn waiters(&self) -> Vec<i32> {
        queued_pids(&self.lock_dir)
    }
}

/// An argv as a C `main` gets it, over `words` (leaked, so that the strings
/// live for the rest of the test process as real argv strings do), for unit
/// tests of the option parsers.
pub fn leaked_argv(words: &[&str]) -> wrapper_common::argv::Argv {
    let ptrs: Vec<*const std::ffi::c_char> = words
        .iter()
        .map(|w| std::ffi::CString::new(*w).expect("no NUL in a test word").into_raw() as *const std::ffi::c_char)
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let ptrs = Box::leak(ptrs.into_boxed_slice());
    // SAFETY: a NULL-terminated array of leaked, hence 'static, C strings.
    unsafe { wrapper_common::argv::Argv::from_main(words.len() as i32, ptrs.as_ptr()) }
}

/// Most intervals open at once: a sweep over the end points, ends before
/// starts at the same instant (a slot handed over is not shared).
pub fn max_overlap(intervals: impl IntoIterator<Item = (u128, u128)>) -> usize {
    let mut events: Vec<(u128, i32)> = Vec::new();
    for (start, end) in intervals {
        events.push((start, 1));
        events.push((end, -1));
    }
    events.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, delta) in events {
        open += delta;
        most = most.max(open);
    }
    most as usize
}
