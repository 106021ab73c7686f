//! `--list[=FORMAT]`: what the wrapper sees and would do, without taking a
//! lock or running a test. What a CI job prints at its top instead of
//! `rocminfo` ("is the GPU actually visible to this container?"), and what
//! driver scripts read instead of `rocm-smi`/`nvidia-smi` to size
//! `--local_test_jobs`.
//!
//! - `text` (default): one line per device seen, usable or not and why,
//!   then the source, count, mode, pool and slots per GPU.
//! - `json`: the same as one object (keys documented in the README).
//! - `count`: the number of usable GPUs.
//! - `gfx-targets`: the distinct gfx targets of the usable AMD GPUs,
//!   comma-separated, for `TF_ROCM_AMDGPU_TARGETS`.

use crate::cli::ListFormat as Format;
use crate::error::Error;
use crate::hardware::devnode::Access;
use crate::hardware::gpu_count::Source;
use crate::hardware::survey::{KfdGpu, NvidiaGpu, Survey};
use crate::prelude::*;
use crate::profile::{LockNames, Profile, Vendor, test_variables};
use crate::report::json;
use crate::settings::Settings;
use crate::slots::exposure::Exposed;
use crate::slots::privacy;
use crate::slots::request::{Pool, Preset};
use core::fmt::Write as _;
use wrapper_common::diag::Os;

/// What the wrapper would do with what it sees.
struct Plan {
    survey: Survey,
    vendor: Option<Vendor>,
    pool: Option<Pool>,
    slots: u32,
}

fn vendor_name(v: Vendor) -> &'static str {
    match v {
        Vendor::Rocm => "rocm",
        Vendor::Cuda => "cuda",
        Vendor::Classic => "classic",
    }
}

fn plan(settings: &Settings) -> Result<Plan, Error> {
    let survey = Survey::take(&settings.probe());
    let (vendor, pool, slots) = match survey.source() {
        Some(source) => {
            let vendor = settings.vendor.unwrap_or(source.default_vendor());
            (
                Some(vendor),
                Some(Pool::for_vendor(Preset::of(vendor, || settings.rocr_kept(vendor)), survey.count())?),
                settings.slots_per_gpu(source),
            )
        }
        None => (None, None, settings.tests_per_gpu),
    };
    Ok(Plan { survey, vendor, pool, slots })
}

/// Why a test here is refused, where the pool's GPUs cannot be told (the
/// refusal's line, as `--status` says it): the pool named as a test names
/// it. Only for the text and the JSON (naming may survey the hardware
/// again, and say a note).
fn refused(plan: &Plan, settings: &Settings) -> Option<String> {
    match (&plan.pool, plan.survey.source()) {
        (Some(pool), Some(source)) if !pool.hides_every_gpu() => {
            let mut named = pool.clone();
            let result = match settings.lock_names {
                LockNames::Physical => named.name_physically(&settings.probe(), source),
                LockNames::Index => named.name_by_index(&settings.probe()),
            };
            result.err().map(|e| e.to_string())
        }
        _ => None,
    }
}

/// The index each usable device of the chosen source gets.
fn index_of(usable: bool, chosen: bool, next: &mut u32) -> Option<u32> {
    if usable && chosen {
        *next += 1;
        Some(*next - 1)
    } else {
        None
    }
}

/// A KFD GPU's render node (when it names one), what opening it gave, and
/// why the GPU is not usable when `/dev/kfd` is the reason.
fn kfd_state(survey: &Survey, g: &KfdGpu) -> (Option<String>, Access, Option<String>) {
    let path = match g.props.drm_render_minor {
        crate::hardware::kfd::RenderMinor::Value(m) => Some(format!("/dev/dri/renderD{m}")),
        _ => None,
    };
    let gated = survey.kfd_device.filter(|_| g.access.usable()).map(|e| format!("but {}", kfd_device_state(e)));
    (path, g.access, gated)
}

