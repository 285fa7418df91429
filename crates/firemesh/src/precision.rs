//! Mixed precision: the precision policy of a run and the dynamic loss scaler of f16.
//!
//! The policy is one value ([`Precision`]) given to the [`Trainer`](crate::Trainer). Under
//! `bf16` or `f16` the trainer arms it on its mesh for the forward and the backward pass
//! (`Mesh::autocast`, inside `Sharded`, below autodiff): matrix products, linear layers and
//! convolutions compute in the low precision, forward and backward; everything else (sums,
//! softmax, normalisation statistics, the loss) and everything autodiff and the optimizer see
//! (parameters, gradients, optimizer state) stays f32. Model code does not change.
//!
//! f16's range is small (largest finite value 65504; gradients below about 6e-8 flush to
//! zero), so its gradients are computed from a loss multiplied by a [`LossScaler`]'s scale and
//! divided by it again before the update. A step whose gradients hold an inf or a NaN is
//! skipped and the scale halved; after `growth_interval` clean steps in a row it doubles.

use crate::error::{Error, Result};
use crate::named::{by_name, Named};
use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, FloatDType, TensorPrimitive};
use firemesh_backend::Sharded;
use serde::{Deserialize, Serialize};

/// The precision matrix products and convolutions compute in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// bfloat16 products, f32 elsewhere: f32's range, so no loss scaling.
    Bf16,
    /// float16 products, f32 elsewhere, with dynamic loss scaling.
    F16,
}

impl Named for Precision {
    const WHAT: &'static str = "precision";
    const ALL: &'static [Self] = &[Self::F32, Self::Bf16, Self::F16];
    fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::F16 => "f16",
        }
    }
}

by_name!(Precision);

impl Precision {
    /// The dtype products compute in.
    pub fn dtype(self) -> FloatDType {
        match self {
            Self::F32 => FloatDType::F32,
            Self::Bf16 => FloatDType::BF16,
            Self::F16 => FloatDType::F16,
        }
    }

    /// Whether gradients need a scaled loss (f16 only).
    pub fn scales_loss(self) -> bool {
        self == Self::F16
    }

    /// Checks that the device of every rank (`devices`, in rank order) computes in this
    /// precision: the error names the first that cannot.
    pub fn check<B: Backend>(self, devices: &[B::Device]) -> Result<()> {
        let dtype = DType::from(self.dtype());
        for (rank, device) in devices.iter().enumerate() {
            if !B::supports_dtype(device, dtype) {
                let hint = match (self, B::name(device).contains("wgpu")) {
                    (Self::F16, true) => " (wgpu needs the adapter's shader-f16 feature)",
                    (Self::Bf16, true) => " (WGSL has no bf16 type)",
                    _ => "",
                };
                return Err(Error::PrecisionUnsupported {
                    precision: self.name(),
                    rank,
                    device: format!("{}, {device:?}", B::name(device)),
                    hint,
                });
            }
        }
        Ok(())
    }
}

/// How the loss scale moves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossScaling {
    /// The first scale (2^16, as PyTorch's `GradScaler`).
    pub initial: f64,
    /// Clean steps in a row after which the scale doubles.
    pub growth_interval: usize,
}

impl Default for LossScaling {
    fn default() -> Self {
        Self {
            initial: 65536.0,
            growth_interval: 2000,
        }
    }
}

impl LossScaling {
    /// Checks the values (a scale is a finite positive number; the interval at least 1).
    pub fn validated(self) -> Result<Self> {
        if !(self.initial.is_finite() && self.initial > 0.0) {
            return Err(Error::LossScale(self.initial));
        }
        if self.growth_interval == 0 {
            return Err(Error::GrowthInterval);
        }
        Ok(self)
    }
}

/// How closely a low-precision run's losses follow the f32 run's, each relative to f32's:
/// the first step's (the forward pass alone, on the same parameters), the largest of any
/// step's, and the mean of the last four steps' against theirs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossTracking {
    pub first: f64,
    pub largest: f64,
    pub last_four: f64,
}

impl LossTracking {
    /// The bounds firemesh holds bf16 and f16 runs to: 0.1% on the first step, 6% on any step,
    /// 3% on the last four steps' mean. Rounding differences grow over steps of SGD with
    /// momentum on small batches; these are the bounds of the precision test (the tiny ResNet,
    /// 16 steps on batches of 16), which `firemesh compare --track-losses` applies to any run.
    pub const BOUNDS: Self = Self {
        first: 1e-3,
        largest: 0.06,
        last_four: 0.03,
    };

    /// How closely `low` (a run's losses, step by step) follows `f32` (the same run in f32);
    /// `None` when either has fewer than 4 steps or they differ in length.
    pub fn measure(f32: &[f64], low: &[f64]) -> Option<Self> {
        if f32.len() != low.len() || f32.len() < 4 {
            return None;
        }
        let off = |l: f64, r: f64| (l - r).abs() / r.abs();
        let tail = |run: &[f64]| run[run.len() - 4..].iter().sum::<f64>() / 4.0;
        Some(Self {
            first: off(low[0], f32[0]),
            largest: low
                .iter()
                .zip(f32)
                .map(|(l, r)| off(*l, *r))
                .fold(0.0, f64::max),
            last_four: off(tail(low), tail(f32)),
        })
    }

