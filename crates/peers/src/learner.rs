//! A zoo model trained through burn-train's `Learner` on synthetic batches, under a given
//! execution strategy (one device, `MultiDevice` or DDP), and the time of one of its steps.
//!
//! A step's time is the difference of two epochs of different lengths, each from fresh weights,
//! so that what an epoch costs besides its steps (the model's start, the strategy's threads and
//! communicators, the loaders, one validation batch) cancels out.

use crate::error::PeerError;
use crate::model::Work;
use burn::backend::Autodiff;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamWConfig, Optimizer, SgdConfig};
use burn::prelude::*;
use burn::train::metric::MetricDefinition;
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use burn::train::{ExecutionStrategy, Learner, LearnerSummary, SupervisedTraining};
use firemesh_zoo::{Batch, Net};
use std::sync::Arc;
use std::time::Instant;

/// Synthetic batches of a `Work`.
#[derive(Clone)]
struct Synthetic(Arc<Work>);

impl<B: Backend> Batcher<B, usize, Batch<B>> for Synthetic {
    fn batch(&self, samples: Vec<usize>, device: &B::Device) -> Batch<B> {
        // A loader's batch holds consecutive sample indices.
        let first = samples.first().copied().unwrap_or(0);
        self.0.batch(first, samples.len(), device)
    }
}

/// A Learner renderer that prints nothing (the program prints its own progress):
/// `SupervisedTraining::renderer(Quiet)`. Without one, a Learner with no terminal UI prints
/// each `TrainingProgress` as a debug line.
pub struct Quiet;

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

/// The backends a `Learner` trains on in this build: with the `ddp` feature, Burn's
/// `Autodiff<B>` is an autodiff backend only where `B` is a `DistributedBackend`.
#[cfg(not(feature = "ddp"))]
pub trait Inner: Backend {}
#[cfg(not(feature = "ddp"))]
impl<B: Backend> Inner for B {}
#[cfg(feature = "ddp")]
pub trait Inner: Backend + burn::tensor::backend::distributed::DistributedBackend {}
#[cfg(feature = "ddp")]
impl<B: Backend + burn::tensor::backend::distributed::DistributedBackend> Inner for B {}

/// How an epoch's steps are spread: the devices, each taking a batch of `Work::per_device`
/// per step, and the strategy over them.
pub trait Strategy<B: Inner>: Fn() -> ExecutionStrategy<Autodiff<B>> {}
impl<B: Inner, F: Fn() -> ExecutionStrategy<Autodiff<B>>> Strategy<B> for F {}

/// `work.steps` step times, in seconds, of `work` on `devices` under `strategy`; progress on
/// stderr. A panic inside burn-train (a device or NCCL refusing) is returned as its message.
pub fn step_seconds<B: Inner>(
    devices: &[B::Device],
    strategy: &impl Strategy<B>,
    work: &Work,
    label: &str,
) -> Result<Vec<f64>, PeerError> {
    let work = Arc::new(work.clone());
    let short_len = work.warmup.max(1);
    let mut times = Vec::new();
    for step in 1..=work.steps {
        let short = epoch::<B>(devices, strategy, &work, short_len)?;
        let long = epoch::<B>(devices, strategy, &work, short_len + 1)?;
        let secs = (long - short).max(0.0);
        eprintln!(
            "{label}: step {step}/{} {secs:.3} s (epochs of {short_len} and {} steps)",
            work.steps,
            short_len + 1
        );
        times.push(secs);
    }
    Ok(times)
}

