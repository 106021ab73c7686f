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

use crate::cli::Opt;
use crate::error::{Error, Looked};
use std::ffi::{CStr, CString};
use wrapper_common::env;
use wrapper_common::paths::absolute;
use wrapper_common::runfiles::{Runfiles, exists, manifest_path};
use wrapper_common::{StackPath, with_joined};

/// `<argv0><suffix>`, when argv[0] names a path.
pub fn beside_argv0(argv0: &[u8], suffix: &[u8]) -> Option<StackPath> {
    if !argv0.contains(&b'/') {
        return None;
    }
    let mut path = StackPath::from_bytes(argv0).ok()?;
    path.push(suffix).ok()?;
    Some(path)
}

/// The runfiles directory to look in (it may not exist).
pub fn runfiles_dir(argv0: &[u8]) -> Option<StackPath> {
    match env::var_nonempty(b"RUNFILES_DIR").or_else(|| env::var_nonempty(b"TEST_SRCDIR")) {
        Some(dir) => StackPath::from_bytes(dir).ok(),
        None => beside_argv0(argv0, b".runfiles"),
    }
}

/// Is the runfiles directory [`runfiles_dir`] names a directory? Without
/// a 4 KiB copy of it: the variable's own string, or `<argv0>.runfiles` in
/// a short buffer.
pub fn runfiles_dir_is_directory(argv0: &[u8]) -> bool {
    let is_dir = |path: &CStr| {
        rustix::fs::stat(path)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
    };
    match env::var_nonempty_cstr(b"RUNFILES_DIR").or_else(|| env::var_nonempty_cstr(b"TEST_SRCDIR")) {
        Some(dir) => is_dir(dir),
        None => argv0.contains(&b'/') && with_joined(&[argv0, b".runfiles"], None, is_dir).unwrap_or(false),
    }
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
        return match StackPath::from_bytes(value) {
            Ok(path) if exists(&path) => Ok(path.as_cstr().to_owned()),
            _ => Err(unresolved(Looked::Absolute)),
        };
    }
    let shown = |p: &StackPath| -> Box<[u8]> { p.as_bytes().into() };
    let Some(found) = runfiles.rlocation(value) else {
        let dir_path = runfiles.dir.as_ref().and_then(|d| {
            let mut p = d.clone();
            p.push_path(value).ok()?;
            Some(shown(&p))
        });
        return Err(unresolved(Looked::Runfiles { dir_path, manifest: runfiles.manifest.as_ref().map(shown) }));
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
