//! A model's gradients summed over the ranks in buckets, before the optimizer sees them.
//!
//! Weight gradients on `Autodiff<Sharded<B>>` come out `Partial`. Left alone, each is summed on
//! its own where the optimizer first uses it: one collective per parameter. [`reduce_gradients`]
//! sums them all in buckets of 25 MiB (ceil(gradient bytes / bucket bytes) collectives), in the
//! order the backward pass produces them. [`Bucketed`] wraps any Burn optimizer to do it on
//! every step, so burn-train's `Learner` gets it with one line:
//!
//! ```ignore
//! let optimizer = firemesh::grads::Bucketed::new(AdamConfig::new().init());
//! ```
//!
//! With [`Bucketed::summing_early`] the buckets are summed during the backward pass, each as
//! soon as the backward pass has made its gradients, so that a runtime that queues work can
//! communicate while the rest of the backward pass computes; the optimizer then sums only the
//! last, partly filled bucket and the gradients no op marks as a parameter's (BatchNorm's, for
//! instance). [`crate::Trainer`] does both in its step.
//!
//! Gradient accumulation needs nothing more, with early buckets off (the default):
//! `GradientsAccumulator` adds `Partial` gradients on each rank without communication, and the
//! step after it reduces once.

use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Tensor, TensorPrimitive};
pub use firemesh_backend::buckets::DEFAULT_BUCKET_BYTES;
use firemesh_backend::buckets::{sum_in_buckets_on_wire, EarlyBuckets};
use firemesh_backend::kind::FloatKind;
use firemesh_backend::{Sharded, ShardedTensor};
use std::any::Any;
use std::sync::Arc;

type Ad<B> = Autodiff<Sharded<B>>;
type Grad<B> = ShardedTensor<B, FloatKind>;
/// Puts a summed gradient back under its parameter (its rank `D` is known where it was taken).
type PutBack<B> = Box<dyn FnOnce(&mut GradientsParams, Grad<B>)>;

/// The largest gradient bucket: 64 GiB.
pub const MAX_BUCKET_MIB: f64 = 65_536.0;

/// The bytes of a bucket of `mib` MiB (at least one byte), or why that is no bucket size: the
/// one check of a bucket size for every program.
pub fn bucket_bytes(mib: f64) -> crate::error::Result<usize> {
    if !(mib.is_finite() && mib > 0.0 && mib <= MAX_BUCKET_MIB) {
        return Err(crate::error::Error::BucketSize {
            mib,
            most: MAX_BUCKET_MIB,
        });
    }
    Ok(((mib * (1u64 << 20) as f64).round() as usize).max(1))
}

/// Sums `module`'s `Partial` gradients in `grads` over the ranks, in buckets of `bucket_bytes`
/// filled in backward order (the reverse of the module's parameter order), after waiting for
/// the `early` buckets of the backward pass ([`EarlyBuckets::close`]). Returns the number of
/// collectives the step's gradients took: those it issued, and the early buckets.
pub fn reduce_gradients<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: &M,
    grads: &mut GradientsParams,
    bucket_bytes: usize,
    early: Option<&EarlyBuckets>,
) -> usize {
    reduce_gradients_on_wire::<B, M>(module, grads, bucket_bytes, early, None)
}

/// [`reduce_gradients`], each f32 bucket summed in `wire` (bf16: half the bytes on the wire,
/// the sums cast back to f32; `None`: f32). The early buckets say their own
/// ([`EarlyBuckets::on_wire`]).
pub fn reduce_gradients_on_wire<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: &M,
    grads: &mut GradientsParams,
    bucket_bytes: usize,
    early: Option<&EarlyBuckets>,
    wire: Option<FloatDType>,
) -> usize {
    reduce_with::<B, M>(module, grads, early, |g| {
        sum_in_buckets_on_wire(g, bucket_bytes, wire)
    })
}

