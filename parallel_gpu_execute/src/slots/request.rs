//! What the test asks for (how many GPUs) and what it may get (the pool of
//! physical GPU ids).

use crate::error::Error;
use crate::hardware::gpu_count::Source;
use crate::hardware::{Probe, identity};
use crate::prelude::*;
use crate::profile::{CUDA_POOL_VARIABLE, ROCR_POOL_VARIABLE, Vendor};
use alloc::borrow::Cow;
use wrapper_common::diag;
use wrapper_common::diag::Bytes;
use wrapper_common::env;
use wrapper_common::numbers::parse_u64;

/// Longest GPU id accepted (a UUID such as `GPU-xxxxxxxx-...` is 40 bytes).
pub const MAX_ID_LEN: usize = 128;
/// Most ids a pool may list.
pub const MAX_POOL: usize = 65_536;

/// `--num_processes=N` times `--gpus_per_process=M` among the test's
/// arguments (also as two words), 1 each by default; as in the classic
/// script, a value that is not a decimal integer counts as 1, the last
/// occurrence wins, and a product of 0 (`--num_processes=0`) is raised to 1.
/// A decimal integer past `u64::MAX`, and a product past it, count as
/// `u64::MAX`, more than any pool holds, so a typo that asks for that many
/// GPUs always fails (the classic script's bash arithmetic wraps it, to 0
/// and so one GPU for 2^64). The arguments are not changed.
pub fn gpus_needed<'a>(test_args: impl Iterator<Item = &'a [u8]>) -> u64 {
    const NAMES: [&[u8]; 2] = [b"--num_processes", b"--gpus_per_process"];
    let mut values = [1u64; 2];
    let integer_or_one = |v: &[u8]| match parse_u64(v) {
        Some(n) => n,
        None if !v.is_empty() && v.iter().all(u8::is_ascii_digit) => u64::MAX,
        None => 1,
    };
    // Index into NAMES of a two-word flag whose value comes next. The value
    // is not consumed, so a flag in its place is still seen as a flag.
    let mut pending: Option<usize> = None;
    for arg in test_args {
        if let Some(i) = pending.take() {
            values[i] = integer_or_one(arg);
        }
        for (i, name) in NAMES.iter().enumerate() {
            if arg == *name {
                pending = Some(i);
            } else if let Some(value) = arg.strip_prefix(*name).and_then(|r| r.strip_prefix(b"=")) {
                values[i] = integer_or_one(value);
            }
        }
    }
    if let Some(i) = pending {
        // A trailing flag without a value.
        values[i] = 1;
    }
    values[0].saturating_mul(values[1]).max(1)
}

/// The physical GPU ids to choose from, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Borrowed from the environment, or `0..count` written out.
    pub ids: Vec<Cow<'static, [u8]>>,
    /// The variable the ids came from; `None` for `0..count`.
    pub variable: Option<&'static str>,
    /// The variable lists more than the runtime reads: it ends at a
    /// negative index (see [`runtime_visible`]).
    pub ends_early: bool,
    /// The names the lock files use for each GPU, when not its id
    /// (`--lock-names=physical`, a UUID's index, a MIG path's form).
    pub lock_names: Option<Vec<Vec<u8>>>,
    /// The lock names are hardware identities (`--lock-names=physical`
    /// that found them), not indexes.
    pub physical: bool,
}

/// Can `id` be part of a lock file name without leaving the lock directory?
pub fn is_safe_id(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && !id.windows(2).any(|w| w == b"..")
}

const MIG_PATH_PREFIX: &[u8] = b"MIG-GPU-";

