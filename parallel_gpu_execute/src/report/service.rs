//! Taking a GPU out of service and putting it back (`--drain=GPU
//! --reason=TEXT`, `--undrain=GPU`), and what `PARALLEL_GPU_EXECUTE_UNHEALTHY`
//! asks of a run (`warn`, `avoid`). The drain state itself is `slots::drain`.
//!
//! A GPU is named as `--status` names it: its index, or its physical name
//! under `--lock-names=physical` (a MIG path with `/`), one of the GPUs
//! these settings give, or one already drained (to undrain a GPU this host
//! no longer shows). The record keeps the user: the effective uid, and its
//! name where `<sysroot>/etc/passwd` has it.

use crate::error::Error;
use crate::hardware::kfd_usage;
use crate::prelude::*;
use crate::report::status::Configured;
use crate::settings::Settings;
use crate::slots::drain::{self, Drained};
use crate::slots::request::{Pool, lock_form};
use crate::sys::clock::{SystemTime, UNIX_EPOCH};
use crate::sys::userns::{Ids, outside};
use wrapper_common::diag::{self, Bytes, Excerpt};

/// `<sysroot>/etc/passwd`, read once for every name looked up in it.
pub fn passwd(sysroot: &[u8]) -> Option<Vec<u8>> {
    crate::sys::dirs::read_file(&alloc::ffi::CString::new([sysroot, b"/etc/passwd"].concat()).ok()?)
}

/// The user name of `uid` in the `/etc/passwd` text `text`.
pub fn user_name(text: &[u8], uid: u32) -> Option<Vec<u8>> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let id = wrapper_common::numbers::parse_u64(fields.next()?)?;
        (id == u64::from(uid) && !name.is_empty()).then(|| name.to_vec())
    })
}

/// The lock-file name of the GPU `gpu` names, when these settings give it
/// or it is drained; else the one-line error that lists the GPUs there are.
fn resolve(settings: &Settings, flag: &str, gpu: &[u8]) -> Result<Vec<u8>, Error> {
    let name = lock_form(gpu).into_owned();
    let configured = Configured::of(settings);
    let lock_dir = settings.lock_dir.path();
    if configured.names.contains(&name) || drain::all(&lock_dir).unwrap_or_default().iter().any(|d| d.gpu == name) {
        return Ok(name);
    }
    let known: Vec<String> = configured.names.iter().map(|n| Bytes(n).to_string()).collect();
    Err(Error::Drain(if known.is_empty() {
        format!("{flag}: unknown GPU '{}': these settings give no GPU on this host (see --list)", Excerpt(gpu))
    } else {
        format!(
            "{flag}: unknown GPU '{}': the GPUs here are {} (as --status names them)",
            Excerpt(gpu),
            known.join(", ")
        )
    }))
}

/// `--drain=GPU --reason=TEXT`: the line to print.
pub fn drain(settings: &Settings, gpu: &[u8], reason: &[u8]) -> Result<String, Error> {
    let name = resolve(settings, "--drain", gpu)?;
    // As the host has it (a container's user namespace maps its ids onto
    // the host's), and so the record's owner there; named where that is
    // this namespace's own id (its `/etc/passwd` names its own users).
    let uid = rustix::process::geteuid().as_raw();
    let host = outside(uid, Ids::User).unwrap_or(uid);
    let record = Drained {
        gpu: name,
        reason: reason.trim_ascii().to_vec(),
        time: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()),
        uid: Some(host),
        user: (host == uid).then(|| passwd(settings.sysroot)).flatten().and_then(|text| user_name(&text, uid)),
        owner: None,
        doubt: None,
    };
    let lock_dir = settings.lock_dir.path();
    drain::drain(&lock_dir, &record)?;
    Ok(format!(
        "drained GPU {} in {}: {}; new tests are not given it, running ones finish; --undrain={} puts it back\n",
        Bytes(gpu),
        Bytes(lock_dir.to_bytes()),
        Bytes(&record.reason),
        Bytes(gpu)
    ))
}

/// `--undrain=GPU`: the line to print.
pub fn undrain(settings: &Settings, gpu: &[u8]) -> Result<String, Error> {
    let name = resolve(settings, "--undrain", gpu)?;
    let lock_dir = settings.lock_dir.path();
    let found = drain::undrain(&lock_dir, &name)?;
    let (gpu, dir) = (Bytes(gpu), Bytes(lock_dir.to_bytes()));
    Ok(match found {
        drain::Undrained::Removed => format!("GPU {gpu} is back in service in {dir}\n"),
        drain::Undrained::NotDrained => format!("GPU {gpu} was not drained in {dir}; nothing to do\n"),
        drain::Undrained::NotARecord(kind, owner) => format!(
            "GPU {gpu} was not drained in {dir}: {dir}/gpudrain/{} is a {kind} of uid {owner}, not a drain record, left as it is (it keeps --drain={gpu} from working until root or uid {owner} removes it)\n",
            Bytes(&name)
        ),
    })
}

/// The unhealthy GPUs of `pool` (pool index, `GPU <id> (why)`), for
/// `PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid`.
pub fn unhealthy_in_pool(settings: &Settings, pool: &Pool) -> Vec<(usize, String)> {
    let gpus = kfd_usage::named_gpus(&settings.probe());
    (0..pool.ids.len())
        .filter_map(|i| {
            let g = kfd_usage::find(&gpus, pool.lock_name(i))?;
            let health = kfd_usage::health(settings.sysroot, &g.gpu);
            (health != "ok").then(|| (i, format!("GPU {} (unhealthy: {health})", Bytes(pool.lock_name(i)))))
        })
        .collect()
}

/// `PARALLEL_GPU_EXECUTE_UNHEALTHY=warn`: one line per unhealthy GPU of
/// the grant.
pub fn warn_unhealthy(settings: &Settings, pool: &Pool, start: usize, n: usize) {
    for (i, why) in unhealthy_in_pool(settings, pool) {
        if (start..start + n).contains(&i) {
            diag::report(
                crate::TOOL,
                format_args!(
                    "warning: the test is given {why}; PARALLEL_GPU_EXECUTE_UNHEALTHY=avoid passes such GPUs over, --drain takes one out of service"
                ),
            );
        }
    }
}
