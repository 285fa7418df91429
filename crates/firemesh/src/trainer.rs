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
//! Options of a mesh's step: a precision for the products ([`Trainer::with_precision`], with
//! dynamic loss scaling under f16, [`crate::precision`]), gradient buckets summed in bf16
//! ([`Trainer::with_gradient_wire`]), and the optimizer state sharded over the ranks
//! ([`Trainer::with_zero`], [`crate::zero`]).
//!
//! Loops that Burn drives (burn-train's `Learner`, or a user's own loop around an optimizer)
//! keep the one-line path: [`crate::grads::Bucketed`].

use crate::error::{Error, Result};
use crate::grads::reduce_gradients_on_wire;
use crate::precision::{unscale_gradients, LossScaler, LossScaling, Precision, ScalerState};
use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::FloatDType;
use firemesh_backend::buckets::EarlyBuckets;
use firemesh_backend::{stats, Mesh, ParameterGathers, Sharded, StepScope};

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
    sums: Option<Sums<M>>,
    precision: Precision,
    scaler: Option<LossScaler>,
}

/// How a mesh's gradients are summed over its ranks.
struct Sums<M> {
    bucket_bytes: usize,
    /// The dtype buckets are summed in (`None`: f32).
    wire: Option<FloatDType>,
    /// What each step arms on the mesh for its forward and backward passes: the precision of
    /// products, and the early buckets the backward pass fills.
    scope: StepScope,
    reduce: fn(&M, &mut GradientsParams, usize, Option<&EarlyBuckets>, Option<FloatDType>) -> usize,
    /// Marks the model's parameters for autocast, cast once per step
    /// ([`crate::precision::mark_parameters`]).
    mark: fn(M) -> M,
    /// ZeRO-1 ([`crate::zero`]): the two ends of its update (its reduce-scatter is `reduce`).
    zero: Option<ZeroUpdate<M>>,
    /// ZeRO-3: the bytes of parameter gathers issued ahead of use (0: each at use).
    gathers_ahead: usize,
}

/// ZeRO-1's update between its two ends: the parameters sliced to the blocks of their
/// `Shard(0)` gradients before it, and gathered whole in buckets of the given bytes after it
/// (returning the collectives).
struct ZeroUpdate<M> {
    shard: fn(M, &GradientsParams) -> M,
    gather: fn(M, usize) -> (M, usize),
    /// How the parameters are stored before a step: as they are (ZeRO-1), or sharded (ZeRO-3,
    /// [`crate::zero::shard_model`]).
    store: fn(M) -> M,
}

// Function pointers copy whatever `M` is (a derive would ask `M: Copy`).
impl<M> Clone for ZeroUpdate<M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M> Copy for ZeroUpdate<M> {}

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
    /// Collectives that gathered the updated parameters (ZeRO-1; 0 otherwise).
    pub parameter_collectives: usize,
    /// What the mesh counted during the step: ops, sums and gathers by route, fallbacks,
    /// time in communication.
    pub counts: stats::Counts,
    /// The loss scale the step's gradients were computed with (f16).
    pub loss_scale: Option<f64>,
    /// Whether the update was skipped: the scaled gradients held an inf or a NaN (the scale is
    /// halved for the next step).
    pub skipped: bool,
}

