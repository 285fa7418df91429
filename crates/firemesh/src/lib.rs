//! firemesh: multi-GPU data-parallel training for Burn. The library: the `Sharded` backend, the
//! collectives and the world of processes ([`world`]: links, launchers, joins) re-exported, [`Trainer`] (one training step for every loop), gradient
//! buckets, mixed precision ([`precision`]), ZeRO-1 ([`zero`]), meshes and their
//! `RuntimeConfig`, checkpoints, the optimizers ([`optim`]) and the programs' allocator.
//! The command line (`firemesh train`, `bench`, `simulate`, `compare`, `demo`) is the
//! `firemesh-cli` package, built on this API.

pub use error::{Error, Result};
pub use firemesh_backend as backend;
pub use firemesh_collective as collective;
pub use firemesh_world as world;
pub use precision::{LossScaler, LossScaling, Precision};
pub use trainer::{StepReport, Trainer};

/// How this build's CubeCL kernels (wgpu, CUDA) are chosen: "autotuned" with the `autotune`
/// feature (what Burn's default features build: each matmul, convolution and reduction shape
/// timed once per device among CubeCL's kernels, the choice kept in CubeCL's autotune cache),
/// else "fixed" (CubeCL's defaults: direct convolutions, one matmul kernel per device).
pub const KERNELS: &str = if cfg!(feature = "autotune") {
    "autotuned"
} else {
    "fixed"
};

pub mod alloc;
pub mod checkpoint;
mod error;
pub mod grads;
pub mod mesh;
pub mod named;
pub mod optim;
pub mod precision;
pub mod trainer;
pub mod zero;
