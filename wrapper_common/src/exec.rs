//! Replacing the wrapper with the test: `execve`, with the `PATH` search and
//! the exit codes of a shell's `exec`.
//!
//! Exit codes follow the shell (and tini): 127 when the program does not
//! exist, 126 when it exists but cannot be executed. As bash, a program
//! that exists but whose `#!` interpreter does not is 126 ("bad
//! interpreter"), one whose ELF loader does not is 127, and each is named;
//! a binary the kernel does not run (another architecture's ELF) is 126,
//! never handed to `/bin/sh`.

use crate::cbuf::{separator, with_joined};
use crate::diag::{Bytes, Os};
use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::ffi::CString;
use alloc::vec;
use alloc::vec::Vec;
use core::ffi::{CStr, c_char};
use core::fmt;
use rustix::io::Errno;

/// Why the test could not be started.
///
/// The path is on the heap, not in a [`StackPath`](crate::StackPath): a
/// failure travels up through the `Result` slot of every caller, and a 4 KiB
/// buffer there puts 4 KiB more on each of their frames, which start-up then
/// faults in on the paths that never fail (README, "Where the time goes").
/// It is built once, on the way out.
#[derive(Debug)]
pub struct ExecFailure {
    /// The path that was tried last (or the name, when no PATH entry fit).
    pub path: Box<[u8]>,
    pub errno: Errno,
    /// Where the file exists but `execve` found nothing (`ENOENT`): what
    /// was missing.
    missing: Option<Missing>,
}

/// What a program that exists needs and does not find.
#[derive(Debug)]
enum Missing {
    /// The interpreter its `#!` line names, and whether a file is there
    /// (then what that one needs is missing).
    Interpreter(Box<[u8]>, bool),
    /// Its ELF loader (`PT_INTERP`).
    Loader,
}

impl ExecFailure {
    fn new(path: &[u8], errno: Errno) -> ExecFailure {
        let missing = if errno == Errno::NOENT && has_slash(path) { missing_part(path) } else { None };
        // `execve` of a directory says EACCES; a shell says what it is.
        let errno = if errno == Errno::ACCESS && has_slash(path) && is_directory(path) { Errno::ISDIR } else { errno };
        ExecFailure { path: path.into(), errno, missing }
    }

    /// True when nothing was found at all (exit 127) rather than found but
    /// not executable (exit 126).
    pub fn is_not_found(&self) -> bool {
        not_found(self.errno) && self.missing.is_none()
    }

    pub fn exit_code(&self) -> u8 {
        match self.missing {
            Some(Missing::Interpreter(..)) => 126,
            Some(Missing::Loader) => 127,
            None if self.is_not_found() => 127,
            None => 126,
        }
    }
}

impl fmt::Display for ExecFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = Bytes(&self.path);
        match &self.missing {
            Some(Missing::Interpreter(i, true)) => write!(
                f,
                "cannot execute: {path}: its #! interpreter '{}' cannot be started (what it needs in turn, its own interpreter or ELF loader, does not exist)",
                Bytes(i)
            ),
            Some(Missing::Interpreter(i, false)) => {
                let crlf = if i.ends_with(b"\r") {
                    " (its first line ends in a carriage return: the file has Windows line endings; convert it, as dos2unix does)"
                } else {
                    ""
                };
                write!(f, "cannot execute: {path}: its #! interpreter '{}' does not exist{crlf}", Bytes(i))
            }
            Some(Missing::Loader) => write!(
                f,
                "cannot execute: {path}: its ELF loader (the dynamic linker it names) does not exist here (built for another system or C library?)"
            ),
            None => {
                let what = if self.is_not_found() { "not found" } else { "cannot execute" };
                // An empty word as the test: said as one, not as nothing.
                let empty = if self.path.is_empty() { "'' (an empty name)" } else { "" };
                write!(f, "{what}: {path}{empty}: {}", Os(self.errno))
            }
        }
    }
}

