//! Early buckets: parameter gradients summed during the backward pass.
//!
//! Each gradient an op makes for a parameter (the ops that exist for that:
//! `linear_weight_backward`, `linear_bias_backward`, `conv2d_weight_backward`,
//! `conv2d_bias_backward`, …) joins the thread's open bucket, and a bucket is summed as soon as
//! it holds `bucket_bytes`, while the rest of the backward pass is still to be issued. The
//! gradient keeps its `Partial` placement and carries the sum (as clones of a `Partial` tensor
//! do), so the optimizer's [`super::sum_in_buckets`] finds it summed.
//!
//! Where the sum runs: on a communication thread, beside the rest of the backward pass;
//! [`close_early_buckets`] waits for it. On devices that compute where they are called (Flex,
//! NdArray) the sum runs while the calling thread computes the next gradients. On CubeCL
//! devices (wgpu, CUDA) the calling thread goes on queuing the backward pass while the
//! communication thread waits for the bucket's gradients and moves them; like every thread of
//! firemesh it issues to the device stream (`firemesh_collective::stream`), so the devices see
//! its copies and kernels in order with the backward pass.
//!
//! Not `embedding_backward`: a GPT's token embedding is tied to its output head, so that
//! gradient is one addend of the parameter's (summing it would be wasted), and an embedding's
//! gradient comes last in the backward pass anyway. A parameter used twice (a shared layer)
//! wastes in the same way: each use's gradient is summed on its own.

use super::{same_stream, sum_run, F};
use crate::exec::{worker, Job};
use crate::placement::Placement;
use crate::stats::{self, Counts};
use burn_backend::{Backend, TensorMetadata};
use firemesh_collective::panic_message;
use firemesh_collective::DeviceStream;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

thread_local! {
    /// The bucket size of early buckets on this thread; `None`: off.
    static EARLY_BYTES: Cell<Option<usize>> = const { Cell::new(None) };
    /// This thread's open early bucket (an `Open<B>`).
    static OPEN: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    /// Early buckets summed since the last [`close_early_buckets`].
    static EARLY_SUMMED: Cell<usize> = const { Cell::new(0) };
    /// Buckets this thread handed to the communication thread, not waited for yet.
    static IN_FLIGHT: RefCell<Vec<Receiver<Summed>>> = const { RefCell::new(Vec::new()) };
}

/// On this thread, from now on, sum parameter gradients in buckets of `bucket_bytes` as the
/// backward pass makes them (`None`: only where the optimizer meets them). The bucket that is
/// still open when the optimizer runs is summed there, with the gradients no op marks as a
/// parameter's (BatchNorm's, for instance), by [`super::sum_in_buckets`] after
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
/// them), waits for the buckets still being summed on the communication thread, and returns
/// how many early buckets were summed since the last call. What the communication thread
/// counted is counted here ([`stats::count`]), with the time it took and the time this thread
/// waited for it.
pub fn close_early_buckets() -> usize {
    OPEN.with(|o| o.borrow_mut().take());
    let in_flight = IN_FLIGHT.with(|f| std::mem::take(&mut *f.borrow_mut()));
    let start = Instant::now();
    let done: Vec<Summed> = in_flight
        .into_iter()
        .map(|r| {
            r.recv()
                .unwrap_or_else(|_| Err("the thread stopped".into()))
        })
        .collect();
    let waited = start.elapsed();
    for summed in done {
        match summed {
            Ok(counts) => stats::early_bucket_summed(&counts),
            Err(message) => panic!("firemesh: summing an early gradient bucket: {message}"),
        }
    }
    stats::early_buckets_waited(waited);
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

/// Sums one early bucket, here or on the communication thread, and leaves each tensor's sum
/// where its clones find it. Tensors that nothing else holds any more (intermediate addends of
/// a gradient) are left out.
fn sum_early<B: Backend>(bucket: Vec<F<B>>) {
    let (sums, tensors): (Vec<_>, Vec<F<B>>) = bucket
        .into_iter()
        .filter_map(|t| t.sum_for_clones().map(|s| (s, t)))
        .unzip();
    if tensors.is_empty() {
        return;
    }
    stats::early_bucket();
    EARLY_SUMMED.with(|n| n.set(n.get() + 1));
    let job = move || {
        let _span = tracing::debug_span!(target: "firemesh::comm", "early bucket").entered();
        let (summed, _) = sum_run(tensors, usize::MAX);
        for (sum, t) in sums.into_iter().zip(summed) {
            // A clone summed meanwhile holds the same values.
            let _ = sum.set(t.into_parts());
        }
    };
    let done = on_comm_thread(job);
    IN_FLIGHT.with(|f| f.borrow_mut().push(done));
}

/// What the communication thread counted for one bucket (its `comm_nanos`: the time inside
/// the sums, from when every rank's part was there), or why it failed.
type Summed = Result<Counts, String>;

/// Runs `job` on the process's communication thread (started when first used), after the jobs
/// queued before it, issuing to the device stream.
fn on_comm_thread(job: impl FnOnce() + Send + 'static) -> Receiver<Summed> {
    static QUEUE: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| Mutex::new(worker("firemesh-comm".into())));
    let (done, result) = channel();
    let counted: Job = Box::new(move || {
        let (outcome, counts) =
            stats::count(|| DeviceStream::run(|| catch_unwind(AssertUnwindSafe(job))));
        let _ = done.send(outcome.map(|()| counts).map_err(|p| panic_message(&*p)));
    });
    queue
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(counted)
        .expect("firemesh: the communication thread has stopped");
    result
}
