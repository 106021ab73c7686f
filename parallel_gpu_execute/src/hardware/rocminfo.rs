//! The last hardware source: a `rocminfo` shipped in the test's runfiles.
//!
//! Counting: the GPU agents, that is the agents whose `Device Type:` is
//! `GPU`, when the output has `Device Type:` lines (every rocminfo since
//! ROCm 1.x prints one per agent). Only an output without any falls back to
//! the classic `grep 'Name: *gfx*'`, which also matches a
//! `Marketing Name: gfx...` line and so can count an agent twice.
//!
//! Finding it: the runfiles manifest names every runfile, so when there is one
//! a single read of it finds any entry ending in `/bin/rocminfo`; only when
//! there is no manifest is the tree walked (following symlinks, as the
//! classic `find -L` did, with loops detected). Running it: fork and exec
//! with its stdout on a pipe, counting as the output streams by and keeping
//! its end, where rocminfo prints why it failed (`output_tail`). None of
//! this allocates.

use crate::sys::dirs::{for_each_entry, open_dir, open_dir_at};
use crate::sys::output_tail::OutputTail;
use core::ffi::{CStr, c_char};
use core::ops::ControlFlow;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;
use wrapper_common::StackPath;
use wrapper_common::exec::check_executable;
use wrapper_common::runfiles::{ManifestEntry, scan_manifest, unescape_into};
use wrapper_common::{diag, env};
use wrapper_common::{separator, with_joined};

/// Directory levels below the runfiles root that the walk descends.
const MAX_DEPTH: usize = 64;

/// Counts lines matching the basic regular expression `Name: *gfx*`: the text
/// `Name:`, any number of spaces, then `gf` (`x*` also matches no `x`).
/// Fed in arbitrary chunks; lines may be of any length.
#[derive(Debug, Default)]
pub struct GfxLineCounter {
    state: MatchState,
    line_matched: bool,
    count: u64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum MatchState {
    /// `n` bytes of `Name:` matched so far.
    #[default]
    Start,
    Prefix(u8),
    /// `Name:` and possibly spaces seen.
    Spaces,
    /// ... then `g`.
    G,
}

impl GfxLineCounter {
    const PREFIX: &'static [u8] = b"Name:";

    /// The state after `b` when nothing is in progress. `Name:` has no
    /// border (no proper prefix that is also a suffix), so a failed partial
    /// match can restart from scratch at the current byte.
    fn restart(b: u8) -> MatchState {
        if b == Self::PREFIX[0] { MatchState::Prefix(1) } else { MatchState::Start }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if b == b'\n' {
                if self.line_matched {
                    self.count += 1;
                }
                self.line_matched = false;
                self.state = MatchState::Start;
                continue;
            }
            if self.line_matched {
                continue;
            }
            self.state = match self.state {
                MatchState::Start => Self::restart(b),
                MatchState::Prefix(n) if b == Self::PREFIX[usize::from(n)] => {
                    if usize::from(n) + 1 == Self::PREFIX.len() {
                        MatchState::Spaces
                    } else {
                        MatchState::Prefix(n + 1)
                    }
                }
                MatchState::Prefix(_) => Self::restart(b),
                MatchState::Spaces if b == b' ' => MatchState::Spaces,
                MatchState::Spaces if b == b'g' => MatchState::G,
                MatchState::Spaces => Self::restart(b),
                MatchState::G if b == b'f' => {
                    self.line_matched = true;
                    MatchState::Start
                }
                MatchState::G => Self::restart(b),
            };
        }
    }

    /// The count, including a last line without a newline.
    pub fn finish(mut self) -> u64 {
        if self.line_matched {
            self.count += 1;
        }
        self.count
    }

    /// Counts a whole output held in memory.
    pub fn count(output: &[u8]) -> u64 {
        let mut c = GfxLineCounter::default();
        c.feed(output);
        c.finish()
    }
}

/// Longest line the agent scanner looks at; longer ones are cut (the keys
/// it needs are near the start).
const SCAN_LINE: usize = 256;

