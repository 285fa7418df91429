//! burn-train's `Learner` on `Autodiff<Sharded<B>>`, unmodified: the mesh is the device, the
//! batcher shards each batch over the ranks, and the optimizer is wrapped in `Bucketed` (one
//! line: gradients summed over the ranks in 25 MiB buckets, not one collective per parameter).
//! Training, validation, metrics and checkpoints are burn-train's own.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example learner -- --ranks 4 --epochs 5
//! ```

use burn::backend::{Autodiff, Flex};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::record::{BinFileRecorder, FullPrecisionSettings};
use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use burn_flex::FlexDevice;
use clap::Parser;
use firemesh::grads::Bucketed;
use firemesh_backend::{shard, shard_int, Mesh, MeshBackend, Sharded};
use firemesh_examples::Spirals;
use std::sync::Arc;

type B = Autodiff<Sharded<Flex>>;

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    hidden: Linear<B>,
    out: Linear<B>,
}

#[derive(Clone, Debug)]
struct Points<B: Backend> {
    x: Tensor<B, 2>,
    y: Tensor<B, 1, Int>,
}

impl<B: Backend> Mlp<B> {
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.out.forward(relu(self.hidden.forward(x)))
    }

    fn classify(&self, batch: Points<B>) -> ClassificationOutput<B> {
        let logits = self.forward(batch.x);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.y.clone());
        ClassificationOutput::new(loss, logits, batch.y)
    }
}

impl<B: AutodiffBackend> TrainStep for Mlp<B> {
    type Input = Points<B>;
    type Output = ClassificationOutput<B>;
    fn step(&self, batch: Points<B>) -> TrainOutput<ClassificationOutput<B>> {
        let out = self.classify(batch);
        TrainOutput::new(self, out.loss.backward(), out)
    }
}

impl<B: Backend> InferenceStep for Mlp<B> {
    type Input = Points<B>;
    type Output = ClassificationOutput<B>;
    fn step(&self, batch: Points<B>) -> ClassificationOutput<B> {
        self.classify(batch)
    }
}

/// Builds a batch as on one device, then shards it over the mesh's ranks.
#[derive(Clone)]
struct ShardedBatcher;

impl<Bk: MeshBackend> Batcher<Bk, ([f32; 2], i64), Points<Bk>> for ShardedBatcher {
    fn batch(&self, items: Vec<([f32; 2], i64)>, mesh: &Bk::Device) -> Points<Bk> {
        let data = Spirals {
            features: items.iter().map(|i| i.0).collect(),
            labels: items.iter().map(|i| i.1).collect(),
        };
        let (x, y) = data.tensors::<Bk>(0..data.len(), mesh);
        Points {
            x: shard(x, 0).expect("a batch has a row per rank"),
            y: shard_int(y, 0).expect("a batch has a row per rank"),
        }
    }
}

/// Batches of 32 points, each sharded over the ranks.
fn loader<Bk: MeshBackend>(points: Spirals) -> Arc<dyn DataLoader<Bk, Points<Bk>>> {
    let items: Vec<([f32; 2], i64)> = points.features.into_iter().zip(points.labels).collect();
    DataLoaderBuilder::new(ShardedBatcher)
        .batch_size(32)
        .build(InMemDataset::new(items))
}

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    /// burn-train's folder (checkpoints, logs) [default: a temporary folder].
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mesh = Mesh::replicate(FlexDevice, args.ranks)?;
    let dir = args.dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("firemesh-learner-{}", std::process::id()))
    });
    let model = Mlp::<B> {
        hidden: LinearConfig::new(2, 64).init(&mesh),
        out: LinearConfig::new(64, 3).init(&mesh),
    };
    let training = SupervisedTraining::new(
        &dir,
        loader::<B>(Spirals::new(3, 200)),
        loader::<Sharded<Flex>>(Spirals::new(3, 50)),
    )
    .metric_train_numeric(LossMetric::new())
    .metric_valid_numeric(LossMetric::new())
    .metric_valid_numeric(AccuracyMetric::new())
    .with_file_checkpointer(BinFileRecorder::<FullPrecisionSettings>::new())
    .with_application_logger(None)
    .num_epochs(args.epochs);
    let trained = training
        // firemesh: the optimizer sums the gradients in buckets (was AdamConfig::new().init())
        .launch(Learner::new(
            model,
            Bucketed::new(AdamConfig::new().init()),
            1e-2,
        ))
        .model;

    let valid = Spirals::new(3, 50);
    let (x, y) = valid.tensors::<Sharded<Flex>>(0..valid.len(), &mesh);
    let predicted = trained.forward(x).argmax(1).squeeze_dim::<1>(1);
    let correct: i64 = predicted.equal(y).int().sum().into_scalar().into();
    println!(
        "{} epochs on {} ranks with burn-train's Learner: validation accuracy {:.1}%; checkpoints in {}",
        args.epochs,
        args.ranks,
        100.0 * correct as f64 / valid.len() as f64,
        dir.display()
    );
    Ok(())
}
