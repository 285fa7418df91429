//! Training-step time of a small ResNet on `Sharded<Flex>` against plain `Flex`, measured
//! side by side: setups take turns step by step, so machine noise hits them alike.
//!
//! `cargo run --release -p firemesh-benches --bin sharded_step`

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor, TensorData};
use clap::Parser;
use firemesh::backend::buckets::DEFAULT_BUCKET_BYTES;
use firemesh::Trainer;
use firemesh_backend::{shard, shard_int, Mesh, Sharded};
use firemesh_benches::{median, resnet_loss, resnet_sgd, step_rows, ResNetSgd};
use firemesh_resnet::{ResNet, ResNetConfig};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// Global batch size (split over the ranks).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Image side in pixels.
    #[arg(long, default_value_t = 32)]
    size: usize,
    /// Measured steps per setup (after two warm-up steps).
    #[arg(long, default_value_t = 12)]
    steps: usize,
    /// Where to write sharded_step.{md,json}.
    #[arg(long, default_value = "benches/results")]
    out: String,
}

type Ref = Flex;
const CLASSES: usize = 10;

/// A batch of images and labels, placed on a setup's device (kept, or sharded over a mesh).
type Batch<B> = (Tensor<B, 4>, Tensor<B, 1, Int>);

/// One training setup: a model, its optimizer and how its batch is placed.
trait Setup {
    fn name(&self) -> String;
    /// One SGD step; returns the loss (read back, so the step's work is done).
    fn step(&mut self, images: &TensorData, labels: &TensorData) -> f32;
}

struct Run<B: AutodiffBackend> {
    name: String,
    device: B::Device,
    trainer: Trainer<B, ResNet<B>, ResNetSgd<B>>,
    place: fn(Tensor<B, 4>, Tensor<B, 1, Int>) -> Batch<B>,
}

impl<B: AutodiffBackend> Setup for Run<B>
where
    ResNet<B>: AutodiffModule<B>,
{
    fn name(&self) -> String {
        self.name.clone()
    }
    fn step(&mut self, images: &TensorData, labels: &TensorData) -> f32 {
        let x = Tensor::<B, 4>::from_data(images.clone(), &self.device);
        let y = Tensor::<B, 1, Int>::from_data(labels.clone(), &self.device);
        let (x, y) = (self.place)(x, y);
        let report = self
            .trainer
            .step(|model| Ok(resnet_loss(model, x, y)))
            .expect("a training step");
        report.loss as f32
    }
}

/// A tiny ResNet, the same weights in every setup, and its SGD.
fn model<B: AutodiffBackend>(device: &B::Device) -> (ResNet<B>, ResNetSgd<B>)
where
    ResNet<B>: AutodiffModule<B>,
{
    B::seed(device, 3);
    let model = ResNetConfig::tiny(CLASSES)
        .init::<B>(device)
        .expect("valid config");
    // Parameters initialize lazily; draw them now, so every setup starts from the same weights.
    firemesh_benches::init_params(&model);
    (model, resnet_sgd())
}

fn single(name: &str) -> Box<dyn Setup> {
    type B = Autodiff<Ref>;
    let (model, optim) = model::<B>(&FlexDevice);
    Box::new(Run::<B> {
        name: name.into(),
        device: FlexDevice,
        trainer: Trainer::single_device(model, optim, &FlexDevice).with_lr(|_| 0.05),
        place: keep,
    })
}

fn keep<B: AutodiffBackend>(
    x: Tensor<B, 4>,
    y: Tensor<B, 1, Int>,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    (x, y)
}

fn split(
    x: Tensor<Autodiff<Sharded<Ref>>, 4>,
    y: Tensor<Autodiff<Sharded<Ref>>, 1, Int>,
) -> Batch<Autodiff<Sharded<Ref>>> {
    (
        shard(x, 0).expect("batch ≥ ranks"),
        shard_int(y, 0).expect("batch ≥ ranks"),
    )
}

fn sharded(ranks: usize, parallel: bool) -> Box<dyn Setup> {
    // Meshes of equal device lists are one mesh, so setups of the same size share it and each
    // sets its execution mode right before its step.
    let mesh = Mesh::replicate(FlexDevice, ranks).expect("mesh");
    let name = format!(
        "Sharded<Flex> N={ranks}{}",
        if parallel { " (rank threads)" } else { "" }
    );
    let (model, optim) = model::<Autodiff<Sharded<Ref>>>(&mesh);
    let trainer = Trainer::sharded(model, optim, &mesh, DEFAULT_BUCKET_BYTES).with_lr(|_| 0.05);
    let setup = Box::new(Run {
        name,
        device: mesh.clone(),
        trainer,
        place: split,
    });
    Box::new(Mode {
        mesh,
        parallel,
        inner: setup,
    })
}

/// Sets the mesh's execution mode before each step (setups share meshes of equal size).
struct Mode {
    mesh: Mesh<FlexDevice>,
    parallel: bool,
    inner: Box<dyn Setup>,
}

impl Setup for Mode {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn step(&mut self, images: &TensorData, labels: &TensorData) -> f32 {
        self.mesh.set_parallel(self.parallel);
        self.inner.step(images, labels)
    }
}

fn main() {
    let args = Args::parse();
    let mut setups: Vec<Box<dyn Setup>> = vec![
        single("Flex"),
        sharded(1, false),
        sharded(2, false),
        sharded(2, true),
        sharded(4, false),
        sharded(4, true),
    ];
    let n = args.batch * 3 * args.size * args.size;
    let images: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let images = TensorData::new(images, [args.batch, 3, args.size, args.size]);
    let labels: Vec<i64> = (0..args.batch).map(|i| (i % CLASSES) as i64).collect();
    let labels = TensorData::new(labels, [args.batch]);

    let mut times = vec![Vec::new(); setups.len()];
    let mut losses = vec![0f32; setups.len()];
    for step in 0..args.steps + 2 {
        for (i, s) in setups.iter_mut().enumerate() {
            let start = Instant::now();
            losses[i] = s.step(&images, &labels);
            if step >= 2 {
                times[i].push(start.elapsed().as_secs_f64());
            }
        }
    }
    let medians: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
    let mut md = format!(
        "# Training step, tiny ResNet, batch {} of 3×{}×{}, SGD (CPU, {} cores)\n\n\
         Setups take turns step by step in one run; medians of {} steps after 2 warm-up steps; \
         the loss is the last step's.\n\n",
        args.batch,
        args.size,
        args.size,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        args.steps
    );
    let names: Vec<String> = setups.iter().map(|s| s.name()).collect();
    let (rows, table) = step_rows(&names, &medians, &losses, args.batch);
    md += &table;
    md +=
        "\nRatios are step-time ratios (lower is faster). The same training through burn-train's \
           Learner, with its MultiDevice strategy as the peer, is in learner_step.md.\n";
    print!("{md}");
    firemesh_benches::write_results(&args.out, "sharded_step", &rows, &md).expect("write results");
}
