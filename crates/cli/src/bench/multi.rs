//! The peer: burn-train's `Learner` with its `MultiDevice` strategy, which keeps a copy of the
//! model per device, gives each device its own batch and sums their gradients on the first
//! device. It trains the same model on the same synthetic samples (`firemesh_peers`), and its
//! step time is the difference of two epochs of different lengths, so that the Learner's start
//! and end (threads, loaders, the validation pass) cancel out.

use super::step::{Measured, Work};
use crate::{Error, Result};
use burn::prelude::Backend;
use burn::train::{ExecutionStrategy, MultiDeviceOptim};

/// Step times of `work` through burn-train's `MultiDevice` over `devices`, each device taking
/// a per-rank batch per step. A panic inside burn-train is returned as an error.
pub fn step_seconds<B: Backend>(
    devices: &[B::Device],
    work: &Work,
    label: &str,
) -> Result<Measured> {
    let multi = || ExecutionStrategy::multi(devices.to_vec(), MultiDeviceOptim::OptimMainDevice);
    let label = format!("bench: {label}");
    let step_s = firemesh_peers::step_seconds::<B>(devices, &multi, &work.peer(), &label).map_err(
        |source| Error::Peer {
            peer: "burn-train MultiDevice".into(),
            source,
        },
    )?;
    Ok(Measured {
        step_s,
        ..Measured::default()
    })
}
