//! The optimizer of a run (Burn's SGD with momentum or AdamW, behind one type so that the
//! training loop is compiled once) and its learning-rate schedule.

use crate::error::{Error, Result};
use crate::named::{by_name, Named};
use burn::module::AutodiffModule;
use burn::module::ParamId;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdamW, AdamWConfig, GradientsParams, LearningRate, MultiGradientsParams, Optimizer, Sgd,
    SgdConfig,
};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Record, Recorder};
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

/// The optimizers a run can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    /// SGD with momentum (and weight decay).
    Sgd,
    /// AdamW (decoupled weight decay).
    Adamw,
}

impl Named for OptimizerKind {
    const WHAT: &'static str = "optimizer";
    const ALL: &'static [Self] = &[Self::Sgd, Self::Adamw];
    fn name(self) -> &'static str {
        match self {
            Self::Sgd => "sgd",
            Self::Adamw => "adamw",
        }
    }
}

by_name!(OptimizerKind);

/// SGD with momentum, or AdamW.
pub enum AnyOptimizer<M: AutodiffModule<B>, B: AutodiffBackend> {
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, M, B>),
    AdamW(OptimizerAdaptor<AdamW, M, B>),
}

type Bytes = BinBytesRecorder<FullPrecisionSettings>;

impl<M: AutodiffModule<B>, B: AutodiffBackend> AnyOptimizer<M, B> {
    pub fn new(kind: OptimizerKind, momentum: f64, weight_decay: f64) -> Self {
        match kind {
            OptimizerKind::Sgd => {
                let decay =
                    (weight_decay > 0.0).then(|| WeightDecayConfig::new(weight_decay as f32));
                // No momentum: no state at all (Burn's momentum of 0 would keep zeros).
                let momentum =
                    (momentum > 0.0).then(|| MomentumConfig::new().with_momentum(momentum));
                let config = SgdConfig::new()
                    .with_momentum(momentum)
                    .with_weight_decay(decay);
                Self::Sgd(config.init())
            }
            OptimizerKind::Adamw => Self::AdamW(
                AdamWConfig::new()
                    .with_weight_decay(weight_decay as f32)
                    .init(),
            ),
        }
    }

    /// The optimizer's state (momenta, moment estimates), serialized.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let bytes = match self {
            Self::Sgd(o) => Recorder::<B>::record(&Bytes::new(), o.to_record(), ()),
            Self::AdamW(o) => Recorder::<B>::record(&Bytes::new(), o.to_record(), ()),
        };
        bytes.map_err(|e| Error::Checkpoint(format!("cannot serialize the optimizer: {e}")))
    }

    /// [`Self::to_bytes`] for a mesh that is one process's share of a world: the state is read
    /// parameter by parameter first, in `module`'s order. Reading a tensor sharded over the
    /// world (ZeRO-1's state) gathers it across the processes, which must all do so in one
    /// order; the state's map iterates in another order in every process, and parameter ids
    /// differ between processes.
    pub fn to_bytes_in_order(&self, module: &M, device: &B::Device) -> Result<Vec<u8>> {
        let order = burn::module::list_param_ids(module);
        let bytes = match self {
            Self::Sgd(o) => Recorder::<B>::record(
                &Bytes::new(),
                in_order::<B, _, _>(o.to_record(), &order, device)?,
                (),
            ),
            Self::AdamW(o) => Recorder::<B>::record(
                &Bytes::new(),
                in_order::<B, _, _>(o.to_record(), &order, device)?,
                (),
            ),
        };
        bytes.map_err(|e| Error::Checkpoint(format!("cannot serialize the optimizer: {e}")))
    }

    /// The same optimizer with the state of `bytes` (from [`Self::to_bytes`]).
    pub fn load_bytes(self, bytes: Vec<u8>, device: &B::Device) -> Result<Self> {
        let bad = |e: burn::record::RecorderError| {
            Error::Checkpoint(format!("the optimizer state does not load: {e}"))
        };
        Ok(match self {
            Self::Sgd(o) => Self::Sgd(
                o.load_record(Recorder::<B>::load(&Bytes::new(), bytes, device).map_err(bad)?),
            ),
            Self::AdamW(o) => Self::AdamW(
                o.load_record(Recorder::<B>::load(&Bytes::new(), bytes, device).map_err(bad)?),
            ),
        })
    }
}

