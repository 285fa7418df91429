//! Train a ResNet data-parallel on every device found, with the library alone: find the
//! devices, make the model on their mesh, shard each batch over the ranks, take one
//! `Trainer::step` per batch, and measure top-1 accuracy on held-out images. This is the loop
//! `firemesh train` runs, without its checkpoints, metrics and data pipeline.
//!
//! Synthetic CIFAR-shaped images by default; `--cifar10 DIR` reads CIFAR-10's binary files,
//! `--images DIR` a folder of images, one sub-folder per class. Every 8th image is held out.
//! `--precision bf16` computes products in bf16 (f32 elsewhere); `f16` adds loss scaling.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example train_resnet -- --steps 200
//! cargo run --release -p firemesh-examples --example train_resnet -- --depth 50 --cifar10 /data/cifar-10-batches-bin --precision bf16
//! ```

use burn::backend::Autodiff;
use burn::data::dataset::Dataset;
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::SgdConfig;
use burn::prelude::*;
use clap::Parser;
use firemesh::grads::DEFAULT_BUCKET_BYTES;
use firemesh::mesh::{MeshJob, RuntimeConfig};
use firemesh::{Precision, Trainer};
use firemesh_backend::{from_shards, from_shards_int, Mesh, Sharded};
use firemesh_datasets::{
    shard_image_batch, Cifar10, ImageFolder, ImageItem, SyntheticImages, SyntheticImagesConfig,
};
use firemesh_examples::{batch_of, held_out, Devices};
use firemesh_resnet::{ResNet, ResNetConfig, StemKind};
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    devices: Devices,
    /// ResNet depth: 18, 34, 50, 101 or 152; 0 for the tiny one.
    #[arg(long, default_value_t = 18)]
    depth: usize,
    /// CIFAR-10's binary folder (cifar-10-batches-bin).
    #[arg(long, conflicts_with = "images")]
    cifar10: Option<PathBuf>,
    /// A folder of images, one sub-folder per class (resized to --image-size).
    #[arg(long)]
    images: Option<PathBuf>,
    /// Side of the images, in pixels (CIFAR-10's are 32).
    #[arg(long, default_value_t = 32)]
    image_size: usize,
    /// Synthetic images, held-out ones included.
    #[arg(long, default_value_t = 2048)]
    samples: usize,
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Images per step, over all ranks.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    #[arg(long, default_value_t = 0.05)]
    lr: f64,
    /// f32, bf16 or f16: the precision of products (convolutions and matmuls).
    #[arg(long, default_value = "f32")]
    precision: Precision,
}

type Ad<B> = Autodiff<Sharded<B>>;
type Images = Box<dyn Dataset<ImageItem>>;

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let devices = args.devices.discover()?;
    devices.run(&RuntimeConfig::default(), Train(args))?
}

/// The training, written once for every inner backend (`DeviceMesh::run` picks it).
struct Train(Args);

impl MeshJob for Train {
    type Output = Result<(), Box<dyn Error>>;
    fn run<B: Backend>(self, mesh: Mesh<B::Device>) -> Self::Output {
        train::<B>(&self.0, &mesh)
    }
}

