//! Reductions. Summing (or averaging) over a sharded dim leaves `Partial` addends. A reduction
//! that can be applied twice (max, min, prod, any, all, arg max/min) over a sharded dim reduces
//! each block, then the N small results are gathered and reduced again (`Then::GatherAndMerge`).

use crate::placement::Placement;
use crate::rules::{Meta, Plan, Then};

/// Sum or mean of all elements: a sharded or `Partial` input gives one addend per rank.
pub(crate) fn sum(m: &[Meta]) -> Plan {
    match m[0].placement {
        Placement::Replicated => Plan::keep(m, Placement::Replicated),
        _ => Plan::keep(m, Placement::Partial),
    }
}

/// Sum or mean along `dim`: `Partial` when `dim` is the sharded one.
pub(crate) fn sum_dim(m: &[Meta], dim: usize) -> Plan {
    match m[0].placement {
        Placement::Shard(d) if d == dim => Plan::keep(m, Placement::Partial),
        p => Plan::keep(m, p),
    }
}

/// A reduction that can be applied twice, over `dim` (every dim when `None`). Over the sharded
/// dim, each rank's result is a block of the gathered tensor: along `dim`, or along dim 0 for a
/// reduction of every dim (whose result has shape `[1]`).
pub(crate) fn twice(m: &[Meta], dim: Option<usize>) -> Plan {
    match (m[0].placement, dim) {
        (Placement::Partial, _) => Plan::replicated(m),
        (Placement::Shard(d), Some(x)) if d != x => Plan::keep(m, Placement::Shard(d)),
        (Placement::Shard(d), _) => {
            let blocks_along = dim.map_or(0, |_| d);
            Plan::keep(m, Placement::Shard(blocks_along)).then(Then::GatherAndMerge)
        }
        (Placement::Replicated, _) => Plan::keep(m, Placement::Replicated),
    }
}

/// The second step of [`Then::GatherAndMerge`]: the per-rank results, gathered.
pub(crate) fn merge(m: &[Meta]) -> Plan {
    Plan::replicated(m)
}
