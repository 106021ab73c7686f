//! `--status`'s view of each GPU: drained or not (`slots::drain`), the
//! processes the kernel lists on it and its health
//! (`hardware::kfd_usage`).

use crate::hardware::kfd_usage;
use crate::prelude::*;
use crate::report::status::gpu_id;
use crate::report::status_format::Gpu;
use crate::settings::Settings;
use crate::slots::drain;
use core::ffi::CStr;

/// Each of `names` (the settings' GPUs, as lock file names have them),
/// then the other drained GPUs of the lock directory `dir`, at most
/// [`MAX_OTHER_DRAINED`] of them; and how many more there are. The error
/// where the drain state cannot be read.
pub fn survey(settings: &Settings, names: &[Vec<u8>], dir: &CStr) -> Result<(Vec<Gpu>, usize), rustix::io::Errno> {
    let mut drained = drain::all(dir)?;
    // Named as `/etc/passwd` names the uid the text gives, never by the
    // text's own `user`, which its writer chooses ("root (uid 0): ...");
    // that uid is the parent user namespace's, named only where it is
    // this one's too (not a container's host uid by the container's file).
    let passwd = if drained.is_empty() { None } else { crate::report::service::passwd(settings.sysroot) };
    for d in &mut drained {
        let own = d.uid.filter(|&uid| crate::sys::userns::outside(uid, crate::sys::userns::Ids::User) == Some(uid));
        d.user = own.zip(passwd.as_deref()).and_then(|(uid, text)| crate::report::service::user_name(text, uid));
    }
    let kfd = kfd_usage::named_gpus(&settings.probe());
    let procs = if kfd.is_empty() { None } else { kfd_usage::kfd_processes(settings.sysroot) };
    let mut out = Vec::new();
    for name in names {
        let g = kfd_usage::find(&kfd, name);
        let kernel_users = match (g.and_then(|g| g.gpu_id), &procs) {
            (Some(id), Some(procs)) => Some(
                procs
                    .iter()
                    .filter_map(|p| p.vram.iter().find(|v| v.0 == id).map(|v| (p.pid, v.1)))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        };
        let health = g.map_or_else(|| "ok".to_string(), |g| kfd_usage::health(settings.sysroot, &g.gpu));
        let at = drained.iter().position(|d| d.gpu == *name);
        out.push(Gpu {
            gpu: gpu_id(&String::from_utf8_lossy(name)),
            drained: at.map(|at| drained.remove(at)),
            kernel_users,
            health,
            configured: true,
        });
    }
    let more = drained.len().saturating_sub(MAX_OTHER_DRAINED);
    drained.truncate(MAX_OTHER_DRAINED);
    out.extend(drained.into_iter().map(|d| Gpu {
        gpu: gpu_id(&String::from_utf8_lossy(&d.gpu)),
        drained: Some(d),
        kernel_users: None,
        health: "ok".to_string(),
        configured: false,
    }));
    Ok((out, more))
}

/// Most drained GPUs not of these settings that `--status` lists (to
/// undrain one this host no longer shows).
pub const MAX_OTHER_DRAINED: usize = 16;
