//! What several subcommands share: the options declared once here ([`RuntimeOptions`] for
//! train, bench and demo; [`MeshOptions`] for train and demo; [`StepOptions`] for train, bench
//! and simulate), and one check for each value that several subcommands take, whichever
//! subcommand (or config file) it comes from.

use crate::{Error, Result};
use firemesh::backend::MeshConfig;
use firemesh::collective::{Engine, Transfer};
use firemesh::mesh::{DeviceMesh, MeshKind, RuntimeConfig};
use firemesh::named::Named;
use firemesh::Precision;
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;
use std::time::Duration;

/// How the meshes run; each option can also come from its environment variable. Read at the
/// program's edge, once, into the one [`RuntimeConfig`] the library is handed.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Ranks 1.. on their own threads: on or off [default: on for CPU and CUDA meshes, off for
    /// wgpu].
    #[arg(long, env = "FIREMESH_RANK_THREADS", value_name = "on|off", value_parser = switch)]
    pub rank_threads: Option<bool>,
    /// Microseconds an idle rank thread polls for its next op before it sleeps; 0 sleeps at
    /// once [default: 50].
    #[arg(long, env = "FIREMESH_LANE_POLL_US", value_name = "US")]
    pub lane_poll_us: Option<u64>,
    /// How copies between CUDA GPUs are ordered: stream (queued on raw streams, ordered by
    /// flags in device memory; a pair whose driver refuses falls back to sync, with a warning)
    /// or sync (each copy waits for both devices) [default: stream].
    #[arg(long, env = "FIREMESH_CUDA_COPY", value_enum)]
    pub cuda_copy: Option<CudaCopy>,
    /// What runs the sums of a CUDA mesh: nccl (NCCL, through CubeCL, on the devices; not yet
    /// run on a GPU), cubecl (CubeCL's ring) or auto (NCCL where the library loads, the GPUs
    /// are distinct and a check sum reads back right, else the ring); the run's summary says
    /// which ran and why. Other meshes sum on their own [default: cubecl].
    #[arg(long, env = "FIREMESH_ENGINE", value_enum)]
    pub engine: Option<EngineOption>,
}

/// What runs the sums of a CUDA mesh (`--engine`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum EngineOption {
    Auto,
    Cubecl,
    Nccl,
}

/// How copies between CUDA GPUs are ordered (`--cuda-copy`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CudaCopy {
    Stream,
    Sync,
}

impl RuntimeOptions {
    pub fn config(&self) -> RuntimeConfig {
        RuntimeConfig {
            mesh: MeshConfig {
                rank_threads: self.rank_threads,
                lane_poll: self.lane_poll_us.map(Duration::from_micros),
                settle_before_comm: false,
            },
            cuda_copy: match self.cuda_copy {
                None => Transfer::default(),
                Some(CudaCopy::Stream) => Transfer::StreamOrdered,
                Some(CudaCopy::Sync) => Transfer::Synchronous,
            },
            engine: match self.engine {
                None | Some(EngineOption::Cubecl) => Engine::Cubecl,
                Some(EngineOption::Auto) => Engine::Auto,
                Some(EngineOption::Nccl) => Engine::Nccl,
            },
        }
    }
}

/// `on`/`off` (or `1`/`0`, `true`/`false`).
pub fn switch(text: &str) -> std::result::Result<bool, String> {
    match text.trim() {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        other => Err(format!("{other:?} is neither on nor off")),
    }
}

/// Which devices, and how many ranks. A config file of `firemesh train` takes the same keys.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MeshOptions {
    /// Devices: CUDA GPUs when usable (auto), else a CPU mesh [default: auto].
    #[arg(long, value_parser = named::<MeshKind>())]
    pub mesh: Option<MeshKind>,
    /// Ranks [default: one per GPU, or 4 on the CPU].
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Let several ranks share one GPU (for testing on fewer GPUs than ranks).
    #[arg(long)]
    #[serde(default)]
    pub share_devices: bool,
}