/// Counts GPU agents (`Device Type: GPU`) in rocminfo output fed in
/// arbitrary chunks, and reports each one's `Name:` (its gfx target, e.g.
/// `gfx942`; with `HSA_OVERRIDE_GFX_VERSION` the overridden one).
pub struct AgentScanner {
    line: [u8; SCAN_LINE],
    len: usize,
    /// The current agent's own `Name:` (the first one after `Agent N`;
    /// later ones belong to its ISA list).
    name: [u8; 64],
    name_len: Option<usize>,
    typed: bool,
    saw_device_type: bool,
    gpus: u64,
    classic: GfxLineCounter,
}

impl Default for AgentScanner {
    fn default() -> Self {
        AgentScanner {
            line: [0; SCAN_LINE],
            len: 0,
            name: [0; 64],
            name_len: None,
            typed: false,
            saw_device_type: false,
            gpus: 0,
            classic: GfxLineCounter::default(),
        }
    }
}

/// `Key:` at the start of `line` (after blanks), and the trimmed value.
fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    line.trim_ascii_start().strip_prefix(key).and_then(|r| r.strip_prefix(b":")).map(<[u8]>::trim_ascii)
}

impl AgentScanner {
    pub fn feed(&mut self, chunk: &[u8], on_gpu: &mut impl FnMut(&[u8])) {
        self.classic.feed(chunk);
        for &b in chunk {
            if b == b'\n' {
                self.end_line(on_gpu);
            } else if self.len < SCAN_LINE {
                self.line[self.len] = b;
                self.len += 1;
            }
        }
    }

    fn end_line(&mut self, on_gpu: &mut impl FnMut(&[u8])) {
        let line = &self.line[..self.len];
        let trimmed = line.trim_ascii();
        if trimmed.strip_prefix(b"Agent ").is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit)) {
            self.name_len = None;
            self.typed = false;
        } else if let Some(value) = field(line, b"Name") {
            if self.name_len.is_none() && !self.typed {
                let n = value.len().min(self.name.len());
                self.name[..n].copy_from_slice(&value[..n]);
                self.name_len = Some(n);
            }
        } else if let Some(value) = field(line, b"Device Type") {
            self.saw_device_type = true;
            if !self.typed && value == b"GPU" {
                self.gpus += 1;
                on_gpu(&self.name[..self.name_len.unwrap_or(0)]);
            }
            self.typed = true;
        }
        self.len = 0;
    }

    /// The GPU count: agents typed GPU, or the classic count for an output
    /// without `Device Type:` lines.
    pub fn finish(mut self, on_gpu: &mut impl FnMut(&[u8])) -> u64 {
        if self.len > 0 {
            self.end_line(on_gpu);
        }
        if self.saw_device_type { self.gpus } else { self.classic.finish() }
    }

    /// Counts a whole output held in memory.
    pub fn count(output: &[u8]) -> u64 {
        let mut s = AgentScanner::default();
        s.feed(output, &mut |_| {});
        s.finish(&mut |_| {})
    }
}

/// Where the runfiles are: `TEST_SRCDIR`, else `RUNFILES_DIR`.
fn runfiles_dir() -> Option<&'static [u8]> {
    env::var_nonempty(b"TEST_SRCDIR").or_else(|| env::var_nonempty(b"RUNFILES_DIR"))
}