/// Sums `module`'s `Partial` gradients over the ranks with `sum` (given them in backward order,
/// it returns them summed and the collectives it took), after closing the `early` buckets;
/// returns the collectives, the early buckets' included.
pub(crate) fn reduce_with<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: &M,
    grads: &mut GradientsParams,
    early: Option<&EarlyBuckets>,
    sum: impl FnOnce(Vec<Grad<B>>) -> (Vec<Grad<B>>, usize),
) -> usize {
    let early = early.map_or(0, EarlyBuckets::close);
    let mut taken = Take::<B> {
        grads,
        taken: Vec::new(),
    };
    module.visit(&mut taken);
    let Take { grads, mut taken } = taken;
    taken.reverse();
    let (put_backs, tensors): (Vec<PutBack<B>>, Vec<Grad<B>>) = taken.into_iter().unzip();
    let (summed, collectives) = sum(tensors);
    for (put_back, g) in put_backs.into_iter().zip(summed) {
        put_back(grads, g);
    }
    early + collectives
}

/// Takes every parameter's gradient out of `grads`, with how to put it back.
struct Take<'a, B: Backend> {
    grads: &'a mut GradientsParams,
    taken: Vec<(PutBack<B>, Grad<B>)>,
}

impl<B: Backend> ModuleVisitor<Ad<B>> for Take<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad<B>, D>>) {
        let id = param.id;
        if let Some(g) = self.grads.remove::<Sharded<B>, D>(id) {
            let put_back: PutBack<B> = Box::new(move |grads, g| {
                let g = Tensor::<Sharded<B>, D>::from_primitive(TensorPrimitive::Float(g));
                grads.register::<Sharded<B>, D>(id, g);
            });
            self.taken.push((put_back, g.into_primitive().tensor()));
        }
    }
}

/// A Burn optimizer whose steps first sum the gradients over the ranks in buckets.
#[derive(Clone)]
pub struct Bucketed<O> {
    inner: O,
    bucket_bytes: usize,
    early: Option<EarlyBuckets>,
    /// The early buckets armed on the model's mesh since the first step, until the last clone
    /// of this optimizer drops (an `Armed<D>`).
    armed: Option<Arc<dyn Any + Send + Sync>>,
}

impl<O> Bucketed<O> {
    /// `inner` with buckets of 25 MiB.
    pub fn new(inner: O) -> Self {
        Self {
            inner,
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            early: None,
            armed: None,
        }
    }

    /// From the first step on, the backward passes on the model's mesh sum their buckets as
    /// they go ([`EarlyBuckets`]); the first step's are summed at the step. Not with gradient
    /// accumulation: each micro-batch would be summed.
    pub fn summing_early(mut self) -> Self {
        self.early = Some(EarlyBuckets::new(self.bucket_bytes));
        self
    }

    /// Buckets of `bytes` (at least one element).
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes;
        if self.early.is_some() {
            self.early = Some(EarlyBuckets::new(bytes));
        }
        self
    }
}

impl<B, M, O> Optimizer<M, Ad<B>> for Bucketed<O>
where
    B: Backend,
    M: AutodiffModule<Ad<B>>,
    O: Optimizer<M, Ad<B>>,
{
    type Record = O::Record;

    fn step(&mut self, lr: LearningRate, module: M, mut grads: GradientsParams) -> M {
        reduce_gradients::<B, M>(&module, &mut grads, self.bucket_bytes, self.early.as_ref());
        if let (Some(early), None) = (&self.early, &self.armed) {
            if let Some(mesh) = module.devices().first() {
                self.armed = Some(Arc::new(early.arm(mesh)));
            }
        }
        self.inner.step(lr, module, grads)
    }

    fn step_multi(&mut self, lr: LearningRate, module: M, grads: MultiGradientsParams) -> M {
        // Several devices' gradients, each from its own model copy: nothing is Partial.
        self.inner.step_multi(lr, module, grads)
    }

    fn to_record(&self) -> Self::Record {
        self.inner.to_record()
    }

    fn load_record(self, record: Self::Record) -> Self {
        Self {
            inner: self.inner.load_record(record),
            ..self
        }
    }
}
