//! Parameters gathered in buckets: after a sharded optimizer step (ZeRO-1) every parameter is
//! `Shard(0)`, each rank holding the block it updated; the next forward pass needs them
//! `Replicated`. One all-gather per bucket instead of one per parameter: on every rank a bucket
//! is its blocks of several parameters, flat and concatenated; the gathered buffer holds every
//! rank's, and each parameter is cut back out of it, block by block.

use super::{block_offsets, cat, piece, F, P};
use crate::kind::FloatKind;
use crate::placement::offsets as starts;
use crate::placement::Placement;
use crate::route::{self, To};
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

/// One bucket of `Shard(0)` tensors of one dtype and mesh, gathered with one collective.
fn gather_bucket<B: Backend>(bucket: Vec<F<B>>) -> Vec<F<B>> {
    let mesh = bucket[0].mesh.clone();
    let ranks = mesh.len();
    let shapes: Vec<_> = bucket.iter().map(|t| t.shape()).collect();
    // blocks[item][rank]: the rank's block, flat.
    let blocks: Vec<Vec<P<B>>> = bucket
        .into_iter()
        .map(|t| {
            t.into_parts()
                .into_iter()
                .map(|p| {
                    let len = p.shape().num_elements();
                    B::float_reshape(p, [len].into())
                })
                .collect()
        })
        .collect();
    // lens[item][rank]: the block's elements, for every rank of the world (every process
    // holds blocks of the same sizes, `across.rs`), whose buffers the gather concatenates.
    let lens: Vec<Vec<usize>> = blocks
        .iter()
        .map(|of_item| {
            let local = of_item.iter().map(|b| b.shape().num_elements()).collect();
            crate::placement::world_blocks(local, mesh.processes())
        })
        .collect();
    let buffers: Vec<P<B>> = (0..ranks)
        .map(|r| cat::<B>(blocks.iter().map(|of_item| of_item[r].clone()).collect()))
        .collect();
    let world_ranks = mesh.world_len();
    let (offsets, rank_lens) = block_offsets(&lens, world_ranks);
    // Where rank r's buffer starts in the gathered one.
    let rank_starts = starts(&rank_lens);
    let total: usize = rank_lens.iter().sum();
    stats::preparing("buckets", || {
        stats::redistribution(Redistribution::ShardToReplicated)
    });
    let wholes = route::gather::<B, FloatKind>(buffers, 0, &mesh, To::EveryRank);
    shapes
        .into_iter()
        .enumerate()
        .map(|(item, shape)| {
            let parts = wholes
                .iter()
                .map(|whole| {
                    let mut pieces: Vec<P<B>> = (0..world_ranks)
                        .filter(|&r| lens[item][r] > 0)
                        .map(|r| {
                            let start = rank_starts[r] + offsets[item][r];
                            piece::<B>(whole, total, start, lens[item][r])
                        })
                        .collect();
                    if pieces.is_empty() {
                        pieces.push(piece::<B>(whole, total, 0, 0));
                    }
                    B::float_reshape(cat::<B>(pieces), shape.clone())
                })
                .collect();
            F::<B>::new(parts, Placement::Replicated, mesh.clone())
        })
        .collect()
}
