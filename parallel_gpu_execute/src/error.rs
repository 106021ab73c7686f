//! Every way the wrapper can fail, each with its exit code and one line of
//! explanation.
//!
//! | code | meaning |
//! |------|---------|
//! | 1    | no GPU slot: the test needs more GPUs than the pool holds, the wait limit passed, or every GPU it could use is drained |
//! | 2    | bad input or an unusable environment: flag, variable, pool id, lock directory, lock file |
//! | 126  | the test exists but cannot be executed |
//! | 127  | the test does not exist |
//! | 130, 143 | SIGINT / SIGTERM arrived while waiting for a slot |
//!
//! Anything else is the test's own exit status: the wrapper execs the test
//! and leaves no process of its own behind.

use crate::prelude::*;
use crate::profile::{CUDA_POOL_VARIABLE, Profile};
use core::fmt;
use wrapper_common::diag::{Bytes, Excerpt, Os};
use wrapper_common::exec::ExecFailure;

/// Appended to usage errors, so that they stay one line.
pub const USAGE_HINT: &str = "usage: parallel_gpu_execute [OPTIONS] [--] TEST [ARGS...] (see --help)";

pub const EXIT_NO_SLOT: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

/// The options that take a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    LockDir,
    Vendor,
    Wait,
    LockNames,
    Profile,
    Visible,
}

impl Flag {
    pub fn name(self) -> &'static str {
        match self {
            Flag::LockDir => "--lock-dir",
            Flag::Vendor => "--vendor",
            Flag::Wait => "--wait",
            Flag::LockNames => "--lock-names",
            Flag::Profile => "--profile",
            Flag::Visible => "--visible",
        }
    }

    pub const ALL: [Flag; 6] = [Flag::LockDir, Flag::Vendor, Flag::Wait, Flag::LockNames, Flag::Profile, Flag::Visible];
}

