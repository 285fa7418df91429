//! Parameters gathered in buckets: after a sharded optimizer step (ZeRO-1) every parameter is
//! `Shard(0)`, each rank holding the block it updated; the next forward pass needs them
//! `Replicated`. One all-gather per bucket instead of one per parameter, each block written once,
//! in its place: through a collective group into one flat buffer per rank that holds the
//! bucket's parameters whole, one after another, each a view of it (a flat-parameter bucket);
//! on one device each parameter's blocks are joined once and shared by the ranks.

use super::{F, P};
use crate::placement::Placement;
use crate::route;
use crate::stats::{self, Redistribution};
use burn_backend::{Backend, TensorMetadata};

/// The `Shard(0)` tensors gathered (now `Replicated`), whole tensors in buckets of about
/// `bucket_bytes` (a tensor larger than that is a bucket alone); tensors of other placements
/// are returned unchanged, and a change of dtype or mesh starts a new bucket. Returns the
/// tensors in the given order and the number of collectives.
pub fn gather_in_buckets<B: Backend>(
    tensors: Vec<F<B>>,
    bucket_bytes: usize,
) -> (Vec<F<B>>, usize) {
    crate::exec::on_device_stream::<B, _>(|| in_buckets(tensors, bucket_bytes))
}

fn in_buckets<B: Backend>(tensors: Vec<F<B>>, bucket_bytes: usize) -> (Vec<F<B>>, usize) {
    let sharded = |t: &F<B>| t.placement() == Placement::Shard(0);
    super::in_whole_buckets(tensors, bucket_bytes, sharded, gather_bucket)
}

/// One bucket of `Shard(0)` tensors of one dtype and mesh, gathered with one collective, each
/// block written once where its tensor needs it (`route::gather_placed`): through a collective
/// group, into one flat buffer per rank of which each tensor is a view.
fn gather_bucket<B: Backend>(bucket: Vec<F<B>>) -> Vec<F<B>> {
    let mesh = bucket[0].mesh.clone();
    let shapes: Vec<_> = bucket.iter().map(|t| t.shape()).collect();
    // blocks[rank][item]: the rank's block of the item, flat; lens[item][world rank]: its
    // elements, for every rank of the world (every process holds blocks of the same sizes,
    // `across.rs`).
    let mut blocks: Vec<Vec<P<B>>> = (0..mesh.len()).map(|_| Vec::new()).collect();
    let mut lens: Vec<Vec<usize>> = Vec::with_capacity(bucket.len());
    for t in bucket {
        let parts = t.into_parts();
        let local = parts.iter().map(|p| p.shape().num_elements()).collect();
        lens.push(crate::placement::world_blocks(local, mesh.processes()));
        for (of_rank, p) in blocks.iter_mut().zip(parts) {
            let len = p.shape().num_elements();
            of_rank.push(B::float_reshape(p, [len].into()));
        }
    }
    stats::preparing("buckets", || {
        stats::redistribution(Redistribution::ShardToReplicated)
    });
    let wholes = route::gather_placed::<B>(blocks, &lens, &mesh);
    (wholes.into_iter().zip(shapes))
        .map(|(parts, shape)| {
            let parts = parts
                .into_iter()
                .map(|p| B::float_reshape(p, shape.clone()))
                .collect();
            F::<B>::new(parts, Placement::Replicated, mesh.clone())
        })
        .collect()
}
