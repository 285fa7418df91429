//! Embedding lookups: sharded indices select sharded rows of the `Replicated` table; the
//! table's gradient from sharded rows comes out `Partial`.

use crate::placement::Placement;
use crate::rules::{activations, Meta, Plan};

/// `[weights, indices]`: the result is placed like the indices.
pub(crate) fn forward(m: &[Meta]) -> Plan {
    activations(m, &[1], |_| true)
}

/// `[weights, output_grad, indices]`: the gradient and the indices aligned; sharded rows give
/// one addend per rank.
pub(crate) fn backward(m: &[Meta]) -> Plan {
    let plan = activations(m, &[1, 2], |_| true);
    let out = match plan.out {
        Placement::Shard(_) => Placement::Partial,
        _ => Placement::Replicated,
    };
    Plan { out, ..plan }
}
