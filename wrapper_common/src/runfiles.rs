//! Bazel runfiles lookup without a shell, without walking the tree, and
//! without the heap.
//!
//! A runfile is named by its rlocation, `<repo>/<path>`. Bazel makes it
//! available in one or both of two ways: a directory tree where
//! `<dir>/<rlocation>` exists (a symlink to the real file), and a `MANIFEST`
//! file mapping each rlocation to the real path, one `<rlocation> <path>`
//! line each. When a path contains a space, newline or backslash, Bazel
//! starts the line with a space and escapes them (`\s`, `\n`, `\b`).

use crate::cbuf::{StackPath, separator, with_joined};
use crate::exec::{self, ExecFailure};
use crate::lines::{Line, with_read_buffer};
use alloc::borrow::ToOwned;
use alloc::ffi::CString;
use core::ops::ControlFlow;
use rustix::io::Errno;

/// Buffer size for reading a manifest: lines longer than this cannot name a
/// path the kernel accepts, and are skipped.
pub const MANIFEST_BUFFER: usize = crate::lines::READ_BUFFER;

/// One manifest line, split but not yet unescaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestEntry<'a> {
    pub rlocation: &'a [u8],
    /// Empty for an empty runfile (Bazel writes no target for those).
    pub target: &'a [u8],
    pub escaped: bool,
}

/// Splits one manifest line; `None` for a line that names nothing.
pub fn parse_manifest_line(line: &[u8]) -> Option<ManifestEntry<'_>> {
    let (escaped, rest) = match line.split_first() {
        Some((b' ', rest)) => (true, rest),
        _ => (false, line),
    };
    let (rlocation, target) = match crate::lines::find_byte(rest, b' ') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b""[..]),
    };
    if rlocation.is_empty() {
        return None;
    }
    Some(ManifestEntry { rlocation, target, escaped })
}

/// Undoes the manifest escapes (`\s` space, `\n` newline, `\b` backslash)
/// into `out`. Other backslash sequences are kept as they are.
pub fn unescape_into(src: &[u8], escaped: bool, out: &mut StackPath) -> Result<(), crate::TooLong> {
    out.truncate(0);
    if !escaped {
        return out.push(src);
    }
    let mut i = 0;
    while i < src.len() {
        let (byte, step) = match (src[i], src.get(i + 1)) {
            (b'\\', Some(b's')) => (b' ', 2),
            (b'\\', Some(b'n')) => (b'\n', 2),
            (b'\\', Some(b'b')) => (b'\\', 2),
            (b, _) => (b, 1),
        };
        out.push(&[byte])?;
        i += step;
    }
    Ok(())
}

impl ManifestEntry<'_> {
    /// The rlocation with escapes undone, in `out`.
    pub fn rlocation_into(&self, out: &mut StackPath) -> Result<(), crate::TooLong> {
        unescape_into(self.rlocation, self.escaped, out)
    }

    /// The target path with escapes undone, in `out`.
    pub fn target_into(&self, out: &mut StackPath) -> Result<(), crate::TooLong> {
        unescape_into(self.target, self.escaped, out)
    }
}

