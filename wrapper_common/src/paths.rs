//! Absolute paths on the stack, without resolving symlinks.
//!
//! A path a wrapper hands on (in a sanitizer option, as a chained wrapper's
//! argv[0]) must mean the same file to a process that runs in another working
//! directory. Joining it to the working directory is enough for that;
//! `realpath` would also replace each runfiles symlink by its target, so the
//! path would no longer be the one `rlocation` gives, and it would cost a
//! system call per component.

use crate::cbuf::StackPath;
use crate::runfiles::strip_dot_slash;
use rustix::io::Errno;

/// The working directory, as `getcwd(3)` gives it.
pub fn current_dir() -> Result<StackPath, Errno> {
    let mut buf = [0u8; 4096];
    // SAFETY: getcwd writes at most `buf.len()` bytes, its terminating NUL
    // included, into `buf`, which lives for the whole call.
    let ret = unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
    if ret.is_null() {
        return Err(crate::last_errno());
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    // Linux reports a directory outside the process's root as
    // "(unreachable)/...": no path to it can be built.
    if buf.first() != Some(&b'/') {
        return Err(Errno::NOENT);
    }
    StackPath::from_bytes(&buf[..len]).map_err(|_| Errno::NAMETOOLONG)
}

/// `path` as an absolute path: unchanged when it starts with `/`, else joined
/// to the working directory (leading `./` components dropped).
pub fn absolute(path: &[u8]) -> Result<StackPath, Errno> {
    if path.first() == Some(&b'/') {
        return StackPath::from_bytes(path).map_err(|_| Errno::NAMETOOLONG);
    }
    let mut joined = current_dir()?;
    let relative = strip_dot_slash(path);
    if !relative.is_empty() {
        joined.push_path(relative).map_err(|_| Errno::NAMETOOLONG)?;
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::prelude::rust_2024::*;

    #[test]
    fn relative_paths_are_joined_to_the_working_directory() {
        let cwd = std::env::current_dir().unwrap();
        let cwd = cwd.as_os_str().as_bytes();
        assert_eq!(current_dir().unwrap().as_bytes(), cwd);
        let mut want = cwd.to_vec();
        want.extend_from_slice(b"/pkg/file");
        assert_eq!(absolute(b"pkg/file").unwrap().as_bytes(), &want[..]);
        assert_eq!(absolute(b"././pkg/file").unwrap().as_bytes(), &want[..]);
        assert_eq!(absolute(b"./").unwrap().as_bytes(), cwd);
    }

    #[test]
    fn absolute_paths_are_kept_as_they_are() {
        assert_eq!(absolute(b"/a/./b/../c").unwrap().as_bytes(), b"/a/./b/../c");
        assert_eq!(absolute(&[b'/'; 5000]).unwrap_err(), Errno::NAMETOOLONG);
    }
}
