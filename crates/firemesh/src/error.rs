//! The error of the facade and the command line: one enum over the workspace's typed errors.

use firemesh_backend::{MeshError, ShardError};
use firemesh_collective::{CollectiveError, Unavailable};
use firemesh_datasets::DatasetError;
use firemesh_gpt::GptError;
use firemesh_resnet::ResNetError;
use firemesh_zoo::ZooError;
use std::path::PathBuf;

/// Why a firemesh job could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line or configuration value that cannot be used.
    #[error("{0}")]
    Invalid(String),
    #[error("the devices asked for cannot be used: {0}")]
    Unavailable(#[from] Unavailable),
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Model(#[from] ResNetError),
    #[error(transparent)]
    Gpt(#[from] GptError),
    #[error(transparent)]
    Zoo(#[from] ZooError),
    /// A checkpoint that cannot be written, read or used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A file of the run folder that cannot be written or read.
    #[error("{0}")]
    Io(String),
    /// Training diverged.
    #[error("the loss became {loss} at step {step}; stopped{}", match checkpoint {
        Some(p) => format!(" (the last good checkpoint is {})", p.display()),
        None => " (no checkpoint was written before it)".to_string(),
    })]
    NonFinite {
        step: usize,
        loss: f64,
        checkpoint: Option<PathBuf>,
    },
    /// A self-check of a result failed.
    #[error("{0}")]
    Check(String),
}

pub type Result<T> = std::result::Result<T, Error>;
