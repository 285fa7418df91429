//! burn-train's `Learner` runs unmodified on `Autodiff<Sharded<Flex>>`: the only change from a
//! one-device program is the batcher, which shards each batch over the mesh. Training, metrics,
//! validation and file checkpoints go through burn-train's own code, and the result matches the
//! same training on one device. An interrupted run resumed from its checkpoint ends where the
//! uninterrupted one does.

use crate::common;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::record::{BinFileRecorder, FullPrecisionSettings};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use common::{largest_difference, mesh, params, same_init, Ref, RefAd, SAd, CPU, S};
use firemesh_backend::{shard, shard_int, stats, MeshBackend};
use std::path::PathBuf;
use std::sync::Arc;

const FEATURES: usize = 4;
const CLASSES: usize = 3;

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    hidden: Linear<B>,
    act: Relu,
    out: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            hidden: LinearConfig::new(FEATURES, 16).init(device),
            act: Relu::new(),
            out: LinearConfig::new(16, CLASSES).init(device),
        }
    }

    fn classify(&self, batch: Rows<B>) -> ClassificationOutput<B> {
        let logits = self
            .out
            .forward(self.act.forward(self.hidden.forward(batch.x)));
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.y.clone());
        ClassificationOutput::new(loss, logits, batch.y)
    }
}

impl<B: AutodiffBackend> TrainStep for Mlp<B> {
    type Input = Rows<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: Rows<B>) -> TrainOutput<ClassificationOutput<B>> {
        let out = self.classify(batch);
        TrainOutput::new(self, out.loss.backward(), out)
    }
}

impl<B: Backend> InferenceStep for Mlp<B> {
    type Input = Rows<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: Rows<B>) -> ClassificationOutput<B> {
        self.classify(batch)
    }
}

#[derive(Clone, Debug)]
struct Item {
    x: [f32; FEATURES],
    y: i64,
}

#[derive(Clone, Debug)]
struct Rows<B: Backend> {
    x: Tensor<B, 2>,
    y: Tensor<B, 1, Int>,
}

/// 52 points whose class is the sign pattern of two features: batches of 12 leave a last
/// batch of 4, which splits unevenly (2/1/1) over 3 ranks.
fn items() -> Vec<Item> {
    (0..52)
        .map(|i| {
            let f = |k: usize| (((i * (7 + 3 * k) + k) % 13) as f32 - 6.0) / 6.0;
            let x = [f(0), f(1), f(2), f(3)];
            let y = if x[0] > 0.0 {
                0
            } else if x[1] > 0.0 {
                1
            } else {
                2
            };
            Item { x, y }
        })
        .collect()
}

fn rows<B: Backend>(items: &[Item], device: &B::Device) -> Rows<B> {
    let x: Vec<f32> = items.iter().flat_map(|i| i.x).collect();
    let y: Vec<i64> = items.iter().map(|i| i.y).collect();
    Rows {
        x: Tensor::from_data(TensorData::new(x, [items.len(), FEATURES]), device),
        y: Tensor::from_data(TensorData::new(y, [items.len()]), device),
    }
}

/// The one-device batcher.
#[derive(Clone)]
struct OneDevice;

impl<B: Backend> Batcher<B, Item, Rows<B>> for OneDevice {
    fn batch(&self, items: Vec<Item>, device: &B::Device) -> Rows<B> {
        rows(&items, device)
    }
}

/// The same batcher for a mesh: each batch is split by rows over the ranks.
#[derive(Clone)]
struct OverRanks;

impl<B: MeshBackend> Batcher<B, Item, Rows<B>> for OverRanks {
    fn batch(&self, items: Vec<Item>, device: &B::Device) -> Rows<B> {
        let Rows { x, y } = rows::<B>(&items, device);
        Rows {
            x: shard(x, 0).expect("every batch has a row per rank"),
            y: shard_int(y, 0).expect("every batch has a row per rank"),
        }
    }
}

fn loader<B: Backend, Bt: Batcher<B, Item, Rows<B>> + 'static>(
    batcher: Bt,
) -> Arc<dyn DataLoader<B, Rows<B>>> {
    DataLoaderBuilder::new(batcher)
        .batch_size(12)
        .build(InMemDataset::new(items()))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("firemesh-learner-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Trains `model` with burn-train for epochs `from+1..=to` (resuming from the checkpoint of
/// epoch `from` when `from > 0`), saving a checkpoint after every epoch.
fn learn<B, Bt>(
    model: Mlp<B>,
    batcher: Bt,
    dir: &PathBuf,
    from: usize,
    to: usize,
) -> Mlp<B::InnerBackend>
where
    B: AutodiffBackend,
    Bt: Batcher<B, Item, Rows<B>>
        + Batcher<B::InnerBackend, Item, Rows<B::InnerBackend>>
        + Clone
        + 'static,
{
    let learner = Learner::new(model, AdamConfig::new().init(), 1e-2);
    let mut training = SupervisedTraining::new(
        dir,
        loader::<B, _>(batcher.clone()),
        loader::<B::InnerBackend, _>(batcher),
    )
    .metric_train_numeric(LossMetric::new())
    .metric_valid_numeric(LossMetric::new())
    .metric_valid_numeric(AccuracyMetric::new())
    .with_file_checkpointer(BinFileRecorder::<FullPrecisionSettings>::new())
    .with_application_logger(None)
    .num_epochs(to);
    if from > 0 {
        training = training.checkpoint(from);
    }
    training.launch(learner).model
}

#[test]
fn learner_trains_on_sharded_like_on_one_device_and_resumes() {
    let mesh = mesh(3);
    let (reference, model) = same_init(5, || Mlp::<RefAd>::new(&CPU), || Mlp::<SAd>::new(&mesh));
    let before = params(&reference);

    let want = learn(reference, OneDevice, &scratch("one-device"), 0, 2);
    let want = params::<Ref, _>(&want);
    assert!(
        largest_difference(&want, &before) > 1e-3,
        "two epochs must move the weights"
    );

    // Burn-train runs the training and validation steps on this thread, so a count scope sees
    // them whatever other tests do meanwhile.
    let dir = scratch("sharded");
    let (after_one, first) = stats::count(|| learn(model, OverRanks, &dir, 0, 1));
    assert!(
        dir.join("checkpoint")
            .read_dir()
            .map(|d| d.count())
            .unwrap_or(0)
            > 0,
        "burn-train wrote checkpoints of the sharded model"
    );
    // A fresh process would build a fresh model: resume it from the epoch-1 checkpoint.
    let (_, fresh) = same_init(99, || Mlp::<RefAd>::new(&CPU), || Mlp::<SAd>::new(&mesh));
    let (resumed, second) = stats::count(|| learn(fresh, OverRanks, &dir, 1, 2));
    let got = params::<S, _>(&resumed);

    let worst = largest_difference(&got, &want);
    println!("largest parameter difference after 2 epochs (one resume): {worst:e}");
    assert!(worst <= 1e-4, "parameters differ by {worst}");
    assert!(
        largest_difference(&params::<S, _>(&after_one), &want) > 1e-4,
        "the resumed epoch must have trained"
    );
    for counts in [first, second] {
        assert!(
            counts.total_redistributions() > 0,
            "the scope saw the steps: gradients are summed across the ranks"
        );
        assert_eq!(
            counts.total_fallbacks(),
            0,
            "training and validation need no fallback"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