/// CUDA's MIG form of a device id: `MIG-GPU-<GPU UUID>/<GPU instance
/// ID>/<compute instance ID>`, such as
/// `MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2` (NVIDIA's CUDA
/// Programming Guide, "CUDA Environment Variables", `CUDA_VISIBLE_DEVICES`;
/// the `MIG-<UUID>` form that `nvidia-smi -L` prints on current drivers is a
/// plain id).
/// Accepted in `CUDA_VISIBLE_DEVICES` only; see [`lock_form`] for its lock
/// file names.
pub fn is_cuda_mig_path(id: &[u8]) -> bool {
    let mut parts = id.split(|&b| b == b'/');
    let (Some(gpu), Some(gi), Some(ci), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let number = |n: &[u8]| !n.is_empty() && n.len() <= 10 && n.iter().all(u8::is_ascii_digit);
    id.len() <= MAX_ID_LEN
        && gpu.len() > MIG_PATH_PREFIX.len()
        && gpu.starts_with(MIG_PATH_PREFIX)
        && is_safe_id(gpu)
        && number(gi)
        && number(ci)
}

/// What a lock file name holds for an accepted pool id: the id itself, or,
/// for CUDA's MIG form, the id with `+` for each `/` (`MIG-GPU-<uuid>+1+2`).
/// No plain id holds a `+`, so two ids never share a lock file name, and
/// `--status` turns the `+` back into `/`.
pub fn lock_form(id: &[u8]) -> Cow<'_, [u8]> {
    if id.contains(&b'/') {
        Cow::Owned(id.iter().map(|&b| if b == b'/' { b'+' } else { b }).collect())
    } else {
        Cow::Borrowed(id)
    }
}

/// The id a lock file name stands for, as a test is given it: the inverse
/// of [`lock_form`] (CUDA's MIG form has `+` in the name where the id has
/// `/`); any other name is the id itself.
pub fn id_form(name: &[u8]) -> Cow<'_, [u8]> {
    if name.contains(&b'+') {
        let id: Vec<u8> = name.iter().map(|&b| if b == b'+' { b'/' } else { b }).collect();
        if is_cuda_mig_path(&id) {
            return Cow::Owned(id);
        }
    }
    Cow::Borrowed(name)
}

