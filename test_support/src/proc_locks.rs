//! What `/proc/locks` says about parallel_gpu_execute's wait queue.

/// The pids that hold or wait for a lock on one of the queue's lane files
/// (`gpulock.queue`, `gpulock.queue.N`), from `/proc/locks`: the wrappers
/// that are waiting right now; the first list holds the heads.
pub fn queued_pids(lock_dir: &std::path::Path) -> (Vec<i32>, Vec<i32>) {
    use std::os::unix::fs::MetadataExt;
    let lanes: Vec<u64> = std::fs::read_dir(lock_dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("gpulock.queue"))
                .filter_map(|e| e.metadata().ok().map(|m| m.ino()))
                .collect()
        })
        .unwrap_or_default();
    let (mut heads, mut blocked) = (Vec::new(), Vec::new());
    for line in std::fs::read_to_string("/proc/locks").unwrap_or_default().lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (is_blocked, rest) = if words.get(1) == Some(&"->") { (true, &words[2..]) } else { (false, &words[1..]) };
        // FLOCK ADVISORY WRITE <pid> <maj:min:inode> 0 EOF
        let (Some(pid), Some(inode)) = (rest.get(3).and_then(|p| p.parse().ok()), rest.get(4)) else { continue };
        let ino: Option<u64> = inode.rsplit(':').next().and_then(|i| i.parse().ok());
        if rest.first() == Some(&"FLOCK") && ino.is_some_and(|i| lanes.contains(&i)) {
            if is_blocked { blocked.push(pid) } else { heads.push(pid) }
        }
    }
    (heads, blocked)
}

/// The wait queue's stall cases for a load test: a plain `flock` blocked on
/// the queue file (a process in the queue that never acts), and the file's
/// time set an hour ahead (a beat in the future). The `flock` is killed when
/// this is dropped.
pub struct QueueFaults {
    queue: std::path::PathBuf,
    outsider: std::process::Child,
}

impl QueueFaults {
    /// Starts the blocked `flock` (the queue must exist and be held).
    pub fn start(queue: &std::path::Path) -> QueueFaults {
        let outsider = std::process::Command::new("flock").arg(queue).arg("true").spawn().expect("flock(1)");
        QueueFaults { queue: queue.to_path_buf(), outsider }
    }

    /// `touch -d '+1 hour'` of the queue file.
    pub fn beat_in_the_future(&self) {
        let st = std::process::Command::new("touch").args(["-d", "+1 hour"]).arg(&self.queue).status();
        assert!(st.is_ok_and(|s| s.success()), "touch -d '+1 hour' {}", self.queue.display());
    }
}

impl Drop for QueueFaults {
    fn drop(&mut self) {
        let _ = self.outsider.kill();
        let _ = self.outsider.wait();
    }
}
