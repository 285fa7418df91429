//! firemesh: multi-GPU data-parallel training for Burn. This crate re-exports the library API;
//! the `firemesh` binary is the command-line entry point.

pub use error::{Error, Result};
pub use firemesh_backend as backend;
pub use firemesh_collective as collective;
pub use trainer::{StepReport, Trainer};

pub mod alloc;
pub mod bench;
mod error;
pub mod grads;
pub mod mesh;
pub mod simulate;
pub mod train;
pub mod trainer;