/// The first bytes of the file at `path`: what the kernel reads to choose
/// how to run it. `None` when it cannot be read.
fn head(path: &[u8]) -> Option<([u8; 256], usize)> {
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC | rustix::fs::OFlags::NOCTTY;
    let fd = with_joined(&[path], None, |p| rustix::fs::open(p, flags, rustix::fs::Mode::empty()))?.ok()?;
    let mut buf = [0u8; 256];
    let n = rustix::io::read(&fd, &mut buf).ok()?;
    Some((buf, n))
}

/// Why `execve` found nothing where the file `path` exists: its `#!`
/// interpreter, or its ELF loader. Only on the way out of a failed exec.
#[cold]
fn missing_part(path: &[u8]) -> Option<Missing> {
    let (buf, n) = head(path)?;
    let bytes = &buf[..n];
    if let Some(line) = bytes.strip_prefix(b"#!") {
        // As the kernel reads it: blanks, then the name up to a blank or
        // the end of the line (a carriage return is part of the name).
        let line = &line[line.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(line.len())..];
        let end = line.iter().position(|&b| matches!(b, b' ' | b'\t' | b'\n')).unwrap_or(line.len());
        let interpreter = &line[..end];
        let there = with_joined(&[interpreter], None, |p| rustix::fs::stat(p).is_ok()).unwrap_or(false);
        return Some(Missing::Interpreter(interpreter.into(), there));
    }
    bytes.starts_with(b"\x7fELF").then_some(Missing::Loader)
}

#[cold]
fn is_directory(path: &[u8]) -> bool {
    with_joined(&[path], None, |p| rustix::fs::stat(p))
        .and_then(Result::ok)
        .is_some_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
}

/// Whether the file at `path` is a binary, which `/bin/sh` must not be
/// given: ELF, or a NUL in its first line (bash's test).
fn is_binary(path: &CStr) -> bool {
    head(path.to_bytes()).is_some_and(|(buf, n)| {
        let bytes = &buf[..n];
        let line = &bytes[..bytes.iter().position(|&b| b == b'\n').unwrap_or(n)];
        bytes.starts_with(b"\x7fELF") || line.contains(&0)
    })
}

/// Errors that mean "nothing there" (127) rather than "cannot run it" (126).
fn not_found(errno: Errno) -> bool {
    matches!(errno, Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG | Errno::LOOP)
}

fn has_slash(name: &[u8]) -> bool {
    name.contains(&b'/')
}

/// The directories `execvp` would search for `name`.
fn search_path() -> &'static [u8] {
    crate::env::var(b"PATH").unwrap_or(b"/bin:/usr/bin")
}

/// A PATH entry as a directory: an empty entry is the current directory,
/// as in execvp.
fn entry_dir(dir: &[u8]) -> &[u8] {
    if dir.is_empty() { b"." } else { dir }
}

/// Calls `f` with the PATH entry `dir` joined to `name`, built in a short
/// buffer ([`with_joined`]); `None` when no such path can be built.
fn with_candidate<R>(dir: &[u8], name: &[u8], f: impl FnOnce(&CStr) -> R) -> Option<R> {
    let dir = entry_dir(dir);
    with_joined(&[dir, separator(dir), name], None, f)
}

/// Finds the file `exec` would run, without running it: `name` itself when it
/// contains a slash, else the first executable regular file named `name` in
/// `PATH`. Used to fail fast (127/126) before waiting for a GPU.
///
/// On the GPU path only, which builds the test's environment on the heap
/// anyway: the answer is a `CString`, and each PATH candidate is built in a
/// short buffer ([`with_joined`]). The search keeps only an `Errno` and a
/// slice per failure; the failure is built once, out of line, on the way
/// out. Never inlined, so that its callers' frames do not grow by its
/// buffers.
#[inline(never)]
pub fn resolve(name: &CStr) -> Result<CString, ExecFailure> {
    let bytes = name.to_bytes();
    if bytes.is_empty() {
        return Err(failure(None, bytes, Errno::NOENT));
    }
    if has_slash(bytes) {
        return match probe_executable(name) {
            Ok(()) => Ok(name.to_owned()),
            Err(e) => Err(failure(None, bytes, e)),
        };
    }
    // As execvp: a candidate that exists but cannot be run is remembered,
    // and the search goes on; "not found" only when nothing was found.
    let mut denied: Option<(&[u8], Errno)> = None;
    for dir in search_path().split(|&b| b == b':') {
        let tried = with_candidate(dir, bytes, |candidate| probe_executable(candidate).map(|()| candidate.to_owned()));
        match tried {
            Some(Ok(found)) => return Ok(found),
            Some(Err(e)) if !not_found(e) => {
                denied.get_or_insert((dir, e));
            }
            _ => {}
        }
    }
    Err(match denied {
        Some((dir, e)) => failure(Some(dir), bytes, e),
        None => failure(None, bytes, Errno::NOENT),
    })
}

