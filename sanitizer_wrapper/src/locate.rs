//! Where the runfiles are, and how a configured path becomes the absolute
//! path that the sanitizers and the chained wrapper get.
//!
//! The directory is `$RUNFILES_DIR`, else `$TEST_SRCDIR`, else
//! `<argv[0]>.runfiles` (the first that is set, whether or not it exists:
//! it is named in messages either way). The manifest is
//! `$RUNFILES_MANIFEST_FILE`, else `<dir>/MANIFEST` when that exists, else
//! `<argv[0]>.runfiles_manifest` when that exists; it is read only when the
//! directory does not have the file. The lookup itself (`<dir>/<rlocation>`,
//! then one scan of the manifest) is wrapper_common's.
//!
//! `<argv[0]>...` candidates are used only when argv[0] holds a `/`: a bare
//! name was found in `PATH` and says nothing about where the runfiles are.

use crate::error::{Error, FileKind, Looked, Shown};
use crate::opt::Opt;
use std::ffi::{CStr, CString};
use wrapper_common::env;
use wrapper_common::paths::absolute;
use wrapper_common::runfiles::{Runfiles, exists, manifest_path};
use wrapper_common::{StackPath, with_joined};

/// The parts of `<argv0><suffix>`, when argv[0] names a path.
fn beside_parts<'a>(argv0: &'a [u8], suffix: &'a [u8]) -> Option<[&'a [u8]; 2]> {
    argv0.contains(&b'/').then_some([argv0, suffix])
}

/// The parts of the runfiles directory to look in: `$RUNFILES_DIR`, else
/// `$TEST_SRCDIR`, else `<argv0>.runfiles`.
fn runfiles_dir_parts(argv0: &[u8]) -> Option<[&[u8]; 2]> {
    match env::var_nonempty(b"RUNFILES_DIR").or_else(|| env::var_nonempty(b"TEST_SRCDIR")) {
        Some(dir) => Some([dir, b""]),
        None => beside_parts(argv0, b".runfiles"),
    }
}

fn kept(parts: [&[u8]; 2]) -> Option<StackPath> {
    let mut path = StackPath::new();
    path.push_all(&parts, None).ok()?;
    Some(path)
}

/// `<argv0><suffix>`, when argv[0] names a path.
pub fn beside_argv0(argv0: &[u8], suffix: &[u8]) -> Option<StackPath> {
    kept(beside_parts(argv0, suffix)?)
}

/// [`beside_argv0`] built in a short buffer for `f` ([`with_joined`]).
pub fn with_beside_argv0<R>(argv0: &[u8], suffix: &[u8], f: impl FnOnce(&CStr) -> R) -> Option<R> {
    with_joined(&beside_parts(argv0, suffix)?, None, f)
}

/// The runfiles directory to look in (it may not exist).
pub fn runfiles_dir(argv0: &[u8]) -> Option<StackPath> {
    kept(runfiles_dir_parts(argv0)?)
}

/// Is the runfiles directory [`runfiles_dir`] names a directory? Built in
/// a short buffer ([`with_joined`]), not a 4 KiB copy.
pub fn runfiles_dir_is_directory(argv0: &[u8]) -> bool {
    let is_dir = |path: &CStr| {
        rustix::fs::stat(path)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
    };
    runfiles_dir_parts(argv0).and_then(|parts| with_joined(&parts, None, is_dir)).unwrap_or(false)
}

/// The runfiles manifest to read, given the directory candidate.
pub fn manifest(dir: Option<&StackPath>, argv0: &[u8]) -> Option<StackPath> {
    manifest_path(dir.map(StackPath::as_bytes)).or_else(|| beside_argv0(argv0, b".runfiles_manifest").filter(exists))
}

/// Both places to look, for a wrapper started as `argv0`.
pub fn discover(argv0: &[u8]) -> Runfiles {
    let dir = runfiles_dir(argv0);
    let manifest = manifest(dir.as_ref(), argv0);
    Runfiles { dir, manifest }
}