impl StepReport {
    /// The sums and gathers across ranks other than the gradient buckets' (BatchNorm
    /// statistics of a sharded batch and their gradients, the loss read back): the step waits
    /// for each.
    pub fn other_collectives(&self) -> u64 {
        let all: u64 = self.counts.routes.values().sum();
        all - (self.gradient_collectives + self.parameter_collectives) as u64
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
    ///
    /// On a mesh that is one process's share of a world ([`Mesh::in_world`]) the early
    /// buckets cross the processes through the link's side channel, beside the step's own
    /// sums (BatchNorm statistics) on the link; where the link has none ([`Mesh::side_link`])
    /// they are summed after the backward pass.
    pub fn sharded(model: M, optimizer: O, mesh: &Mesh<B::Device>, bucket_bytes: usize) -> Self {
        let bucket_bytes = bucket_bytes.max(1);
        let mut scope = StepScope::new(mesh);
        scope.set_early_buckets(Some(EarlyBuckets::new(bucket_bytes)));
        let sums = Sums {
            bucket_bytes,
            wire: None,
            scope,
            reduce: reduce_gradients_on_wire::<B, M>,
            mark: crate::precision::mark_parameters::<B, M>,
            zero: None,
            gathers_ahead: bucket_bytes,
        };
        Self::new(model, optimizer, mesh.clone(), Some(sums))
    }

    /// Computes matrix products and convolutions in `precision` (forward and backward), and the
    /// element-wise ops on their results (the rest, the parameters and the optimizer state stay
    /// f32), with dynamic loss scaling under f16 ([`LossScaling::default`] until
    /// [`Trainer::with_loss_scaling`]). Fails, naming the device, when a rank's device cannot
    /// compute in it.
    pub fn with_precision(mut self, precision: Precision) -> Result<Self> {
        precision.check::<B>(self.device.devices())?;
        self.precision = precision;
        if let Some(sums) = &mut self.sums {
            let low = (precision != Precision::F32).then(|| precision.dtype());
            sums.scope.set_autocast(low);
        }
        if precision.scales_loss() && self.scaler.is_none() {
            self.scaler = Some(LossScaler::new(LossScaling::default()));
        }
        Ok(self)
    }

    /// Sums the gradient buckets in `wire` (bf16: half the bytes on the wire), each sum cast
    /// back to f32: PyTorch DDP's bf16 compression. Off (f32) by default. The step's bytes are
    /// in its report (`counts.summed_bytes`). Refused when a rank's device lacks the dtype.
    pub fn with_gradient_wire(mut self, wire: Precision) -> Result<Self> {
        wire.check::<B>(self.device.devices())?;
        let wire = wire.dtype();
        if let Some(sums) = &mut self.sums {
            sums.wire = Some(wire);
            sums.remake_early();
        }
        Ok(self)
    }

    /// ZeRO stage `stage`: 0 (every rank holds the whole optimizer state), 1 (each rank
    /// updates, and keeps the optimizer state of, its `Shard(0)` block of every parameter; the
    /// parameters are all-gathered in buckets after the update) or 3 (the parameters stay
    /// sharded between steps, and each op of the forward and backward passes gathers the ones
    /// it reads); see [`crate::zero`]. Stage 2 is refused.
    pub fn with_zero(mut self, stage: u8) -> Result<Self> {
        let zero = match crate::zero::stage(stage)? {
            0 => None,
            1 => Some(ZeroUpdate {
                shard: crate::zero::shard_parameters::<B, M>,
                gather: crate::zero::gather_parameters::<B, M>,
                store: std::convert::identity,
            }),
            _ => Some(ZeroUpdate {
                shard: crate::zero::shard_parameters::<B, M>,
                gather: crate::zero::keep_sharded,
                store: crate::zero::shard_model::<B, M>,
            }),
        };
        if let Some(sums) = &mut self.sums {
            sums.reduce = match zero {
                Some(_) => crate::zero::reduce_scatter_gradients::<B, M>,
                None => reduce_gradients_on_wire::<B, M>,
            };
            sums.zero = zero;
            let gathers = (stage == 3).then(|| ParameterGathers::new(sums.gathers_ahead));
            sums.scope.set_parameter_gathers(gathers);
            // ZeRO-1's and ZeRO-3's early buckets reduce-scatter.
            sums.remake_early();
        }
        Ok(self)
    }

    /// ZeRO-3: parameter gathers issued ahead of use, on the communication thread, until
    /// `bytes` of them are in flight (and always the next one); 0 gathers each when its op runs.
    /// Default: the bucket size. Gathers taken from ahead are counted in the step's report
    /// (`Counts::parameter_gathers_ahead`).
    pub fn with_gathers_ahead(mut self, bytes: usize) -> Self {
        if let Some(sums) = &mut self.sums {
            sums.gathers_ahead = bytes;
            if sums.scope.gathers_parameters() {
                sums.scope
                    .set_parameter_gathers(Some(ParameterGathers::new(bytes)));
            }
        }
        self
    }

    /// Buckets summed only at the optimizer step, after the backward pass (for comparisons).
    pub fn without_early_buckets(mut self) -> Self {
        if let Some(sums) = &mut self.sums {
            sums.scope.set_early_buckets(None);
        }
        self
    }
}

impl<M> Sums<M> {
    /// The early buckets (where they are on) made again for the wire and the ZeRO stage:
    /// summed whole, or reduce-scattered under ZeRO-1.
    fn remake_early(&mut self) {
        if self.scope.early_buckets().is_none() {
            return;
        }
        self.scope.set_early_buckets(Some(match self.zero {
            Some(_) => EarlyBuckets::scattering(self.bucket_bytes, self.wire),
            None => EarlyBuckets::on_wire(self.bucket_bytes, self.wire),
        }));
    }
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

    fn new(model: M, optimizer: O, device: A::Device, sums: Option<Sums<M>>) -> Self {
        draw_lazy_parameters::<A, M>(&model);
        Self {
            model: Some(model),
            optimizer,
            lr: Box::new(|_| 1e-3),
            step: 0,
            seed: None,
            device,
            sums,
            precision: Precision::F32,
            scaler: None,
        }
    }

    /// Scales the loss dynamically ([`LossScaler`]), whatever the precision; f16 does by
    /// default. Validates `scaling`.
    pub fn with_loss_scaling(mut self, scaling: LossScaling) -> Result<Self> {
        self.scaler = Some(LossScaler::new(scaling.validated()?));
        Ok(self)
    }

