//! One training step, for every loop that trains: `firemesh train`, `firemesh bench`, the
//! simulator's measurement and the step benchmarks all call [`Trainer::step`].
//!
//! A [`Trainer`] owns the model, the optimizer, the learning-rate schedule, the step counter
//! and the gradient buckets. Its step runs the forward pass and the loss (a closure of the
//! caller's: the model's code is the model's), the backward pass, the sum of the gradients over
//! the ranks in buckets, and the optimizer's update:
//!
//! ```ignore
//! let mut trainer = Trainer::sharded(model, AdamWConfig::new().init(), &mesh, 25 << 20)
//!     .with_lr(|step| 1e-3);
//! for batch in batches {
//!     let report = trainer.step(|model| Ok(model.forward_loss(batch)))?;
//!     println!("step {}: loss {:.4}", report.step, report.loss);
//! }
//! ```
//!
//! On a mesh (`Autodiff<Sharded<B>>`, [`Trainer::sharded`]) the weight gradients come out of
//! the backward pass `Partial` and are summed in buckets; with early buckets (on by default)
//! the buckets are summed during the backward pass as it fills them, and the step sums only
//! what is left. On one device ([`Trainer::single_device`]) nothing is summed: the same step on
//! the inner backend alone, the reference that sharded runs are compared with.
//!
//! Loops that Burn drives (burn-train's `Learner`, or a user's own loop around an optimizer)
//! keep the one-line path: [`crate::grads::Bucketed`].

use crate::grads::reduce_gradients;
use crate::{Error, Result};
use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use firemesh_backend::buckets::EarlyBuckets;
use firemesh_backend::{stats, Mesh, Sharded};
use std::any::Any;

/// A model's training: the model, its optimizer, the learning rate of each step, the step
/// counter and how the gradients are summed over the ranks.
pub struct Trainer<A: AutodiffBackend, M, O> {
    /// Taken by the optimizer's update, which returns the next model; always `Some` between
    /// steps.
    model: Option<M>,
    optimizer: O,
    lr: Box<dyn Fn(usize) -> f64>,
    /// Steps done: the next step's index.
    step: usize,
    /// Reseed the device before each step from this seed and the step's index.
    seed: Option<u64>,
    device: A::Device,
    sums: Option<Sums<A, M>>,
}

/// How a mesh's gradients are summed over its ranks.
struct Sums<A: AutodiffBackend, M> {
    bucket_bytes: usize,
    early: Option<EarlyBuckets>,
    reduce: fn(&M, &mut GradientsParams, usize, Option<&EarlyBuckets>) -> usize,
    arm: fn(&EarlyBuckets, &A::Device) -> Box<dyn Any>,
}

/// What one step did.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// Steps done, this one included.
    pub step: usize,
    pub lr: f64,
    pub loss: f64,
    /// Collectives that summed the gradients, and of them the buckets summed during the
    /// backward pass.
    pub gradient_collectives: usize,
    pub early_gradient_collectives: usize,
    /// What the mesh counted during the step: ops, sums and gathers by route, fallbacks,
    /// time in communication.
    pub counts: stats::Counts,
}

impl StepReport {
    /// The sums and gathers across ranks other than the gradient buckets' (BatchNorm
    /// statistics of a sharded batch and their gradients, the loss read back): the step waits
    /// for each.
    pub fn other_collectives(&self) -> u64 {
        let all: u64 = self.counts.routes.values().sum();
        all - self.gradient_collectives as u64
    }
}

impl<B, M, O> Trainer<Autodiff<Sharded<B>>, M, O>
where
    B: Backend,
    M: AutodiffModule<Autodiff<Sharded<B>>>,
    O: Optimizer<M, Autodiff<Sharded<B>>>,
{
    /// Trains `model` on `mesh`: its gradients summed over the ranks in buckets of
    /// `bucket_bytes` (at least one element), each bucket as soon as the backward pass has
    /// filled it. The learning rate is 1e-3 until [`Trainer::with_lr`].
    pub fn sharded(model: M, optimizer: O, mesh: &Mesh<B::Device>, bucket_bytes: usize) -> Self {
        let bucket_bytes = bucket_bytes.max(1);
        let sums = Sums {
            bucket_bytes,
            early: Some(EarlyBuckets::new(bucket_bytes)),
            reduce: reduce_gradients::<B, M>,
            arm: arm::<B>,
        };
        Self::new(model, optimizer, mesh.clone(), Some(sums))
    }

    /// Buckets summed only at the optimizer step, after the backward pass (for comparisons).
    pub fn without_early_buckets(mut self) -> Self {
        if let Some(sums) = &mut self.sums {
            sums.early = None;
        }
        self
    }
}

