//! Changing a tensor's placement: Partial→Replicated is an all-reduce, Shard→Replicated an
//! all-gather, Replicated→Shard a local slice; everything else goes through Replicated.

use crate::kind::Kind;
use crate::placement::{even_split, ranges, Placement};
use crate::stats;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Slice, TensorMetadata};

type T<B, K> = ShardedTensor<B, K>;

/// The same value, held whole by every rank.
pub fn to_replicated<B: Backend, K: Kind<B>>(t: T<B, K>) -> T<B, K> {
    match t.placement() {
        Placement::Replicated => t,
        Placement::Shard(d) => {
            stats::redistribution("Shard->Replicated");
            let (parts, _, mesh) = t.into_split();
            let parts = K::gather_over_ranks(parts, d, &mesh);
            T::new(parts, Placement::Replicated, mesh)
        }
        Placement::Partial => {
            stats::redistribution("Partial->Replicated");
            let (parts, _, mesh) = t.into_split();
            let parts = K::sum_over_ranks(parts, &mesh);
            T::new(parts, Placement::Replicated, mesh)
        }
    }
}

/// The same value split along `dim` into blocks of `sizes` (an even split when `None`).
pub fn to_shard<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim: usize,
    sizes: Option<&[usize]>,
) -> T<B, K> {
    if t.placement() == Placement::Shard(dim)
        && sizes.is_none_or(|s| t.shard_sizes().as_deref() == Some(s))
    {
        return t;
    }
    let t = to_replicated(t);
    stats::redistribution("Replicated->Shard");
    let len = t.parts()[0].shape()[dim];
    let sizes = sizes.map_or_else(|| even_split(len, t.mesh.len()), <[usize]>::to_vec);
    let (parts, _, mesh) = t.into_split();
    T::new(
        slice_blocks::<B, K>(parts, dim, &sizes),
        Placement::Shard(dim),
        mesh,
    )
}

/// `t` with placement `p` (an even split for a new `Shard`).
pub fn to_placement<B: Backend, K: Kind<B>>(t: T<B, K>, p: Placement) -> T<B, K> {
    match p {
        Placement::Replicated => to_replicated(t),
        Placement::Shard(d) => to_shard(t, d, None),
        Placement::Partial => to_partial(t),
    }
}

/// A Partial tensor with the same value: rank 0 keeps its copy, the other ranks hold zeros.
pub fn to_partial<B: Backend, K: Kind<B>>(t: T<B, K>) -> T<B, K> {
    if t.placement() == Placement::Partial {
        return t;
    }
    let t = to_replicated(t);
    stats::redistribution("Replicated->Partial");
    let (parts, _, mesh) = t.into_split();
    let parts = parts
        .into_iter()
        .enumerate()
        .map(|(r, p)| if r == 0 { p } else { K::zeros_like(&p) })
        .collect();
    T::new(parts, Placement::Partial, mesh)
}

/// Rank r's block `r` of each whole tensor in `parts` (one per rank).
pub(crate) fn slice_blocks<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    dim: usize,
    sizes: &[usize],
) -> Vec<K::P> {
    parts
        .into_iter()
        .zip(ranges(sizes))
        .map(|(p, range)| {
            let shape = p.shape();
            if range.len() == shape[dim] {
                return p;
            }
            let slices: Vec<Slice> = (0..shape.num_dims())
                .map(|i| {
                    if i == dim {
                        Slice::new(range.start as isize, Some(range.end as isize), 1)
                    } else {
                        Slice::full()
                    }
                })
                .collect();
            K::slice(p, &slices)
        })
        .collect()
}
