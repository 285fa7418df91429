//! Gradient buckets: many `Partial` float tensors (a step's weight gradients) summed over the
//! ranks in few collectives. The tensors, in the order given (the order the backward pass
//! produced them), are read as one stream of elements cut into buckets of `bucket_bytes`; on
//! every rank a bucket is one contiguous buffer, the buffers are summed with one collective on
//! the mesh's route, and each tensor is cut back out of the sums, now `Replicated`. A tensor may
//! span buckets, so a stream of S bytes takes ceil(S / bucket_bytes) collectives.
//!
//! Early buckets ([`set_early_buckets`]) are summed during the backward pass instead: each
//! parameter gradient an op makes (the ops that exist for that: `linear_weight_backward`,
//! `linear_bias_backward`, `conv2d_weight_backward`, `conv2d_bias_backward`, …) joins the
//! thread's open bucket, and a bucket is summed as soon as it holds `bucket_bytes`, while the
//! rest of the backward pass is still to be issued. Not `embedding_backward`: a GPT's token
//! embedding is tied to its output head, so that gradient is one addend of the parameter's
//! (summing it would be wasted), and an embedding's gradient comes last in the backward pass
//! anyway. A parameter used twice (a shared layer) wastes in the same way:
//! each use's gradient is summed on its own. The gradient keeps its `Partial` placement and carries the sum (as
//! clones of a `Partial` tensor do), so the optimizer's [`sum_in_buckets`] finds it summed.

use crate::kind::FloatKind;
use crate::placement::Placement;
use crate::route::{self, To};
use crate::stats::{self, Redistribution};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Shape, Slice, TensorMetadata};
use std::any::Any;
use std::cell::{Cell, RefCell};

/// PyTorch DDP's default bucket size, which ours follows: 25 MiB.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

type F<B> = ShardedTensor<B, FloatKind>;
type P<B> = burn_backend::tensor::FloatTensor<B>;