/// What is wrong with `/dev/kfd`, in words.
fn kfd_device_state(errno: rustix::io::Errno) -> String {
    match Access::refused(errno) {
        Access::Missing => "/dev/kfd is missing (not given to this container; the ROCm runtime needs it)".to_string(),
        _ => format!("/dev/kfd cannot be opened read-write: {} (the ROCm runtime needs it)", Os(errno)),
    }
}

/// `/dev/kfd`'s state for `--list=json`: `null` when it was not looked at
/// (no KFD GPU seen, or only withheld ones).
fn kfd_device_key(survey: &Survey) -> String {
    let looked_at = survey.kfd.iter().any(|g| g.access != Access::Withheld);
    match (looked_at, survey.kfd_device) {
        (false, _) => "null".to_string(),
        (true, None) => json::string(b"usable"),
        (true, Some(errno)) => json::string(Access::refused(errno).key().as_bytes()),
    }
}

fn nvidia_state(g: &NvidiaGpu) -> (Option<String>, String, &'static str) {
    let path = g.minor.map(|m| format!("/dev/nvidia{m}"));
    if g.excluded() {
        return (path, "excluded by the driver (GPU Excluded: Yes)".to_string(), "excluded");
    }
    match g.access {
        Some(a) => (path, a.describe(), a.key()),
        None => (path, "no readable information (its device node is unknown)".to_string(), "unknown"),
    }
}

/// Why a usable device gets no index.
fn not_chosen(chosen: Option<Source>, mine: Source) -> &'static str {
    match chosen {
        Some(Source::Nvidia) if mine == Source::Kfd => {
            "usable, but the NVIDIA GPUs are used (mixed host; --vendor=rocm takes these)"
        }
        Some(Source::Kfd) if mine == Source::Nvidia => "usable, but the AMD GPUs are used (--vendor=rocm)",
        _ => "usable, not used",
    }
}

/// The text for `--list=FORMAT`.
pub fn render(settings: &Settings, format: Format) -> Result<String, Error> {
    let plan = plan(settings)?;
    let survey = &plan.survey;
    Ok(match format {
        Format::Count => format!("{}\n", survey.count()),
        Format::GfxTargets => format!("{}\n", survey.gfx_targets().join(",")),
        Format::Bazelrc => crate::report::sizing::bazelrc(settings, survey, plan.pool.as_ref()),
        Format::Text => text(&plan, settings),
        Format::Json => json_object(&plan, settings),
    })
}

