//! Gradients reduce-scattered in buckets, for ZeRO-1: each rank receives only the sum of its
//! `Shard(0)` block of every gradient (the rows it updates), in one collective per bucket.
//! On every rank a bucket is laid out by destination: the blocks of rank 0 of each gradient,
//! then those of rank 1, and so on, so that rank r's part of the reduce-scatter is its blocks.

use super::{block_offsets, in_dtype, narrowing, piece, sum_run, F, P};
use crate::placement::offsets;
use crate::placement::Placement;
use crate::route;
use crate::stats::{self, Redistribution};
use burn_backend::{Backend, FloatDType, TensorMetadata};

/// The `Partial` tensors summed over the ranks into `Shard(0)` blocks (rank r holds the sum of
/// its even share of rows), whole tensors in buckets of about `bucket_bytes`, each f32 bucket
/// in `wire` if given. A tensor with fewer rows than ranks is summed whole (`Replicated`);
/// tensors of other placements are returned unchanged. Returns the tensors in the given order
/// and the number of collectives.
pub fn reduce_scatter_in_buckets<B: Backend>(
    tensors: Vec<F<B>>,
    bucket_bytes: usize,
    wire: Option<FloatDType>,
) -> (Vec<F<B>>, usize) {
    crate::exec::on_device_stream::<B, _>(|| in_buckets(tensors, bucket_bytes, wire, true))
}

/// One early bucket of `Partial` tensors reduce-scattered as one (ZeRO-1's early buckets), the
/// tensors with fewer rows than ranks summed whole. A sum a clone found meanwhile is not
/// taken: what the bucket holds must not depend on when the calling thread got there (in a
/// world, every process must exchange the same buffers).
pub(super) fn scatter_run<B: Backend>(
    tensors: Vec<F<B>>,
    wire: Option<FloatDType>,
) -> (Vec<F<B>>, usize) {
    in_buckets(tensors, usize::MAX, wire, false)
}

/// The buckets of `tensors`; `known`: a gradient whose clone was summed already is that sum.
fn in_buckets<B: Backend>(
    tensors: Vec<F<B>>,
    bucket_bytes: usize,
    wire: Option<FloatDType>,
    known: bool,
) -> (Vec<F<B>>, usize) {
    let tensors = match known {
        true => tensors.into_iter().map(|t| t.with_known_sum()).collect(),
        false => tensors,
    };
    let partial = |t: &F<B>| t.placement() == Placement::Partial;
    let long = |t: &F<B>| {
        let shape = t.shape();
        // In a world, rows that split into equal shares per process, at least one per rank
        // (the `Shard(0)` blocks `placement::local_split` gives); other tensors are summed whole.
        let processes = t.mesh.processes();
        partial(t)
            && shape.num_dims() > 0
            && shape[0].is_multiple_of(processes)
            && shape[0] / processes >= t.mesh.len()
            && shape.num_elements() > 0
    };
    let scatter = |bucket| scatter_bucket(bucket, wire);
    let (out, mut collectives) = super::in_whole_buckets(tensors, bucket_bytes, long, scatter);
    // What is still `Partial` has fewer rows than ranks: summed whole.
    let mut out: Vec<Option<F<B>>> = out.into_iter().map(Some).collect();
    let (index, short): (Vec<usize>, Vec<F<B>>) = out
        .iter_mut()
        .enumerate()
        .filter(|(_, t)| t.as_ref().is_some_and(partial))
        .filter_map(|(i, t)| Some((i, t.take()?)))
        .unzip();
    if !short.is_empty() {
        let (sums, n) = sum_run(short, bucket_bytes, wire);
        for (i, s) in index.into_iter().zip(sums) {
            out[i] = Some(s);
        }
        collectives += n;
    }
    let out = out.into_iter().map(|t| t.expect("every tensor placed"));
    (out.collect(), collectives)
}

/// One bucket of `Partial` tensors of one dtype and mesh, each with at least one row per rank,
/// reduce-scattered with one collective.
fn scatter_bucket<B: Backend>(bucket: Vec<F<B>>, wire: Option<FloatDType>) -> Vec<F<B>> {
    let mesh = bucket[0].mesh.clone();
    let ranks = mesh.len();
    // In a world, the blocks of every rank of every process (world rank order).
    let world_ranks = mesh.world_len();
    let dtype = bucket[0].dtype();
    let shapes: Vec<_> = bucket.iter().map(|t| t.shape()).collect();
    // lens[item][q]: the elements of world rank q's block of the item; starts[item][q]: where
    // it starts in the item's flat tensor.
    let lens: Vec<Vec<usize>> = shapes
        .iter()
        .map(|s| {
            let row = s.num_elements() / s[0];
            crate::redistribute::split(s[0], &mesh)
                .into_iter()
                .map(|rows| rows * row)
                .collect()
        })
        .collect();
    let starts: Vec<Vec<usize>> = lens.iter().map(|l| offsets(l)).collect();
    let totals: Vec<usize> = shapes.iter().map(|s| s.num_elements()).collect();
    // flats[item][rank]: the rank's addend of the item, flat.
    let flats: Vec<Vec<P<B>>> = bucket
        .into_iter()
        .zip(&totals)
        .map(|(t, &total)| {
            t.into_parts()
                .into_iter()
                .map(|p| B::float_reshape(p, [total].into()))
                .collect()
        })
        .collect();
    let low = narrowing(dtype, wire);
    let buffers: Vec<P<B>> = (0..ranks)
        .map(|r| {
            let by_destination = (0..world_ranks).flat_map(|q| {
                let (flats, lens, starts, totals) = (&flats, &lens, &starts, &totals);
                (0..flats.len())
                    .map(move |i| piece::<B>(&flats[i][r], totals[i], starts[i][q], lens[i][q]))
            });
            route::joined::<B>(by_destination.collect())
        })
        .collect();
    let (offsets, rank_lens) = block_offsets(&lens, world_ranks);
    stats::preparing("buckets", || {
        stats::redistribution(Redistribution::PartialToReplicated)
    });
    let blocks = route::reduce_scatter::<B>(in_dtype::<B>(buffers, low), &rank_lens, &mesh);
    let blocks = in_dtype::<B>(blocks, low.map(|_| FloatDType::F32));
    shapes
        .into_iter()
        .enumerate()
        .map(|(item, shape)| {
            let parts = blocks
                .iter()
                .enumerate()
                .map(|(r, block)| {
                    let w = mesh.world_rank(r);
                    let mut dims = shape.clone();
                    dims[0] = lens[item][w] / (totals[item] / shape[0]);
                    let block = piece::<B>(block, rank_lens[w], offsets[item][w], lens[item][w]);
                    B::float_reshape(block, dims)
                })
                .collect();
            F::<B>::new(parts, Placement::Shard(0), mesh.clone())
        })
        .collect()
}
