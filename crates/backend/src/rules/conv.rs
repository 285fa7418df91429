//! Convolutions (plain and transposed, 1-3d) and their backward ops. The activation and the
//! output gradient are sharded along the batch (`Shard(0)`) or `Replicated`; weights and biases
//! are made `Replicated`; the weight and bias gradients of a sharded batch come out `Partial`.

use crate::placement::Placement;
use crate::rules::{activations, Meta, Plan};

fn batch(x: &Meta) -> bool {
    matches!(x.placement, Placement::Shard(0) | Placement::Replicated)
}

/// Forward `[x, weight, bias?]`: the result is sharded like `x`.
pub(crate) fn forward(m: &[Meta]) -> Plan {
    activations(m, &[0], batch)
}

/// Input gradient `[x, weight, output_grad]`: sharded along the batch like both.
pub(crate) fn x_backward(m: &[Meta]) -> Plan {
    activations(m, &[0, 2], batch)
}

/// Transposed-conv input gradient `[weight, output_grad]`: sharded like the output gradient.
pub(crate) fn transposed_x_backward(m: &[Meta]) -> Plan {
    activations(m, &[1], batch)
}

/// Weight or bias gradient `[x, weight or bias, output_grad]`: a sharded batch gives one
/// addend per rank.
pub(crate) fn parameter_backward(m: &[Meta]) -> Plan {
    let plan = activations(m, &[0, 2], batch);
    let out = match plan.out {
        Placement::Shard(0) => Placement::Partial,
        p => p,
    };
    Plan { out, ..plan }
}
