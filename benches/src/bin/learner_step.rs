//! Training-step time of a small ResNet through burn-train's own `Learner`, side by side in one
//! run: on plain `Flex`, on `Sharded<Flex>` with N=1 and N=2, and through burn-train's
//! `MultiDevice` strategy over two Flex devices (the peer). Every setup trains on the same
//! images, 32 per optimizer step; setups take turns epoch by epoch, so machine noise hits them
//! alike.
//!
//! `cargo run --release -p firemesh-benches --bin learner_step`

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use burn::train::{
    ClassificationOutput, ExecutionStrategy, InferenceStep, Learner, MultiDeviceOptim,
    SupervisedTraining, TrainOutput, TrainStep,
};
use clap::Parser;
use firemesh::grads::Bucketed;
use firemesh_backend::{shard, shard_int, Mesh, MeshBackend, Sharded};
use firemesh_benches::{median, step_rows};
use firemesh_resnet::{ResNet, ResNetConfig};
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// Images per optimizer step (split over the ranks or devices).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Image side in pixels.
    #[arg(long, default_value_t = 32)]
    size: usize,
    /// Optimizer steps per epoch.
    #[arg(long, default_value_t = 6)]
    steps: usize,
    /// Timed epochs per setup (after one warm-up epoch each).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Where to write learner_step.{md,json}.
    #[arg(long, default_value = "benches/results")]
    out: String,
}

type Ref = Flex;
type Mesh1 = Mesh<FlexDevice>;
const CLASSES: usize = 10;
const CPU: FlexDevice = FlexDevice;

#[derive(Module, Debug)]
struct Classifier<B: Backend> {
    net: ResNet<B>,
}

impl<B: Backend> Classifier<B> {
    fn classify(&self, batch: Images<B>) -> ClassificationOutput<B> {
        let logits = self.net.forward(batch.x);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.y.clone());
        ClassificationOutput::new(loss, logits, batch.y)
    }
}

impl<B: AutodiffBackend> TrainStep for Classifier<B> {
    type Input = Images<B>;
    type Output = ClassificationOutput<B>;
    fn step(&self, batch: Images<B>) -> TrainOutput<ClassificationOutput<B>> {
        let out = self.classify(batch);
        TrainOutput::new(self, out.loss.backward(), out)
    }
}

impl<B: Backend> InferenceStep for Classifier<B> {
    type Input = Images<B>;
    type Output = ClassificationOutput<B>;
    fn step(&self, batch: Images<B>) -> ClassificationOutput<B> {
        self.classify(batch)
    }
}

#[derive(Clone, Debug)]
struct Images<B: Backend> {
    x: Tensor<B, 4>,
    y: Tensor<B, 1, Int>,
}

/// Synthetic images and labels, made from the sample indices.
fn images<B: Backend>(indices: &[usize], size: usize, device: &B::Device) -> Images<B> {
    let pixels = 3 * size * size;
    let x: Vec<f32> = indices
        .iter()
        .flat_map(|i| (0..pixels).map(move |k| ((i * 7919 + k * 31) % 1000) as f32 / 500.0 - 1.0))
        .collect();
    let y: Vec<i64> = indices.iter().map(|i| (i % CLASSES) as i64).collect();
    Images {
        x: Tensor::from_data(TensorData::new(x, [indices.len(), 3, size, size]), device),
        y: Tensor::from_data(TensorData::new(y, [indices.len()]), device),
    }
}

/// Batches for one device.
#[derive(Clone)]
struct Plain(usize);

impl<B: Backend> Batcher<B, usize, Images<B>> for Plain {
    fn batch(&self, indices: Vec<usize>, device: &B::Device) -> Images<B> {
        images(&indices, self.0, device)
    }
}

/// Batches split by rows over the ranks of a mesh: the only change a program needs.
#[derive(Clone)]
struct OverRanks(usize);

impl<B: MeshBackend> Batcher<B, usize, Images<B>> for OverRanks {
    fn batch(&self, indices: Vec<usize>, device: &B::Device) -> Images<B> {
        let Images { x, y } = images::<B>(&indices, self.0, device);
        Images {
            x: shard(x, 0).expect("a batch has a row per rank"),
            y: shard_int(y, 0).expect("a batch has a row per rank"),
        }
    }
}

fn loader<B: Backend, Bt: Batcher<B, usize, Images<B>> + 'static>(
    batcher: Bt,
    batch: usize,
    samples: usize,
) -> Arc<dyn DataLoader<B, Images<B>>> {
    DataLoaderBuilder::new(batcher)
        .batch_size(batch)
        .build(InMemDataset::new((0..samples).collect()))
}

/// Trains one epoch; returns its wall time and the loss of the trained model on the first batch.
type Epoch = Box<dyn Fn(&Args) -> (f64, f32)>;

/// One setup: how it is named and how it trains one epoch from fresh weights.
struct Setup {
    name: &'static str,
    epoch: Epoch,
}