/// The wall time of one epoch of `steps` optimizer steps from fresh weights, until every
/// device finished.
fn epoch<B: Inner>(
    devices: &[B::Device],
    strategy: &impl Strategy<B>,
    work: &Arc<Work>,
    steps: usize,
) -> Result<f64, PeerError> {
    let run = || {
        if work.model.is_gpt() {
            let adamw = AdamWConfig::new().with_weight_decay(1e-4).init();
            launch::<B, _>(devices, strategy, work, steps, adamw)
        } else {
            let momentum = Some(MomentumConfig::new().with_momentum(0.9));
            let sgd = SgdConfig::new().with_momentum(momentum).init();
            launch::<B, _>(devices, strategy, work, steps, sgd)
        }
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .map_err(|p| PeerError::Panicked(firemesh_collective::panic_message(p.as_ref())))?
}

fn launch<B, O>(
    devices: &[B::Device],
    strategy: &impl Strategy<B>,
    work: &Arc<Work>,
    steps: usize,
    optim: O,
) -> Result<f64, PeerError>
where
    B: Inner,
    O: Optimizer<Net<Autodiff<B>>, Autodiff<B>> + 'static,
{
    let (n, per_device) = (devices.len(), work.per_device);
    Autodiff::<B>::seed(&devices[0], 7);
    let model = work.init::<Autodiff<B>>(&devices[0])?;
    let batcher = Synthetic(work.clone());
    let train: Arc<dyn DataLoader<Autodiff<B>, Batch<Autodiff<B>>>> =
        DataLoaderBuilder::new(batcher.clone())
            .batch_size(per_device)
            .build(InMemDataset::new((0..per_device * n * steps).collect()));
    let valid: Arc<dyn DataLoader<B, Batch<B>>> = DataLoaderBuilder::new(batcher)
        .batch_size(per_device)
        .build(InMemDataset::new((0..per_device).collect()));
    let dir = std::env::temp_dir().join(format!("firemesh-ddp-peer-{}", std::process::id()));
    let training = SupervisedTraining::new(&dir, train, valid)
        .with_training_strategy(strategy().into())
        .with_application_logger(None)
        .renderer(Quiet)
        .num_epochs(1);
    let start = Instant::now();
    let trained = training.launch(Learner::new(model, optim, 1e-3)).model;
    for d in devices {
        B::sync(d).map_err(|e| PeerError::Sync(format!("{e:?}")))?;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(trained);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(secs)
}

#[cfg(all(test, not(feature = "ddp")))]
mod tests {
    use super::*;
    use burn::backend::flex::FlexDevice;
    use burn::backend::Flex;
    use burn::train::MultiDeviceOptim;
    use firemesh_gpt::GptConfig;
    use firemesh_resnet::ResNetConfig;
    use firemesh_zoo::NetConfig;

    fn tiny(gpt: bool) -> Work {
        let model = if gpt {
            NetConfig::Gpt(GptConfig::tiny())
        } else {
            NetConfig::ResNet(ResNetConfig::tiny(10))
        };
        Work {
            model,
            per_device: 2,
            image_size: 16,
            seq_len: 16,
            warmup: 1,
            steps: 2,
        }
    }

    #[test]
    fn times_steps_on_one_device_and_on_multi_device() {
        let one = || ExecutionStrategy::single(FlexDevice);
        let two = [FlexDevice, FlexDevice];
        let multi = || ExecutionStrategy::multi(two.to_vec(), MultiDeviceOptim::OptimMainDevice);
        for gpt in [false, true] {
            let times = step_seconds::<Flex>(&two[..1], &one, &tiny(gpt), "one device")
                .expect("a Flex Learner trains");
            assert_eq!(times.len(), 2, "gpt: {gpt}");
            assert!(
                times.iter().all(|t| t.is_finite() && *t >= 0.0),
                "{times:?}"
            );
            let times = step_seconds::<Flex>(&two, &multi, &tiny(gpt), "multi-device")
                .expect("MultiDevice trains on two Flex devices");
            assert_eq!(times.len(), 2, "gpt: {gpt}");
        }
    }

    #[test]
    fn a_sequence_longer_than_the_context_is_an_error_not_a_panic() {
        let one = || ExecutionStrategy::single(FlexDevice);
        let work = Work {
            seq_len: 10_000,
            ..tiny(true)
        };
        let err = step_seconds::<Flex>(&[FlexDevice], &one, &work, "test").unwrap_err();
        assert!(err.to_string().contains("10000 tokens"), "{err}");
    }
}