/// Finds `rocminfo` in the runfiles (a path ending in `/bin/rocminfo`
/// that is an executable file) and calls `f` with its path; `None` when
/// there is none.
///
/// The path is handed to `f` rather than returned: a returned 4 KiB path
/// would need a slot in every caller's frame, probed and faulted in on every
/// run that finds nothing, which is nearly all of them. The manifest scan and
/// the tree walk are never inlined here: each has buffers of its own, and only
/// the one that runs should have its stack pages touched.
///
/// The manifest is `$RUNFILES_MANIFEST_FILE` when set, else
/// `<runfiles>/MANIFEST`; the latter is opened without an existence check
/// first (one path lookup less), and only its absence sends the search to
/// the tree walk.
pub fn find<R>(f: impl FnOnce(&StackPath) -> R) -> Option<R> {
    let dir = runfiles_dir();
    let mut f = Some(f);
    if let Some(named) = env::var_nonempty_cstr(b"RUNFILES_MANIFEST_FILE") {
        return find_in_manifest(named, dir, &mut f).ok().flatten();
    }
    let dir = dir?;
    match with_joined(&[dir, separator(dir), b"MANIFEST"], None, |m| find_in_manifest(m, Some(dir), &mut f)) {
        Some(Ok(found)) => found,
        Some(Err(Errno::NOENT | Errno::NOTDIR)) | None => find_in_tree(dir, f?),
        Some(Err(_)) => None,
    }
}

#[inline(never)]
fn find_in_tree<R>(dir: &[u8], f: impl FnOnce(&StackPath) -> R) -> Option<R> {
    let mut path = StackPath::new();
    path.push(dir).ok()?;
    let root = open_dir(path.as_cstr()).ok()?;
    let mut ancestors = [(0u64, 0u64); MAX_DEPTH + 1];
    walk(&root, &mut path, false, &mut ancestors, 0).then(|| f(&path))
}

/// Scans the manifest; an entry whose rlocation ends in `/bin/rocminfo` is
/// looked at out of line ([`try_manifest_entry`]), so that the scan's own
/// frame, entered for every line, holds no path buffer.
#[inline(never)]
fn find_in_manifest<R, F: FnOnce(&StackPath) -> R>(
    manifest: &CStr,
    dir: Option<&[u8]>,
    f: &mut Option<F>,
) -> Result<Option<R>, Errno> {
    let mut result = None;
    scan_manifest(manifest, |entry| {
        let candidate = if entry.escaped {
            escaped_ends_with(entry.rlocation, ROCMINFO_SUFFIX)
        } else {
            entry.rlocation.ends_with(ROCMINFO_SUFFIX)
        };
        if candidate && try_manifest_entry(entry, dir, f, &mut result) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })?;
    Ok(result)
}

const ROCMINFO_SUFFIX: &[u8] = b"/bin/rocminfo";

/// Does the escaped manifest text `text` end in `suffix` once unescaped?
/// The suffix holds no space, newline or backslash, so only a `\s`, `\n` or
/// `\b` escape within its length could change the answer; such a line is
/// unescaped in full, out of line.
fn escaped_ends_with(text: &[u8], suffix: &[u8]) -> bool {
    if !text.contains(&b'\\') {
        return text.ends_with(suffix);
    }
    unescaped_ends_with(text, suffix)
}

#[cold]
#[inline(never)]
fn unescaped_ends_with(text: &[u8], suffix: &[u8]) -> bool {
    let mut plain = StackPath::new();
    unescape_into(text, true, &mut plain).is_ok() && plain.as_bytes().ends_with(suffix)
}

/// One manifest entry naming a rocminfo: its path in the runfiles tree (what
/// the classic `find` printed) when that is executable, else the manifest's
/// target when that is. True when one was, and `f` was called with it.
#[cold]
#[inline(never)]
fn try_manifest_entry<R, F: FnOnce(&StackPath) -> R>(
    entry: &ManifestEntry<'_>,
    dir: Option<&[u8]>,
    f: &mut Option<F>,
    result: &mut Option<R>,
) -> bool {
    let mut rlocation = StackPath::new();
    if entry.rlocation_into(&mut rlocation).is_err() || !rlocation.as_bytes().ends_with(ROCMINFO_SUFFIX) {
        return false;
    }
    let mut path = StackPath::new();
    let in_tree = dir.is_some_and(|dir| {
        path.push(dir).is_ok()
            && path.push_path(rlocation.as_bytes()).is_ok()
            && check_executable(path.as_cstr()).is_ok()
    });
    if !in_tree {
        path.truncate(0);
        if entry.target_into(&mut path).is_err() || path.is_empty() || check_executable(path.as_cstr()).is_err() {
            return false;
        }
    }
    match f.take() {
        Some(f) => {
            *result = Some(f(&path));
            true
        }
        None => false,
    }
}

