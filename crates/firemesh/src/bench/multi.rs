//! The peer: burn-train's `Learner` with its `MultiDevice` strategy, which keeps a copy of the
//! model per device, gives each device its own batch and sums their gradients on the first
//! device. Its step time is taken as the difference of two epochs of different lengths, so
//! that the Learner's start and end (threads, loaders, the validation pass) cancel out.

use super::step::{Measured, Work};
use crate::train::net::{Batch, Net};
use crate::{Error, Result};
use burn::backend::Autodiff;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamWConfig, Optimizer, SgdConfig};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::MetricDefinition;
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use burn::train::{
    ExecutionStrategy, InferenceStep, Learner, LearnerSummary, MultiDeviceOptim,
    SupervisedTraining, TrainOutput, TrainStep,
};
use std::sync::Arc;
use std::time::Instant;

/// A zoo model as burn-train trains it.
#[derive(Module, Debug)]
struct Trainee<B: Backend> {
    net: Net<B>,
}

impl<B: AutodiffBackend> TrainStep for Trainee<B> {
    type Input = Batch<B>;
    type Output = ();
    fn step(&self, batch: Batch<B>) -> TrainOutput<()> {
        // The batcher below builds the batch kind of the model: the loss cannot refuse it.
        let loss = self
            .net
            .loss(batch)
            .expect("the bench's batches suit its model");
        TrainOutput::new(self, loss.backward(), ())
    }
}

impl<B: Backend> InferenceStep for Trainee<B> {
    type Input = Batch<B>;
    type Output = ();
    fn step(&self, _batch: Batch<B>) {}
}

/// A Learner that prints nothing (the bench prints its own progress).
struct Quiet;

impl MetricsRendererTraining for Quiet {
    fn update_train(&mut self, _: MetricState) {}
    fn update_valid(&mut self, _: MetricState) {}
    fn render_train(&mut self, _: TrainingProgress, _: Vec<ProgressType>) {}
    fn render_valid(&mut self, _: TrainingProgress, _: Vec<ProgressType>) {}
    fn on_train_end(
        &mut self,
        _: Option<LearnerSummary>,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }
}

impl MetricsRendererEvaluation for Quiet {
    fn render_test(&mut self, _: EvaluationProgress, _: Vec<ProgressType>) {}
    fn update_test(&mut self, _: EvaluationName, _: MetricState) {}
}

impl MetricsRenderer for Quiet {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _: MetricDefinition) {}
}

/// Synthetic batches of `Work` (sample index i is in rank i / per-rank's batch).
#[derive(Clone)]
struct Synthetic(Arc<Work>);

impl<B: Backend> Batcher<B, usize, Batch<B>> for Synthetic {
    fn batch(&self, indices: Vec<usize>, device: &B::Device) -> Batch<B> {
        let rank = indices.first().map_or(0, |i| i / self.0.per_rank);
        self.0.batch::<B>(rank, device)
    }
}

/// Step times of `work` through burn-train's `MultiDevice` over `devices`, each device taking
/// a per-rank batch per step. A panic inside burn-train is returned as an error.
pub fn step_seconds<B: Backend>(
    devices: &[B::Device],
    work: &Work,
    label: &str,
) -> Result<Measured> {
    let work = Arc::new(work.clone());
    let warmup = work.warmup.max(1);
    let mut measured = Measured::default();
    for _ in 0..work.steps {
        let short = epoch::<B>(devices, &work, warmup)?;
        let long = epoch::<B>(devices, &work, warmup + 1)?;
        let secs = (long - short).max(0.0);
        eprintln!(
            "bench: {label}: step {}/{} {secs:.3} s (epochs of {warmup} and {} steps)",
            measured.step_s.len() + 1,
            work.steps,
            warmup + 1
        );
        measured.step_s.push(secs);
    }
    Ok(measured)
}

/// The wall time of one epoch of `steps` optimizer steps from fresh weights.
fn epoch<B: Backend>(devices: &[B::Device], work: &Arc<Work>, steps: usize) -> Result<f64> {
    let run = || {
        if work.model.is_gpt() {
            launch::<B, _>(
                devices,
                work,
                steps,
                AdamWConfig::new().with_weight_decay(1e-4).init(),
            )
        } else {
            let momentum = Some(MomentumConfig::new().with_momentum(0.9));
            launch::<B, _>(
                devices,
                work,
                steps,
                SgdConfig::new().with_momentum(momentum).init(),
            )
        }
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|p| {
        let why = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into());
        Error::Check(format!("burn-train MultiDevice failed: {why}"))
    })?
}

fn launch<B, O>(devices: &[B::Device], work: &Arc<Work>, steps: usize, optim: O) -> Result<f64>
where
    B: Backend,
    O: Optimizer<Trainee<Autodiff<B>>, Autodiff<B>> + 'static,
{
    let n = devices.len();
    Autodiff::<B>::seed(&devices[0], 7);
    let model = Trainee {
        net: work.net.init::<Autodiff<B>>(&devices[0])?,
    };
    let batcher = Synthetic(work.clone());
    let train: Arc<dyn DataLoader<Autodiff<B>, Batch<Autodiff<B>>>> =
        DataLoaderBuilder::new(batcher.clone())
            .batch_size(work.per_rank)
            .build(InMemDataset::new((0..work.per_rank * n * steps).collect()));
    let valid: Arc<dyn DataLoader<B, Batch<B>>> = DataLoaderBuilder::new(batcher)
        .batch_size(work.per_rank)
        .build(InMemDataset::new((0..work.per_rank).collect()));
    let dir = std::env::temp_dir().join(format!("firemesh-bench-{}", std::process::id()));
    let strategy = ExecutionStrategy::multi(devices.to_vec(), MultiDeviceOptim::OptimMainDevice);
    let training = SupervisedTraining::new(&dir, train, valid)
        .with_training_strategy(strategy.into())
        .with_application_logger(None)
        .renderer(Quiet)
        .num_epochs(1);
    let learner = Learner::new(model, optim, 1e-3);
    let start = Instant::now();
    let trained = training.launch(learner).model;
    for d in devices {
        let _ = B::sync(d);
    }
    let secs = start.elapsed().as_secs_f64();
    drop(trained);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(secs)
}