/// Calls `f` for every well-formed entry of the manifest at `path`, in file
/// order, until `f` breaks.
///
/// Read through the shared static buffer ([`with_read_buffer`]): a small
/// manifest then touches one page of it, where a 16 KiB stack buffer had
/// four probed and faulted in. Never inlined, like [`manifest_lookup`].
#[inline(never)]
pub fn scan_manifest(
    path: &core::ffi::CStr,
    mut f: impl FnMut(&ManifestEntry<'_>) -> ControlFlow<()>,
) -> Result<(), Errno> {
    // A device (`/dev/zero`) would be read without end: no manifest.
    let fd = crate::lines::open_for_reading(path)?;
    // S_IFCHR (0o020000) and S_IFBLK (0o060000), and no other type, have
    // these bits so.
    if rustix::fs::fstat(&fd).is_ok_and(|st| st.st_mode & 0o130000 == 0o020000) {
        return Err(Errno::NODEV);
    }
    with_read_buffer(|buf| {
        crate::lines::for_each_line(&fd, buf, |Line { bytes, complete }| {
            if !complete {
                return ControlFlow::Continue(());
            }
            match parse_manifest_line(bytes) {
                Some(entry) => f(&entry),
                None => ControlFlow::Continue(()),
            }
        })
    })
}

/// The target the manifest at `manifest` gives for `rlocation`, if any:
/// its own entry, else, as Bazel's runfiles libraries do for a directory
/// (a tree artifact) listed as one entry, the longest entry that is a
/// directory above it, joined with the rest of the path. Entries for empty
/// files (no target) count as absent.
#[inline(never)]
pub fn manifest_lookup(manifest: &core::ffi::CStr, rlocation: &[u8]) -> Result<Option<StackPath>, Errno> {
    let mut found = None;
    // The longest directory entry above `rlocation` so far: its length, and
    // its target.
    let mut above: Option<(usize, StackPath)> = None;
    let mut scratch = StackPath::new();
    scan_manifest(manifest, |entry| {
        let name = if entry.escaped {
            if entry.rlocation_into(&mut scratch).is_err() {
                return ControlFlow::Continue(());
            }
            scratch.as_bytes()
        } else {
            entry.rlocation
        };
        let own = name == rlocation;
        let is_above = rlocation.len() > name.len()
            && rlocation.starts_with(name)
            && rlocation[name.len()] == b'/'
            && !name.is_empty();
        // Only an entry that may answer has its target unescaped.
        let nearer = is_above && above.as_ref().is_none_or(|(len, _)| name.len() > *len);
        if !(own || nearer) {
            return ControlFlow::Continue(());
        }
        let mut target = StackPath::new();
        let has_target = !entry.target.is_empty() && entry.target_into(&mut target).is_ok();
        if own {
            // Its own entry, a file with no target included, is the answer.
            found = Some(has_target.then_some(target));
            return ControlFlow::Break(());
        }
        if has_target {
            above = Some((name.len(), target));
        }
        ControlFlow::Continue(())
    })?;
    if let Some(own) = found {
        return Ok(own);
    }
    Ok(above.and_then(|(len, mut target)| target.push_path(&rlocation[len + 1..]).ok().map(|()| target)))
}

/// Where a wrapper looks runfiles up: a directory tree, a manifest, or both.
#[derive(Default, Clone)]
pub struct Runfiles {
    pub dir: Option<StackPath>,
    pub manifest: Option<StackPath>,
}

impl Runfiles {
    /// Resolves `rlocation`: `<dir>/<rlocation>` when that exists, else the
    /// manifest's entry. An absolute path is returned as is when it exists.
    pub fn rlocation(&self, rlocation: &[u8]) -> Option<StackPath> {
        if rlocation.first() == Some(&b'/') {
            let p = StackPath::from_bytes(rlocation).ok()?;
            return exists(&p).then_some(p);
        }
        if let Some(dir) = &self.dir {
            let mut p = dir.clone();
            if p.push_path(rlocation).is_ok() && exists(&p) {
                return Some(p);
            }
        }
        let manifest = self.manifest.as_ref()?;
        manifest_lookup(manifest.as_cstr(), rlocation).ok().flatten()
    }
}

/// The runfiles manifest: `$RUNFILES_MANIFEST_FILE` when set, else
/// `<dir>/MANIFEST` when that exists.
pub fn manifest_path(dir: Option<&[u8]>) -> Option<StackPath> {
    if let Some(named) = crate::env::var_nonempty(b"RUNFILES_MANIFEST_FILE") {
        return StackPath::from_bytes(named).ok();
    }
    let mut in_dir = StackPath::new();
    in_dir.push(dir?).ok()?;
    in_dir.push_path(b"MANIFEST").ok()?;
    exists(&in_dir).then_some(in_dir)
}

/// Calls `f` with the runfiles manifest's path, as [`manifest_path`] finds
/// it, without a 4 KiB buffer on the caller's stack: `$RUNFILES_MANIFEST_FILE`
/// is passed as it is, `<dir>/MANIFEST` is built with [`with_joined`](crate::with_joined).
/// `None` when there is no manifest.
pub fn with_manifest_path<R>(dir: Option<&[u8]>, f: impl FnOnce(&core::ffi::CStr) -> R) -> Option<R> {
    if let Some(named) = crate::env::var_nonempty_cstr(b"RUNFILES_MANIFEST_FILE") {
        return Some(f(named));
    }
    let dir = dir?;
    crate::cbuf::with_joined(&[dir, separator(dir), b"MANIFEST"], None, |path| exists_cstr(path).then(|| f(path)))?
}

/// Does `path` exist (following symlinks)?
pub fn exists(path: &StackPath) -> bool {
    exists_cstr(path.as_cstr())
}

/// [`exists`] for any C string.
pub fn exists_cstr(path: &core::ffi::CStr) -> bool {
    rustix::fs::access(path, rustix::fs::Access::EXISTS).is_ok()
}

/// Does the file or directory at `path` exist, with `path` given as bytes?
pub fn exists_bytes(path: &[u8]) -> bool {
    StackPath::from_bytes(path).map(|p| exists(&p)).unwrap_or(false)
}

/// Strips leading `./` components, as `${1#./}` does in the classic scripts
/// (all of them, so `././x` and `x` name the same runfile).
pub fn strip_dot_slash(mut path: &[u8]) -> &[u8] {
    while let Some(rest) = path.strip_prefix(b"./") {
        path = rest;
    }
    path
}

/// The rlocation of `path`, a path relative to a test's working directory
/// (`$TEST_SRCDIR/$TEST_WORKSPACE`, the main repository being `workspace`):
/// `x` and `./x` are `<workspace>/x`, and `../<repo>/x` (a file of another
/// repository, named as Bazel's short paths name it) is `<repo>/x`. `None`
/// for an absolute path, a path that climbs further, or one too long.
pub fn rlocation_from_cwd(path: &[u8], workspace: &[u8]) -> Option<StackPath> {
    let mut rlocation = StackPath::new();
    rlocation.push_all(&rlocation_parts(path, workspace)?, None).ok()?;
    Some(rlocation)
}

/// [`rlocation_from_cwd`] as the three parts that make it up when joined
/// (`[<workspace>, "/", <path>]`, or `[<repo>/x, "", ""]`), for building it
/// where it is used without a buffer of its own.
pub fn rlocation_parts<'a>(path: &'a [u8], workspace: &'a [u8]) -> Option<[&'a [u8]; 3]> {
    let path = strip_dot_slash(path);
    if path.is_empty() || path == b".." || path.first() == Some(&b'/') {
        return None;
    }
    if let Some(other_repo) = path.strip_prefix(b"../") {
        let other_repo = strip_dot_slash(other_repo);
        let climbs = other_repo == b".." || other_repo.starts_with(b"../") || other_repo.starts_with(b"/");
        if other_repo.is_empty() || climbs {
            return None;
        }
        return Some([other_repo, b"", b""]);
    }
    if workspace.is_empty() {
        return None;
    }
    Some([workspace, separator(workspace), path])
}

