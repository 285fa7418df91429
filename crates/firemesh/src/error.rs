//! The error of the facade and the command line: one enum over the workspace's typed errors.

use firemesh_backend::{MeshError, ShardError};
use firemesh_collective::{CollectiveError, Unavailable};
use firemesh_datasets::DatasetError;
use firemesh_resnet::ResNetError;

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
    /// A self-check of a result failed.
    #[error("{0}")]
    Check(String),
}

pub type Result<T> = std::result::Result<T, Error>;
