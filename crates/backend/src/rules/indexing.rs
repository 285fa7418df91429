//! Indexing ops: select/gather and their accumulating inverses (the backward of select and
//! gather). Indices sharded like the data keep the result sharded; selecting rows of a
//! `Replicated` table with sharded indices gives sharded rows, and accumulating sharded values
//! into a `Replicated` base gives `Partial` addends.

use crate::placement::Placement::{Partial, Replicated, Shard};
use crate::rules::elementwise::{broadcast, Linear};
use crate::rules::{Meta, Plan, Want};

/// `select(tensor, dim, indices)` with 1-D indices: `[tensor, indices]`.
pub(crate) fn select(m: &[Meta], dim: usize) -> Plan {
    match (m[0].placement, m[1].placement) {
        (Shard(d), _) if d != dim => Plan::new(vec![Want::Keep, Want::Replicated], Shard(d)),
        (Replicated, Shard(0)) => Plan::keep(m, Shard(dim)),
        (Partial, _) => Plan::new(vec![Want::Keep, Want::Replicated], Partial),
        _ => Plan::fallback(m),
    }
}

/// `select_add(tensor, dim, indices, value)`: `[tensor, indices, value]`. `summable` is false
/// for bool tensors (`select_or`), which are never `Partial`.
pub(crate) fn select_add(m: &[Meta], dim: usize, summable: bool) -> Plan {
    let (t, indices, value) = (&m[0], &m[1], &m[2]);
    match (t.placement, indices.placement, value.placement) {
        (Shard(d), _, _) if d != dim => Plan::new(
            vec![Want::Keep, Want::Replicated, Want::shard_like(d, t)],
            Shard(d),
        ),
        (Replicated | Partial, Shard(0), Shard(vd))
            if summable && vd == dim && value.blocks == indices.blocks =>
        {
            Plan::new(vec![Want::Partial, Want::Keep, Want::Keep], Partial)
        }
        (Partial, _, Partial) => Plan::new(vec![Want::Keep, Want::Replicated, Want::Keep], Partial),
        _ => Plan::fallback(m),
    }
}

/// `gather(dim, tensor, indices)` (`[tensor, indices]`, the indices shaped like the tensor but
/// along `dim`) and `scatter_add(dim, tensor, indices, value)` (`[tensor, indices, value]`):
/// aligned along a sharded dim other than `dim`, or `Partial` data with `Replicated` indices.
pub(crate) fn gather_or_scatter(m: &[Meta], dim: usize) -> Plan {
    let partial_data =
        m[0].is(Partial) && m[1].is(Replicated) && m[2..].iter().all(|v| v.is(Partial));
    if partial_data {
        return Plan::keep(m, Partial);
    }
    let plan = broadcast(m, Linear::No);
    match plan.out {
        Shard(d) if d != dim => plan,
        _ => Plan::fallback(m),
    }
}