fn text(plan: &Plan, settings: &Settings) -> String {
    let survey = &plan.survey;
    let chosen = survey.source();
    let mut out = String::new();
    let mut next = 0;
    for c in &survey.tpu {
        let index = index_of(c.usable(), chosen == Some(Source::Tpu), &mut next);
        let node = c.node.as_deref().unwrap_or("no device node named in sysfs");
        let _ = write!(out, "tpu {}: {}, {node} {}", c.pci, c.generation, tpu_state(c.state));
        match index {
            Some(i) => {
                let _ = writeln!(out, " -> accelerator {i}");
            }
            None => out.push_str(" -> not usable\n"),
        }
    }
    let mut next = 0;
    for g in &survey.kfd {
        let (path, access, gated) = kfd_state(survey, g);
        if access == Access::Withheld {
            let _ = writeln!(out, "kfd node {}: {} -> not usable", g.node, access.describe());
            continue;
        }
        let usable = survey.kfd_usable(g);
        let index = index_of(usable, chosen == Some(Source::Kfd), &mut next);
        let target = g.props.gfx_target().map_or("gfx target unknown (no gfx_target_version)".to_string(), |t| {
            format!("{t} (gfx_target_version {})", g.props.gfx_target_version.unwrap_or(0))
        });
        let _ = write!(out, "kfd node {}: {target}, {} SIMDs, PCI {}", g.node, g.props.simd_count, g.pci());
        match path {
            Some(p) => {
                let _ = write!(out, ", {p} {}", access.describe());
            }
            None => out.push_str(", no render node named (counted unchecked)"),
        }
        if let Some(gated) = gated {
            let _ = write!(out, ", {gated}");
        }
        line_end(&mut out, index, usable, chosen, Source::Kfd);
    }
    let mut next = 0;
    for g in &survey.nvidia {
        let (path, state, _) = nvidia_state(g);
        let index = index_of(g.usable(), chosen == Some(Source::Nvidia), &mut next);
        let model = g.info.as_ref().map(|i| wrapper_common::diag::Bytes(i.model.as_bytes()).to_string());
        match &g.entry {
            Some(bus) => {
                let _ =
                    write!(out, "nvidia {bus}: {}", model.filter(|m| !m.is_empty()).unwrap_or("model unknown".into()));
            }
            None => out.push_str("nvidia device node"),
        }
        if let Some(uuid) = g.info.as_ref().map(|i| i.uuid.as_bytes()).filter(|u| !u.is_empty()) {
            let _ = write!(out, ", {}", wrapper_common::diag::Bytes(uuid));
        }
        match (g.minor, path) {
            (Some(m), Some(p)) => {
                let _ = write!(out, ", minor {m}, {p} {state}");
            }
            _ => {
                let _ = write!(out, ", {state}");
            }
        }
        line_end(&mut out, index, g.usable(), chosen, Source::Nvidia);
    }
    if let Some(names) = &survey.rocminfo {
        for (i, name) in names.iter().enumerate() {
            let _ = writeln!(out, "rocminfo agent: {name} -> GPU {i}");
        }
    }
    let source = match survey.chosen {
        Some((_, s)) => s.name(),
        None => "none",
    };
    let _ = writeln!(out, "source: {source}");
    let _ = writeln!(out, "count: {}", survey.count());
    match (plan.vendor, &plan.pool) {
        (Some(_), Some(pool)) if pool.hides_every_gpu() => {
            let _ = writeln!(
                out,
                "mode: none ({} hides every GPU; the test runs without one: 'Execute with no GPU support')",
                pool.variable.unwrap_or_default()
            );
        }
        (Some(v), Some(pool)) => {
            let vars = test_variables(settings.profile, v, settings.visible);
            let name = if settings.profile == Profile::Jax { "jax" } else { vendor_name(v) };
            let _ = writeln!(out, "mode: {name} ({vars})");
            let ids: Vec<String> = pool.ids.iter().map(|id| wrapper_common::diag::Bytes(id).to_string()).collect();
            let from = match pool.variable {
                // Where the runtime stops reading the list, so does the pool.
                Some(v) if pool.ends_early => {
                    format!(" (from {v}, up to its first negative index, where the runtime stops reading it)")
                }
                Some(v) => format!(" (from {v})"),
                None => String::new(),
            };
            let _ = writeln!(out, "pool: {}{from}", ids.join(","));
            let _ = writeln!(out, "slots per GPU: {}", plan.slots);
            if let Some(why) = refused(plan, settings) {
                let _ = writeln!(out, "note: a test here is refused: {why}");
            }
            let dir = settings.lock_dir.path();
            let state = match (dir_state(&dir), privacy::judge(&dir)) {
                (DirState::Dangling | DirState::Unusable, _) => match crate::slots::lockfile::unusable_dir(&dir) {
                    Some(e) => format!(" ({e}: every test exits 2)"),
                    None => String::new(),
                },
                (state, Some(why)) => format!(
                    " ({}{}, so it coordinates with no other test: {}; PARALLEL_GPU_EXECUTE_PRIVATE_LOCK_DIR decides whether tests run)",
                    if state == DirState::Missing { "missing; " } else { "" },
                    why.place(),
                    why.repair()
                ),
                (DirState::Missing, None) => " (missing: the first test creates it)".to_string(),
                (DirState::Exists, None) => String::new(),
            };
            let _ = writeln!(out, "lock dir: {}{state}", wrapper_common::diag::Bytes(dir.to_bytes()));
            if let Some(exposed) = Exposed::of_dir(&dir) {
                let _ = writeln!(out, "note: {exposed}");
            }
        }
        _ => out.push_str("mode: none (the test runs without a GPU: 'Execute with no GPU support')\n"),
    }
    out
}

