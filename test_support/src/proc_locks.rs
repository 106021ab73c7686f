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