/// One epoch through burn-train: `batch` images per loader batch, `strategy` deciding where
/// the steps run.
fn epoch<B, Bt, O>(
    args: &Args,
    device: &B::Device,
    batcher: Bt,
    batch: usize,
    strategy: ExecutionStrategy<B>,
    optim: O,
) -> (f64, f32)
where
    B: AutodiffBackend,
    O: Optimizer<Classifier<B>, B> + 'static,
    Bt: Batcher<B, usize, Images<B>>
        + Batcher<B::InnerBackend, usize, Images<B::InnerBackend>>
        + Clone
        + 'static,
{
    B::seed(device, 3);
    let model = Classifier {
        net: ResNetConfig::tiny(CLASSES)
            .init::<B>(device)
            .expect("valid config"),
    };
    firemesh_benches::init_params(&model);
    let samples = args.batch * args.steps;
    let dir = std::env::temp_dir().join(format!("firemesh-learner-step-{}", std::process::id()));
    let training = SupervisedTraining::new(
        &dir,
        loader::<B, _>(batcher.clone(), batch, samples),
        loader::<B::InnerBackend, _>(batcher.clone(), args.batch, args.batch),
    )
    .with_training_strategy(strategy.into())
    .with_application_logger(None)
    .renderer(firemesh_peers::Quiet)
    .num_epochs(1);
    let learner = Learner::new(model, optim, 0.05);
    let start = Instant::now();
    let trained = training.launch(learner).model;
    let secs = start.elapsed().as_secs_f64();
    let first: Vec<usize> = (0..args.batch).collect();
    let check = Batcher::<B::InnerBackend, _, _>::batch(&batcher, first, &trained.devices()[0]);
    let loss = trained.classify(check).loss.into_scalar();
    let _ = std::fs::remove_dir_all(&dir);
    (secs, burn::tensor::ElementConversion::elem(loss))
}

type Ad = Autodiff<Ref>;
type ShardedAd = Autodiff<Sharded<Ref>>;

fn sharded(ranks: usize, parallel: bool) -> Epoch {
    Box::new(move |args: &Args| {
        let mesh = Mesh1::replicate(CPU, ranks).expect("mesh");
        mesh.set_parallel(parallel);
        let strategy = ExecutionStrategy::single(mesh.clone());
        // The one line a Learner needs for gradient buckets.
        let optim = Bucketed::new(SgdConfig::new().init());
        epoch::<ShardedAd, _, _>(
            args,
            &mesh,
            OverRanks(args.size),
            args.batch,
            strategy,
            optim,
        )
    })
}

fn setups() -> Vec<Setup> {
    vec![
        Setup {
            name: "Flex, one device",
            epoch: Box::new(|args: &Args| {
                let strategy = ExecutionStrategy::single(CPU);
                let optim = SgdConfig::new().init();
                epoch::<Ad, _, _>(args, &CPU, Plain(args.size), args.batch, strategy, optim)
            }),
        },
        Setup {
            name: "Sharded<Flex> N=1",
            epoch: sharded(1, false),
        },
        Setup {
            name: "Sharded<Flex> N=2 (in turn)",
            epoch: sharded(2, false),
        },
        Setup {
            name: "Sharded<Flex> N=2 (rank threads)",
            epoch: sharded(2, true),
        },
        Setup {
            name: "burn-train MultiDevice, 2 Flex devices",
            epoch: Box::new(|args: &Args| {
                let strategy =
                    ExecutionStrategy::multi(vec![CPU, CPU], MultiDeviceOptim::OptimMainDevice);
                let optim = SgdConfig::new().init();
                epoch::<Ad, _, _>(
                    args,
                    &CPU,
                    Plain(args.size),
                    args.batch / 2,
                    strategy,
                    optim,
                )
            }),
        },
    ]
}

fn main() {
    let args = Args::parse();
    let setups = setups();
    let mut times = vec![Vec::new(); setups.len()];
    let mut losses = vec![0f32; setups.len()];
    for round in 0..=args.rounds {
        for (i, s) in setups.iter().enumerate() {
            let (secs, loss) = (s.epoch)(&args);
            eprintln!("round {round}: {} {:.2} s", s.name, secs);
            if round > 0 {
                times[i].push(secs / args.steps as f64);
            }
            losses[i] = loss;
        }
    }
    let medians: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
    let mut md = format!(
        "# Training step through burn-train's Learner, tiny ResNet, {} images of 3×{}×{} per \
         step, SGD (CPU, {} cores)\n\n\
         Each setup trains one epoch of {} steps from the same weights; setups take turns epoch \
         by epoch; medians of {} epochs after one warm-up epoch each. Step time = epoch wall \
         time (with one validation batch) / steps; the loss is the last epoch's.\n\n",
        args.batch,
        args.size,
        args.size,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        args.steps,
        args.rounds
    );
    let names: Vec<String> = setups.iter().map(|s| s.name.to_string()).collect();
    let (rows, table) = step_rows(&names, &medians, &losses, args.batch);
    md += &table;
    md += "\nRatios are step-time ratios (lower is faster). Sharded runs split each batch of \
           the one-device run over the ranks, so they learn the same weights (same loss). \
           MultiDevice gives each device its own half batch and sums the two gradients, a \
           different update, so its loss differs.\n";
    print!("{md}");
    firemesh_benches::write_results(&args.out, "learner_step", &rows, &md).expect("write results");
}
