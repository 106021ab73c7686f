//! File systems mounted for a test (as root): a small tmpfs for a full
//! disk, an ext4 image made with chosen options, a btrfs image; each
//! unmounted when dropped (lazily where something still has a file open
//! there), also when the test fails.

use crate::cmd::{Cmd, Output};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands that make and mount file systems need the system directories
/// in `PATH`.
pub const SBIN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs `words` with [`SBIN_PATH`].
pub fn system(words: &[&str]) -> Output {
    let mut c = Cmd::new(words[0]);
    c.env("PATH", SBIN_PATH).args(&words[1..]);
    c.run()
}

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

    /// `from` bound at `at` (`mount --bind`), created.
    pub fn bind(from: &Path, at: &Path) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        let st = Command::new("mount").arg("--bind").arg(from).arg(at).status();
        assert!(st.is_ok_and(|s| s.success()), "mount --bind {} {}", from.display(), at.display());
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

    /// A new 200 MB btrfs made in `image` and loop-mounted at `at`, with a
    /// subvolume `sub` (whose files `stat` gives the subvolume's anonymous
    /// device, not the superblock's that `/proc/locks` prints). `Err` says
    /// what is missing: root, btrfs-progs, a loop device.
    pub fn btrfs_image(image: &Path, at: &Path) -> Result<Mounted, String> {
        if !crate::is_root() {
            return Err("root (to mount a btrfs image)".into());
        }
        let found = |tool: &str| SBIN_PATH.split(':').any(|d| Path::new(d).join(tool).is_file());
        if !found("mkfs.btrfs") || !found("btrfs") {
            return Err("mkfs.btrfs and btrfs (apt-get install btrfs-progs)".into());
        }
        std::fs::File::create(image).unwrap().set_len(200 << 20).unwrap();
        system(&["mkfs.btrfs", "-q", image.to_str().unwrap()]).assert_success();
        std::fs::create_dir_all(at).unwrap();
        let out = system(&["mount", "-o", "loop", image.to_str().unwrap(), at.to_str().unwrap()]);
        if out.code() != 0 {
            return Err(format!("a btrfs image mountable here:\n{}", out.explain()));
        }
        let fs = Mounted { at: at.to_path_buf() };
        system(&["btrfs", "subvolume", "create", at.join("sub").to_str().unwrap()]).assert_success();
        Ok(fs)
    }

    /// An overlay (as Docker's overlay2 makes a container's root) at `at`
    /// over an empty lower layer, with its upper and work directories
    /// beside `at`; all created.
    pub fn overlay(at: &Path) -> Mounted {
        let side = |name: &str| {
            let p = at.with_extension(name);
            std::fs::create_dir_all(&p).unwrap();
            p.display().to_string()
        };
        let options = format!("lowerdir={},upperdir={},workdir={}", side("lower"), side("upper"), side("work"));
        std::fs::create_dir_all(at).unwrap();
        system(&["mount", "-t", "overlay", "-o", &options, "overlay", at.to_str().unwrap()]).assert_success();
        Mounted { at: at.to_path_buf() }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.at
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let at = self.at.to_str().unwrap_or_default();
        if system(&["umount", at]).code() != 0 {
            system(&["umount", "-l", at]);
        }
    }
}