/// What is wrong with a pool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolListError<'a> {
    UnsafeId(&'a [u8]),
    /// An index written with leading zeros (`01`): the runtime reads it as
    /// a GPU that other jobs name without them, under another lock file.
    LeadingZero(&'a [u8]),
    /// A CUDA id that begins like an index and is not one (`0x1`, `-0`):
    /// CUDA reads the digits it begins with, as `strtoul` does.
    NotIndex(&'a [u8]),
    DuplicateId(&'a [u8]),
    TooMany,
}

/// Whether `id` begins with a digit or a sign, as an index does.
fn begins_like_an_index(id: &[u8]) -> bool {
    id.first().is_some_and(|&b| b.is_ascii_digit() || b == b'-' || b == b'+')
}

/// Whether `id` is an index written with leading zeros (`01`, `00`).
pub fn has_leading_zero(id: &[u8]) -> bool {
    id.len() > 1 && id[0] == b'0' && id.iter().all(u8::is_ascii_digit)
}

/// The part of a visible-devices list that the runtime uses: everything
/// before the first negative integer. CUDA and ROCr both end the list at an
/// index that cannot name a device, so `0,2,-1,1` shows GPUs 0 and 2 only,
/// and `-1` (the usual way to hide every GPU) shows none (NVIDIA's CUDA
/// Programming Guide, "CUDA Environment Variables"; ROCm/ROCR-Runtime
/// `core/runtime/amd_filter_device.cpp`, `RvdFilter::BuildUsrDeviceList`,
/// read at cdbe554a: a token below 0 returns the list built so far).
pub fn runtime_visible(list: &[u8]) -> &[u8] {
    let mut start = 0usize;
    for token in list.split(|&b| b == b',') {
        if is_negative_index(token) {
            return &list[..start.saturating_sub(1)];
        }
        start += token.len() + 1;
    }
    list
}

/// `-` and one or more digits, not all zeros (`-0` is index 0 to ROCr's
/// `strtol`).
fn is_negative_index(token: &[u8]) -> bool {
    match token {
        [b'-', digits @ ..] => digits.iter().all(u8::is_ascii_digit) && digits.iter().any(|&d| d != b'0'),
        _ => false,
    }
}

/// The variable that holds a preset pool in this mode: in rocm mode
/// `ROCR_VISIBLE_DEVICES`, in cuda mode `CUDA_VISIBLE_DEVICES`, in both
/// profiles. The classic mode reads `ROCR_VISIBLE_DEVICES` where the test
/// keeps it as the caller set it and the AMD runtime reads it (`rocr_kept`),
/// as its scripts did not: the runtime numbers
/// the GPUs it shows from 0, so without the pool a test given index 0 under
/// `2,3` would run on GPU 2 while it locks GPU 0's file. The jax profile
/// reads it deliberately unlike JAX's script, which overwrites
/// it with a slot index: ROCm CI runners give each job a slice of a shared
/// host that way (ROCm/jax#792 to #795), and a test must stay in its job's
/// slice (the closed openxla/xla#46534 proposed the same for XLA's script).
fn pool_variable(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Classic | Vendor::Rocm => ROCR_POOL_VARIABLE,
        Vendor::Cuda => CUDA_POOL_VARIABLE,
    }
}

/// The pool variable of a profile and mode, as the environment sets it,
/// read once for both the hidden-GPU check and the pool. Allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub variable: &'static str,
    /// Its whole value.
    pub value: &'static [u8],
    /// The part the runtime reads ([`runtime_visible`]).
    pub visible: &'static [u8],
}

impl Preset {
    /// The pool variable, when it is set (also when set and empty);
    /// `rocr_kept`: whether the test keeps the caller's
    /// `ROCR_VISIBLE_DEVICES` ([`pool_variable`]), asked in the classic
    /// mode where it is set.
    pub fn of(vendor: Vendor, rocr_kept: impl FnOnce() -> bool) -> Option<Preset> {
        let variable = pool_variable(vendor);
        let value = env::var(variable.as_bytes())?;
        if vendor == Vendor::Classic && !rocr_kept() {
            return None;
        }
        Some(Preset { variable, value, visible: runtime_visible(value) })
    }

    /// Whether it shows the runtime no GPU at all: empty (ROCr surfaces
    /// zero devices for a set, empty `ROCR_VISIBLE_DEVICES`:
    /// `RvdFilter::SelectZeroDevices`, and its flag is `IsEnvVarSet`; CUDA
    /// likewise shows none for an empty `CUDA_VISIBLE_DEVICES`), or starting
    /// with a negative index (`-1`). The test then runs as on a host without
    /// a GPU, its variables unchanged.
    pub fn hides_every_gpu(&self) -> bool {
        self.visible.is_empty()
    }
}

/// Splits and checks a comma list of ids; `mig_paths`: CUDA's MIG form
/// ([`is_cuda_mig_path`]) is accepted too.
pub fn parse_pool_list(list: &[u8], mig_paths: bool) -> Result<Vec<&[u8]>, PoolListError<'_>> {
    let mut ids: Vec<&[u8]> = Vec::new();
    for id in list.split(|&b| b == b',') {
        if !(is_safe_id(id) || mig_paths && is_cuda_mig_path(id)) {
            return Err(PoolListError::UnsafeId(id));
        }
        if has_leading_zero(id) {
            return Err(PoolListError::LeadingZero(id));
        }
        // pytorch/pytorch#84879 (2022): with driver 510, `1gpu2,2ampere`
        // showed GPUs 1 and 2.
        if mig_paths && begins_like_an_index(id) && !id.iter().all(u8::is_ascii_digit) {
            return Err(PoolListError::NotIndex(id));
        }
        if ids.len() >= MAX_POOL {
            return Err(PoolListError::TooMany);
        }
        ids.push(id);
    }
    // Locking the same id twice in one block would wait on itself.
    let mut sorted = ids.clone();
    crate::sys::sort::sort_by(&mut sorted, &mut |a, b| a < b);
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(PoolListError::DuplicateId(w[0]));
    }
    Ok(ids)
}