/// Depth-first search for `bin/rocminfo` below `dir` (whose path is `path`),
/// following symlinks. `ancestors` holds the (device, inode) of each
/// directory on the current path, so a symlink loop is not followed.
/// True when found, with `path` left naming it; else `path` is as it was.
/// The path is built in the one buffer, so each level of the recursion
/// adds only its directory read to the stack.
fn walk(
    dir: &OwnedFd,
    path: &mut StackPath,
    in_bin: bool,
    ancestors: &mut [(u64, u64); MAX_DEPTH + 1],
    depth: usize,
) -> bool {
    let Ok(st) = rustix::fs::fstat(dir) else { return false };
    let id = (st.st_dev, st.st_ino);
    if ancestors[..depth].contains(&id) {
        return false;
    }
    ancestors[depth] = id;
    let saved = path.len();
    let found = for_each_entry(dir, |name, file_type| {
        let name_bytes = name.to_bytes();
        if path.push_path(name_bytes).is_err() {
            return ControlFlow::Continue(());
        }
        let is_dir = match file_type {
            FileType::Directory => true,
            FileType::Symlink | FileType::Unknown => {
                matches!(rustix::fs::statat(dir, name, AtFlags::empty()),
                         Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory)
            }
            _ => false,
        };
        let found = if in_bin && name_bytes == b"rocminfo" && !is_dir {
            check_executable(path.as_cstr()).is_ok()
        } else if is_dir && depth < MAX_DEPTH {
            open_dir_at(dir, name).is_ok_and(|sub| walk(&sub, path, name_bytes == b"bin", ancestors, depth + 1))
        } else {
            false
        };
        if found {
            return ControlFlow::Break(());
        }
        path.truncate(saved);
        ControlFlow::Continue(())
    });
    matches!(found, Ok(Some(())))
}

/// What running rocminfo gave.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    pub gpus: u64,
    /// The wait status, as `waitpid` gives it.
    pub wait_status: i32,
    /// The end of its output (where rocminfo prints its errors).
    pub tail: OutputTail,
}

/// Runs `rocminfo` with its stdout on a pipe and counts GPU agents,
/// calling `on_gpu` with each one's name. stderr and stdin are the
/// wrapper's own.
#[inline(never)]
pub fn run(path: &StackPath, mut on_gpu: impl FnMut(&[u8])) -> Result<Report, Errno> {
    let argv: [*const c_char; 2] = [path.as_cstr().as_ptr(), core::ptr::null()];
    let mut counter = AgentScanner::default();
    let mut tail = OutputTail::new();
    let status = crate::sys::child::run(&argv, false, |chunk| {
        counter.feed(chunk, &mut on_gpu);
        tail.feed(chunk);
    })?;
    Ok(Report { gpus: counter.finish(&mut on_gpu), wait_status: status, tail })
}

/// Finds and runs rocminfo; `None` when there is none to run. `on_gpu`
/// gets each GPU agent's name.
///
/// Never inlined: its stack buffers (paths, directory reads) then occupy
/// the stack only while it runs, and the pages are reused by the next
/// source instead of all being probed and faulted in at once (see the
/// README's start-up cost notes).
#[inline(never)]
pub fn count_gpus(on_gpu: impl FnMut(&[u8])) -> Option<u64> {
    find(|path| run_and_count(path, on_gpu))
}

/// Runs the rocminfo found at `path`; its GPU count (0, with a warning, when
/// it cannot be run or fails without listing any; the warning is followed by
/// the last lines rocminfo printed, which say why).
fn run_and_count(path: &StackPath, on_gpu: impl FnMut(&[u8])) -> u64 {
    match run(path, on_gpu) {
        Ok(report) => {
            if report.gpus == 0 && report.wait_status != 0 {
                warn_failed(path, &report);
            }
            report.gpus
        }
        Err(errno) => {
            diag::report(
                crate::TOOL,
                format_args!(
                    "warning: cannot run {}: {}; running the test without a GPU",
                    diag::Bytes(path.as_bytes()),
                    diag::Os(errno)
                ),
            );
            0
        }
    }
}

