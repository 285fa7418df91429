//! Early buckets: parameter gradients summed during the backward pass.
//!
//! Each gradient an op makes for a parameter (the ops that exist for that:
//! `linear_weight_backward`, `linear_bias_backward`, `conv2d_weight_backward`,
//! `conv2d_bias_backward`, …) joins the open bucket of the [`EarlyBuckets`] that the calling
//! thread armed on its mesh, and a bucket is summed as soon as it holds `bucket_bytes`, while
//! the rest of the backward pass is still to be issued. The gradient keeps its `Partial`
//! placement and carries the sum (as clones of a `Partial` tensor do), so the optimizer's
//! [`super::sum_in_buckets`] finds it summed. ZeRO-1's buckets
//! ([`EarlyBuckets::scattering`]) are reduce-scattered instead, and the gradient carries its
//! sum as `Shard(0)` blocks, which [`super::reduce_scatter_in_buckets`] takes as they are.
//!
//! Where the sum runs: on the process's communication thread (one per world link), beside the
//! rest of the backward pass (across the processes of a world, through the link's side
//! channel: `across.rs`; there the sums reach the gradients' clones at
//! [`EarlyBuckets::close`], so that no op of the backward pass sees them on one process and not
//! on another);
//! [`EarlyBuckets::close`] waits for it. On devices that compute where they are called (Flex,
//! NdArray) the sum runs while the calling thread computes the next gradients. On CubeCL
//! devices (wgpu, CUDA) the calling thread goes on queuing the backward pass while the
//! communication thread waits for the bucket's gradients and moves them; like every thread of
//! firemesh it issues to the device stream (`firemesh_collective::stream`), so the devices see
//! its copies and kernels in order with the backward pass.
//!
//! Not `embedding_backward`: a GPT's token embedding is tied to its output head, so that
//! gradient is one addend of the parameter's (summing it would be wasted), and an embedding's
//! gradient comes last in the backward pass anyway. A parameter used twice (a shared layer)
//! wastes in the same way: each use's gradient is summed on its own. Under ZeRO-1 the second
//! use's gradient may meet the first's `Shard(0)` sum when autodiff adds them; it is then summed
//! on the calling thread and sliced, whichever finishes first (the values are the same).

use super::{same_stream, sum_run, F};
use crate::mesh::{locked, Mesh};
use crate::placement::Placement;
use crate::runtime::armed;
use crate::runtime::comm::{on_comm_thread, Summed};
use crate::stats;
use burn_backend::{Backend, FloatDType, TensorMetadata};
use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One training loop's early buckets: their size, the bucket still filling, and the buckets
/// being summed. A training loop owns one and arms it on its mesh around each backward pass
/// ([`EarlyBuckets::arm`]); while it is armed, every parameter gradient an op of that thread
/// makes on that mesh joins its open bucket (a backward pass runs on the thread that calls it;
/// another thread's training loop on the same mesh keeps its own buckets), and a bucket is
/// summed as soon as it holds `bucket_bytes`. The bucket still open when the optimizer runs is
/// summed there, with the gradients no op marks as a parameter's (BatchNorm's, for instance),
/// by [`super::sum_in_buckets`] after [`EarlyBuckets::close`]. A step's collectives stay at most
/// ceil(gradient bytes / bucket bytes)
/// as long as every early bucket holds at least `bucket_bytes`: all do but one cut short by a
/// change of dtype or mesh, or one holding a gradient that was only an addend of a parameter's
/// (a parameter used twice).
///
/// Not for gradient accumulation: each micro-batch's gradients would be summed, k collectives
/// per bucket instead of one (correct, but the communication accumulation exists to save).
/// Clones share the buckets.
#[derive(Clone)]
pub struct EarlyBuckets {
    session: Arc<Session>,
}

