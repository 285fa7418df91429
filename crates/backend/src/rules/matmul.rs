//! Batched matmul `[.., m, k] x [.., k, n]`: sharded batch or rows or columns stay sharded;
//! both operands sharded along the contracted `k` give `Partial` addends (a weight gradient
//! computed from a sharded batch).

use crate::kind::Kind;
use crate::placement::Placement;
use crate::ranks::{common_mesh, on_ranks};
use crate::redistribute::{to_replicated, to_shard};
use crate::rules::replicate_for;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, TensorMetadata};

type T<B, K> = ShardedTensor<B, K>;

pub(crate) fn matmul<B: Backend, K: Kind<B>>(
    lhs: T<B, K>,
    rhs: T<B, K>,
    op_name: &'static str,
    op: impl Fn(K::P, K::P) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(&[Some(&lhs.mesh), Some(&rhs.mesh)], op_name);
    let (lhs, rhs, p) = place(lhs, rhs, op_name);
    on_ranks!(mesh, p, [lhs, rhs], op(lhs, rhs))
}

fn place<B: Backend, K: Kind<B>>(
    lhs: T<B, K>,
    rhs: T<B, K>,
    op: &'static str,
) -> (T<B, K>, T<B, K>, Placement) {
    use Placement::{Partial, Replicated, Shard};
    let n = lhs.rank();
    let (row, col) = (n - 2, n - 1);
    let sizes = |t: &T<B, K>| t.shard_sizes();
    match (lhs.placement(), rhs.placement()) {
        (Replicated, Replicated) => (lhs, rhs, Replicated),
        (Partial, Replicated) | (Replicated, Partial) => (lhs, rhs, Partial),
        (Partial, _) => place(to_replicated(lhs), rhs, op),
        (_, Partial) => place(lhs, to_replicated(rhs), op),
        // Batch dims: the other operand is sliced alike unless it broadcasts there.
        (Shard(d), _) if d < row => {
            let rhs = batch_operand(rhs, d, sizes(&lhs));
            (lhs, rhs, Shard(d))
        }
        (_, Shard(d)) if d < row => {
            let lhs = batch_operand(lhs, d, sizes(&rhs));
            (lhs, rhs, Shard(d))
        }
        (Shard(d), Replicated) if d == row => (lhs, rhs, Shard(row)),
        (Replicated, Shard(d)) if d == col => (lhs, rhs, Shard(col)),
        // The contracted dim.
        (Shard(d), _) if d == col => {
            let rhs = to_shard(rhs, row, sizes(&lhs).as_deref());
            (lhs, rhs, Partial)
        }
        (_, Shard(d)) if d == row => {
            let lhs = to_shard(lhs, col, sizes(&rhs).as_deref());
            (lhs, rhs, Partial)
        }
        _ => (replicate_for(lhs, op), replicate_for(rhs, op), Replicated),
    }
}

fn batch_operand<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    d: usize,
    sizes: Option<Vec<usize>>,
) -> T<B, K> {
    if t.shape()[d] == 1 {
        to_replicated(t)
    } else {
        to_shard(t, d, sizes.as_deref())
    }
}
