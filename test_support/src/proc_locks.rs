//! What the wait queue's records say (`<lockdir>/gpuqueue/`, docs/design.md,
//! "The wait queue"), and the faults a load test puts in its way.

use std::path::{Path, PathBuf};

/// A waiter's record, as its name and text give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Its file name: `<ticket>.<pid>`.
    pub name: String,
    /// The PID its name carries (its own PID namespace's).
    pub pid: i32,
    /// The GPUs it asks for.
    pub needed: u32,
}

/// The records of `lock_dir`'s queue, earliest first (whatever their
/// waiters' state: a dead one's record stays until another waiter sees
/// it).
pub fn records(lock_dir: &Path) -> Vec<Queued> {
    let mut out: Vec<Queued> = std::fs::read_dir(lock_dir.join("gpuqueue"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let (ticket, pid) = name.split_once('.')?;
                    if ticket.len() != 16 || !ticket.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return None;
                    }
                    let text = std::fs::read(e.path()).ok()?;
                    let text = String::from_utf8_lossy(text.get(32..)?).into_owned();
                    let needed = text.lines().find_map(|l| l.strip_prefix("needed ")?.parse().ok()).unwrap_or(0);
                    Some(Queued { pid: pid.parse().ok()?, name, needed })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The PIDs of the waiters with a record in `lock_dir`'s queue, earliest first.
pub fn queued_pids(lock_dir: &Path) -> Vec<i32> {
    records(lock_dir).into_iter().map(|r| r.pid).collect()
}

/// The wait queue's stall cases for a load test: another user's shared
/// `flock` of the lock directory (a maintenance script's `flock -s
/// /var/lock ...`) and of `gpuqueue/`, and a file in `gpuqueue/` that is no
/// record; `remove_queue` is `rm -rf gpuqueue`. The `flock`s are killed when
/// this is dropped.
pub struct QueueFaults {
    lock_dir: PathBuf,
    others: Vec<std::process::Child>,
}

impl QueueFaults {
    pub fn start(lock_dir: &Path) -> QueueFaults {
        let queue = lock_dir.join("gpuqueue");
        let _ = std::fs::write(queue.join("notes.txt"), "not a record\n");
        let others = [lock_dir.to_path_buf(), queue]
            .iter()
            // `--no-fork`: the lock is held by the process killed on drop,
            // not by a child left behind (holding the caller's output open).
            .map(|d| {
                let mut c = std::process::Command::new("flock");
                c.args(["-s", "--no-fork"]).arg(d).args(["sleep", "600"]);
                c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn()
            })
            .map(|c| c.expect("flock(1)"))
            .collect();
        QueueFaults { lock_dir: lock_dir.to_path_buf(), others }
    }

    /// `rm -rf <lockdir>/gpuqueue`.
    pub fn remove_queue(&self) {
        let _ = std::fs::remove_dir_all(self.lock_dir.join("gpuqueue"));
    }
}

impl Drop for QueueFaults {
    fn drop(&mut self) {
        for c in &mut self.others {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
