//! The wrapper's own flags, which come before the test command.
//!
//! `parallel_gpu_execute [--lock-dir=DIR] [--vendor=V] [--wait=S] [--] TEST [ARGS...]`
//!
//! Bazel's `--run_under='//x:parallel_gpu_execute --wait=600'` puts the flags
//! first, then the test. The first word that is not one of these options
//! (or `--`) ends them; it and everything after it belong to the test and are
//! passed on byte for byte. Parsing borrows from argv and never allocates.

use crate::error::{Error, Flag};
use crate::prelude::*;
use crate::slots::drain::MAX_REASON;
use core::ffi::CStr;
use wrapper_common::argv::Argv;
use wrapper_common::diag::Excerpt;

pub const USAGE: &str = "\
usage: parallel_gpu_execute [OPTIONS] [--] TEST [ARGS...]

Runs TEST on a GPU slot of its own: counts the GPUs, locks a free slot
(flock on <lock-dir>/gpulock<gpu>_<slot>), sets the *_VISIBLE_DEVICES
variables and execs TEST. With no GPU, execs TEST unchanged.

options (each wins over its environment variable):
  --lock-dir=DIR   lock directory (PARALLEL_GPU_EXECUTE_LOCK_DIR, default /var/lock)
  --vendor=V       rocm, cuda or classic (PARALLEL_GPU_EXECUTE_VENDOR,
                   default: from where the GPU count came)
  --visible=V      on AMD GPUs, hip (HIP_ and CUDA_VISIBLE_DEVICES = the
                   GPUs' indices, as XLA main's script; the xla profile's
                   default) or rocr (ROCR_VISIBLE_DEVICES = the GPUs, as
                   JAX main's script; the jax profile's default;
                   PARALLEL_GPU_EXECUTE_VISIBLE)
  --wait=SECONDS   how long to wait for a free slot; 0 fails at once
                   (PARALLEL_GPU_EXECUTE_WAIT, default: no limit)
  --profile=P      xla (XLA's script, the default) or jax (JAX's
                   parallel_accelerator_execute.sh: JAX_ACCELERATOR_COUNT,
                   JAX_TESTS_PER_ACCELERATOR, jax_accelerator_lock_<id>_<slot>
                   in JAX_LOCK_DIR (default /tmp/jax_accelerator_locks_$USER,
                   _shared where USER is empty or unset),
                   TPU_VISIBLE_CHIPS; the default when the executable is
                   named parallel_accelerator_execute;
                   PARALLEL_GPU_EXECUTE_PROFILE)
  --lock-names=N   index (the classic gpulock<index>_<slot>, default) or
                   physical (gpulock<GPU identity>_<slot>, for containers
                   sharing one lock directory; PARALLEL_GPU_EXECUTE_LOCK_NAMES)
  --list[=FORMAT]  print what the wrapper sees and would do, and exit; no
                   lock, no test. FORMAT: text (default), json, count,
                   gfx-targets, bazelrc (test --local_test_jobs and the
                   slots per GPU for this host's GPU memory, CPUs and RAM)
  --status[=FORMAT] print who holds and who waits for the GPU slots of the
                   lock directory (from /proc/locks), and each GPU: drained,
                   the processes the kernel shows using it, its health; and
                   exit; no lock. FORMAT: text (default), json, openmetrics
                   (for node_exporter's textfile collector)
  --drain=GPU --reason=TEXT
                   take GPU (as --status names it) out of service for every
                   test that shares the lock directory, and exit: new tests
                   are not given it, running ones finish
  --undrain=GPU    put a drained GPU back into service, and exit (each of
                   the two: one GPU per run, a result line on stdout)
  --help, -h       this text
  --version        the version

environment: TF_GPU_COUNT, TF_TESTS_PER_GPU (default 8; auto: from the
  GPUs' memory in sysfs),
  ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES (the GPU pool; empty or -1:
  no GPU, TEST runs unchanged),
  TF_PER_DEVICE_MEMORY_LIMIT_MB, PARALLEL_GPU_EXECUTE_SYSROOT,
  PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR (auto, run or refuse: a lock
  directory created inside a fresh action root),
  PARALLEL_GPU_EXECUTE_UNHEALTHY (report, the default: --status only;
  warn: a line when a test is given a GPU with uncorrectable memory errors;
  avoid: such GPUs are passed over as if drained).
exit: the test's own status; 1 no GPU slot (or every usable GPU drained);
  2 bad input; 126 TEST not
  executable; 127 TEST not found; 129/130/143 hung up or interrupted
  while waiting; 141 stderr a pipe whose reader has gone.
";

/// Option values as given (validated later, together with their variables).
#[derive(Debug, Default, Clone, Copy)]
pub struct Flags {
    pub lock_dir: Option<&'static CStr>,
    pub vendor: Option<&'static CStr>,
    pub wait: Option<&'static CStr>,
    pub lock_names: Option<&'static CStr>,
    pub profile: Option<&'static CStr>,
    pub visible: Option<&'static CStr>,
}

/// `--list=FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFormat {
    Text,
    Json,
    Count,
    GfxTargets,
    Bazelrc,
}

impl ListFormat {
    pub fn parse(value: &[u8]) -> Option<ListFormat> {
        match value {
            b"text" => Some(ListFormat::Text),
            b"json" => Some(ListFormat::Json),
            b"count" => Some(ListFormat::Count),
            b"gfx-targets" => Some(ListFormat::GfxTargets),
            b"bazelrc" => Some(ListFormat::Bazelrc),
            _ => None,
        }
    }
}

/// `--status=FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFormat {
    Text,
    Json,
    OpenMetrics,
}

impl StatusFormat {
    pub fn parse(value: &[u8]) -> Option<StatusFormat> {
        match value {
            b"text" => Some(StatusFormat::Text),
            b"json" => Some(StatusFormat::Json),
            b"openmetrics" => Some(StatusFormat::OpenMetrics),
            _ => None,
        }
    }
}

#[derive(Debug)]
pub enum Invocation {
    /// Run the test found at argv index `command`; when `command` lies past
    /// the end there is none, which `run` reports once the values are checked.
    Run {
        flags: Flags,
        command: usize,
    },
    /// `--list[=FORMAT]`: print the survey, run nothing.
    List {
        flags: Flags,
        format: ListFormat,
    },
    /// `--status[=FORMAT]`: print the lock directory's holders and waiters.
    Status {
        flags: Flags,
        format: StatusFormat,
    },
    /// `--drain=GPU --reason=TEXT`: take a GPU out of service.
    Drain {
        flags: Flags,
        gpu: &'static [u8],
        reason: &'static [u8],
    },
    /// `--undrain=GPU`: put it back.
    Undrain {
        flags: Flags,
        gpu: &'static [u8],
    },
    Help,
    Version,
}

/// `--name=value` split off a flag word, as a C string (the value is a
/// suffix of a NUL-terminated argument, so it stays one).
fn value_after(arg: &'static CStr, prefix_len: usize) -> &'static CStr {
    let bytes = arg.to_bytes_with_nul();
    CStr::from_bytes_with_nul(&bytes[prefix_len..]).unwrap_or(c"")
}

/// The value of `--name=value` or `--name value` at argv index `i`, and
/// how many words it took; `None` for any other word.
fn valued(argv: &Argv, i: usize, name: &'static str) -> Option<Result<(&'static [u8], usize), Error>> {
    let word = argv.get(i)?.to_bytes();
    match format_flag(word, name)? {
        Some(value) => Some(Ok((value, 1))),
        // A next word that is an option (`--drain --reason=x`) is its
        // forgotten value, not a GPU or a reason.
        None => Some(match argv.get(i + 1).map(CStr::to_bytes) {
            Some(next) if !next.starts_with(b"--") => Ok((next, 2)),
            _ => Err(Error::Drain(format!("{name} needs a value; {}", crate::error::USAGE_HINT))),
        }),
    }
}

/// Checks `--drain`, `--undrain` and `--reason` together.
fn service(
    flags: Flags,
    drain: Option<&'static [u8]>,
    undrain: Option<&'static [u8]>,
    reason: Option<&'static [u8]>,
    other: bool,
    command: Option<&'static [u8]>,
) -> Result<Option<Invocation>, Error> {
    let bad = |line: String| Err(Error::Drain(line));
    let (gpu, name) = match (drain, undrain) {
        (None, None) if reason.is_some() => return bad("--reason goes with --drain=GPU".to_string()),
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => return bad("--drain and --undrain cannot be combined".to_string()),
        (Some(g), None) => (g, "--drain"),
        (None, Some(g)) => (g, "--undrain"),
    };
    if other {
        return bad(format!("{name} cannot be combined with --list or --status"));
    }
    if let Some(word) = command {
        return bad(format!("{name} runs no test, but '{}' follows; {}", Excerpt(word), crate::error::USAGE_HINT));
    }
    if gpu.is_empty() {
        return bad(format!("{name} needs a GPU, as --status names it (e.g. {name}=0)"));
    }
    if drain.is_none() {
        if reason.is_some() {
            return bad("--reason goes with --drain=GPU, not --undrain".to_string());
        }
        return Ok(Some(Invocation::Undrain { flags, gpu }));
    }
    let Some(reason) = reason else {
        return bad(
            "--drain needs --reason=TEXT: why the GPU is out of service, for whoever reads --status".to_string()
        );
    };
    if reason.iter().all(u8::is_ascii_whitespace) {
        return bad("--reason is empty: say why the GPU is out of service".to_string());
    }
    if reason.iter().any(|&b| b == b'\n' || b == b'\r') || reason.len() > MAX_REASON {
        return bad(format!("--reason must be one line of at most {MAX_REASON} bytes"));
    }
    Ok(Some(Invocation::Drain { flags, gpu, reason }))
}

/// `Some(None)` for `--name`, `Some(Some(value))` for `--name=value`, `None`
/// for any other word.
fn format_flag(word: &'static [u8], name: &str) -> Option<Option<&'static [u8]>> {
    let rest = word.strip_prefix(name.as_bytes())?;
    match rest {
        [] => Some(None),
        [b'=', value @ ..] => Some(Some(value)),
        _ => None,
    }
}

pub fn parse(argv: &Argv) -> Result<Invocation, Error> {
    let mut flags = Flags::default();
    let mut listing: Option<ListFormat> = None;
    let mut status: Option<StatusFormat> = None;
    let (mut drain, mut undrain, mut reason) = (None, None, None);
    let mut i = 1;
    while let Some(arg) = argv.get(i) {
        let bytes = arg.to_bytes();
        let mut taken = false;
        for (name, slot) in [("--drain", &mut drain), ("--undrain", &mut undrain), ("--reason", &mut reason)] {
            if let Some(found) = valued(argv, i, name) {
                let (value, words) = found?;
                if let Some(first) = slot.replace(value) {
                    return Err(Error::Drain(format!(
                        "{name} given twice ('{}', then '{}'): one GPU per run; run the wrapper once for each",
                        Excerpt(first),
                        Excerpt(value)
                    )));
                }
                i += words;
                taken = true;
                break;
            }
        }
        if taken {
            continue;
        }
        match bytes {
            b"--" => {
                i += 1;
                break;
            }
            b"--help" | b"-h" => return Ok(Invocation::Help),
            b"--version" => return Ok(Invocation::Version),
            _ if format_flag(bytes, "--list").is_some() => {
                let value = format_flag(bytes, "--list").flatten().unwrap_or(b"text");
                listing = Some(ListFormat::parse(value).ok_or(Error::BadValue {
                    name: "--list",
                    value,
                    expected: "text, json, count, gfx-targets or bazelrc",
                })?);
                i += 1;
                continue;
            }
            _ if format_flag(bytes, "--status").is_some() => {
                let value = format_flag(bytes, "--status").flatten().unwrap_or(b"text");
                status = Some(StatusFormat::parse(value).ok_or(Error::BadValue {
                    name: "--status",
                    value,
                    expected: "text, json or openmetrics",
                })?);
                i += 1;
                continue;
            }
            _ if bytes.len() < 2 || bytes[0] != b'-' => break,
            _ => {}
        }
        let mut matched = None;
        for flag in Flag::ALL {
            let name = flag.name().as_bytes();
            if bytes == name {
                let value = argv.get(i + 1).ok_or(Error::MissingValue(flag))?;
                i += 1;
                matched = Some((flag, value));
            } else if bytes.len() > name.len() && bytes.starts_with(name) && bytes[name.len()] == b'=' {
                matched = Some((flag, value_after(arg, name.len() + 1)));
            }
        }
        let Some((flag, value)) = matched else {
            return Err(Error::UnknownOption(bytes));
        };
        let slot = match flag {
            Flag::LockDir => &mut flags.lock_dir,
            Flag::Vendor => &mut flags.vendor,
            Flag::Wait => &mut flags.wait,
            Flag::LockNames => &mut flags.lock_names,
            Flag::Profile => &mut flags.profile,
            Flag::Visible => &mut flags.visible,
        };
        *slot = Some(value);
        i += 1;
    }
    let other = listing.is_some() || status.is_some();
    if let Some(invocation) = service(flags, drain, undrain, reason, other, argv.get(i).map(CStr::to_bytes))? {
        return Ok(invocation);
    }
    if other {
        if let Some(word) = argv.get(i) {
            return Err(Error::ListWithCommand(word.to_bytes()));
        }
        return Ok(match (listing, status) {
            (Some(format), None) => Invocation::List { flags, format },
            (None, Some(format)) => Invocation::Status { flags, format },
            _ => return Err(Error::ListAndStatus),
        });
    }
    // No test command is reported by the caller, after the flags' values
    // are checked: `--wait /bin/true` (a value forgotten) then names the
    // value the flag took, not only the missing test.
    Ok(Invocation::Run { flags, command: i })
}

#[cfg(test)]
mod tests {
    use super::*;

    use test_support::leaked_argv as argv;

    fn run(words: &[&str]) -> (Flags, usize) {
        match parse(&argv(words)).unwrap() {
            Invocation::Run { flags, command } => (flags, command),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_end_at_the_test_command() {
        let (f, cmd) = run(&["pge", "--wait=5", "--lock-dir", "/l", "./t", "--wait=9", "--x"]);
        assert_eq!(f.wait, Some(c"5"));
        assert_eq!(f.lock_dir, Some(c"/l"));
        assert_eq!(f.vendor, None);
        assert_eq!(cmd, 4);
    }

    #[test]
    fn double_dash_ends_options() {
        let (f, cmd) = run(&["pge", "--vendor=cuda", "--", "--looks-like-a-flag"]);
        assert_eq!(f.vendor, Some(c"cuda"));
        assert_eq!(cmd, 3);
    }

    #[test]
    fn last_flag_wins_and_empty_value_is_kept() {
        let (f, _) = run(&["pge", "--wait=1", "--wait=", "t"]);
        assert_eq!(f.wait, Some(c""));
    }

    #[test]
    fn errors() {
        // No command: the index lies past the end, and `run` says so once
        // the flags' values have been checked.
        assert_eq!(run(&["pge"]).1, 1);
        assert_eq!(run(&["pge", "--wait=1"]).1, 2);
        assert_eq!(run(&["pge", "--"]).1, 2);
        let (f, cmd) = run(&["pge", "--wait", "/bin/true"]);
        assert_eq!((f.wait, cmd), (Some(c"/bin/true"), 3));
        assert!(matches!(parse(&argv(&["pge", "--wait"])), Err(Error::MissingValue(Flag::Wait))));
        assert!(matches!(parse(&argv(&["pge", "--waiting=3", "t"])), Err(Error::UnknownOption(b"--waiting=3"))));
        assert!(matches!(parse(&argv(&["pge", "-x", "t"])), Err(Error::UnknownOption(b"-x"))));
        assert_eq!(run(&[]).1, 1);
    }

    #[test]
    fn help_and_version() {
        assert!(matches!(parse(&argv(&["pge", "--help", "t"])), Ok(Invocation::Help)));
        assert!(matches!(parse(&argv(&["pge", "-h"])), Ok(Invocation::Help)));
        assert!(matches!(parse(&argv(&["pge", "--version"])), Ok(Invocation::Version)));
        // After the command, --help belongs to the test.
        assert!(matches!(parse(&argv(&["pge", "t", "--help"])), Ok(Invocation::Run { command: 1, .. })));
    }

    #[test]
    fn list() {
        let parsed = parse(&argv(&["pge", "--vendor=cuda", "--list"])).unwrap();
        assert!(
            matches!(parsed, Invocation::List { format: ListFormat::Text, flags } if flags.vendor == Some(c"cuda"))
        );
        let parsed = parse(&argv(&["pge", "--list=json", "--lock-dir=/l"])).unwrap();
        assert!(
            matches!(parsed, Invocation::List { format: ListFormat::Json, flags } if flags.lock_dir == Some(c"/l"))
        );
        for (word, format) in
            [("count", ListFormat::Count), ("gfx-targets", ListFormat::GfxTargets), ("bazelrc", ListFormat::Bazelrc)]
        {
            let parsed = parse(&argv(&["pge", &format!("--list={word}")])).unwrap();
            assert!(matches!(parsed, Invocation::List { format: f, .. } if f == format));
        }
        assert!(matches!(parse(&argv(&["pge", "--list=yaml"])), Err(Error::BadValue { name: "--list", .. })));
        assert!(matches!(parse(&argv(&["pge", "--list", "./t"])), Err(Error::ListWithCommand(b"./t"))));
        assert!(matches!(parse(&argv(&["pge", "--list", "--", "./t"])), Err(Error::ListWithCommand(b"./t"))));
        let parsed = parse(&argv(&["pge", "--status"])).unwrap();
        assert!(matches!(parsed, Invocation::Status { format: StatusFormat::Text, .. }));
        let parsed = parse(&argv(&["pge", "--lock-dir=/l", "--status=json"])).unwrap();
        assert!(
            matches!(parsed, Invocation::Status { format: StatusFormat::Json, flags } if flags.lock_dir == Some(c"/l"))
        );
        assert!(matches!(parse(&argv(&["pge", "--status=xml"])), Err(Error::BadValue { name: "--status", .. })));
        let parsed = parse(&argv(&["pge", "--status=openmetrics"])).unwrap();
        assert!(matches!(parsed, Invocation::Status { format: StatusFormat::OpenMetrics, .. }));
        assert!(matches!(parse(&argv(&["pge", "--status", "t"])), Err(Error::ListWithCommand(b"t"))));
        assert!(matches!(parse(&argv(&["pge", "--status", "--list"])), Err(Error::ListAndStatus)));
        // After the command, --list belongs to the test.
        assert!(matches!(parse(&argv(&["pge", "t", "--list"])), Ok(Invocation::Run { command: 1, .. })));
    }

    #[test]
    fn drain_and_undrain() {
        let parsed = parse(&argv(&["pge", "--drain=1", "--reason", "fan failing"])).unwrap();
        assert!(matches!(parsed, Invocation::Drain { gpu: b"1", reason: b"fan failing", .. }));
        let parsed = parse(&argv(&["pge", "--lock-dir=/l", "--undrain", "GPU-1"])).unwrap();
        assert!(matches!(parsed, Invocation::Undrain { gpu: b"GPU-1", flags } if flags.lock_dir == Some(c"/l")));
        for bad in [
            &["pge", "--drain=1"][..],
            &["pge", "--drain=1", "--reason="],
            &["pge", "--drain=1", "--reason=  "],
            &["pge", "--drain=1", "--reason=a\nb"],
            &["pge", "--drain=", "--reason=x"],
            &["pge", "--drain=1", "--reason=x", "./t"],
            &["pge", "--drain=1", "--undrain=1", "--reason=x"],
            &["pge", "--undrain=1", "--reason=x"],
            &["pge", "--reason=x", "./t"],
            &["pge", "--drain=1", "--reason=x", "--status"],
            &["pge", "--drain"],
            &["pge", "--drain=1", "--drain=2", "--reason=x"],
            &["pge", "--undrain=1", "--undrain", "2"],
            &["pge", "--drain=1", "--reason=x", "--reason=y"],
        ] {
            assert!(matches!(parse(&argv(bad)), Err(Error::Drain(_))), "{bad:?}");
        }
        // After the command, they belong to the test.
        assert!(matches!(parse(&argv(&["pge", "t", "--drain=1"])), Ok(Invocation::Run { command: 1, .. })));
    }

    #[test]
    fn dash_alone_is_a_command() {
        let (_, cmd) = run(&["pge", "-"]);
        assert_eq!(cmd, 1);
    }
}
