//! Errors returned by every collective. Bad input is reported, never panicked on.

use std::time::Duration;

/// Why a collective did not run, or did not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectiveError {
    #[error("a group needs at least one rank")]
    EmptyGroup,
    #[error("rank {first} and rank {second} name the same device ({device}); a device may appear once per group")]
    DuplicateRank {
        first: usize,
        second: usize,
        device: String,
    },
    #[error("rank {rank}: device {device} is not available: {reason}")]
    DeviceUnavailable {
        rank: usize,
        device: String,
        reason: String,
    },
    #[error("expected one buffer per rank ({expected}), got {got}")]
    WrongRankCount { expected: usize, got: usize },
    #[error("rank {rank} holds {got} elements but rank 0 holds {expected}; all ranks must pass the same length")]
    LengthMismatch {
        rank: usize,
        expected: usize,
        got: usize,
    },
    #[error("rank {rank} passed a tensor of shape {got:?} where rank 0 passed {expected:?}")]
    ShapeMismatch {
        rank: usize,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("rank {rank} holds {got:?} but rank 0 holds {expected:?}; all ranks must pass the same dtype")]
    DTypeMismatch {
        rank: usize,
        expected: crate::DType,
        got: crate::DType,
    },
    #[error("rank {rank}: {len} elements is more than a collective buffer holds (2^32 - 1)")]
    TooLarge { rank: usize, len: usize },
    #[error("dtype {dtype:?} is not supported on rank {rank}'s device")]
    UnsupportedDType { rank: usize, dtype: crate::DType },
    #[error("rank {rank}: buffer of {bytes} bytes is not a whole number of {dtype:?} elements")]
    RaggedBuffer {
        rank: usize,
        bytes: usize,
        dtype: crate::DType,
    },
    #[error(
        "reduce-scatter parts {parts:?} must be one per rank and add up to the {len} elements"
    )]
    BadPartition { parts: Vec<usize>, len: usize },
    #[error("root rank {root} is outside the group of {ranks} ranks")]
    BadRoot { root: usize, ranks: usize },
    #[error("rank index {rank} is outside the group of {ranks} ranks")]
    BadRank { rank: usize, ranks: usize },
    #[error("rank {rank} joined the collective twice")]
    RankJoinedTwice { rank: usize },
    #[error("ranks {missing:?} did not join the collective within {timeout:?}")]
    Timeout {
        missing: Vec<usize>,
        timeout: Duration,
    },
    #[error("the collective failed on rank {rank}: {reason}")]
    RankFailed { rank: usize, reason: String },
    #[error("the runtime failed on rank {rank}: {reason}")]
    Runtime { rank: usize, reason: String },
}

/// Result of a collective.
pub type Result<T> = std::result::Result<T, CollectiveError>;

/// A group lists each device once (`new_shared` constructors opt out on purpose).
pub(crate) fn ensure_distinct<D: PartialEq + std::fmt::Debug>(devices: &[D]) -> Result<()> {
    for (i, a) in devices.iter().enumerate() {
        if let Some(j) = devices[..i].iter().position(|b| b == a) {
            return Err(CollectiveError::DuplicateRank {
                first: j,
                second: i,
                device: format!("{a:?}"),
            });
        }
    }
    Ok(())
}

/// Run `f`, turning a panic inside the runtime (CubeCL reports many device
/// failures by panicking on its server thread) into an error for `rank`.
pub(crate) fn catch_runtime<T>(rank: usize, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        CollectiveError::Runtime {
            rank,
            reason: panic_message(payload.as_ref()),
        }
    })
}

/// [`catch_runtime`] for a runtime call that also reports failure as an error value.
pub(crate) fn try_runtime<T, E: std::fmt::Debug>(
    rank: usize,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> Result<T> {
    catch_runtime(rank, f)?.map_err(|e| CollectiveError::Runtime {
        rank,
        reason: format!("{e:?}"),
    })
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
