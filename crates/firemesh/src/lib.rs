//! firemesh: multi-GPU data-parallel training for Burn. The library: the `Sharded` backend and
//! the collectives re-exported, [`Trainer`] (one training step for every loop), gradient
//! buckets, mixed precision ([`precision`]), ZeRO-1 ([`zero`]), meshes and their
//! `RuntimeConfig`, checkpoints, the optimizer of the zoo's runs and the programs' allocator.
//! The command line (`firemesh train`, `bench`, `simulate`, `compare`, `demo`) is the
//! `firemesh-cli` package, built on this API.

pub use error::{Error, Result};
pub use firemesh_backend as backend;
pub use firemesh_collective as collective;
pub use precision::{LossScaler, LossScaling, Precision};
pub use trainer::{StepReport, Trainer};

pub mod alloc;
pub mod checkpoint;
mod error;
pub mod grads;
pub mod mesh;
pub mod optim;
pub mod precision;
pub mod trainer;
pub mod zero;