fn tpu_state(state: crate::hardware::tpu::NodeState) -> &'static str {
    use crate::hardware::tpu::NodeState;
    match state {
        NodeState::Usable => "usable",
        NodeState::Unnamed => "(driver not bound)",
        NodeState::Missing => "missing (not given to this container)",
        NodeState::Denied => "denied (no read-write access)",
    }
}

fn line_end(out: &mut String, index: Option<u32>, usable: bool, chosen: Option<Source>, mine: Source) {
    match index {
        Some(i) => {
            let _ = writeln!(out, " -> GPU {i}");
        }
        None if usable => {
            let _ = writeln!(out, " -> {}", not_chosen(chosen, mine));
        }
        None => out.push_str(" -> not usable\n"),
    }
}

fn json_object(plan: &Plan, settings: &Settings) -> String {
    let survey = &plan.survey;
    let chosen = survey.source();
    let mut devices = Vec::new();
    let mut next = 0;
    for c in &survey.tpu {
        let index = index_of(c.usable(), chosen == Some(Source::Tpu), &mut next);
        devices.push(json::object(&[
            ("source", json::string(b"tpu")),
            ("index", json::opt_number(index.map(u64::from))),
            ("usable", c.usable().to_string()),
            ("pci", json::string(c.pci.as_bytes())),
            ("generation", json::string(c.generation.as_bytes())),
            ("device_node", json::opt_string(c.node.as_deref().map(str::as_bytes))),
            ("device_node_state", json::string(format!("{:?}", c.state).to_lowercase().as_bytes())),
        ]));
    }
    let mut next = 0;
    for g in &survey.kfd {
        let (path, access, gated) = kfd_state(survey, g);
        let usable = survey.kfd_usable(g);
        let index = index_of(usable, chosen == Some(Source::Kfd), &mut next);
        let reason = match gated {
            Some(gated) => format!("{}, {gated}", access.describe()),
            None => access.describe(),
        };
        // What a withheld node's properties would have said is unknown.
        let known = access != Access::Withheld;
        let number = |n: u64| if known { n.to_string() } else { "null".to_string() };
        devices.push(json::object(&[
            ("source", json::string(b"kfd")),
            ("index", json::opt_number(index.map(u64::from))),
            ("usable", usable.to_string()),
            ("node", g.node.to_string()),
            ("gfx_target", json::opt_string(g.props.gfx_target().map(|t| t.to_string()).as_deref().map(str::as_bytes))),
            ("gfx_target_version", json::opt_number(g.props.gfx_target_version)),
            ("simd_count", number(g.props.simd_count)),
            ("pci", if known { json::string(g.pci().as_bytes()) } else { "null".to_string() }),
            ("unique_id", json::opt_string(g.props.unique_id_text().as_deref().map(str::as_bytes))),
            ("device_node", json::opt_string(path.as_deref().map(str::as_bytes))),
            ("device_node_state", json::string(access.key().as_bytes())),
            ("reason", json::string(reason.as_bytes())),
        ]));
    }
    let mut next = 0;
    for g in &survey.nvidia {
        let (path, state, key) = nvidia_state(g);
        let index = index_of(g.usable(), chosen == Some(Source::Nvidia), &mut next);
        let info = g.info.as_ref();
        devices.push(json::object(&[
            ("source", json::string(b"nvidia")),
            ("index", json::opt_number(index.map(u64::from))),
            ("usable", g.usable().to_string()),
            ("bus", json::opt_string(g.entry.as_deref().map(str::as_bytes))),
            ("model", json::opt_string(info.map(|i| i.model.as_bytes()))),
            ("uuid", json::opt_string(info.map(|i| i.uuid.as_bytes()).filter(|u| !u.is_empty()))),
            ("minor", json::opt_number(g.minor)),
            ("excluded", g.excluded().to_string()),
            ("device_node", json::opt_string(path.as_deref().map(str::as_bytes))),
            ("device_node_state", json::string(key.as_bytes())),
            ("reason", json::string(state.as_bytes())),
        ]));
    }
    for (i, name) in survey.rocminfo.iter().flatten().enumerate() {
        devices.push(json::object(&[
            ("source", json::string(b"rocminfo")),
            ("index", i.to_string()),
            ("usable", "true".to_string()),
            ("gfx_target", json::string(name.as_bytes())),
        ]));
    }
    let pool = plan.pool.as_ref();
    // A pool variable that hides every GPU: no mode, as without a GPU.
    let mode = plan.vendor.filter(|_| !pool.is_some_and(Pool::hides_every_gpu));
    let mut fields = vec![
        ("source", json::opt_string(survey.chosen.map(|(_, s)| s.name().as_bytes()))),
        ("count", survey.count().to_string()),
        ("profile", json::string(settings.profile.name().as_bytes())),
        (
            "mode",
            json::opt_string(mode.map(|v| match settings.profile {
                Profile::Jax => "jax".as_bytes(),
                Profile::Xla => vendor_name(v).as_bytes(),
            })),
        ),
        (
            "pool",
            json::array(&pool.map_or(Vec::new(), |p| p.ids.iter().map(|id| json::string(id)).collect::<Vec<_>>())),
        ),
        ("pool_variable", json::opt_string(pool.and_then(|p| p.variable).map(str::as_bytes))),
        ("slots_per_gpu", plan.slots.to_string()),
        ("lock_dir", json::string(settings.lock_dir.path().to_bytes())),
        ("lock_dir_state", json::string(lock_dir_state(&settings.lock_dir.path()).as_bytes())),
        ("kfd_device", kfd_device_key(survey)),
        (
            "gfx_targets",
            json::array(&survey.gfx_targets().iter().map(|t| json::string(t.as_bytes())).collect::<Vec<_>>()),
        ),
        ("devices", json::array(&devices)),
    ];
    if let Some(why) = refused(plan, settings) {
        fields.push(("pool_error", json::string(why.as_bytes())));
    }
    // Only where another user than root and this one owns it, or any user
    // may write it without the sticky bit.
    let dir = settings.lock_dir.path();
    match Exposed::of_dir(&dir) {
        Some(Exposed { owner: Some(uid), .. }) => fields.push(("lock_dir_other_owner", uid.to_string())),
        Some(Exposed { owner: None, .. }) => fields.push(("lock_dir_unsticky", "true".into())),
        None => {}
    }
    json::object(&fields) + "\n"
}

/// `lock_dir_state`: `exists`, `missing`, `dangling`, `unusable`, or
/// `private` (`slots::privacy`), which wins over the first two.
fn lock_dir_state(dir: &core::ffi::CStr) -> &'static str {
    match (dir_state(dir), privacy::judge(dir)) {
        (DirState::Dangling, _) => "dangling",
        (DirState::Unusable, _) => "unusable",
        (_, Some(_)) => "private",
        (DirState::Missing, None) => "missing",
        (DirState::Exists, None) => "exists",
    }
}

/// What a lock directory is before any test ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DirState {
    Exists,
    /// The first test creates it.
    Missing,
    /// A link on its way points nowhere: every test would fail.
    Dangling,
    /// Not a directory, one this user may not open, or missing where this
    /// user may not make it: every test would fail.
    Unusable,
}

fn dir_state(dir: &core::ffi::CStr) -> DirState {
    use crate::slots::lockfile::{dangling, unusable_dir};
    let exists = rustix::fs::stat(dir).is_ok();
    if !exists && dangling(dir).is_some() {
        DirState::Dangling
    } else if unusable_dir(dir).is_some() {
        DirState::Unusable
    } else if exists {
        DirState::Exists
    } else {
        DirState::Missing
    }
}
