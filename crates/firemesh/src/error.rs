//! The error of the library: what went wrong, in the library's terms (a program maps them to
//! its own settings' names), over the typed errors of the workspace crates it drives.

use firemesh_backend::{MeshError, ShardError};
use firemesh_collective::{CollectiveError, Unavailable};

/// Why a mesh, a training step or a checkpoint could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("a mesh needs at least one rank")]
    NoRanks,
    #[error("{asked} ranks: {on} has at most {most}")]
    TooManyRanks {
        asked: usize,
        most: usize,
        on: &'static str,
    },
    /// More ranks than GPUs, with the GPUs not to be shared.
    #[error("{asked} ranks: only {found} CUDA GPU(s) found, and ranks may not share one")]
    TooFewGpus { asked: usize, found: usize },
    #[error("a gradient bucket of {mib} MiB: it holds more than 0 and at most {most} MiB")]
    BucketSize { mib: f64, most: f64 },
    /// A rank's device that cannot compute in a precision.
    #[error("rank {rank}'s device ({device}) does not compute in {precision}{hint}")]
    PrecisionUnsupported {
        /// The precision's name (`bf16`).
        precision: &'static str,
        rank: usize,
        device: String,
        /// Why, where it is known (" (WGSL has no bf16 type)"), else empty.
        hint: &'static str,
    },
    #[error("the initial loss scale must be a finite positive number, got {0}")]
    LossScale(f64),
    #[error("the loss scale's growth interval must be at least 1 step")]
    GrowthInterval,
    #[error("ZeRO stage {0}: only stages 0, 1 and 3 exist here (1: the optimizer state sharded; 3: the parameters too)")]
    ZeroStage(u8),
    /// A [`crate::Trainer`] step after one whose failure took the model with it.
    #[error("the trainer lost its model in an earlier failed step")]
    ModelLost,
    #[error("the devices asked for cannot be used: {0}")]
    Unavailable(#[from] Unavailable),
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    /// The model's own failure in a [`crate::Trainer`] step's loss (a batch it does not take).
    #[error(transparent)]
    Model(Box<dyn std::error::Error + Send + Sync>),
    /// A checkpoint that cannot be written, read or used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A file that cannot be written or read: which, and the operating system's error.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error with what was being done (`checkpoint: cannot write`, a path).
    pub fn io(context: impl std::fmt::Display, source: std::io::Error) -> Self {
        Self::Io {
            context: context.to_string(),
            source,
        }
    }

    /// The model's error in a step's loss: `trainer.step(|m| m.loss(b).map_err(Error::model))`.
    pub fn model(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Model(Box::new(error))
    }
}