impl MeshOptions {
    /// The devices asked for, found (checks `--ranks` against them).
    pub fn discover(&self) -> Result<DeviceMesh> {
        let kind = self.mesh.unwrap_or(MeshKind::Auto);
        Ok(DeviceMesh::discover(kind, self.ranks, self.share_devices)?)
    }
}

/// How a step sums its gradients over the ranks: `firemesh train`, `bench` and `simulate` take
/// these, each with one default (the library's). A config file of `firemesh train` takes the
/// same keys.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StepOptions {
    /// Gradients are summed over the ranks in buckets of this many MiB [default: 25, as
    /// PyTorch DDP's].
    #[arg(long, value_name = "MIB")]
    pub bucket_mib: Option<f64>,
    /// Precision the gradient buckets are summed in: f32, or bf16/f16 (half the bytes on the
    /// wire, the sums cast back to f32) [default: f32].
    #[arg(long, value_name = "PRECISION", value_parser = named::<Precision>())]
    pub comm_precision: Option<Precision>,
    /// ZeRO-3: parameters gathered ahead of use, on the communication thread, until this many
    /// MiB are in flight (and always the next one); 0 gathers each when its op runs
    /// [default: the bucket size].
    #[arg(long, value_name = "MIB")]
    pub gather_ahead_mib: Option<f64>,
}

impl StepOptions {
    /// The bytes of a gradient bucket, checked.
    pub fn bucket_bytes(&self) -> Result<usize> {
        Ok(match self.bucket_mib {
            Some(mib) => firemesh::grads::bucket_bytes(mib)?,
            None => firemesh::grads::DEFAULT_BUCKET_BYTES,
        })
    }

    /// The bytes of parameter gathers issued ahead of use under ZeRO-3, checked.
    pub fn gather_ahead_bytes(&self) -> Result<usize> {
        match self.gather_ahead_mib {
            None => self.bucket_bytes(),
            Some(mib) if mib.is_finite() && mib >= 0.0 => Ok((mib * (1u64 << 20) as f64) as usize),
            Some(mib) => Err(crate::Error::Invalid(format!(
                "--gather-ahead-mib {mib}: a number of MiB, 0 or more"
            ))),
        }
    }

    /// The bucket size in MiB, as asked or the default.
    pub fn bucket_mib(&self) -> f64 {
        let mib = (1u64 << 20) as f64;
        self.bucket_mib
            .unwrap_or(firemesh::grads::DEFAULT_BUCKET_BYTES as f64 / mib)
    }

    /// The precision of the gradient sums (f32 unless asked).
    pub fn comm_precision(&self) -> Precision {
        self.comm_precision.unwrap_or(Precision::F32)
    }
}

/// Image sides the models take, in pixels.
pub const IMAGE_SIDES: RangeInclusive<usize> = 4..=4096;

/// `--image-size`: a side in [`IMAGE_SIDES`].
pub fn image_size(side: usize) -> Result<usize> {
    if IMAGE_SIDES.contains(&side) {
        Ok(side)
    } else {
        Err(Error::Invalid(format!(
            "--image-size {side}: must be {} to {} pixels",
            IMAGE_SIDES.start(),
            IMAGE_SIDES.end()
        )))
    }
}

/// `--seq-len`: at least 2 tokens (an input and its next-token target).
pub fn seq_len(tokens: usize) -> Result<usize> {
    if tokens >= 2 {
        Ok(tokens)
    } else {
        Err(Error::Invalid(format!(
            "--seq-len {tokens}: must be at least 2 tokens"
        )))
    }
}

/// A count that must be at least 1 (`--steps`, `--batch`, …).
pub fn at_least_one(option: &str, value: usize) -> Result<usize> {
    if value == 0 {
        Err(Error::Invalid(format!("{option} must be at least 1")))
    } else {
        Ok(value)
    }
}

/// The parser of an option whose values are one of the library's [`Named`] choices
/// (`--precision`, `--optimizer`, `--schedule`, `--mesh`): `--help` lists the names.
pub fn named<T: Named + Clone + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(T::ALL.iter().map(|v| v.name()))
        .try_map(|name| T::from_name(&name))
}
