//! Why a world could not be formed or kept.

use crate::link::LinkError;

/// Why a world of processes could not be formed, or what ended it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The launcher's variables do not make a world, or make one this build cannot join: the
    /// variables (or the feature) that say so, named.
    #[error("{0}")]
    Launcher(String),
    /// A refusal that every process of the world reaches at the same point, together (they
    /// disagree on a value, or one of them failed a step the others waited for).
    #[error("{0}")]
    Together(String),
    /// The link failed at an exchange (a process lost, stopped, or past the world's timeout).
    #[error("process {process}: {source}")]
    Link {
        process: usize,
        #[source]
        source: LinkError,
    },
}

pub type Result<T> = std::result::Result<T, Error>;