/// The tensors with every `Partial` one summed over the ranks (now `Replicated`) in buckets of
/// `bucket_bytes`; tensors of other placements are returned unchanged, and a change of dtype or
/// mesh in the stream starts a new bucket. Returns the tensors in the given order and the
/// number of collectives.
pub fn sum_in_buckets<B: Backend>(tensors: Vec<F<B>>, bucket_bytes: usize) -> (Vec<F<B>>, usize) {
    let mut out: Vec<Option<F<B>>> = Vec::with_capacity(tensors.len());
    let mut run: Vec<(usize, F<B>)> = Vec::new();
    let mut collectives = 0;
    let mut sum = |run: Vec<(usize, F<B>)>, out: &mut Vec<Option<F<B>>>| {
        let (index, tensors): (Vec<usize>, Vec<F<B>>) = run.into_iter().unzip();
        let (sums, n) = sum_run(tensors, bucket_bytes);
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

/// Whether two `Partial` tensors can share a bucket: one dtype, one mesh.
fn same_stream<B: Backend>(a: &F<B>, b: &F<B>) -> bool {
    a.dtype() == b.dtype() && a.mesh == b.mesh
}

thread_local! {
    /// The bucket size of early buckets on this thread; `None`: off.
    static EARLY_BYTES: Cell<Option<usize>> = const { Cell::new(None) };
    /// This thread's open early bucket (an `Open<B>`).
    static OPEN: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    /// Early buckets summed since the last [`close_early_buckets`].
    static EARLY_SUMMED: Cell<usize> = const { Cell::new(0) };
}

/// On this thread, from now on, sum parameter gradients in buckets of `bucket_bytes` as the
/// backward pass makes them (`None`: only where the optimizer meets them). The bucket that is
/// still open when the optimizer runs is summed there, with the gradients no op marks as a
/// parameter's (BatchNorm's, for instance), by [`sum_in_buckets`] after
/// [`close_early_buckets`]. A step's collectives stay at most ceil(gradient bytes /
/// bucket bytes) as long as every early bucket holds at least `bucket_bytes`: all do but one
/// cut short by a change of dtype or mesh, or one holding a gradient that was only an addend
/// of a parameter's (a parameter used twice).
///
/// Off for gradient accumulation: each micro-batch's gradients would be summed, k collectives
/// per bucket instead of one (correct, but the communication accumulation exists to save).
pub fn set_early_buckets(bucket_bytes: Option<usize>) {
    EARLY_BYTES.with(|b| b.set(bucket_bytes.map(|b| b.max(1))));
    if bucket_bytes.is_none() {
        OPEN.with(|o| o.borrow_mut().take());
    }
}

/// The bucket size of early buckets on this thread, if they are on.
pub fn early_buckets() -> Option<usize> {
    EARLY_BYTES.with(Cell::get)
}

/// Drops this thread's open early bucket (its gradients are summed where the optimizer meets
/// them) and returns how many early buckets were summed since the last call.
pub fn close_early_buckets() -> usize {
    OPEN.with(|o| o.borrow_mut().take());
    EARLY_SUMMED.with(|n| n.replace(0))
}

/// Gradients of one dtype and mesh waiting for their bucket to fill: clones, which share
/// their sum with the gradients the backward pass keeps.
struct Open<B: Backend> {
    tensors: Vec<F<B>>,
    bytes: usize,
}

/// A parameter's gradient, just made by an op: it joins the open early bucket when early
/// buckets are on, and a full bucket is summed now.
pub(crate) fn gradient_made<B: Backend>(g: F<B>) -> F<B> {
    let Some(bucket_bytes) = early_buckets() else {
        return g;
    };
    if g.placement() != Placement::Partial {
        return g;
    }
    let full: Vec<Vec<F<B>>> = OPEN.with(|o| {
        let mut o = o.borrow_mut();
        if !o.as_ref().is_some_and(|b| b.is::<Open<B>>()) {
            *o = Some(Box::new(Open::<B> {
                tensors: Vec::new(),
                bytes: 0,
            }));
        }
        let open = o
            .as_mut()
            .and_then(|b| b.downcast_mut::<Open<B>>())
            .expect("an open bucket of this backend");
        let mut full = Vec::new();
        if open.tensors.first().is_some_and(|f| !same_stream(f, &g)) {
            full.push(std::mem::take(&mut open.tensors));
            open.bytes = 0;
        }
        open.bytes += g.shape().num_elements() * g.dtype().size();
        open.tensors.push(g.clone());
        if open.bytes >= bucket_bytes {
            full.push(std::mem::take(&mut open.tensors));
            open.bytes = 0;
        }
        full
    });
    for bucket in full {
        sum_early(bucket);
    }
    g
}

/// Sums one early bucket and leaves each tensor's sum where its clones find it. Tensors that
/// nothing else holds any more (intermediate addends of a gradient) are left out.
fn sum_early<B: Backend>(bucket: Vec<F<B>>) {
    let (sums, tensors): (Vec<_>, Vec<F<B>>) = bucket
        .into_iter()
        .filter_map(|t| t.sum_for_clones().map(|s| (s, t)))
        .unzip();
    if tensors.is_empty() {
        return;
    }
    let _span = tracing::trace_span!(target: "firemesh::comm", "early bucket").entered();
    let (summed, _) = sum_run(tensors, usize::MAX);
    for (sum, t) in sums.into_iter().zip(summed) {
        // A clone summed meanwhile holds the same values.
        let _ = sum.set(t.into_parts());
    }
    stats::early_bucket();
    EARLY_SUMMED.with(|n| n.set(n.get() + 1));
}

/// One piece of a bucket: `len` elements of tensor `item` from `start`.
struct Span {
    item: usize,
    start: usize,
    len: usize,
}

/// Sums a run of `Partial` tensors of one dtype and mesh; returns them summed
/// (`Replicated`), in order, and the collectives it took.
fn sum_run<B: Backend>(run: Vec<F<B>>, bucket_bytes: usize) -> (Vec<F<B>>, usize) {
    let Some(first) = run.first() else {
        return (Vec::new(), 0);
    };
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
                cat::<B>(of_rank.collect())
            })
            .collect();
        stats::preparing("buckets", || {
            stats::redistribution(Redistribution::PartialToReplicated)
        });
        let sums = route::sum::<B, FloatKind>(buffers, &mesh, To::EveryRank);
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
                .map(|(ps, empty)| if ps.is_empty() { empty } else { cat::<B>(ps) })
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

/// `len` elements of the flat tensor `flat` (of `whole` elements) from `start`.
fn piece<B: Backend>(flat: &P<B>, whole: usize, start: usize, len: usize) -> P<B> {
    if start == 0 && len == whole {
        return flat.clone();
    }
    let range = [Slice::new(start as isize, Some((start + len) as isize), 1)];
    B::float_slice(flat.clone(), &range)
}

fn cat<B: Backend>(mut ps: Vec<P<B>>) -> P<B> {
    if ps.len() == 1 {
        ps.pop().expect("one piece")
    } else {
        B::float_cat(ps, 0)
    }
}
