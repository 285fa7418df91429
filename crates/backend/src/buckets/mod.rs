//! Gradient buckets: many `Partial` float tensors (a step's weight gradients) summed over the
//! ranks in few collectives. The tensors, in the order given (the order the backward pass
//! produced them), are read as one stream of elements cut into buckets of `bucket_bytes`; on
//! every rank a bucket is one contiguous buffer, the buffers are summed with one collective on
//! the mesh's route, and each tensor is cut back out of the sums, now `Replicated`. A tensor may
//! span buckets, so a stream of S bytes takes ceil(S / bucket_bytes) collectives.
//!
//! Early buckets ([`early`]) are summed during the backward pass instead, each as soon as the
//! backward pass has made its gradients; the optimizer's [`sum_in_buckets`] then finds them
//! summed.

use crate::kind::FloatKind;
use crate::placement::Placement;
use crate::route::{self, piece, To};
use crate::stats::{self, Redistribution};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, DType, FloatDType, Shape, TensorMetadata};

mod early;
mod gather;
mod scatter;
pub(crate) use early::gradient_made;
pub use early::{Armed, EarlyBuckets};
pub use gather::gather_in_buckets;
pub use scatter::reduce_scatter_in_buckets;

/// PyTorch DDP's default bucket size, which ours follows: 25 MiB.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

type F<B> = ShardedTensor<B, FloatKind>;
type P<B> = burn_backend::tensor::FloatTensor<B>;

/// The tensors with every `Partial` one summed over the ranks (now `Replicated`) in buckets of
/// `bucket_bytes`; tensors of other placements are returned unchanged, and a change of dtype or
/// mesh in the stream starts a new bucket. Returns the tensors in the given order and the
/// number of collectives.
pub fn sum_in_buckets<B: Backend>(tensors: Vec<F<B>>, bucket_bytes: usize) -> (Vec<F<B>>, usize) {
    sum_in_buckets_on_wire(tensors, bucket_bytes, None)
}

/// [`sum_in_buckets`], each f32 bucket summed in `wire` (bf16: half the bytes on the wire) and
/// cast back to f32; `None`: in the tensors' dtype. The bucket's elements are the same either
/// way (cut by their f32 bytes).
pub fn sum_in_buckets_on_wire<B: Backend>(
    tensors: Vec<F<B>>,
    bucket_bytes: usize,
    wire: Option<FloatDType>,
) -> (Vec<F<B>>, usize) {
    crate::exec::on_device_stream::<B, _>(|| in_buckets(tensors, bucket_bytes, wire))
}

fn in_buckets<B: Backend>(
    tensors: Vec<F<B>>,
    bucket_bytes: usize,
    wire: Option<FloatDType>,
) -> (Vec<F<B>>, usize) {
    let mut out: Vec<Option<F<B>>> = Vec::with_capacity(tensors.len());
    let mut run: Vec<(usize, F<B>)> = Vec::new();
    let mut collectives = 0;
    let mut sum = |run: Vec<(usize, F<B>)>, out: &mut Vec<Option<F<B>>>| {
        let (index, tensors): (Vec<usize>, Vec<F<B>>) = run.into_iter().unzip();
        let (sums, n) = sum_run(tensors, bucket_bytes, wire);
        for (i, s) in index.into_iter().zip(sums) {
            out[i] = Some(s);
        }
        collectives += n;
    };
    for (i, t) in tensors.into_iter().enumerate() {
        out.push(None);
        // A gradient whose clone was summed already (by a norm for clipping, or in an early
        // bucket) is that sum.
        let t = t.with_known_sum();
        if t.placement() != Placement::Partial {
            out[i] = Some(t);
            continue;
        }
        if run
            .first()
            .is_some_and(|(_, first)| !same_stream(first, &t))
        {
            sum(std::mem::take(&mut run), &mut out);
        }
        run.push((i, t));
    }
    sum(run, &mut out);
    let out = out.into_iter().map(|t| t.expect("every tensor placed"));
    (out.collect(), collectives)
}

/// Runs `run` on buckets of the tensors `wanted` picks: whole tensors, in order, of one dtype
/// and mesh, about `bucket_bytes` each (a larger tensor is a bucket alone). The other tensors
/// come back unchanged, in their places. Returns the tensors and the buckets run.
fn in_whole_buckets<B: Backend>(
    tensors: Vec<F<B>>,
    bucket_bytes: usize,
    wanted: impl Fn(&F<B>) -> bool,
    mut run: impl FnMut(Vec<F<B>>) -> Vec<F<B>>,
) -> (Vec<F<B>>, usize) {
    let mut out: Vec<Option<F<B>>> = Vec::with_capacity(tensors.len());
    let mut bucket: Vec<(usize, F<B>)> = Vec::new();
    let (mut bytes, mut buckets) = (0, 0);
    let mut flush = |bucket: &mut Vec<(usize, F<B>)>, out: &mut Vec<Option<F<B>>>| {
        if bucket.is_empty() {
            return;
        }
        let (index, tensors): (Vec<usize>, Vec<F<B>>) = std::mem::take(bucket).into_iter().unzip();
        for (i, t) in index.into_iter().zip(run(tensors)) {
            out[i] = Some(t);
        }
        buckets += 1;
    };
    for (i, t) in tensors.into_iter().enumerate() {
        out.push(None);
        if !wanted(&t) {
            out[i] = Some(t);
            continue;
        }
        let size = t.shape().num_elements() * t.dtype().size();
        let joins = bucket
            .first()
            .is_some_and(|(_, f)| same_stream(f, &t) && bytes + size <= bucket_bytes);
        if !joins {
            flush(&mut bucket, &mut out);
            bytes = 0;
        }
        bytes += size;
        bucket.push((i, t));
    }
    flush(&mut bucket, &mut out);
    let out = out.into_iter().map(|t| t.expect("every tensor placed"));
    (out.collect(), buckets)
}