/// Where the runfiles put a test that Bazel names by its path from the
/// test's working directory ([`test_lookup`]).
pub enum TestLookup {
    /// `<TEST_SRCDIR>/<rlocation>` exists, and was checked for executing
    /// (a found file that cannot be run is its 126).
    InTree(Result<CString, ExecFailure>),
    /// The manifest's target, not checked yet.
    InManifest(CString),
}

/// Where the runfiles put the test `test`, as the classic script's
/// `rlocation` finds it: its rlocation is [`rlocation_parts`] of `test`
/// under `$TEST_WORKSPACE`; `<TEST_SRCDIR>/<rlocation>` when it exists,
/// else the manifest's entry for it (`$RUNFILES_MANIFEST_FILE`, else
/// `$TEST_SRCDIR/MANIFEST`). `None` for an absolute `test`, without
/// `TEST_WORKSPACE`, or when neither has it. The tree path is checked for
/// executing at once: that check's `stat` also says whether it exists, so
/// the test costs one path lookup less than an existence check followed by
/// [`exec::resolve`]. Never inlined: its paths then leave the stack before
/// the test is checked, instead of adding to the deepest frame.
#[inline(never)]
pub fn test_lookup(test: &[u8]) -> Option<TestLookup> {
    let [repo, slash, path] = rlocation_parts(test, crate::env::var_nonempty(b"TEST_WORKSPACE")?)?;
    let srcdir = crate::env::var_nonempty(b"TEST_SRCDIR");
    if let Some(dir) = srcdir {
        let in_tree =
            with_joined(&[dir, separator(dir), repo, slash, path], None, |p| match exec::check_executable(p) {
                Ok(()) => Some(Ok(p.to_owned())),
                Err(e) if e.is_not_found() => None,
                Err(e) => Some(Err(e)),
            });
        if let Some(Some(checked)) = in_tree {
            return Some(TestLookup::InTree(checked));
        }
    }
    manifest_entry(srcdir, &[repo, slash, path].concat()).map(TestLookup::InManifest)
}

