//! Changing a tensor's placement: Partial→Replicated is a sum across the ranks, Shard→Replicated
//! a gather (both through [`crate::route`]), Replicated→Shard a local slice; everything else goes
//! through Replicated.

use crate::across;
use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::part::Part;
use crate::placement::{self, block_ranges, Placement};
use crate::route::{self, To};
use crate::rules::Want;
use crate::stats::{self, Redistribution};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Slice, TensorMetadata};

type T<B, K> = ShardedTensor<B, K>;

/// `t` as a rule wants it. A pending random draw is drawn here: as blocks when the rule wants
/// it sharded with given block sizes, whole otherwise.
pub(crate) fn apply_want<B: Backend, K: Kind<B>>(t: T<B, K>, want: &Want) -> T<B, K> {
    let blocks = match want {
        Want::Shard(d, Some(sizes)) => Some((*d, &sizes[..])),
        _ => None,
    };
    let t = t.drawn(blocks);
    match want {
        Want::Keep => t,
        Want::Replicated => to_replicated(t),
        Want::Shard(d, sizes) => to_shard(t, *d, sizes.as_deref()),
        Want::Partial => to_partial(t),
    }
}

/// The same value, held whole by every rank. A `Partial` tensor's sum is left for its clones.
pub(crate) fn to_replicated<B: Backend, K: Kind<B>>(t: T<B, K>) -> T<B, K> {
    let t = t.with_known_sum();
    let for_clones = t.shared_with_clones();
    let (parts, placement, mesh) = t.into_split();
    let parts = match placement {
        Placement::Replicated => parts,
        Placement::Shard(d) => {
            stats::redistribution(Redistribution::ShardToReplicated);
            route::gather::<B, K>(parts, d, &mesh, To::EveryRank)
        }
        Placement::Partial => {
            stats::redistribution(Redistribution::PartialToReplicated);
            let sums = route::sum::<B, K>(parts, &mesh, To::EveryRank);
            if let Some(shared) = for_clones {
                let ready = sums.iter().cloned().map(Part::Ready).collect();
                let _ = shared.set((ready, Placement::Replicated));
            }
            sums
        }
    };
    T::new(parts, Placement::Replicated, mesh)
}

/// The same value split along `dim` into blocks of `sizes` (an even split when `None`).
pub(crate) fn to_shard<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim: usize,
    sizes: Option<&[usize]>,
) -> T<B, K> {
    // A `Partial` tensor whose clone was reduce-scattered already holds its blocks.
    let t = t.with_known_sum();
    if t.placement() == Placement::Shard(dim)
        && sizes.is_none_or(|s| t.shard_sizes().as_deref() == Some(s))
    {
        return t;
    }
    let (parts, _, mesh) = to_replicated(t).into_split();
    stats::redistribution(Redistribution::ReplicatedToShard);
    let sizes = sizes.map_or_else(|| split(parts[0].shape()[dim], &mesh), <[usize]>::to_vec);
    let (sizes, start) = across::own_blocks(&sizes, &mesh);
    T::new(
        slice_blocks::<B, K>(parts, dim, &sizes, start),
        Placement::Shard(dim),
        mesh,
    )
}

/// The block sizes of `len` rows split evenly over the world's ranks (every process the same
/// blocks, see `across.rs`).
pub(crate) fn split<D: burn_backend::DeviceOps>(len: usize, mesh: &Mesh<D>) -> Vec<usize> {
    let local = placement::local_split(len, mesh.len(), mesh.processes()).unwrap_or_else(|| {
        panic!(
            "firemesh: {len} rows cannot be split into equal shares for {} processes",
            mesh.processes()
        )
    });
    placement::world_blocks(local, mesh.processes())
}

/// A `Partial` tensor with the same value: rank 0 keeps its copy, the other ranks hold zeros.
pub(crate) fn to_partial<B: Backend, K: Kind<B>>(t: T<B, K>) -> T<B, K> {
    if t.placement() == Placement::Partial {
        return t;
    }
    let (parts, _, mesh) = to_replicated(t).into_split();
    stats::redistribution(Redistribution::ReplicatedToPartial);
    let parts = parts
        .into_iter()
        .enumerate()
        .map(|(r, p)| {
            if mesh.world_rank(r) == 0 {
                p
            } else {
                K::zeros(&p, p.shape(), &K::device(&p))
            }
        })
        .collect();
    T::new(parts, Placement::Partial, mesh)
}

/// `t` with placement `p` (an even split for a new `Shard`).
pub(crate) fn to_placement<B: Backend, K: Kind<B>>(t: T<B, K>, p: Placement) -> T<B, K> {
    match p {
        Placement::Replicated => to_replicated(t),
        Placement::Shard(d) => to_shard(t, d, None),
        Placement::Partial => to_partial(t),
    }
}

/// Rank r's block `r` of each whole tensor in `parts` (one per rank), the first block
/// starting at row `start` (this process's first, in a world).
fn slice_blocks<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    dim: usize,
    sizes: &[usize],
    start: usize,
) -> Vec<K::P> {
    parts
        .into_iter()
        .zip(block_ranges(sizes))
        .map(|(p, range)| {
            let range = range.start + start..range.end + start;
            let shape = p.shape();
            if range.len() == shape[dim] {
                return p;
            }
            // An empty block is cut at row 0, which every non-empty dim holds: cut at its own
            // start (the dim's end for the last rank) a flipped tensor's offset would step
            // outside its storage (Flex asserts on that; see the README's known issues).
            let range = if range.is_empty() { 0..0 } else { range };
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
