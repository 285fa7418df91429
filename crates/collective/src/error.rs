//! Errors returned by every collective. Bad input is reported, never panicked on.

use std::time::Duration;

/// Why a collective did not run, or did not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectiveError {
    #[error("a group needs at least one rank")]
    EmptyGroup,
    #[error("the {engine} engine cannot run this group's sums: {reason}")]
    EngineUnavailable {
        engine: &'static str,
        reason: String,
    },
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
    #[error(
        "all-gather places {places:?} must be one list per rank, as long as its shard \
         ({lens:?} elements), inside the result's {len} elements and not overlapping"
    )]
    BadPlaces {
        places: Vec<Vec<std::ops::Range<usize>>>,
        lens: Vec<usize>,
        len: usize,
    },
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

/// Why the devices of a runtime cannot be used on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("the CUDA driver library (libcuda) is not installed")]
    NoCudaDriver,
    #[error("the CUDA driver failed to start ({0})")]
    CudaDriverFailed(String),
    #[error("the CUDA driver could not count its GPUs ({0})")]
    CudaCountFailed(String),
    #[error("the CUDA driver found no GPU")]
    NoGpu,
    #[error(
        "the CUDA runtime compiler (libnvrtc, part of the CUDA toolkit) is not installed; \
         CubeCL compiles its kernels with it"
    )]
    NoNvrtc,
    #[error(
        "the CUDA toolkit's headers (include/cuda_runtime.h) were not found under CUDA_PATH, \
         /usr/local/cuda, /opt/cuda or /usr (with /usr/bin/nvcc); CubeCL compiles its kernels \
         against them"
    )]
    NoCudaHeaders,
    #[error("CUDA device {index} does not exist ({present} present)")]
    NoSuchCudaDevice { index: usize, present: usize },
    #[error("no wgpu adapter (is a Vulkan driver installed?): {0}")]
    NoWgpuAdapter(String),
    #[error("the wgpu adapter refused another device: {0}")]
    WgpuDeviceRefused(String),
    /// The runtime is a cargo feature this build left out.
    #[error("this build has no {runtime} support (the `{feature}` cargo feature of firemesh)")]
    NotBuilt {
        runtime: &'static str,
        feature: &'static str,
    },
}

/// Result of a collective.
pub type Result<T> = std::result::Result<T, CollectiveError>;

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

/// The text of a panic payload (a `&str` or `String` message).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
