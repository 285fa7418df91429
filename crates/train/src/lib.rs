//! firemesh-train: data-parallel training over the ranks of a collective group.
//!
//! [`DataParallel`] keeps one replica of the model (and of its optimizer) per rank; every step
//! each rank computes the loss of its shard of the batch, the gradients are averaged across ranks
//! by bucketed all-reduces ([`GradientSync`]), and every replica takes the same optimizer step,
//! so the replicas stay identical and the run matches single-device training on the whole batch.

mod data_parallel;
mod grad_sync;

pub use data_parallel::DataParallel;
pub use grad_sync::GradientSync;

/// Why a training step failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("gradient sync failed: {0}")]
    Collective(#[from] firemesh_collective::CollectiveError),
    #[error("rank {rank} has gradients for {got} parameters but rank 0 for {expected}; replicas must be the same model")]
    GradientSetMismatch {
        rank: usize,
        expected: usize,
        got: usize,
    },
    #[error("expected one item per rank ({expected}), got {got}")]
    WrongRankCount { expected: usize, got: usize },
    #[error("rank {rank} failed: {reason}")]
    RankPanicked { rank: usize, reason: String },
}