/// `record` (Burn's map of parameter states) with every entry read (serialized) and loaded
/// back whole on `device`, in the parameters' `order`: serializing the result reads no
/// sharded tensor.
fn in_order<B, R, T>(record: T, order: &[ParamId], device: &B::Device) -> Result<T>
where
    B: AutodiffBackend,
    T: Record<B> + IntoIterator<Item = (ParamId, R)> + FromIterator<(ParamId, R)>,
{
    let fail = |e: burn::record::RecorderError| {
        Error::Checkpoint(format!("cannot serialize the optimizer: {e}"))
    };
    let place: std::collections::HashMap<ParamId, usize> =
        order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut entries: Vec<(ParamId, R)> = record.into_iter().collect();
    entries.sort_by_key(|(id, _)| place.get(id).copied());
    entries
        .into_iter()
        .map(|(id, r)| {
            let one = T::from_iter([(id, r)]);
            let bytes = Recorder::<B>::record(&Bytes::new(), one, ()).map_err(fail)?;
            let back: T = Recorder::<B>::load(&Bytes::new(), bytes, device).map_err(fail)?;
            back.into_iter()
                .next()
                .ok_or_else(|| Error::Checkpoint(format!("the state of {id} did not load")))
        })
        .collect()
}

impl<M: AutodiffModule<B>, B: AutodiffBackend> Clone for AnyOptimizer<M, B> {
    fn clone(&self) -> Self {
        match self {
            Self::Sgd(o) => Self::Sgd(o.clone()),
            Self::AdamW(o) => Self::AdamW(o.clone()),
        }
    }
}

/// Burn's optimizer interface, so that [`crate::Trainer`] and burn-train drive it like any
/// other. Its record holds the state of the kind in use (checkpoints use
/// [`AnyOptimizer::to_bytes`]).
impl<M: AutodiffModule<B>, B: AutodiffBackend> Optimizer<M, B> for AnyOptimizer<M, B> {
    type Record = (
        Option<<OptimizerAdaptor<Sgd<B::InnerBackend>, M, B> as Optimizer<M, B>>::Record>,
        Option<<OptimizerAdaptor<AdamW, M, B> as Optimizer<M, B>>::Record>,
    );

    fn step(&mut self, lr: LearningRate, model: M, grads: GradientsParams) -> M {
        match self {
            Self::Sgd(o) => o.step(lr, model, grads),
            Self::AdamW(o) => o.step(lr, model, grads),
        }
    }

    fn step_multi(&mut self, lr: LearningRate, model: M, grads: MultiGradientsParams) -> M {
        match self {
            Self::Sgd(o) => o.step_multi(lr, model, grads),
            Self::AdamW(o) => o.step_multi(lr, model, grads),
        }
    }

    fn to_record(&self) -> Self::Record {
        match self {
            Self::Sgd(o) => (Some(o.to_record()), None),
            Self::AdamW(o) => (None, Some(o.to_record())),
        }
    }

    fn load_record(self, record: Self::Record) -> Self {
        match (self, record) {
            (Self::Sgd(o), (Some(r), _)) => Self::Sgd(o.load_record(r)),
            (Self::AdamW(o), (_, Some(r))) => Self::AdamW(o.load_record(r)),
            // A record of the other kind (or none): the state stays as it is.
            (same, _) => same,
        }
    }
}

/// The learning rate's course after the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScheduleKind {
    /// Linear warm-up, then a cosine decay to zero at the last step.
    Cosine,
    /// Linear warm-up, then constant.
    Constant,
}

impl Named for ScheduleKind {
    const WHAT: &'static str = "schedule";
    const ALL: &'static [Self] = &[Self::Cosine, Self::Constant];
    fn name(self) -> &'static str {
        match self {
            Self::Cosine => "cosine",
            Self::Constant => "constant",
        }
    }
}

by_name!(ScheduleKind);

/// The learning rate at each step: linear warm-up from `peak / warmup` to `peak` over the
/// first `warmup` steps, then constant or a cosine decay that reaches zero after the last step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub kind: ScheduleKind,
    pub peak: f64,
    pub warmup: usize,
    pub total: usize,
}

impl Schedule {
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.peak * (step + 1) as f64 / self.warmup as f64;
        }
        match self.kind {
            ScheduleKind::Constant => self.peak,
            ScheduleKind::Cosine => {
                let span = (self.total - self.warmup).max(1) as f64;
                let progress = (step - self.warmup) as f64 / span;
                0.5 * self.peak * (1.0 + (std::f64::consts::PI * progress.min(1.0)).cos())
            }
        }
    }
}
