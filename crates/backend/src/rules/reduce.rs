//! Reductions: summing over a sharded dim leaves `Partial` addends; max/min/any/all over a
//! sharded dim reduce locally, gather the N partial results (small) and reduce again.

use crate::kind::{Float, Int, Kind};
use crate::placement::{ranges, Placement};
use crate::ranks::{on_ranks, PerRank};
use crate::redistribute::to_replicated;
use crate::rules::pointwise;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Scalar, TensorMetadata};

type T<B, K> = ShardedTensor<B, K>;

/// Sum of all elements: a sharded input gives one addend per rank.
pub(crate) fn sum<B: Backend, K: Kind<B>>(t: T<B, K>, op: impl Fn(K::P) -> K::P + Sync) -> T<B, K> {
    let p = match t.placement() {
        Placement::Replicated => Placement::Replicated,
        _ => Placement::Partial,
    };
    on_ranks!(t.mesh.clone(), p, [t], op(t))
}

/// Sum along `dim`: `Partial` when `dim` is the sharded one.
pub(crate) fn sum_dim<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim: usize,
    op: impl Fn(K::P, usize) -> K::P + Sync,
) -> T<B, K> {
    let p = match t.placement() {
        Placement::Shard(d) if d == dim => Placement::Partial,
        p => p,
    };
    on_ranks!(t.mesh.clone(), p, [t], op(t, dim))
}

/// Mean of all elements: each rank's sum over the global count, as addends.
pub(crate) fn mean<B: Backend>(t: T<B, Float>) -> T<B, Float> {
    match t.placement() {
        Placement::Shard(_) => {
            let count = t.shape().num_elements() as f64;
            on_ranks!(t.mesh.clone(), Placement::Partial, [t], {
                B::float_div_scalar(B::float_sum(t), Scalar::from(count))
            })
        }
        p => on_ranks!(t.mesh.clone(), p, [t], B::float_mean(t)),
    }
}

/// Mean along `dim`: over the sharded dim, each rank's sum over the global length, as addends.
pub(crate) fn mean_dim<B: Backend>(t: T<B, Float>, dim: usize) -> T<B, Float> {
    match t.placement() {
        Placement::Shard(d) if d == dim => {
            let len = t.shape()[dim] as f64;
            on_ranks!(t.mesh.clone(), Placement::Partial, [t], {
                B::float_div_scalar(B::float_sum_dim(t, dim), Scalar::from(len))
            })
        }
        p => on_ranks!(t.mesh.clone(), p, [t], B::float_mean_dim(t, dim)),
    }
}

/// A reduction that can be applied twice (max, min, prod, any, all): over the sharded dim (or
/// all dims when `dim` is `None`), reduce each block with `local`, gather the N results and
/// reduce them with `merge`.
pub(crate) fn combine<B: Backend, K: Kind<B>, K2: Kind<B>>(
    t: T<B, K>,
    dim: Option<usize>,
    _op: &'static str,
    local: impl Fn(K::P) -> K2::P + Sync,
    merge: impl Fn(K2::P) -> K2::P + Sync,
) -> T<B, K2> {
    let (t, p) = pointwise(t);
    let mesh = t.mesh.clone();
    match (p, dim) {
        (Placement::Shard(d), Some(x)) if d != x => on_ranks!(mesh, p, [t], local(t)),
        (Placement::Shard(d), _) => {
            let gather_dim = dim.map_or(0, |_| d);
            let blocks: T<B, K2> =
                on_ranks!(mesh.clone(), Placement::Shard(gather_dim), [t], local(t));
            let all = to_replicated(blocks);
            on_ranks!(mesh, Placement::Replicated, [all], merge(all))
        }
        _ => on_ranks!(mesh, Placement::Replicated, [t], local(t)),
    }
}

/// argmax/argmin along `dim`. Over the sharded dim: each rank's extreme value and its global
/// index are gathered, and the index of the best rank is picked (the first on ties, as on one
/// device).
pub(crate) fn arg_extreme<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim: usize,
    _op: &'static str,
    arg: impl Fn(K::P, usize) -> B::IntTensorPrimitive + Sync,
    extreme: impl Fn(K::P, usize) -> K::P + Sync,
) -> T<B, Int> {
    let (t, p) = pointwise(t);
    let mesh = t.mesh.clone();
    match p {
        Placement::Shard(d) if d == dim => {
            let sizes = t.shard_sizes().unwrap_or_default();
            let starts = ranges(&sizes).into_iter();
            let start = PerRank(starts.map(|r| Scalar::from(r.start as i64)).collect());
            let (values, indices): (T<B, K>, T<B, Int>) = on_ranks!(mesh.clone(), p, [t, start], {
                let index = arg(t.clone(), dim);
                (extreme(t, dim), B::int_add_scalar(index, start))
            });
            let (values, indices) = (to_replicated(values), to_replicated(indices));
            on_ranks!(mesh, Placement::Replicated, [values, indices], {
                B::int_gather(dim, indices, arg(values, dim))
            })
        }
        _ => on_ranks!(mesh, p, [t], arg(t, dim)),
    }
}