/// Execs `TEST ARGS...` (`argv` from `command`): TEST as given (searched
/// in `PATH` without a slash), else, where nothing is there, where the
/// runfiles put it ([`test_lookup`]): Bazel names TEST by its path from
/// `$TEST_SRCDIR/$TEST_WORKSPACE`, which is empty where the runfiles are a
/// manifest only (`--noenable_runfiles`). The test then gets the path it
/// runs from as argv[0]. Returns only on failure; the way that finds the
/// test as given allocates nothing. Inlined: a frame of its own between
/// the caller's and the exec's path buffer cost the no-GPU path a page of
/// stack.
#[inline(always)]
pub fn exec_test(
    test: &core::ffi::CStr,
    argv: &crate::argv::Argv,
    command: usize,
    envp: *const *const core::ffi::c_char,
) -> ExecFailure {
    let failure = exec::exec(test, argv.tail_ptr(command), envp);
    if !failure.is_not_found() {
        return failure;
    }
    exec_from_runfiles(test, argv, command, envp).unwrap_or(failure)
}

/// [`exec_test`]'s second way: `None` when the runfiles do not have it.
#[cold]
#[inline(never)]
fn exec_from_runfiles(
    test: &core::ffi::CStr,
    argv: &crate::argv::Argv,
    command: usize,
    envp: *const *const core::ffi::c_char,
) -> Option<ExecFailure> {
    let path = match test_lookup(test.to_bytes())? {
        TestLookup::InTree(Ok(path)) | TestLookup::InManifest(path) => path,
        TestLookup::InTree(Err(failure)) => return Some(failure),
    };
    let mut test_argv: alloc::vec::Vec<*const core::ffi::c_char> =
        alloc::vec::Vec::with_capacity(argv.len().saturating_sub(command) + 1);
    test_argv.push(path.as_ptr());
    test_argv.extend(argv.iter_from(command + 1).map(core::ffi::CStr::as_ptr));
    test_argv.push(core::ptr::null());
    Some(exec::exec(&path, test_argv.as_ptr(), envp))
}