/// The failure for `name` tried in the PATH entry `dir` (as [`with_candidate`] joins
/// it), or for `name` itself.
#[cold]
#[inline(never)]
fn failure(dir: Option<&[u8]>, name: &[u8], errno: Errno) -> ExecFailure {
    dir.and_then(|dir| with_candidate(dir, name, |path| ExecFailure::new(path.to_bytes(), errno)))
        .unwrap_or_else(|| ExecFailure::new(name, errno))
}

/// Is `path` a regular file this process may execute?
pub fn check_executable(path: &CStr) -> Result<(), ExecFailure> {
    probe_executable(path).map_err(|e| failure(None, path.to_bytes(), e))
}

/// [`check_executable`] without the failure's path buffer: `EISDIR` for a
/// directory, `EACCES` for anything else but a regular file, else what
/// `access(X_OK)` says.
fn probe_executable(path: &CStr) -> Result<(), Errno> {
    let st = rustix::fs::stat(path)?;
    match rustix::fs::FileType::from_raw_mode(st.st_mode) {
        rustix::fs::FileType::RegularFile => {}
        rustix::fs::FileType::Directory => return Err(Errno::ISDIR),
        _ => return Err(Errno::ACCESS),
    }
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK)
}

/// `execve`, retried when interrupted. Returns only on failure.
fn execve(path: &CStr, argv: *const *const c_char, envp: *const *const c_char) -> Errno {
    loop {
        // SAFETY: `path` is a valid C string; `argv` and `envp` are
        // NULL-terminated arrays of valid C strings (callers' contract of
        // `exec`). execve only returns on failure.
        unsafe { libc::execve(path.as_ptr(), argv, envp) };
        let errno = crate::last_errno();
        if errno != Errno::INTR {
            return errno;
        }
    }
}

/// A file the kernel will not execute (no `#!` line, not ELF) is run by
/// `/bin/sh`, as execvp and a shell's `exec` do, unless it is a binary
/// (another architecture's ELF): that stays `ENOEXEC`, 126. This rare path
/// allocates.
fn exec_as_script(path: &CStr, argv: *const *const c_char, envp: *const *const c_char) -> Errno {
    if is_binary(path) {
        return Errno::NOEXEC;
    }
    let mut sh_argv: Vec<*const c_char> = vec![c"/bin/sh".as_ptr(), path.as_ptr()];
    // SAFETY: argv is a NULL-terminated array (contract of `exec`); its
    // first entry is the program name, replaced here by the script path.
    unsafe {
        if !(*argv).is_null() {
            let mut p = argv.add(1);
            while !(*p).is_null() {
                sh_argv.push(*p);
                p = p.add(1);
            }
        }
    }
    sh_argv.push(core::ptr::null());
    execve(c"/bin/sh", sh_argv.as_ptr(), envp)
}