fn train<B: Backend>(args: &Args, mesh: &Mesh<B::Device>) -> Result<(), Box<dyn Error>> {
    let (images, classes) = dataset(args)?;
    let (train, held): (Vec<usize>, Vec<usize>) = (0..images.len()).partition(|&i| !held_out(i));
    if train.len() < args.batch || args.batch < mesh.len() {
        return Err(format!(
            "--batch {} must be at least the {} ranks and at most the {} training images",
            args.batch,
            mesh.len(),
            train.len()
        )
        .into());
    }
    Ad::<B>::seed(mesh, 42);
    let config = match args.depth {
        0 => ResNetConfig::tiny(classes),
        depth => ResNetConfig::from_depth(depth, classes)?,
    };
    let stem = StemKind::for_image_size(args.image_size);
    let model: ResNet<Ad<B>> = config.with_stem(stem).init(mesh)?;
    let momentum = MomentumConfig::new().with_momentum(0.9);
    let optimizer = SgdConfig::new().with_momentum(Some(momentum)).init();
    let lr = args.lr;
    // Gradients are summed over the ranks in 25 MiB buckets, each as soon as the backward
    // pass has filled it.
    let mut trainer = Trainer::sharded(model, optimizer, mesh, DEFAULT_BUCKET_BYTES)
        .with_lr(move |_| lr)
        // f16 scales the loss (dynamic loss scaling, its defaults).
        .with_precision(args.precision)?;
    let begin = Instant::now();
    for step in 1..=args.steps {
        // The next `batch` training images, each rank's share made on its own device.
        let indices = batch_of(step, args.batch, &train);
        let (x, y) = on_mesh::<Ad<B>>(mesh, &*images, &indices)?;
        let report = trainer.step(|model| {
            let logits = model.forward(x);
            Ok(CrossEntropyLossConfig::new().init(mesh).forward(logits, y))
        })?;
        if step % 10 == 0 || step == args.steps {
            let per_s = (step * args.batch) as f64 / begin.elapsed().as_secs_f64();
            println!(
                "step {step:>5}/{}  loss {:.4}  {per_s:.1} images/s",
                args.steps, report.loss
            );
        }
    }
    let model = trainer.model().valid();
    match accuracy::<B>(&model, mesh, &*images, &held, args.batch)? {
        Some((accuracy, n)) => println!(
            "top-1 accuracy {:.1}% on {n} held-out images after {} steps",
            100.0 * accuracy,
            args.steps
        ),
        None => println!("no held-out batch of at least {} images", mesh.len()),
    }
    Ok(())
}

/// The images and their classes.
fn dataset(args: &Args) -> Result<(Images, usize), Box<dyn Error>> {
    Ok(match (&args.cifar10, &args.images) {
        (Some(dir), _) => (Box::new(Cifar10::train(dir)?), 10),
        (_, Some(dir)) => {
            let folder = ImageFolder::open(dir, args.image_size)?;
            let classes = folder.classes().len();
            println!("{} images in {classes} classes", folder.len());
            (Box::new(folder), classes)
        }
        (None, None) => {
            let config = SyntheticImagesConfig {
                len: args.samples,
                shape: [3, args.image_size, args.image_size],
                ..SyntheticImagesConfig::cifar_like(args.samples, 7)
            };
            (Box::new(SyntheticImages::new(config)?), 10)
        }
    })
}

/// Images and labels of one batch.
type Batch<A> = (Tensor<A, 4>, Tensor<A, 1, Int>);

/// The images at `indices` as one batch sharded over the mesh: rank `r` holds the `r`-th
/// share, made on its own device.
fn on_mesh<A: firemesh_backend::MeshBackend>(
    mesh: &Mesh<burn::tensor::Device<A::Inner>>,
    images: &dyn Dataset<ImageItem>,
    indices: &[usize],
) -> Result<Batch<A>, Box<dyn Error>> {
    let parts = shard_image_batch::<A::Inner, _>(images, indices, mesh.devices())?;
    let (x, y): (Vec<_>, Vec<_>) = parts.into_iter().map(|b| (b.images, b.labels)).unzip();
    Ok((from_shards(mesh, x, 0)?, from_shards_int(mesh, y, 0)?))
}

/// Top-1 accuracy on the images at `indices`, `batch` at a time (a last batch smaller than
/// the rank count is left out), and the images it saw; `None` if it saw none.
fn accuracy<B: Backend>(
    model: &ResNet<Sharded<B>>,
    mesh: &Mesh<B::Device>,
    images: &dyn Dataset<ImageItem>,
    indices: &[usize],
    batch: usize,
) -> Result<Option<(f64, usize)>, Box<dyn Error>> {
    let (mut correct, mut seen) = (0, 0);
    for chunk in indices.chunks(batch).filter(|c| c.len() >= mesh.len()) {
        let (x, y) = on_mesh::<Sharded<B>>(mesh, images, chunk)?;
        let predicted = model.forward(x).argmax(1).squeeze_dim::<1>(1);
        correct += predicted.equal(y).int().sum().into_scalar().elem::<i64>();
        seen += chunk.len();
    }
    Ok((seen > 0).then(|| (correct as f64 / seen as f64, seen)))
}
