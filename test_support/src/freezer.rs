//! The cgroup v2 freezer, as `docker pause`, `systemctl freeze` and
//! checkpointing use it: a frozen process stops running, and `/proc` shows
//! it sleeping (`S`), never stopped (`T`).
//!
//! A [`Freezer`] is a child cgroup of its own under the host's cgroup v2
//! hierarchy (found in `/proc/self/mountinfo`: `/sys/fs/cgroup` on a
//! unified host, `/sys/fs/cgroup/unified` on a hybrid one); dropped, it
//! thaws, moves what is left back to the hierarchy's root and is removed.

use std::path::{Path, PathBuf};

pub struct Freezer {
    dir: PathBuf,
    root: PathBuf,
}

/// Where cgroup v2 is mounted, from mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (fields, fs) = l.split_once(" - ")?;
        let mount_point = fields.split_whitespace().nth(4)?;
        (fs.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(mount_point))
    })
}

impl Freezer {
    /// A new cgroup named after `label`; `Err` says what is missing (root,
    /// a cgroup v2 mount, its freezer).
    pub fn new(label: &str) -> Result<Freezer, String> {
        if !crate::is_root() {
            return Err("root (to make a cgroup)".into());
        }
        let root = cgroup2_mount().ok_or("a cgroup v2 mount (the freezer)")?;
        let dir = root.join(format!("gpu-ci-wrappers-{label}-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("a cgroup v2 hierarchy one may add to ({}: {e})", dir.display()))?;
        let freezer = Freezer { dir, root };
        if !freezer.dir.join("cgroup.freeze").exists() {
            return Err("the cgroup v2 freezer (cgroup.freeze; Linux 5.2 or later)".into());
        }
        Ok(freezer)
    }

    /// Moves process `pid` into the cgroup (its children born later follow).
    pub fn add(&self, pid: i32) {
        write(&self.dir.join("cgroup.procs"), &pid.to_string());
    }

    /// Freezes everything in the cgroup, and waits until the kernel says so.
    pub fn freeze(&self) {
        write(&self.dir.join("cgroup.freeze"), "1");
        let frozen = crate::wait_until(std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(self.dir.join("cgroup.events")).is_ok_and(|e| e.contains("frozen 1"))
        });
        assert!(frozen, "{} never froze", self.dir.display());
    }

    pub fn thaw(&self) {
        write(&self.dir.join("cgroup.freeze"), "0");
    }
}

fn write(path: &Path, value: &str) {
    std::fs::write(path, value).unwrap_or_else(|e| panic!("echo {value} > {}: {e}", path.display()));
}

impl Drop for Freezer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("cgroup.freeze"), "0");
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
