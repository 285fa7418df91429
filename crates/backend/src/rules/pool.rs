//! Pooling, interpolation and unfolding over a batch: per sample and per channel, so the input
//! and, for the backward ops, the output gradient and indices (aligned with it) may stay
//! sharded along the batch or the channels.

use crate::placement::Placement;
use crate::rules::{activations, Meta, Plan};

pub(crate) fn per_sample_and_channel(m: &[Meta]) -> Plan {
    let all: Vec<usize> = (0..m.len()).collect();
    activations(m, &all, |x| {
        matches!(x.placement, Placement::Shard(0 | 1) | Placement::Replicated)
    })
}
