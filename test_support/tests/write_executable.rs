//! `write_executable` returns only once the file can be exec'd, however
//! many other threads of the process fork meanwhile (a child forked while
//! the file is open for writing holds it open until its own exec, and
//! exec'ing it then fails with ETXTBSY: rust-lang/rust#114554).

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use test_support::{TempDir, write_executable};

/// Stops the spawning threads however the test ends, so a failure is
/// reported instead of hanging the scope.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_written_executable_runs_while_other_threads_spawn() {
    let dir = TempDir::new("write-exec");
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    Command::new("/bin/true").status().expect("spawn /bin/true");
                }
            });
        }
        for i in 0..300 {
            let path = dir.join(format!("run{i}"));
            write_executable(&path, "#!/bin/sh\nexit 0\n");
            let status = Command::new(&path).status();
            assert!(matches!(&status, Ok(s) if s.success()), "run {i} of {}: {status:?}", path.display());
        }
    });
}