impl Pool {
    /// `--lock-names=physical`: names the pool's lock files by each GPU's
    /// physical identity ([`identity::physical`]), or says in one note why
    /// it keeps index names. A preset pool is named by the GPUs its ids
    /// stand for ([`identity::of_preset`]), or refused: index names there
    /// would book a GPU that another container knows by another index.
    pub fn name_physically(&mut self, probe: &Probe, source: Source) -> Result<(), Error> {
        if let Some(variable) = self.variable {
            let ids: Vec<&[u8]> = self.ids.iter().map(|id| id.as_ref()).collect();
            let rocm = variable != CUDA_POOL_VARIABLE;
            // The hardware itself, also where the count was given by hand
            // (the classic mode reads ROCR_VISIBLE_DEVICES on a host that
            // shows KFD).
            let look = Probe { count_variable: None, profile: crate::profile::Profile::Xla, ..*probe };
            let source = match source {
                Source::TfGpuCount | Source::JaxCount if rocm => Source::Kfd,
                Source::TfGpuCount | Source::JaxCount => Source::Nvidia,
                source => source,
            };
            let all = if rocm || ids.iter().any(|id| parse_u64(id).is_some()) {
                identity::physical(&look, source)
            } else {
                // CUDA's UUIDs and MIG paths are physical as they are; a
                // UUID is made whole where the driver shows the GPUs' (a
                // prefix, or another case, would be another lock file).
                let none = || identity::Identities { names: Vec::new(), uids: Vec::new(), use_as_ids: false };
                Ok(identity::physical(&look, Source::Nvidia).unwrap_or_else(|_| none()))
            };
            let named = all.and_then(|all| identity::of_preset(&all, &ids, rocm));
            let names = named.map_err(|why| Error::PresetNotPhysical { variable, why, twice: false })?;
            // Two spellings of one GPU (`GPU-...` in either case, an index
            // and a UUID): one lock file twice in a block would wait on itself.
            for (j, name) in names.iter().enumerate() {
                if let Some(k) = names[..j].iter().position(|n| n == name) {
                    let (a, b) = (Bytes(ids[k]), Bytes(ids[j]));
                    let why = format!("'{a}' and '{b}' name one GPU, {name}");
                    return Err(Error::PresetNotPhysical { variable, why, twice: true });
                }
            }
            if let Some(bad) = names.iter().find(|n| !is_safe_id(n.as_bytes()) && !is_cuda_mig_path(n.as_bytes())) {
                return Err(Error::PresetNotPhysical {
                    variable,
                    why: format!("identity '{bad}' cannot name a lock file"),
                    twice: false,
                });
            }
            self.lock_names = Some(names.iter().map(|n| lock_form(n.as_bytes()).into_owned()).collect());
            self.physical = true;
            return Ok(());
        }
        match self.physical_names(probe, source) {
            Ok(identity::Identities { names, use_as_ids, .. }) => {
                if use_as_ids {
                    self.ids = names.iter().map(|n| Cow::Owned(n.as_bytes().to_vec())).collect();
                }
                self.lock_names = Some(names.into_iter().map(String::into_bytes).collect());
                self.physical = true;
            }
            Err(why) => diag::report(
                crate::TOOL,
                format_args!(
                    "note: --lock-names=physical: no hardware identity ({why}); lock files are named by index"
                ),
            ),
        }
        Ok(())
    }