/// Replaces this process with `program`: searched in `PATH` when it has no
/// slash, run by `/bin/sh` when the kernel does not recognise its format.
/// Returns only on failure. No allocation unless the `/bin/sh` fallback runs.
///
/// `argv` and `envp` must be NULL-terminated arrays of valid C strings.
pub fn exec(program: &CStr, argv: *const *const c_char, envp: *const *const c_char) -> ExecFailure {
    let name = program.to_bytes();
    if name.is_empty() {
        return ExecFailure::new(name, Errno::NOENT);
    }
    if has_slash(name) {
        let mut errno = execve(program, argv, envp);
        if errno == Errno::NOEXEC {
            errno = exec_as_script(program, argv, envp);
        }
        return ExecFailure::new(name, errno);
    }
    // As execvp: the last candidate that refused (EACCES) is the failure
    // when no candidate ran; else "not found". Only a `PATH` entry is kept
    // per failure, and the failure is built on the way out: a successful
    // exec allocates nothing and carries no 4 KiB candidate buffer.
    let mut denied: Option<&[u8]> = None;
    for dir in search_path().split(|&b| b == b':') {
        let tried = with_candidate(dir, name, |candidate| {
            let errno = execve(candidate, argv, envp);
            if errno == Errno::NOEXEC { exec_as_script(candidate, argv, envp) } else { errno }
        });
        match tried {
            None => {}
            Some(Errno::ACCESS) => denied = Some(dir),
            Some(Errno::NOENT | Errno::NOTDIR | Errno::STALE | Errno::NODEV | Errno::TIMEDOUT) => {}
            Some(other) => return failure(Some(dir), name, other),
        }
    }
    match denied {
        Some(dir) => failure(Some(dir), name, Errno::ACCESS),
        None => ExecFailure::new(name, Errno::NOENT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::prelude::rust_2024::*;

    #[test]
    fn resolve_finds_programs_in_path() {
        let sh = resolve(c"sh").expect("sh is in PATH on any test machine");
        assert!(sh.as_bytes().ends_with(b"/sh"), "{sh:?}");
    }

    #[test]
    fn resolve_reports_missing_and_non_executable() {
        let missing = resolve(c"/nonexistent/dir/prog").unwrap_err();
        assert_eq!(missing.exit_code(), 127);
        let missing = resolve(c"no-such-program-anywhere-4242").unwrap_err();
        assert_eq!(missing.exit_code(), 127);
        let dir = resolve(c"/").unwrap_err();
        assert_eq!(dir.exit_code(), 126);
        assert!(dir.to_string().starts_with("cannot execute: /: Is a directory"), "{dir}");
        let empty = resolve(c"").unwrap_err();
        assert_eq!(empty.exit_code(), 127);
    }

    #[test]
    fn a_missing_interpreter_or_loader_is_named() {
        let dir = std::env::temp_dir().join(std::format!("gpuci-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).to_vec()
        };
        let crlf = ExecFailure::new(&file("crlf", b"#!/bin/sh\r\necho\r\n"), Errno::NOENT);
        assert_eq!(crlf.exit_code(), 126);
        let msg = crlf.to_string();
        assert!(msg.contains(": its #! interpreter '/bin/sh\\x0d' does not exist (its first line ends"), "{msg}");
        let env = ExecFailure::new(&file("env", b"#! \t/no/such/env python3\n"), Errno::NOENT);
        assert!(env.to_string().ends_with(": its #! interpreter '/no/such/env' does not exist"), "{env}");
        let elf = ExecFailure::new(&file("elf", b"\x7fELF\x02\x01\x01"), Errno::NOENT);
        assert_eq!(elf.exit_code(), 127);
        assert!(elf.to_string().contains(": its ELF loader"), "{elf}");
        let gone = ExecFailure::new(dir.join("gone").to_str().unwrap().as_bytes(), Errno::NOENT);
        assert!(gone.to_string().starts_with("not found: ") && gone.exit_code() == 127, "{gone}");
        let chained = ExecFailure::new(&file("chained", b"#!/bin/sh\n"), Errno::NOENT);
        assert!(chained.to_string().contains(": its #! interpreter '/bin/sh' cannot be started"), "{chained}");
        let plain = ExecFailure::new(&file("plain", b"echo hi\n"), Errno::NOENT);
        assert!(plain.to_string().starts_with("not found: "), "{plain}");
        let p = |name: &str| CString::new(dir.join(name).to_str().unwrap()).unwrap();
        assert!(is_binary(&p("elf")));
        std::fs::write(dir.join("nul"), b"abc\0def\n").unwrap();
        assert!(is_binary(&p("nul")));
        assert!(!is_binary(&p("plain")) && !is_binary(&p("crlf")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn messages_name_the_path() {
        let e = resolve(c"/nonexistent/prog").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("not found: /nonexistent/prog: "), "{msg}");
        let empty = resolve(c"").unwrap_err().to_string();
        assert!(empty.starts_with("not found: '' (an empty name): "), "{empty}");
    }
}