    /// Whether every figure is within `bounds` (a NaN is not).
    pub fn within(&self, bounds: &Self) -> bool {
        self.first <= bounds.first
            && self.largest <= bounds.largest
            && self.last_four <= bounds.last_four
    }
}

impl std::fmt::Display for LossTracking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "first step {:.1e}, largest {:.1e}, last 4 steps' mean {:.1e}",
            self.first, self.largest, self.last_four
        )
    }
}

/// Where a loss scaler stands: what a checkpoint keeps of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScalerState {
    pub scale: f64,
    /// Clean steps since the scale last changed.
    pub clean_steps: usize,
    /// Steps skipped so far in the run.
    pub skipped_steps: u64,
}

/// The dynamic loss scale of f16 training.
#[derive(Debug, Clone, PartialEq)]
pub struct LossScaler {
    scaling: LossScaling,
    state: ScalerState,
}

impl LossScaler {
    pub fn new(scaling: LossScaling) -> Self {
        Self {
            scaling,
            state: ScalerState {
                scale: scaling.initial,
                clean_steps: 0,
                skipped_steps: 0,
            },
        }
    }

    /// Goes on from `state` (a resumed run).
    pub fn resumed(scaling: LossScaling, state: ScalerState) -> Self {
        Self { scaling, state }
    }

    pub fn scale(&self) -> f64 {
        self.state.scale
    }

    pub fn state(&self) -> ScalerState {
        self.state
    }

    /// After a step's gradients: skips the step (`finite` false: the scale halves) or counts
    /// it clean (the scale doubles after `growth_interval` in a row). Returns whether the
    /// update may run.
    pub fn update(&mut self, finite: bool) -> bool {
        let s = &mut self.state;
        if finite {
            s.clean_steps += 1;
            if s.clean_steps >= self.scaling.growth_interval {
                s.scale *= 2.0;
                s.clean_steps = 0;
            }
        } else {
            // Never to zero: a scale that underflows would make every gradient zero.
            s.scale = (s.scale / 2.0).max(f64::MIN_POSITIVE);
            s.clean_steps = 0;
            s.skipped_steps += 1;
        }
        finite
    }
}

/// Divides every parameter gradient of `model` in `grads` by the loss scale (multiplies by
/// `inverse`); returns whether all of them are finite. The test reads one number, the sum of
/// every gradient's sum, which is finite exactly when no element is an inf or a NaN (barring
/// an f32 overflow of the sum itself, a step worth skipping too).
pub(crate) fn unscale_gradients<A: AutodiffBackend, M: AutodiffModule<A>>(
    model: &M,
    grads: &mut GradientsParams,
    inverse: f64,
) -> bool {
    struct Unscale<'a, A: AutodiffBackend> {
        grads: &'a mut GradientsParams,
        inverse: f64,
        total: Option<Tensor<A::InnerBackend, 1>>,
    }
    impl<A: AutodiffBackend> ModuleVisitor<A> for Unscale<'_, A> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
            if let Some(g) = self.grads.remove::<A::InnerBackend, D>(param.id) {
                let g = g.mul_scalar(self.inverse);
                let sum = g.clone().sum();
                self.total = Some(match self.total.take() {
                    Some(total) => total + sum,
                    None => sum,
                });
                self.grads.register::<A::InnerBackend, D>(param.id, g);
            }
        }
    }
    let mut pass = Unscale::<A> {
        grads,
        inverse,
        total: None,
    };
    model.visit(&mut pass);
    pass.total
        .is_none_or(|t| t.into_scalar().elem::<f64>().is_finite())
}

/// `module` with every parameter marked as one, with its place in the module
/// (`ShardedTensor::mark_parameter_at`): under a narrow precision, each is cast once per step
/// for all its readers (the forward product and the backward pass's), the copy freed when the
/// step's scope ends; under ZeRO-3, the step's gathers of it are issued ahead of use. The
/// `Trainer` marks its model at the start of every step, inside the step's scope (the
/// optimizer's update makes new tensors); a loop of one's own that arms `Mesh::autocast` or a
/// `StepScope` calls this after each update, after entering the scope. Values, gradients and
/// parameter ids do not change.
pub fn mark_parameters<B: Backend, M: AutodiffModule<Autodiff<Sharded<B>>>>(module: M) -> M {
    /// Numbers the parameters in the order the module visits them: their place in it.
    struct Mark(u64);
    impl<B: Backend> ModuleMapper<Autodiff<Sharded<B>>> for Mark {
        fn map_float<const D: usize>(
            &mut self,
            param: Param<Tensor<Autodiff<Sharded<B>>, D>>,
        ) -> Param<Tensor<Autodiff<Sharded<B>>, D>> {
            let index = self.0;
            self.0 += 1;
            param.map(|t| match t.into_primitive() {
                TensorPrimitive::Float(mut t) => {
                    t.primitive.mark_parameter_at(index);
                    Tensor::from_primitive(TensorPrimitive::Float(t))
                }
                other => Tensor::from_primitive(other),
            })
        }
    }
    module.map(&mut Mark(0))
}