/// The warning for a rocminfo that failed and listed no GPU, and the last
/// lines it printed. Cold and out of line, so that its code stays off the
/// pages the usual paths run through.
#[cold]
#[inline(never)]
fn warn_failed(path: &StackPath, report: &Report) {
    let (what, n) = if libc::WIFSIGNALED(report.wait_status) {
        ("was killed by signal", libc::WTERMSIG(report.wait_status))
    } else {
        ("exited with status", libc::WEXITSTATUS(report.wait_status))
    };
    diag::report(
        crate::TOOL,
        format_args!(
            "warning: {} {what} {n} and listed no GPU; running the test without a GPU",
            diag::Bytes(path.as_bytes())
        ),
    );
    report.tail.for_each_line(|line| {
        diag::report(crate::TOOL, format_args!("rocminfo: {}", diag::Bytes(line)));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn counts_like_grep() {
        let out = b"  Name:                    gfx90a\n  Marketing Name:          AMD Instinct MI210\n  Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-\n  Name:                    AMD EPYC\nName:gfx1100\nName: gf\nName:  g\nNName: gfx\nName:Name: gfx\n";
        // Matches: gfx90a, Marketing Name (its "Name:" is followed by spaces
        // then "AMD", so no), gfx1100, "gf", "NName: gfx", "Name:Name: gfx".
        assert_eq!(GfxLineCounter::count(out), 5);
    }

    #[test]
    fn chunking_does_not_matter() {
        let out = b"  Name:     gfx942\nfoo\n  Name: gfx942";
        let whole = GfxLineCounter::count(out);
        assert_eq!(whole, 2, "last line without newline counts");
        for split in 0..out.len() {
            let mut c = GfxLineCounter::default();
            c.feed(&out[..split]);
            c.feed(&out[split..]);
            assert_eq!(c.finish(), whole, "split at {split}");
        }
    }

    #[test]
    fn gpu_agents_are_counted_by_device_type() {
        let out = b"*******\nAgent 1\n*******\n  Name:                    AMD EPYC 9474F\n  Marketing Name:          AMD EPYC 9474F\n  Device Type:             CPU   \n*******\nAgent 2\n*******\n  Name:                    gfx942   \n  Marketing Name:          gfx942 prototype\n  Device Type:             GPU   \n  ISA Info:\n    ISA 1\n      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-\n*******\nAgent 3\n*******\n  Name:                    gfx1036\n  Device Type:             GPU";
        // The classic pattern counts the Marketing Name line as well.
        assert_eq!(GfxLineCounter::count(out), 3);
        assert_eq!(AgentScanner::count(out), 2);
        let mut names = Vec::new();
        let mut s = AgentScanner::default();
        for chunk in out.chunks(7) {
            s.feed(chunk, &mut |n| names.push(String::from_utf8_lossy(n).into_owned()));
        }
        assert_eq!(s.finish(&mut |n| names.push(String::from_utf8_lossy(n).into_owned())), 2);
        assert_eq!(names, ["gfx942", "gfx1036"]);
    }

    #[test]
    fn outputs_without_device_type_use_the_classic_pattern() {
        let out = b"  Name:                    gfx900\n  Name:                    gfx900\n  Name:     AMD Ryzen\n";
        assert_eq!(AgentScanner::count(out), 2);
        assert_eq!(AgentScanner::count(b""), 0);
    }

    #[test]
    fn a_line_counts_once() {
        assert_eq!(GfxLineCounter::count(b"Name: gfx Name: gfx\n"), 1);
        assert_eq!(GfxLineCounter::count(b"Name:\tgfx\n"), 0, "only spaces, as in grep's ' *'");
        assert_eq!(GfxLineCounter::count(b"name: gfx\n"), 0, "case-sensitive");
    }
}