/// The absolute path of the file that `option`'s `value` names: an absolute
/// path that exists, or a runfiles path found in `runfiles`.
/// Never inlined: its 4 KiB paths are then on the stack once, while one
/// file is resolved, not once per configured file in the caller's frame.
#[inline(never)]
pub fn resolve(runfiles: &Runfiles, option: Opt, value: &[u8]) -> Result<CString, Error> {
    // Only the first 4000 bytes of an impossible value are worth quoting.
    let unresolved = |looked| Error::Unresolved { option, path: value[..value.len().min(4000)].into(), looked };
    if value.first() == Some(&b'/') {
        let path = StackPath::from_bytes(value).map_err(|_| unresolved(Looked::Absolute(None)))?;
        // A path in a directory this user may not enter is said as such,
        // not as missing.
        return match rustix::fs::access(path.as_cstr(), rustix::fs::Access::EXISTS) {
            Ok(()) => Ok(path.as_cstr().to_owned()),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Err(unresolved(Looked::Absolute(None))),
            Err(e) => Err(unresolved(Looked::Absolute(Some(e)))),
        };
    }
    let shown = |p: &StackPath| -> Shown { p.as_bytes().into() };
    let Some(found) = runfiles.rlocation(value) else {
        let dir_path = runfiles.dir.as_ref().and_then(|d| {
            let mut p = d.clone();
            p.push_path(value).ok()?;
            Some(shown(&p))
        });
        // A manifest that is missing or no file is said as such.
        let unreadable =
            runfiles.manifest.as_ref().and_then(|m| wrapper_common::lines::open_for_reading(m.as_cstr()).err());
        let unreadable = unreadable.or_else(|| {
            let m = runfiles.manifest.as_ref()?;
            let st = rustix::fs::stat(m.as_cstr()).ok()?;
            (rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
                .then_some(rustix::io::Errno::ISDIR)
        });
        let manifest = runfiles.manifest.as_ref().map(shown);
        return Err(unresolved(Looked::Runfiles { dir_path, manifest, unreadable }));
    };
    // The tree is only ever answered with a path that exists; a manifest
    // entry is taken at its word, so check it here rather than leave a
    // sanitizer to fail on a missing file later.
    if !exists(&found) {
        let manifest = runfiles.manifest.as_ref().map(shown).unwrap_or_default();
        return Err(unresolved(Looked::ManifestTarget { manifest, target: shown(&found) }));
    }
    absolute(found.as_bytes())
        .map(|path| path.as_cstr().to_owned())
        .map_err(|errno| Error::System { what: "cannot name the working directory", errno })
}

/// [`resolve`] for a file that the sanitizer runtime reads (a suppression
/// list) or runs (the symbolizer): it must also be a regular file, or a
/// path that leads to one, that this user may read or run (`access`). A
/// directory, FIFO or device, or a file the test may not read or run,
/// would otherwise reach the runtime, which fails on it (or blocks reading
/// a FIFO, or symbolizes nothing) only after the test has started.
pub fn resolve_usable_file(
    runfiles: &Runfiles,
    option: Opt,
    value: &[u8],
    access: rustix::fs::Access,
) -> Result<CString, Error> {
    let path = resolve(runfiles, option, value)?;
    let st = rustix::fs::stat(path.as_c_str())
        .map_err(|errno| Error::System { what: "cannot stat a configured file", errno })?;
    // Only the first 4000 bytes of an impossible value are worth quoting.
    let path_shown: Shown = value[..value.len().min(4000)].into();
    let resolved = || (path.as_bytes() != value).then(|| path.as_bytes().into());
    if let Some(kind) = FileKind::of(st.st_mode) {
        return Err(Error::NotAFile { option, path: path_shown, resolved: resolved(), kind });
    }
    match rustix::fs::access(path.as_c_str(), access) {
        Ok(()) => Ok(path),
        Err(errno) => Err(Error::Refused { option, path: path_shown, resolved: resolved(), errno }),
    }
}
