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
    /// A file that cannot be written or read: which, and the operating system's error.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A value that cannot be encoded as JSON.
    #[error("cannot encode {what}: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A peer (burn-train's own strategies) that could not be measured.
    #[error("{peer} failed: {source}")]
    Peer {
        peer: String,
        #[source]
        source: firemesh_peers::PeerError,
    },
    /// A chart that cannot be drawn.
    #[error("cannot draw {0}")]
    Chart(String),
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

impl Error {
    /// An I/O error with what was being done (`cannot write metrics.jsonl`, a path).
    pub fn io(context: impl std::fmt::Display, source: std::io::Error) -> Self {
        Self::Io {
            context: context.to_string(),
            source,
        }
    }

    /// A JSON encoding error of `what`.
    pub fn json(what: impl std::fmt::Display, source: serde_json::Error) -> Self {
        Self::Json {
            what: what.to_string(),
            source,
        }
    }
}