    /// Index lock names (the default): a preset pool's GPU UUIDs are named
    /// by the index they stand for ([`identity::index_of`]), so that a job
    /// that names a GPU by UUID and one that names it by index (or has no
    /// pool) take one lock file; where the index cannot be told, the test
    /// is refused with the fix. Looks at the hardware only for such a pool.
    pub fn name_by_index(&mut self, probe: &Probe) -> Result<(), Error> {
        let Some(variable) = self.variable else { return Ok(()) };
        let rocm = variable != CUDA_POOL_VARIABLE;
        let by_uuid = |id: &[u8]| parse_u64(id).is_none() && (rocm || identity::is_uuid(id));
        if !self.ids.iter().any(|id| by_uuid(id)) {
            return Ok(());
        }
        // The hardware itself, whatever the count came from.
        let look = Probe { count_variable: None, profile: crate::profile::Profile::Xla, ..*probe };
        let survey = crate::hardware::survey::Survey::take(&look);
        let unseen = if rocm { survey.kfd.is_empty() } else { survey.nvidia.iter().all(|g| g.info.is_none()) };
        let mut names: Vec<Vec<u8>> = Vec::with_capacity(self.ids.len());
        for (i, id) in self.ids.iter().enumerate() {
            let index = if by_uuid(id) { identity::index_of(&survey, id, rocm) } else { Ok(None) };
            let id_text = || String::from_utf8_lossy(id).into_owned();
            let name = match index {
                Ok(Some(k)) => k.to_string().into_bytes(),
                Ok(None) => self.lock_name(i).to_vec(),
                Err(why) => return Err(Error::PresetNotIndexed { variable, id: id_text(), why, unseen }),
            };
            if let Some(j) = names.iter().position(|n| *n == name) {
                let why = format!("it names GPU {} twice, also as '{}'", Bytes(&name), Bytes(&self.ids[j]));
                return Err(Error::PresetNotIndexed { variable, id: id_text(), why, unseen: false });
            }
            names.push(name);
        }
        self.lock_names = Some(names);
        Ok(())
    }

    fn physical_names(&self, probe: &Probe, source: Source) -> Result<identity::Identities, String> {
        let identities = identity::physical(probe, source)?;
        if identities.names.len() != self.ids.len() {
            return Err("the GPUs changed while they were counted".to_string());
        }
        if let Some(bad) = identities.names.iter().find(|n| !is_safe_id(n.as_bytes())) {
            return Err(format!("identity '{bad}' cannot name a lock file"));
        }
        Ok(identities)
    }

    /// Whether its variable hides every GPU (see [`Preset::hides_every_gpu`]).
    pub fn hides_every_gpu(&self) -> bool {
        self.variable.is_some() && self.ids.is_empty()
    }

    /// The name GPU `i` has in lock file names.
    pub fn lock_name(&self, i: usize) -> &[u8] {
        match &self.lock_names {
            Some(names) => &names[i],
            None => &self.ids[i],
        }
    }

