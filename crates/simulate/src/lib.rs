//! A scaling simulator for data-parallel training.
//!
//! Input: a one-device training step ([`StepProfile`]: forward time, per-layer backward times
//! and gradient sizes, in the order the backward pass produces them), the gradient bucket
//! schedule, the collectives that cannot wait (BatchNorm statistics summed over the ranks), the
//! host time of issuing the step's ops, and the links ([`Link`]: NCCL's published ring cost
//! model for the presets, α–β for custom links).
//! Output: the predicted step time, throughput and scaling efficiency for N ranks, with and
//! without overlap and bucketing ([`predict`], [`sweep`]).
//!
//! The model, step by step (times for one rank; every rank does the same work):
//! 1. compute: forward, then backward layer by layer; a bucket of gradients is ready when the
//!    layer that wrote its last byte has finished its backward;
//! 2. gradient sums: one all-reduce per bucket, queued in bucket order on a communication stream
//!    that runs beside compute (with overlap) or after the whole backward (without);
//! 3. blocking sums (synchronized BatchNorm): on the critical path, never hidden;
//! 4. stragglers: a synchronous step waits for the slowest rank. With per-rank compute times
//!    spread around their mean with coefficient of variation `cv`, the slowest of N takes
//!    `mean * (1 + cv * E[max of N standard normals])` ([`straggler`]). No published
//!    measurement of that spread is built in: `cv` is 0 unless the user gives one;
//! 5. host: ops are issued by the host while the device runs them; the step takes at least
//!    the host's issue time ([`HostModel`]).
//!
//! All-reduce time ([`all_reduce_seconds`]): one ring through every rank, `2 (N-1)` steps (or,
//! across nodes, one of the two-level schedules of [`Levels`]). On a
//! preset link each step costs NCCL's published latency for its hardware and protocol, plus a
//! base latency per collective, and the protocol with the least time is taken, as NCCL does.
//! On a custom link each step costs α, or one-shot `α + (N-1) M / β` when shorter. Across
//! nodes the ring's bandwidth is the smaller of the node's link and its network ports.
//!
//! Inputs and their sources: [`gpu`] (published throughputs), [`LINK_PRESETS`] (link specs),
//! the NCCL latencies in `link.rs`; [`validate`] checks the predictions against held-out
//! published 8-GPU results.

pub mod gpu;
mod link;
pub mod memory;
mod predict;
mod profile;
pub mod straggler;
pub mod validate;
mod workload;

pub use gpu::{Gpu, Published, GPUS, RESNET50};
pub use link::{
    all_gather_seconds, all_reduce_seconds, Hw, Levels, Link, Topology, BUS_SHARE, LINK_PRESETS,
};
pub use memory::{model_state, ModelState, StateShape};
pub use predict::{predict, sweep, HostModel, Prediction, Scenario, Schedule, Sharding};
pub use profile::{Layer, StepProfile};
pub use workload::{gpt, resnet, LayerShape, Workload};

/// What can go wrong building or reading a simulation's inputs.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read the profile {path}: {reason}")]
    Profile { path: String, reason: String },
}

pub type Result<T> = std::result::Result<T, SimulateError>;
