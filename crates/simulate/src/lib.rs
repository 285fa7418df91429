//! A scaling simulator for data-parallel training.
//!
//! Input: a one-device training step ([`StepProfile`]: forward time, per-layer backward times
//! and gradient sizes, in the order the backward pass produces them), the gradient bucket
//! schedule, the collectives that cannot wait (BatchNorm statistics summed over the ranks), the
//! host time of issuing the step's ops, and an α–β model of the links ([`Link`], with presets).
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
//!    `mean * (1 + cv * E[max of N standard normals])` ([`straggler`]);
//! 5. host: ops are issued by the host while the device runs them; the step takes at least
//!    the host's issue time ([`HostModel`]).
//!
//! All-reduce time: ring, `2 (N-1) (α + M / (N β))`, or one-shot, `α + (N-1) M / β`, whichever
//! is shorter (the collective library picks by size). Beyond one node, hierarchical:
//! reduce-scatter in the node, ring all-reduce of the node's share across nodes, all-gather in
//! the node.

mod link;
mod predict;
mod profile;
pub mod straggler;
mod workload;

pub use link::{all_reduce_seconds, Link, Topology, LINK_PRESETS};
pub use predict::{predict, sweep, HostModel, Prediction, Scenario, Schedule};
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