#[derive(Debug)]
pub enum Error {
    /// An option the wrapper does not know, before the test command.
    UnknownOption(&'static [u8]),
    /// An option that needs a value came last.
    MissingValue(Flag),
    /// No test command after the options.
    NoCommand,
    /// `--list` or `--status` with a test command after it.
    ListWithCommand(&'static [u8]),
    /// `--list` and `--status` together.
    ListAndStatus,
    /// `--status`: the lock directory cannot be read.
    StatusDir {
        dir: Vec<u8>,
        error: String,
    },
    /// A flag or variable with a value out of its domain.
    BadValue {
        name: &'static str,
        value: &'static [u8],
        expected: &'static str,
    },
    /// A GPU id in the pool that cannot name a lock file safely.
    BadPoolId {
        variable: &'static str,
        id: &'static [u8],
    },
    /// An index in the pool written with leading zeros.
    PoolIdLeadingZero {
        variable: &'static str,
        id: &'static [u8],
    },
    /// A CUDA pool id that begins like an index (a digit or a sign) and
    /// is not one (`0x1`, `1a`, `-0`).
    PoolIdNotIndex {
        variable: &'static str,
        id: &'static [u8],
    },
    DuplicatePoolId {
        variable: &'static str,
        id: &'static [u8],
    },
    /// `--lock-names=physical` with a preset pool whose GPUs cannot be told.
    PresetNotPhysical {
        variable: &'static str,
        why: String,
        /// Two of its ids name one GPU.
        twice: bool,
    },
    /// Index lock names with a preset pool that names a GPU by a UUID whose
    /// index cannot be told.
    PresetNotIndexed {
        variable: &'static str,
        id: String,
        why: String,
        /// Whether the hardware that would tell it is out of this
        /// container's sight (then the repair says to show it).
        unseen: bool,
    },
    /// The lock directory is shared with jobs that name GPUs the other way
    /// (`slots::naming`).
    MixedLockNames {
        dir: Box<[u8]>,
        /// This job names GPUs physically.
        physical: bool,
        /// What shows the other naming: the marker, or an index lock file.
        found: Box<[u8]>,
    },
    /// The test asks for more GPUs than the pool has.
    PoolTooSmall {
        needed: u64,
        pool: usize,
        variable: Option<&'static str>,
    },
    /// No slot became free within the wait limit (0 = fail fast).
    NoFreeSlot {
        needed: u64,
        wait_ms: u64,
        /// The test and its arguments, as the "Running test" line shows them.
        test: String,
        profile: Profile,
        /// The waiters in the queue that come first for lock files it
        /// could take (0: none, or it did not look).
        earlier: usize,
    },
    // The paths below are on the heap: an error travels up through the
    // `Result` slot of every caller, and a 4 KiB `StackPath` there would put
    // 4 KiB on each of their frames, faulted in at start-up even on the
    // paths that never fail (README, "Where the time goes").
    /// The lock directory is missing and cannot be created, or is unusable.
    LockDir {
        dir: Box<[u8]>,
        action: &'static str,
        errno: rustix::io::Errno,
        /// Its cause and repair, in parentheses (`slots::lockfile::hint`).
        hint: Box<str>,
    },
    /// A link on the lock directory's path points nowhere.
    DanglingLockDir {
        dir: Box<[u8]>,
        link: Box<[u8]>,
        target: Box<[u8]>,
    },
    /// The lock directory coordinates with no other test (`slots::privacy`)
    /// and the pool has several GPUs.
    PrivateLockDir {
        dir: Box<[u8]>,
        /// What keeps it from being used at all, said first: read-only, or
        /// not writable by this user (`None`: nothing).
        unusable: Option<&'static str>,
        /// Where it is, and what makes it coordinate (`slots::privacy`).
        place: &'static str,
        repair: &'static str,
        gpus: usize,
    },
    /// A lock file cannot be created in an existing directory.
    LockFileCreate {
        path: Box<[u8]>,
        errno: rustix::io::Errno,
        /// Its cause and repair, in parentheses (`slots::lockfile::hint`).
        hint: Box<str>,
    },
    /// Something other than a regular file of its own sits at a lock path
    /// (`what` says what).
    UnsafeLockPath {
        path: Box<[u8]>,
        what: &'static str,
    },
    /// No slot the test could take is left but those of lock files this
    /// user may not use: the first such file's error, with its repair, in
    /// one line (`slots::locks`).
    NoUsableSlot(String),
    /// Any other failing system call, named.
    System {
        what: &'static str,
        path: Option<Box<[u8]>>,
        errno: rustix::io::Errno,
    },
    /// The test could not be executed.
    Exec(ExecFailure),
    /// `--drain`, `--undrain` or `--reason` misused, or the drain state
    /// cannot be written: the whole line.
    Drain(String),
    /// Every block of GPUs the test could use holds a drained (or, with
    /// `PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid`, an unhealthy) GPU: each one
    /// and why, as `GPU 3 (reason)`, joined.
    AllDrained {
        gpus: String,
        /// Whether some were drained (`--undrain` puts one back), and
        /// whether some were avoided as unhealthy (it does not).
        drained: bool,
        avoided: bool,
    },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::PoolTooSmall { .. } | Error::NoFreeSlot { .. } | Error::AllDrained { .. } => EXIT_NO_SLOT,
            Error::Exec(e) => e.exit_code(),
            _ => EXIT_USAGE,
        }
    }

    /// The system call's error, where this is one.
    pub fn errno(&self) -> Option<rustix::io::Errno> {
        match self {
            Error::LockDir { errno, .. } | Error::LockFileCreate { errno, .. } | Error::System { errno, .. } => {
                Some(*errno)
            }
            _ => None,
        }
    }
}