/// Arms early buckets on a mesh for one backward pass.
fn arm<B: Backend>(early: &EarlyBuckets, mesh: &Mesh<B::Device>) -> Box<dyn Any> {
    Box::new(early.arm(mesh))
}

impl<A, M, O> Trainer<A, M, O>
where
    A: AutodiffBackend,
    M: AutodiffModule<A>,
    O: Optimizer<M, A>,
{
    /// Trains `model` on `device` alone: nothing to sum.
    pub fn single_device(model: M, optimizer: O, device: &A::Device) -> Self {
        Self::new(model, optimizer, device.clone(), None)
    }

    fn new(model: M, optimizer: O, device: A::Device, sums: Option<Sums<A, M>>) -> Self {
        Self {
            model: Some(model),
            optimizer,
            lr: Box::new(|_| 1e-3),
            step: 0,
            seed: None,
            device,
            sums,
        }
    }

    /// The learning rate of each step (given the step's index from 0).
    pub fn with_lr(mut self, lr: impl Fn(usize) -> f64 + 'static) -> Self {
        self.lr = Box::new(lr);
        self
    }

    /// Goes on from step `step` (a resumed run): the next step has index `step`.
    pub fn starting_at(mut self, step: usize) -> Self {
        self.step = step;
        self
    }

    /// Before each step, seeds the device's random draws (dropout) from `seed` and the step's
    /// index, so that a resumed run draws what an uninterrupted one does.
    pub fn with_step_seeds(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// One step: `loss` (the forward pass and the loss of the model's batch), the backward
    /// pass, the gradients summed over the ranks, the optimizer's update. The loss is read back,
    /// so the step's work has been issued to every device when it returns.
    pub fn step(&mut self, loss: impl FnOnce(&M) -> Result<Tensor<A, 1>>) -> Result<StepReport> {
        let index = self.step;
        let lr = (self.lr)(index);
        if let Some(seed) = self.seed {
            A::seed(&self.device, step_seed(seed, index));
        }
        let model = self.model.take().ok_or_else(|| {
            Error::Invalid("the trainer lost its model in an earlier failed step".into())
        })?;
        let (sums, device, optimizer) = (&self.sums, &self.device, &mut self.optimizer);
        let (outcome, counts) = stats::count(|| {
            let loss = match loss(&model) {
                Ok(loss) => loss,
                Err(e) => return Err((model, e)),
            };
            let armed = sums
                .as_ref()
                .and_then(|s| s.early.as_ref().map(|early| (s.arm)(early, device)));
            let grads = loss.backward();
            drop(armed);
            let mut grads = GradientsParams::from_grads(grads, &model);
            let collectives = sums.as_ref().map_or(0, |s| {
                (s.reduce)(&model, &mut grads, s.bucket_bytes, s.early.as_ref())
            });
            let loss: f64 = loss.into_scalar().elem();
            Ok((optimizer.step(lr, model, grads), loss, collectives))
        });
        let (model, loss, collectives) = match outcome {
            Ok(stepped) => stepped,
            Err((model, e)) => {
                self.model = Some(model);
                return Err(e);
            }
        };
        self.model = Some(model);
        self.step += 1;
        Ok(StepReport {
            step: self.step,
            lr,
            loss,
            gradient_collectives: collectives,
            early_gradient_collectives: counts.early_buckets as usize,
            counts,
        })
    }

    /// The model as it is after the steps so far.
    pub fn model(&self) -> &M {
        self.model
            .as_ref()
            .expect("the model is back after every step")
    }

    pub fn into_model(self) -> M {
        self.model.expect("the model is back after every step")
    }

    pub fn optimizer(&self) -> &O {
        &self.optimizer
    }

    /// Steps done.
    pub fn steps_done(&self) -> usize {
        self.step
    }
}

/// The seed of step `step`'s random draws: the run's seed and the step mixed.
fn step_seed(seed: u64, step: usize) -> u64 {
    firemesh_rng::mix(seed, step as u64)
}