/// The manifest's target for `rlocation`. Out of line: its 4 KiB paths are
/// on the stack only when the runfiles tree did not have the test.
#[inline(never)]
fn manifest_entry(srcdir: Option<&[u8]>, rlocation: &[u8]) -> Option<CString> {
    let target = with_manifest_path(srcdir, |manifest| manifest_lookup(manifest, rlocation).ok().flatten())??;
    Some(target.as_cstr().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::prelude::rust_2024::*;

    #[test]
    fn parses_plain_and_escaped_lines() {
        assert_eq!(
            parse_manifest_line(b"ws/pkg/t /exec/root/pkg/t with space"),
            Some(ManifestEntry { rlocation: b"ws/pkg/t", target: b"/exec/root/pkg/t with space", escaped: false })
        );
        assert_eq!(
            parse_manifest_line(b"ws/__init__.py"),
            Some(ManifestEntry { rlocation: b"ws/__init__.py", target: b"", escaped: false })
        );
        assert_eq!(parse_manifest_line(b""), None);
        assert_eq!(parse_manifest_line(b" "), None);
        let e = parse_manifest_line(br" ws/a\sb\bc /real/a\sb\nx").unwrap();
        assert!(e.escaped);
        let mut out = StackPath::new();
        e.rlocation_into(&mut out).unwrap();
        assert_eq!(out.as_bytes(), b"ws/a b\\c");
        e.target_into(&mut out).unwrap();
        assert_eq!(out.as_bytes(), b"/real/a b\nx");
    }

    #[test]
    fn lookup_in_a_manifest_file() {
        let dir = std::env::temp_dir().join(format!("wc-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("MANIFEST");
        std::fs::write(
            &manifest,
            "ws/a /real/a\nws/empty\n ws/sp\\sace /real/sp\\sace\nws/ab /real/ab\nws/a /second/a\nws/tree /out/tree\nws/tree/deep /out/deep\nws/tree/deep/x.txt\n",
        )
        .unwrap();
        let m = CString::new(manifest.to_str().unwrap()).unwrap();
        let get = |k: &[u8]| manifest_lookup(&m, k).unwrap().map(|p| p.as_bytes().to_vec());
        assert_eq!(get(b"ws/a"), Some(b"/real/a".to_vec()), "first entry wins");
        assert_eq!(get(b"ws/ab"), Some(b"/real/ab".to_vec()));
        assert_eq!(get(b"ws/sp ace"), Some(b"/real/sp ace".to_vec()));
        assert_eq!(get(b"ws/empty"), None);
        assert_eq!(get(b"ws"), None);
        // A directory listed as one entry (a tree artifact), as Bazel's
        // runfiles libraries read it: the longest entry above the path.
        assert_eq!(get(b"ws/tree/f.txt"), Some(b"/out/tree/f.txt".to_vec()));
        assert_eq!(get(b"ws/tree/deep/g/h"), Some(b"/out/deep/g/h".to_vec()));
        assert_eq!(get(b"ws/tree/deep/x.txt"), None, "an empty file's own entry stands");
        assert_eq!(get(b"ws/treex/f"), None, "a prefix that is no directory above it");
        assert!(manifest_lookup(c"/nonexistent/MANIFEST", b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn strips_dot_slash() {
        assert_eq!(strip_dot_slash(b"./pkg/t"), b"pkg/t");
        assert_eq!(strip_dot_slash(b"././pkg/t"), b"pkg/t");
        assert_eq!(strip_dot_slash(b"pkg/./t"), b"pkg/./t");
        assert_eq!(strip_dot_slash(b"../x"), b"../x");
    }

    #[test]
    fn rlocation_of_a_path_relative_to_the_test_directory() {
        let get = |p: &[u8]| rlocation_from_cwd(p, b"ws").map(|r| r.as_bytes().to_vec());
        assert_eq!(get(b"pkg/w"), Some(b"ws/pkg/w".to_vec()));
        assert_eq!(get(b"./pkg/w"), Some(b"ws/pkg/w".to_vec()));
        assert_eq!(get(b"../other/pkg/w"), Some(b"other/pkg/w".to_vec()));
        assert_eq!(get(b"./.././other/w"), Some(b"other/w".to_vec()));
        for bad in [&b""[..], b"./", b"..", b"../", b"../..", b"../../x", b"/abs/w"] {
            assert_eq!(get(bad), None, "{:?}", crate::diag::Bytes(bad));
        }
        assert!(rlocation_from_cwd(b"pkg/w", b"").is_none());
    }
}