    /// Goes on with the loss scale of a resumed run (a checkpoint's [`ScalerState`]), under
    /// `scaling`.
    pub fn with_loss_scaler(mut self, scaling: LossScaling, state: ScalerState) -> Result<Self> {
        self.scaler = Some(LossScaler::resumed(scaling.validated()?, state));
        Ok(self)
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The loss scaler, when the loss is scaled.
    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.scaler.as_ref()
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
    /// pass, the gradients summed over the ranks, the optimizer's update. The loss is read back
    /// after the update is issued, so the step's work has been issued to every device when it
    /// returns. With a loss scaler,
    /// the backward pass starts from the scaled loss, the gradients are divided by the scale,
    /// and a step whose gradients are not all finite skips the update (it still counts as a
    /// step: its batch was used).
    pub fn step(&mut self, loss: impl FnOnce(&M) -> Result<Tensor<A, 1>>) -> Result<StepReport> {
        let index = self.step;
        let lr = (self.lr)(index);
        if let Some(seed) = self.seed {
            A::seed(&self.device, step_seed(seed, index));
        }
        let mut model = self.model.take().ok_or(Error::ModelLost)?;
        let sums = &self.sums;
        if let Some(s) = sums {
            if let Some(zero) = s.zero {
                model = (zero.store)(model);
            }
        }
        let scale = self.scaler.as_ref().map(LossScaler::scale);
        let (outcome, counts) = stats::count(|| {
            // The step's scope: its precision for the forward and backward passes, its early
            // buckets for the backward pass.
            let forward = sums.as_ref().map(|s| s.scope.enter());
            // A step that failed half-way left its gathers open.
            if let Some(gathers) = sums.as_ref().and_then(|s| s.scope.parameter_gathers()) {
                gathers.begin();
            }
            // Parameters are cast once per step, and gathered where the step reads them (some
            // ahead of use: marked inside the scope, which keeps them for its gathers).
            let model = match sums {
                Some(s) if s.scope.autocast().is_some() || s.scope.gathers_parameters() => {
                    (s.mark)(model)
                }
                _ => model,
            };
            let loss = match loss(&model) {
                Ok(loss) => loss,
                Err(e) => return Err((model, e)),
            };
            let backward = sums.as_ref().map(|s| s.scope.enter_backward());
            let grads = match scale {
                Some(scale) => loss.clone().mul_scalar(scale).backward(),
                None => loss.backward(),
            };
            drop((backward, forward));
            if let Some(gathers) = sums.as_ref().and_then(|s| s.scope.parameter_gathers()) {
                gathers.close();
            }
            let mut grads = GradientsParams::from_grads(grads, &model);
            let collectives = sums.as_ref().map_or(0, |s| {
                (s.reduce)(
                    &model,
                    &mut grads,
                    s.bucket_bytes,
                    s.scope.early_buckets(),
                    s.wire,
                )
            });
            let finite =
                scale.is_none_or(|scale| unscale_gradients(&model, &mut grads, 1.0 / scale));
            Ok((finite, model, grads, loss, collectives))
        });
        let mut counts = counts;
        let (finite, model, grads, loss, collectives) = match outcome {
            Ok(stepped) => stepped,
            Err((model, e)) => {
                self.model = Some(model);
                return Err(e);
            }
        };
        let apply = self.scaler.as_mut().is_none_or(|s| s.update(finite));
        let zero = self
            .sums
            .as_ref()
            .and_then(|s| Some((s.zero?, s.bucket_bytes)));
        let (model, gathers) = match (apply, zero) {
            (false, _) => (model, 0),
            (true, None) => (self.optimizer.step(lr, model, grads), 0),
            (true, Some((zero, bytes))) => {
                let (model, slicing) = stats::count(|| (zero.shard)(model, &grads));
                let model = self.optimizer.step(lr, model, grads);
                let ((model, gathers), gathering) = stats::count(|| (zero.gather)(model, bytes));
                counts.add(&slicing);
                counts.add(&gathering);
                (model, gathers)
            }
        };
        self.model = Some(model);
        self.step += 1;
        // Read once the update is issued, so that the devices are not drained before the
        // optimizer's launches are queued.
        let (loss, reading) = stats::count(|| loss.into_scalar().elem::<f64>());
        counts.add(&reading);
        Ok(StepReport {
            step: self.step,
            lr,
            loss,
            gradient_collectives: collectives,
            early_gradient_collectives: counts.early_buckets as usize,
            parameter_collectives: gathers,
            counts,
            loss_scale: scale,
            skipped: !apply,
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

/// Draws every parameter of `model` that Burn has not initialized yet. Burn draws a parameter
/// lazily, at its first use, from the random generator as it is then; a trainer that reseeds
/// each step ([`Trainer::with_step_seeds`]) would otherwise draw the model from the first
/// step's seed. So the model a trainer steps from is the one its maker seeded and built,
/// whatever runs before the first step.
fn draw_lazy_parameters<A: AutodiffBackend, M: AutodiffModule<A>>(model: &M) {
    struct Draw;
    impl<B: Backend> ModuleVisitor<B> for Draw {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let _ = param.val();
        }
        fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<B, D, Int>>) {
            let _ = param.val();
        }
        fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<B, D, Bool>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Draw);
}
