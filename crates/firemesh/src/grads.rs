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
//! With [`Bucketed::summing_early`] (or [`set_early_buckets`] on the training thread) the
//! buckets are summed during the backward pass, each as soon as the backward pass has made
//! its gradients, so that a runtime that queues work can communicate while the rest of the
//! backward pass computes; the optimizer then sums only the last, partly filled bucket and the
//! gradients no op marks as a parameter's (BatchNorm's, for instance).
//!
//! Gradient accumulation needs nothing more, with early buckets off (the default):
//! `GradientsAccumulator` adds `Partial` gradients on each rank without communication, and the
//! step after it reduces once.

use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
pub use firemesh_backend::buckets::set_early_buckets;
use firemesh_backend::buckets::{close_early_buckets, sum_in_buckets, DEFAULT_BUCKET_BYTES};
use firemesh_backend::kind::FloatKind;
use firemesh_backend::{Sharded, ShardedTensor};

type Ad<B> = Autodiff<Sharded<B>>;
type Grad<B> = ShardedTensor<B, FloatKind>;
/// Puts a summed gradient back under its parameter (its rank `D` is known where it was taken).
type PutBack<B> = Box<dyn FnOnce(&mut GradientsParams, Grad<B>)>;

/// Sums `module`'s `Partial` gradients in `grads` over the ranks, in buckets of `bucket_bytes`
/// filled in backward order (the reverse of the module's parameter order). Returns the number of
/// collectives the step's gradients took: those it issued, and the early buckets summed on this
/// thread since the last call ([`set_early_buckets`]).
pub fn reduce_gradients<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: &M,
    grads: &mut GradientsParams,
    bucket_bytes: usize,
) -> usize {
    let mut taken = Take::<B> {
        grads,
        taken: Vec::new(),
    };
    module.visit(&mut taken);
    let Take { grads, mut taken } = taken;
    taken.reverse();
    let (put_backs, tensors): (Vec<PutBack<B>>, Vec<Grad<B>>) = taken.into_iter().unzip();
    let early = close_early_buckets();
    let (summed, collectives) = sum_in_buckets(tensors, bucket_bytes);
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
    early: bool,
}

impl<O> Bucketed<O> {
    /// `inner` with buckets of 25 MiB.
    pub fn new(inner: O) -> Self {
        Self {
            inner,
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            early: false,
        }
    }

    /// After each step, the next backward passes on the step's thread sum their buckets as
    /// they go ([`set_early_buckets`]); the first step's are summed at the step. Not with
    /// gradient accumulation: each micro-batch would be summed.
    pub fn summing_early(mut self) -> Self {
        self.early = true;
        self
    }

    /// Buckets of `bytes` (at least one element).
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes;
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
        reduce_gradients::<B, M>(&module, &mut grads, self.bucket_bytes);
        if self.early {
            set_early_buckets(Some(self.bucket_bytes));
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

/// Early buckets ([`set_early_buckets`]) on the calling thread while this value lives.
pub struct EarlyBuckets;

impl EarlyBuckets {
    pub fn on(bucket_bytes: usize) -> Self {
        set_early_buckets(Some(bucket_bytes));
        Self
    }
}

impl Drop for EarlyBuckets {
    fn drop(&mut self) {
        set_early_buckets(None);
    }
}
