//! Batched matmul `[.., m, k] x [.., k, n]`: sharded batch or rows or columns stay sharded;
//! both operands sharded along the contracted `k` give `Partial` addends (a weight gradient
//! computed from a sharded batch). `Partial` times `Replicated` stays `Partial`; a `Partial`
//! operand meeting anything else is summed first.

use crate::placement::Placement::{self, Partial, Replicated, Shard};
use crate::rules::{compose, staged, Meta, Plan, Want};

pub(crate) fn matmul(m: &[Meta]) -> Plan {
    let (l, r) = (&m[0], &m[1]);
    let sum_lhs = l.is(Partial) && !r.is(Replicated);
    let sum_rhs = r.is(Partial) && !(l.is(Replicated) || sum_lhs);
    let sum_first = |sum: bool| if sum { Want::Replicated } else { Want::Keep };
    let first = [sum_first(sum_lhs), sum_first(sum_rhs)];
    compose(&first, place(&staged(m, &first)))
}

/// The rule once no `Partial` operand meets a non-`Replicated` one.
fn place(m: &[Meta]) -> Plan {
    let (l, r) = (&m[0], &m[1]);
    let n = l.rank();
    let (row, col) = (n - 2, n - 1);
    let plan = |wl: Want, wr: Want, out: Placement| Plan::new(vec![wl, wr], out);
    match (l.placement, r.placement) {
        (Replicated, Replicated) => Plan::keep(m, Replicated),
        (Partial, Replicated) | (Replicated, Partial) => Plan::keep(m, Partial),
        // Batch dims: the other operand is sliced alike unless it broadcasts there.
        (Shard(d), _) if d < row && l.shape[d] == r.shape[d] => {
            plan(Want::Keep, Want::shard_like(d, l), Shard(d))
        }
        (Shard(d), _) if d < row && r.shape[d] == 1 => plan(Want::Keep, Want::Replicated, Shard(d)),
        (_, Shard(d)) if d < row && l.shape[d] == r.shape[d] => {
            plan(Want::shard_like(d, r), Want::Keep, Shard(d))
        }
        (_, Shard(d)) if d < row && l.shape[d] == 1 => plan(Want::Replicated, Want::Keep, Shard(d)),
        (Shard(d), Replicated) if d == row => Plan::keep(m, Shard(row)),
        (Replicated, Shard(d)) if d == col => Plan::keep(m, Shard(col)),
        // The contracted dim.
        (Shard(d), _) if d == col => plan(Want::Keep, Want::shard_like(row, l), Partial),
        (_, Shard(d)) if d == row => plan(Want::shard_like(col, r), Want::Keep, Partial),
        _ => Plan::fallback(m),
    }
}
