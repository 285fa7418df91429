//! The error of the library: one enum over the typed errors of the workspace crates it drives.

use firemesh_backend::{MeshError, ShardError};
use firemesh_collective::{CollectiveError, Unavailable};
use firemesh_zoo::ZooError;

/// Why a mesh, a training step or a checkpoint could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value that cannot be used (a rank count, a bucket size).
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
    /// A zoo model's failure, such as the loss of a [`crate::Trainer`] step (a batch its model
    /// does not take).
    #[error(transparent)]
    Zoo(#[from] ZooError),
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
}