    /// The preset pool: the ids of the pool variable that the runtime uses
    /// ([`Preset::visible`]), when it is set; none at all when it hides
    /// every GPU. Else `0..count`.
    pub fn for_vendor(preset: Option<Preset>, count: u32) -> Result<Pool, Error> {
        if let Some(Preset { variable: var, value, visible }) = preset {
            let ids = if visible.is_empty() {
                Vec::new()
            } else {
                parse_pool_list(visible, var == CUDA_POOL_VARIABLE).map_err(|e| match e {
                    PoolListError::UnsafeId(id) => Error::BadPoolId { variable: var, id },
                    PoolListError::LeadingZero(id) => Error::PoolIdLeadingZero { variable: var, id },
                    PoolListError::NotIndex(id) => Error::PoolIdNotIndex { variable: var, id },
                    PoolListError::DuplicateId(id) => Error::DuplicatePoolId { variable: var, id },
                    PoolListError::TooMany => {
                        Error::BadValue { name: var, value, expected: "a comma list of at most 65536 GPU ids" }
                    }
                })?
            };
            // A MIG path's lock file name is not the id itself.
            let lock_names = ids
                .iter()
                .any(|id| id.contains(&b'/'))
                .then(|| ids.iter().map(|id| lock_form(id).into_owned()).collect());
            return Ok(Pool {
                ids: ids.into_iter().map(Cow::Borrowed).collect(),
                variable: Some(var),
                ends_early: visible.len() < value.len(),
                lock_names,
                physical: false,
            });
        }
        let ids = (0..count).map(|i| Cow::Owned(i.to_string().into_bytes())).collect();
        Ok(Pool { ids, variable: None, ends_early: false, lock_names: None, physical: false })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(args: &[&str]) -> u64 {
        gpus_needed(args.iter().map(|a| a.as_bytes()))
    }

    #[test]
    fn defaults_to_one() {
        assert_eq!(needed(&[]), 1);
        assert_eq!(needed(&["--gtest_filter=x"]), 1);
    }

    #[test]
    fn both_forms_multiply() {
        assert_eq!(needed(&["--num_processes=2", "--gpus_per_process=2"]), 4);
        assert_eq!(needed(&["--num_processes", "3", "x", "--gpus_per_process", "2"]), 6);
        assert_eq!(needed(&["--gpus_per_process=4"]), 4);
    }

    #[test]
    fn bad_values_count_as_one_and_last_wins() {
        // The classic script takes 0 as given and raises a zero product to 1.
        assert_eq!(needed(&["--num_processes=0", "--gpus_per_process=2"]), 1);
        assert_eq!(needed(&["--num_processes=3", "--gpus_per_process=0"]), 1);
        assert_eq!(needed(&["--num_processes", "0"]), 1);
        assert_eq!(needed(&["--num_processes=-4"]), 1);
        assert_eq!(needed(&["--num_processes=two"]), 1);
        assert_eq!(needed(&["--num_processes=4", "--num_processes=2"]), 2);
        assert_eq!(needed(&["--num_processes"]), 1);
        assert_eq!(needed(&["--num_processes", "--gpus_per_process=3"]), 3);
        assert_eq!(needed(&["--num_processes_extra=5"]), 1);
    }

    #[test]
    fn huge_values_saturate() {
        assert_eq!(needed(&["--num_processes=99999999999999999999"]), u64::MAX, "past u64::MAX");
        assert_eq!(needed(&["--gpus_per_process", "18446744073709551616"]), u64::MAX, "u64::MAX + 1");
        assert_eq!(needed(&["--num_processes=18446744073709551615", "--gpus_per_process=2"]), u64::MAX);
        assert_eq!(needed(&["--num_processes=4294967296", "--gpus_per_process=4294967296"]), u64::MAX);
        // Still not a number, however long: 1.
        assert_eq!(needed(&["--num_processes=99999999999999999999x"]), 1);
    }

    #[test]
    fn ids() {
        for ok in [&b"0"[..], b"12", b"GPU-8f3a1c2e-1b2c-4d5e-8f90-123456789abc", b"a.b_c-d", b"."] {
            assert!(is_safe_id(ok), "{ok:?}");
        }
        for bad in [&b""[..], b"..", b"a..b", b"../x", b"/", b"a/b", b"0 ", b"x\n", b"\xff", &[b'a'; 129][..]] {
            assert!(!is_safe_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn pool_lists() {
        assert_eq!(parse_pool_list(b"2,5,7", false).unwrap(), vec![&b"2"[..], b"5", b"7"]);
        assert_eq!(parse_pool_list(b"1,,2", false), Err(PoolListError::UnsafeId(b"")));
        assert_eq!(parse_pool_list(b"0,", false), Err(PoolListError::UnsafeId(b"")));
        assert_eq!(parse_pool_list(b"0,../../etc", false), Err(PoolListError::UnsafeId(b"../../etc")));
        assert_eq!(parse_pool_list(b"0,01", false), Err(PoolListError::LeadingZero(b"01")));
        // CUDA reads the digits an id begins with: `0x1` is GPU 0 to it.
        for bad in [&b"0x1"[..], b"1gpu2", b"-0", b"2-"] {
            let list = [&b"3,"[..], bad].concat();
            assert_eq!(
                parse_pool_list(&list, true),
                Err(PoolListError::NotIndex(bad)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_pool_list(b"3,GPU-8f3a1c2e,12", true).unwrap(), vec![&b"3"[..], b"GPU-8f3a1c2e", b"12"]);
        assert_eq!(parse_pool_list(b"00", true), Err(PoolListError::LeadingZero(b"00")));
        assert_eq!(parse_pool_list(b"0,10,0x1,0a", false).unwrap(), vec![&b"0"[..], b"10", b"0x1", b"0a"]);
        assert_eq!(parse_pool_list(b"1,2,1", false), Err(PoolListError::DuplicateId(b"1")));
        let too_many: Vec<u8> = (0..=MAX_POOL).map(|i| i.to_string()).collect::<Vec<_>>().join(",").into_bytes();
        assert_eq!(parse_pool_list(&too_many, false), Err(PoolListError::TooMany));
    }

    #[test]
    fn the_runtime_stops_at_a_negative_index() {
        for (list, visible) in [
            (&b"0,2,-1,1"[..], &b"0,2"[..]),
            (b"-1", b""),
            (b"-1,0", b""),
            (b"", b""),
            (b"3", b"3"),
            (b"GPU-a-1,GPU-b", b"GPU-a-1,GPU-b"),
            (b"0,-,1", b"0,-,1"),
            (b"0,-x", b"0,-x"),
            (b"1,-22", b"1"),
            (b"-0,1", b"-0,1"),
            (b"1,-00,-01", b"1,-00"),
        ] {
            assert_eq!(runtime_visible(list), visible, "{}", String::from_utf8_lossy(list));
        }
    }

    #[test]
    fn cuda_mig_paths() {
        let mig = &b"MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2"[..];
        assert!(is_cuda_mig_path(mig));
        assert!(is_cuda_mig_path(b"MIG-GPU-8932f937/0/0"), "an abbreviated UUID");
        for bad in [
            &b"MIG-GPU-8932f937/1"[..],
            b"MIG-GPU-8932f937/1/2/3",
            b"MIG-GPU-8932f937/1/",
            b"MIG-GPU-8932f937//2",
            b"MIG-GPU-8932f937/a/2",
            b"MIG-GPU-8932f937/1/-2",
            b"MIG-GPU-/1/2",
            b"MIG-GPU-../1/2",
            b"MIG-GPU-a b/1/2",
            b"GPU-8932f937/1/2",
            b"MIG-8932f937/1/2",
            b"/MIG-GPU-8932f937/1/2",
            b"MIG-GPU-8932f937/1/12345678901",
            b"MIG-GPU-8932f937",
        ] {
            assert!(!is_cuda_mig_path(bad), "{}", String::from_utf8_lossy(bad));
        }
        let long = [&b"MIG-GPU-"[..], &[b'a'; 116], b"/1/2"].concat();
        assert_eq!(long.len(), MAX_ID_LEN);
        assert!(is_cuda_mig_path(&long));
        assert!(!is_cuda_mig_path(&[&b"MIG-GPU-"[..], &[b'a'; 117], b"/1/2"].concat()));

        assert_eq!(&*lock_form(mig), b"MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6+1+2");
        assert_eq!(&*lock_form(b"GPU-1"), b"GPU-1");
        let list = b"MIG-GPU-8932f937/1/0,MIG-GPU-8932f937/2/0,3";
        assert_eq!(
            parse_pool_list(list, true).unwrap(),
            vec![&b"MIG-GPU-8932f937/1/0"[..], b"MIG-GPU-8932f937/2/0", b"3"]
        );
        assert_eq!(parse_pool_list(list, false), Err(PoolListError::UnsafeId(b"MIG-GPU-8932f937/1/0")));
        assert_eq!(
            parse_pool_list(b"MIG-GPU-8932f937/1/0,0,MIG-GPU-8932f937/1/0", true),
            Err(PoolListError::DuplicateId(b"MIG-GPU-8932f937/1/0"))
        );
    }

    #[test]
    fn large_pools() {
        let list: String = (0..10_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        assert_eq!(parse_pool_list(list.as_bytes(), false).unwrap().len(), 10_000);
    }
}