/// What an [`EarlyBuckets`] holds; a mesh holds it while it is armed there.
struct Session {
    bucket_bytes: usize,
    /// The dtype f32 buckets are summed in (`None`: f32).
    wire: Option<FloatDType>,
    /// Reduce-scatter the buckets into `Shard(0)` blocks instead of summing them whole
    /// (ZeRO-1, [`EarlyBuckets::scattering`]).
    scatter: bool,
    /// The open bucket (an `Open<B>`).
    open: Mutex<Option<Box<dyn Any + Send>>>,
    /// Buckets summed since the last [`EarlyBuckets::close`].
    summed: AtomicUsize,
    /// Buckets handed to the communication thread, not waited for yet.
    in_flight: Mutex<Vec<Receiver<Summed>>>,
    /// In a world, the summed buckets' sums, left for their gradients' clones by
    /// [`EarlyBuckets::close`] on the calling thread, in bucket order: an op of the backward
    /// pass then meets every bucketed gradient as `Partial` (with a live clone) on every
    /// process, whenever its sum finishes. Published as soon as summed, that op would see
    /// `Partial` on one process and the sum on another, and cross the processes (or not)
    /// differently on each.
    deferred: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl EarlyBuckets {
    /// Buckets of `bucket_bytes` (at least one byte).
    pub fn new(bucket_bytes: usize) -> Self {
        Self::on_wire(bucket_bytes, None)
    }

    /// Buckets of `bucket_bytes` (of f32) summed in `wire` (bf16 halves the bytes on the wire;
    /// `None`: in the gradients' dtype), as [`super::sum_in_buckets_on_wire`] does.
    pub fn on_wire(bucket_bytes: usize, wire: Option<FloatDType>) -> Self {
        Self::made(bucket_bytes, wire, false)
    }

    /// As [`EarlyBuckets::on_wire`], each bucket reduce-scattered: a gradient's sum is left
    /// for it as `Shard(0)` blocks (rank r holds its even share of rows), as
    /// [`super::reduce_scatter_in_buckets`] makes them; one with fewer rows than ranks is summed
    /// whole. ZeRO-1's buckets, summed during the backward pass: for an optimizer step that
    /// updates `Shard(0)` blocks and gathers the parameters after it (`firemesh::zero`), not
    /// for one that expects whole sums.
    pub fn scattering(bucket_bytes: usize, wire: Option<FloatDType>) -> Self {
        Self::made(bucket_bytes, wire, true)
    }

    fn made(bucket_bytes: usize, wire: Option<FloatDType>, scatter: bool) -> Self {
        Self {
            session: Arc::new(Session {
                bucket_bytes: bucket_bytes.max(1),
                wire,
                scatter,
                open: Mutex::new(None),
                summed: AtomicUsize::new(0),
                in_flight: Mutex::new(Vec::new()),
                deferred: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Parameter gradients that this thread's ops make on `mesh` join these buckets until the
    /// returned value drops (then the buckets this thread armed there before, if any, are armed
    /// again). Other threads' ops on the mesh do not see them. On a mesh that is one process's
    /// share of a world ([`Mesh::in_world`]) the communication thread crosses the processes
    /// through the link's side channel (`across.rs`); where the link has none
    /// ([`Mesh::side_link`]) nothing is armed, and the gradients are summed at the step.
    pub fn arm<D: 'static>(&self, mesh: &Mesh<D>) -> Armed<D> {
        let crossing = mesh.processes() == 1 || mesh.side_link().is_some();
        Armed {
            _armed: self.arm_on(mesh.key(), crossing),
            mesh: PhantomData,
        }
    }

    /// Arms these buckets on `mesh` for the calling thread (none where they cannot cross its
    /// processes).
    pub(crate) fn arm_on(&self, mesh: armed::MeshKey, crossing: bool) -> armed::Token {
        let session: Arc<dyn Any + Send + Sync> = self.session.clone();
        let setting = armed::Setting::Early(crossing.then(|| Arc::downgrade(&session)));
        armed::arm(mesh, setting)
    }

    /// Drops the open bucket (its gradients are summed where the optimizer meets them), waits
    /// for the buckets still being summed on the communication thread, and returns how many
    /// buckets were summed early since the last call. What the communication thread counted
    /// is counted on the calling thread ([`stats::count`]), with the time it took and the time
    /// this thread waited for it.
    pub fn close(&self) -> usize {
        locked(&self.session.open).take();
        let in_flight = std::mem::take(&mut *locked(&self.session.in_flight));
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
        let deferred = std::mem::take(&mut *locked(&self.session.deferred));
        for publish in deferred {
            publish();
        }
        stats::early_buckets_waited(waited);
        self.session.summed.swap(0, Ordering::Relaxed)
    }
}

/// Early buckets armed on a mesh for one thread ([`EarlyBuckets::arm`]); disarms them when
/// dropped, wherever it drops (a `Bucketed` optimizer keeps its buckets armed until its last
/// clone drops).
#[must_use = "the buckets are disarmed when this is dropped"]
pub struct Armed<D: 'static> {
    _armed: armed::Token,
    mesh: PhantomData<fn() -> D>,
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
    if g.placement() != Placement::Partial {
        return g;
    }
    let Some(session) = g
        .mesh
        .early_buckets()
        .and_then(|s| s.downcast::<Session>().ok())
    else {
        return g;
    };
    let full: Vec<Vec<F<B>>> = {
        let mut o = locked(&session.open);
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
        if open.bytes >= session.bucket_bytes {
            full.push(std::mem::take(&mut open.tensors));
            open.bytes = 0;
        }
        full
    };
    for bucket in full {
        sum_early(&session, bucket);
    }
    g
}

/// Sums one early bucket, here or on the communication thread, and leaves each tensor's sum
/// where its clones find it. Tensors that nothing else holds any more (intermediate addends of
/// a gradient) are left out.
fn sum_early<B: Backend>(session: &Arc<Session>, bucket: Vec<F<B>>) {
    let (sums, tensors): (Vec<_>, Vec<F<B>>) = bucket
        .into_iter()
        .filter_map(|t| t.shared_with_clones().map(|s| (s, t)))
        .unzip();
    if tensors.is_empty() {
        return;
    }
    let mesh = tensors[0].mesh.clone();
    let in_world = mesh.processes() > 1;
    stats::early_bucket();
    session.summed.fetch_add(1, Ordering::Relaxed);
    let (wire, scatter) = (session.wire, session.scatter);
    let counted = session.clone();
    let job = move || {
        let _span = tracing::debug_span!(target: "firemesh::comm", "early bucket").entered();
        let (summed, collectives) = match scatter {
            true => super::scatter::scatter_run(tensors, wire),
            false => sum_run(tensors, usize::MAX, wire),
        };
        // A scattered bucket's tensors with fewer rows than ranks take a sum of their own.
        let more = collectives.saturating_sub(1);
        counted.summed.fetch_add(more, Ordering::Relaxed);
        let publish = move || {
            for (sum, t) in sums.into_iter().zip(summed) {
                // A clone summed meanwhile holds the same sum (up to the wire's rounding),
                // whole where this one is scattered: either serves.
                let (parts, placement, _) = t.into_issued();
                let _ = sum.set((parts, placement));
            }
        };
        match in_world {
            true => locked(&counted.deferred).push(Box::new(publish)),
            false => publish(),
        }
    };
    let done = on_comm_thread(&mesh, job);
    locked(&session.in_flight).push(done);
}
