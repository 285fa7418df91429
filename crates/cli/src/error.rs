//! The error of the command line: the library's, and what only the subcommands can fail at.

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
    /// The library's error: meshes, training steps, checkpoints. (Those that a setting of the
    /// command line caused arrive as [`Error::Invalid`], naming it: [`Error::in_setting`].)
    #[error(transparent)]
    Firemesh(firemesh::Error),
    /// A zoo model's failure (a batch it does not take).
    #[error(transparent)]
    Zoo(#[from] ZooError),
    /// A command-line or configuration value that cannot be used.
    #[error("{0}")]
    Invalid(String),
    /// A refusal that every process of a world reaches at the same point, together (they
    /// disagree on the settings or the start step; process 0 cannot make the run folder).
    #[error("{0}")]
    World(String),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Model(#[from] ResNetError),
    #[error(transparent)]
    Gpt(#[from] GptError),
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

/// The errors the library wraps reach this one through [`firemesh::Error`], as they do when
/// the library returns them.
macro_rules! through_the_library {
    ($($error:ty),*) => {$(
        impl From<$error> for Error {
            fn from(e: $error) -> Self {
                Self::Firemesh(e.into())
            }
        }
    )*};
}

through_the_library!(Unavailable, MeshError, ShardError, CollectiveError);

/// The library's errors in the command line's words: a value the library refuses is named by
/// the option that gave it.
impl From<firemesh::Error> for Error {
    fn from(e: firemesh::Error) -> Self {
        Self::in_setting("--precision", e)
    }
}

/// A world that could not be formed: the launcher's variables (or this build) refuse it, or
/// its processes refused together (every process prints it before any exits), or its link
/// failed.
impl From<firemesh::world::Error> for Error {
    fn from(e: firemesh::world::Error) -> Self {
        use firemesh::world::Error as World;
        match e {
            World::Together(why) => Self::World(why),
            e @ (World::Launcher(_) | World::Link { .. }) => Self::Invalid(e.to_string()),
        }
    }
}

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

    /// `e` as [`From`] makes it, a precision the devices lack named as `precision_setting`
    /// (`--precision`, `--comm-precision`).
    pub fn in_setting(precision_setting: &str, e: firemesh::Error) -> Self {
        use firemesh::Error as Lib;
        Self::Invalid(match e {
            Lib::NoRanks => "--ranks 0: a mesh needs at least one rank".into(),
            Lib::TooManyRanks { asked, most, on } => {
                format!("--ranks {asked}: {on} has at most {most} ranks")
            }
            Lib::TooFewGpus { asked, found } => format!(
                "--ranks {asked}: only {found} CUDA GPU(s) found \
                 (--share-devices puts several ranks on one GPU)"
            ),
            Lib::BucketSize { mib, most } => {
                format!("--bucket-mib {mib}: a bucket holds more than 0 and at most {most} MiB")
            }
            Lib::ZeroStage(stage) => {
                format!(
                    "--zero {stage}: ZeRO stages 0, 1 and 3 exist here (1 shards the optimizer state, 3 the parameters too)"
                )
            }
            Lib::PrecisionUnsupported { precision, .. } => {
                format!("{precision_setting} {precision}: {e}")
            }
            Lib::LossScale(scale) => format!("--loss-scale {scale}: {e}"),
            Lib::GrowthInterval => format!("--loss-scale-interval 0: {e}"),
            e => return Self::Firemesh(e),
        })
    }

    /// A checkpoint that cannot be written, read or used: the library's
    /// [`firemesh::Error::Checkpoint`].
    pub fn checkpoint(why: impl std::fmt::Display) -> Self {
        Self::Firemesh(firemesh::Error::Checkpoint(why.to_string()))
    }
}