fn path_of(p: &Option<Box<[u8]>>) -> Bytes<'_> {
    Bytes(p.as_deref().unwrap_or(b""))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownOption(o) => write!(f, "unknown option '{}'; {USAGE_HINT}", Excerpt(o)),
            Error::MissingValue(flag) => write!(f, "{} needs a value; {USAGE_HINT}", flag.name()),
            Error::NoCommand => write!(f, "no test command given; {USAGE_HINT}"),
            Error::ListWithCommand(word) => {
                write!(f, "--list and --status run no test, but '{}' follows; {USAGE_HINT}", Excerpt(word))
            }
            Error::ListAndStatus => write!(f, "--list and --status cannot be combined; {USAGE_HINT}"),
            Error::StatusDir { dir, error } => {
                write!(f, "--status: cannot read the lock directory {}: {error}", Excerpt(dir))
            }
            Error::BadValue { name, value, expected } => {
                write!(f, "{name}: invalid value '{}' (expected {expected})", Excerpt(value))
            }
            Error::BadPoolId { variable, id } => {
                let mig = if *variable == CUDA_POOL_VARIABLE { "; or MIG-GPU-<UUID>/<GI>/<CI>" } else { "" };
                write!(
                    f,
                    "{variable}: GPU id '{}' is not usable in a lock file name (allowed: letters, digits, '_', '.', '-'; no '..'{mig})",
                    Excerpt(id)
                )
            }
            Error::PoolIdLeadingZero { variable, id } => {
                let digits = id.iter().position(|&b| b != b'0').map_or(&b"0"[..], |at| &id[at..]);
                write!(
                    f,
                    "{variable}: GPU index '{}' has a leading zero: the runtime reads it as a GPU that other jobs write without one, and the two would take different lock files; write it '{}'",
                    Excerpt(id),
                    Excerpt(digits)
                )
            }
            Error::PoolIdNotIndex { variable, id } => write!(
                f,
                "{variable}: GPU id '{}' is no index, yet CUDA reads the digits it begins with: another lock file than the GPU's; write the index alone, or its UUID (GPU-...)",
                Excerpt(id)
            ),
            Error::DuplicatePoolId { variable, id } => {
                write!(f, "{variable}: GPU id '{}' is listed twice", Excerpt(id))
            }
            Error::PresetNotPhysical { variable, why, twice: true } => write!(
                f,
                "--lock-names=physical: {variable} names one GPU twice ({why}), and a block would wait on its own lock; name each GPU once"
            ),
            Error::PresetNotPhysical { variable, why, twice: false } => write!(
                f,
                "--lock-names=physical: cannot tell which physical GPUs {variable} names ({why}); give the pool by GPU UUID ({variable}=GPU-...), or let this container see /sys/class/kfd (ROCm) or /proc/driver/nvidia (CUDA)"
            ),
            Error::PresetNotIndexed { variable, id, why, unseen } => write!(
                f,
                "{variable}: cannot tell which GPU index '{}' is ({why}), and a job that names that GPU by index would take another lock file for it; name the pool's GPUs by index ({variable}=1,...){}",
                Excerpt(id.as_bytes()),
                if *unseen {
                    ", or let this container see /sys/class/kfd (ROCm) or /proc/driver/nvidia (CUDA; with CUDA_DEVICE_ORDER=PCI_BUS_ID on a host of several models)"
                } else if *variable == crate::profile::CUDA_POOL_VARIABLE {
                    ", or set CUDA_DEVICE_ORDER=PCI_BUS_ID (which a host of several GPU models needs)"
                } else {
                    ""
                }
            ),
            Error::MixedLockNames { dir, physical: false, found } => write!(
                f,
                "lock directory {} is shared with jobs that name GPUs physically (--lock-names=physical; they made {}), and this one names them by index: the two take different lock files for one GPU; give every job that shares it one --lock-names (or the physical ones a lock directory of their own), then remove {}",
                Excerpt(dir),
                Excerpt(found),
                Excerpt(found)
            ),
            Error::MixedLockNames { dir, physical: true, found } => write!(
                f,
                "--lock-names=physical: lock directory {} holds lock files named by index ({}), used by jobs that take different lock files for the same GPUs; give every job that shares it one --lock-names (or this one a lock directory of its own), and remove the index-named lock files once no job uses them",
                Excerpt(dir),
                Excerpt(found)
            ),
            Error::PoolTooSmall { needed, pool, variable } => {
                write!(f, "the test needs {needed} GPU(s) but the pool holds only {pool}")?;
                match variable {
                    Some(v) => write!(f, " (from {v})"),
                    None => write!(f, " (all GPUs of this host)"),
                }
            }
            Error::NoFreeSlot { needed, wait_ms, test, profile, earlier } => {
                let test = Excerpt(test.as_bytes());
                match (needed, wait_ms, profile) {
                    // JAX's script's wording.
                    (1, 0, Profile::Jax) => {
                        write!(f, "Cannot find a free accelerator to run the test {test} on, exiting with failure...")
                    }
                    (_, 0, Profile::Jax) => write!(
                        f,
                        "Cannot find {needed} free accelerators to run the test {test} on, exiting with failure..."
                    ),
                    (_, 0, _) => write!(
                        f,
                        "cannot find {needed} free GPU(s) to run the test {test} on, and waiting is off (wait=0)"
                    ),
                    _ => write!(
                        f,
                        "cannot find {needed} free GPU(s) to run the test {test} on within the wait limit of {}.{:03}s",
                        wait_ms / 1000,
                        wait_ms % 1000
                    ),
                }?;
                // GPUs may be free, yet left to the waiters in the queue.
                match earlier {
                    0 => Ok(()),
                    n => write!(
                        f,
                        ": {n} waiter(s) in the queue come first for GPUs this test could take (--status shows them)"
                    ),
                }
            }
            Error::LockDir { dir, action, errno, hint } => {
                write!(f, "lock directory {}: cannot {action}: {}{hint}", Excerpt(dir), Os(*errno))
            }
            Error::DanglingLockDir { dir, link, target } => write!(
                f,
                "lock directory {}: {l} is a symbolic link to {}, which does not exist; create its target (as systemd-tmpfiles does at boot for /run/lock) or mount the host's lock directory at {l}",
                Excerpt(dir),
                Excerpt(target),
                l = Excerpt(link),
            ),
            Error::PrivateLockDir { dir, unusable, place, repair, gpus } => {
                write!(f, "lock directory {}", Excerpt(dir))?;
                if let Some(why) = unusable {
                    write!(f, " {why}, and")?;
                }
                write!(
                    f,
                    " is {place}, so it coordinates with no other test: tests running at once here would all get the first of its {gpus} GPUs; {repair}, or set PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR=run where one action runs at a time"
                )
            }
            Error::LockFileCreate { path, errno, hint } => {
                write!(f, "cannot create lock file {}: {}{hint}", Bytes(path), Os(*errno))
            }
            Error::UnsafeLockPath { path, what } => {
                write!(f, "refusing lock path {}: it is {what}", Bytes(path))
            }
            Error::NoUsableSlot(line) => f.write_str(line),
            Error::System { what, path, errno } => {
                if path.is_some() {
                    write!(f, "{what} {}: {}", path_of(path), Os(*errno))
                } else {
                    write!(f, "{what}: {}", Os(*errno))
                }
            }
            Error::Exec(e) => write!(f, "{e}"),
            Error::Drain(line) => f.write_str(line),
            Error::AllDrained { gpus, drained, avoided } => {
                write!(
                    f,
                    "every GPU this test could use is out of service: {gpus}; `parallel_gpu_execute --status` shows them"
                )?;
                if *drained {
                    f.write_str(", `--undrain=GPU` puts a drained one back")?;
                }
                if *avoided {
                    f.write_str(
                        ", and PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid passes over an unhealthy one (set it to warn or report to use it)",
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl From<ExecFailure> for Error {
    fn from(e: ExecFailure) -> Error {
        Error::Exec(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurdly_long_values_do_not_push_the_reason_off_the_line() {
        // A 100 KB value used to fill the whole 1 KB message line, so that
        // what was wrong with it ("expected ...") was cut off.
        let value: &'static [u8] = Box::leak(vec![b'9'; 100_000].into_boxed_slice());
        let e = Error::BadValue { name: "TF_GPU_COUNT", value, expected: "an integer from 0 to 4096" };
        let message = e.to_string();
        assert!(message.ends_with("...' (expected an integer from 0 to 4096)"), "{message}");
        assert!(message.len() < Excerpt::MAX + 100, "{}", message.len());
        let e = Error::BadPoolId { variable: "ROCR_VISIBLE_DEVICES", id: value };
        assert!(e.to_string().contains("...' is not usable in a lock file name"));
        let dir = vec![b'd'; 4000].into_boxed_slice();
        let e = Error::LockDir { dir, action: "open it", errno: rustix::io::Errno::NAMETOOLONG, hint: "".into() };
        let message = e.to_string();
        assert!(message.contains("...: cannot open it: File name too long"), "{message}");
        assert!(message.len() < 2 * Excerpt::MAX + 200, "{}", message.len());
    }
}
