//! Why a peer's measurement failed.

use firemesh_zoo::ZooError;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// A sequence length the GPT cannot take.
    #[error(
        "sequences of {seq_len} tokens: the GPT takes 2 to {most} (its context plus the target)"
    )]
    SequenceLength { seq_len: usize, most: usize },
    #[error(transparent)]
    Model(#[from] ZooError),
    /// burn-train panicked (a device or NCCL refusing): its message.
    #[error("burn-train stopped: {0}")]
    Panicked(String),
    /// A device did not finish its work.
    #[error("a device failed to sync: {0}")]
    Sync(String),
}
