//! Per-row ops with replicated parameters: linear layers and layer norm. Activations may be
//! sharded along any dim but the last (the features they mix); weight and bias gradients of
//! sharded rows come out `Partial`.

use crate::placement::Placement;
use crate::rules::{activations, Meta, Plan};

/// Whether `x` is `Replicated` or sharded along a dim other than its last.
fn rows(x: &Meta) -> bool {
    match x.placement {
        Placement::Shard(d) => d + 1 < x.rank(),
        p => p == Placement::Replicated,
    }
}

/// `Partial` when the activations were sharded by rows, `Replicated` otherwise.
fn summed_over_rows(plan: Plan) -> Plan {
    let out = match plan.out {
        Placement::Shard(_) => Placement::Partial,
        p => p,
    };
    Plan { out, ..plan }
}

/// Linear or layer norm forward `[x, weight, bias?]`.
pub(crate) fn forward(m: &[Meta]) -> Plan {
    activations(m, &[0], rows)
}

/// Linear input gradient `[weight, output_grad]`.
pub(crate) fn x_backward(m: &[Meta]) -> Plan {
    activations(m, &[1], rows)
}

/// Linear weight gradient `[x, output_grad]`.
pub(crate) fn weight_backward(m: &[Meta]) -> Plan {
    summed_over_rows(activations(m, &[0, 1], rows))
}

/// Linear bias gradient `[output_grad]`.
pub(crate) fn bias_backward(m: &[Meta]) -> Plan {
    summed_over_rows(activations(m, &[0], rows))
}
