//! The conventions a run follows, named once for every layer: whose
//! scripts it stands in for (the profile), whose variables tell the test
//! its GPUs (the vendor), and how lock files name a GPU. Plain values with
//! no behaviour beyond their names, so that errors, the slot search and the
//! hardware survey can all take them without importing the settings.

/// Whose conventions the wrapper follows: XLA's `parallel_gpu_execute.sh`
/// (the default) or JAX's `parallel_accelerator_execute.sh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Xla,
    Jax,
}

impl Profile {
    pub fn parse(value: &[u8]) -> Option<Profile> {
        match value {
            b"xla" => Some(Profile::Xla),
            b"jax" => Some(Profile::Jax),
            _ => None,
        }
    }

    /// The default: `jax` when the executable is called
    /// `parallel_accelerator_execute` (so it drops in for JAX's script).
    pub fn from_argv0(argv0: &[u8]) -> Profile {
        let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or(argv0);
        if base == b"parallel_accelerator_execute" { Profile::Jax } else { Profile::Xla }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Xla => "xla",
            Profile::Jax => "jax",
        }
    }

    /// `gpulock<id>_<slot>` or `jax_accelerator_lock_<id>_<slot>`.
    pub fn lock_prefix(self) -> &'static [u8] {
        match self {
            Profile::Xla => b"gpulock",
            Profile::Jax => b"jax_accelerator_lock_",
        }
    }

    /// The variable that gives the count.
    pub fn count_variable(self) -> &'static str {
        match self {
            Profile::Xla => "TF_GPU_COUNT",
            Profile::Jax => "JAX_ACCELERATOR_COUNT",
        }
    }

    /// The variable that gives the slots per GPU.
    pub fn slots_variable(self) -> &'static str {
        match self {
            Profile::Xla => "TF_TESTS_PER_GPU",
            Profile::Jax => "JAX_TESTS_PER_ACCELERATOR",
        }
    }
}

/// How the test is told which GPUs are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// AMD GPUs: the pool is a preset `ROCR_VISIBLE_DEVICES`, and the
    /// variables are [`Visible`]'s.
    Rocm,
    /// `CUDA_VISIBLE_DEVICES=<ids>`.
    Cuda,
    /// `CUDA_VISIBLE_DEVICES=<ids>` and `HIP_VISIBLE_DEVICES=<ids>`, as the
    /// original TensorFlow script did.
    Classic,
}

impl Vendor {
    pub fn parse(value: &[u8]) -> Option<Vendor> {
        match value {
            b"rocm" => Some(Vendor::Rocm),
            b"cuda" => Some(Vendor::Cuda),
            b"classic" => Some(Vendor::Classic),
            _ => None,
        }
    }
}

/// Which variable tells an AMD test its GPUs (`--visible`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visible {
    /// `HIP_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` set to the GPUs'
    /// indices among those ROCr shows; `ROCR_VISIBLE_DEVICES` left as it
    /// is. XLA main's script (the xla profile's default) and the ROCm/jax
    /// fork's.
    Hip,
    /// `ROCR_VISIBLE_DEVICES` set to the GPUs' ids, so that ROCr shows the
    /// test nothing else. xla profile: `HIP_VISIBLE_DEVICES=0..n-1`, no
    /// `CUDA_VISIBLE_DEVICES` (openxla/xla#46534's proposal); jax profile:
    /// JAX main's script (its default).
    Rocr,
}

impl Visible {
    pub fn parse(value: &[u8]) -> Option<Visible> {
        match value {
            b"hip" => Some(Visible::Hip),
            b"rocr" => Some(Visible::Rocr),
            _ => None,
        }
    }

    /// Each profile's default: the variables its upstream main sets.
    pub fn default_for(profile: Profile) -> Visible {
        match profile {
            Profile::Xla => Visible::Hip,
            Profile::Jax => Visible::Rocr,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Visible::Hip => "hip",
            Visible::Rocr => "rocr",
        }
    }

    /// Which AMD variables a test gets, `None` for none: in the xla
    /// profile, in rocm mode; in the jax profile, on AMD GPUs, or on any
    /// host when `hip` is asked for (the ROCm/jax fork's variables).
    pub fn in_force(profile: Profile, vendor: Vendor, asked: Option<Visible>) -> Option<Visible> {
        match (profile, asked) {
            _ if vendor == Vendor::Rocm => Some(asked.unwrap_or(Visible::default_for(profile))),
            (Profile::Jax, Some(Visible::Hip)) => Some(Visible::Hip),
            _ => None,
        }
    }
}

/// The variables a test gets, as `--list` names them.
pub fn test_variables(profile: Profile, vendor: Vendor, asked: Option<Visible>) -> &'static str {
    match (profile, Visible::in_force(profile, vendor, asked)) {
        (Profile::Xla, Some(Visible::Hip)) => "HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES",
        (Profile::Xla, Some(Visible::Rocr)) => "ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES",
        (Profile::Xla, None) if vendor == Vendor::Cuda => "CUDA_VISIBLE_DEVICES",
        (Profile::Xla, None) => "CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES",
        (Profile::Jax, Some(Visible::Hip)) => "TPU_VISIBLE_CHIPS, CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES",
        (Profile::Jax, Some(Visible::Rocr)) => {
            "TPU_VISIBLE_CHIPS, ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, ONEAPI_VISIBLE_DEVICES"
        }
        (Profile::Jax, None) => "TPU_VISIBLE_CHIPS, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ONEAPI_VISIBLE_DEVICES",
    }
}

/// What to do with a GPU whose RAS counters show uncorrectable memory
/// errors (`PARALLEL_GPU_EXECUTE_UNHEALTHY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unhealthy {
    /// Show it in `--status` only (the default): no counter is read on the
    /// way to a slot.
    Report,
    /// Also one warning line when a test is given such a GPU.
    Warn,
    /// Pass it over as if drained.
    Avoid,
}

impl Unhealthy {
    pub fn parse(value: &[u8]) -> Option<Unhealthy> {
        match value {
            b"report" => Some(Unhealthy::Report),
            b"warn" => Some(Unhealthy::Warn),
            b"avoid" => Some(Unhealthy::Avoid),
            _ => None,
        }
    }
}

/// How lock files name a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockNames {
    /// `gpulock<index>_<slot>`, as the classic scripts name them.
    Index,
    /// `gpulock<identity>_<slot>`.
    Physical,
}

impl LockNames {
    pub fn parse(value: &[u8]) -> Option<LockNames> {
        match value {
            b"index" => Some(LockNames::Index),
            b"physical" => Some(LockNames::Physical),
            _ => None,
        }
    }
}

/// The pool variable of rocm mode: a preset pool's GPUs, which ROCr shows
/// in the list's order.
pub const ROCR_POOL_VARIABLE: &str = "ROCR_VISIBLE_DEVICES";

/// The pool variable of cuda mode, the only one whose ids may take CUDA's
/// MIG form ([`crate::slots::request::is_cuda_mig_path`]).
pub const CUDA_POOL_VARIABLE: &str = "CUDA_VISIBLE_DEVICES";
