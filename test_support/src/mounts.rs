//! File systems mounted for a test (as root): a small tmpfs for a full
//! disk, an ext4 image made with chosen options; each unmounted (lazily)
//! when dropped, also when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mount of a test's own; unmounted when dropped.
pub struct Mounted {
    at: PathBuf,
}

impl Mounted {
    /// A tmpfs with `options` (`size=64k,nr_inodes=3`) at `at`, created.
    pub fn tmpfs(at: &Path, options: &str) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        let st = Command::new("mount").args(["-t", "tmpfs", "-o", options, "tmpfs"]).arg(at).status();
        assert!(st.is_ok_and(|s| s.success()), "mount -t tmpfs -o {options} tmpfs {}", at.display());
        Mounted { at: at.to_path_buf() }
    }

    /// An ext4 file system of `size` (`4M`) made in `image` with
    /// `mkfs_args` (`-I 128`), loop-mounted at `at`, created.
    pub fn ext4_image(image: &Path, size: &str, mkfs_args: &[&str], at: &Path) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        let mkfs = Command::new("mkfs.ext4").args(["-q", "-F"]).args(mkfs_args).arg(image).arg(size).output();
        let mkfs = mkfs.unwrap_or_else(|e| panic!("mkfs.ext4 (e2fsprogs) is needed: {e}"));
        assert!(mkfs.status.success(), "mkfs.ext4 {mkfs_args:?} {}: {mkfs:?}", image.display());
        let st = Command::new("mount").args(["-o", "loop"]).arg(image).arg(at).status();
        assert!(st.is_ok_and(|s| s.success()), "mount -o loop {} {}", image.display(), at.display());
        Mounted { at: at.to_path_buf() }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}