/// The precision a stream of `dtype` is summed in: `wire` where it narrows f32.
fn narrowing(dtype: DType, wire: Option<FloatDType>) -> Option<FloatDType> {
    wire.filter(|w| dtype == DType::F32 && DType::from(*w) != DType::F32)
}

/// Each rank's part in `dtype` (unchanged without one).
fn in_dtype<B: Backend>(parts: Vec<P<B>>, dtype: Option<FloatDType>) -> Vec<P<B>> {
    match dtype {
        Some(dtype) => parts.into_iter().map(|p| B::float_cast(p, dtype)).collect(),
        None => parts,
    }
}

/// Where each item's block starts in its rank's buffer, when every rank concatenates its
/// blocks (`lens[item][rank]` elements) in item order; and each rank's buffer length.
fn block_offsets(lens: &[Vec<usize>], ranks: usize) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut at = vec![0; ranks];
    let offsets = lens
        .iter()
        .map(|of_item| {
            let starts = at.clone();
            for (a, len) in at.iter_mut().zip(of_item) {
                *a += len;
            }
            starts
        })
        .collect();
    (offsets, at)
}

/// Whether two `Partial` tensors can share a bucket: one dtype, one mesh.
fn same_stream<B: Backend>(a: &F<B>, b: &F<B>) -> bool {
    a.dtype() == b.dtype() && a.mesh == b.mesh
}

/// One piece of a bucket: `len` elements of tensor `item` from `start`.
struct Span {
    item: usize,
    start: usize,
    len: usize,
}

/// Sums a run of `Partial` tensors of one dtype and mesh, an f32 run in `wire` if given;
/// returns them summed (`Replicated`), in order, and the collectives it took.
fn sum_run<B: Backend>(
    run: Vec<F<B>>,
    bucket_bytes: usize,
    wire: Option<FloatDType>,
) -> (Vec<F<B>>, usize) {
    let Some(first) = run.first() else {
        return (Vec::new(), 0);
    };
    let wire = narrowing(first.dtype(), wire);
    let mesh = first.mesh.clone();
    let per_bucket = (bucket_bytes / first.dtype().size()).max(1);
    let ranks = mesh.len();
    let mut shapes = Vec::with_capacity(run.len());
    // flats[item][rank]: the rank's part as a flat tensor.
    let mut flats: Vec<Vec<P<B>>> = Vec::with_capacity(run.len());
    for t in run {
        let shape = t.shape();
        let len = Shape::new([shape.num_elements()]);
        flats.push(
            t.into_parts()
                .into_iter()
                .map(|p| B::float_reshape(p, len.clone()))
                .collect(),
        );
        shapes.push(shape);
    }
    let lens: Vec<usize> = shapes.iter().map(|s| s.num_elements()).collect();
    let buckets = cut(&lens, per_bucket);
    // pieces[item][rank]: the summed pieces of the item, in order.
    let mut pieces: Vec<Vec<Vec<P<B>>>> = vec![vec![Vec::new(); ranks]; lens.len()];
    for spans in &buckets {
        let buffers = (0..ranks)
            .map(|r| {
                let of_rank = spans
                    .iter()
                    .map(|s| piece::<B>(&flats[s.item][r], lens[s.item], s.start, s.len));
                route::joined::<B>(of_rank.collect())
            })
            .collect();
        stats::preparing("buckets", || {
            stats::redistribution(Redistribution::PartialToReplicated)
        });
        let low = in_dtype::<B>(buffers, wire);
        let sums = route::sum::<B, FloatKind>(low, &mesh, To::EveryRank);
        let sums = in_dtype::<B>(sums, wire.map(|_| FloatDType::F32));
        let total: usize = spans.iter().map(|s| s.len).sum();
        let mut offset = 0;
        for s in spans {
            for (r, sum) in sums.iter().enumerate() {
                pieces[s.item][r].push(piece::<B>(sum, total, offset, s.len));
            }
            offset += s.len;
        }
    }
    let summed = shapes
        .into_iter()
        .zip(pieces)
        .zip(flats)
        .map(|((shape, of_item), flat)| {
            let parts = of_item
                .into_iter()
                .zip(flat)
                // An empty tensor has no pieces: its (empty) part is already the sum.
                .map(|(ps, empty)| {
                    if ps.is_empty() {
                        empty
                    } else {
                        route::joined::<B>(ps)
                    }
                })
                .map(|p| B::float_reshape(p, shape.clone()))
                .collect();
            F::<B>::new(parts, Placement::Replicated, mesh.clone())
        })
        .collect();
    (summed, buckets.len())
}

/// The stream of tensors of `lens` elements cut into buckets of `per_bucket` elements.
fn cut(lens: &[usize], per_bucket: usize) -> Vec<Vec<Span>> {
    let mut buckets = Vec::new();
    let mut bucket = Vec::new();
    let mut room = per_bucket;
    for (item, &len) in lens.iter().enumerate() {
        let mut start = 0;
        while start < len {
            let take = (len - start).min(room);
            bucket.push(Span {
                item,
                start,
                len: take,
            });
            start += take;
            room -= take;
            if room == 0 {
                buckets.push(std::mem::take(&mut bucket));
                room = per_bucket;
            }
        }
    }
    if !bucket.is_empty() {
        buckets.push(bucket);
    }
    buckets
}
