//! `firemesh train`: data-parallel training of a reference model on the devices found.

use crate::{Error, Result};
use burn::backend::Autodiff;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::Backend;
use burn::tensor::ElementConversion;
use firemesh_backend::{from_shards, from_shards_int, stats, Mesh, Route, Sharded};
use firemesh_datasets::{
    shard_image_batch, DistributedSampler, SamplerPosition, SyntheticImages, SyntheticImagesConfig,
    TailPolicy,
};
use firemesh_resnet::ResNetConfig;
use std::time::Instant;

/// What to train and for how long.
#[derive(Debug, Clone, clap::Args)]
pub struct TrainArgs {
    /// Optimizer steps.
    #[arg(long, default_value_t = 40)]
    pub steps: usize,
    /// Images per step over all ranks, a multiple of the ranks (each rank gets an equal
    /// share). Default: 32, rounded up to a multiple of the ranks.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Learning rate (SGD with momentum 0.9).
    #[arg(long, default_value_t = 0.05)]
    pub lr: f64,
    /// Synthetic dataset size.
    #[arg(long, default_value_t = 1024)]
    pub samples: usize,
    /// Side of the square synthetic images, in pixels.
    #[arg(long, default_value_t = 16)]
    pub image_size: usize,
    /// Seed of the data order and of the model.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print progress every this many steps.
    #[arg(long, default_value_t = 5)]
    pub log_every: usize,
}

impl TrainArgs {
    /// The global batch of a run on `ranks` ranks, or why the one asked for cannot be split.
    pub fn batch_for(&self, ranks: usize) -> Result<usize> {
        let ranks = ranks.max(1);
        let batch = self
            .batch
            .unwrap_or_else(|| 32usize.div_ceil(ranks) * ranks);
        if batch.is_multiple_of(ranks) && batch >= ranks {
            Ok(batch)
        } else {
            Err(Error::Invalid(format!(
                "--batch {batch} must be a positive multiple of the {ranks} ranks"
            )))
        }
    }
}

/// What a run measured.
pub struct TrainReport {
    /// Images per step over all ranks.
    pub batch: usize,
    pub first_loss: f64,
    pub last_loss: f64,
    pub images_per_second: f64,
    /// Ops that ran replicated for lack of a placement rule, over all forward and backward
    /// passes (0 for this model).
    pub fallbacks: u64,
    /// Sums and gathers of parts across ranks, by the route they took.
    pub routes: std::collections::BTreeMap<Route, u64>,
}

type Ad<B> = Autodiff<Sharded<B>>;

/// Train a tiny CIFAR ResNet on synthetic CIFAR-like images with `Autodiff<Sharded<B>>`: one
/// model whose parameters are replicated over the ranks of `mesh`, each step's batch sharded
/// over them (each rank's slice built on its own device), gradients all-reduced where the
/// optimizer meets them, BatchNorm statistics computed over the whole batch.
pub fn train_resnet<B: Backend>(mesh: Mesh<B::Device>, args: &TrainArgs) -> Result<TrainReport> {
    let ranks = mesh.len();
    let global_batch = args.batch_for(ranks)?;
    Ad::<B>::seed(&mesh, args.seed);
    let config = SyntheticImagesConfig {
        shape: [3, args.image_size, args.image_size],
        ..SyntheticImagesConfig::cifar_like(args.samples, args.seed)
    };
    let data = SyntheticImages::new(config)?;
    let sampler = DistributedSampler::new(
        args.samples,
        ranks,
        global_batch,
        args.seed,
        TailPolicy::DropLast,
    )?;
    let mut model = ResNetConfig::tiny(10).init::<Ad<B>>(&mesh)?;
    let momentum = burn::optim::momentum::MomentumConfig::new().with_momentum(0.9);
    let mut optimizer = SgdConfig::new().with_momentum(Some(momentum)).init();
    let loss_fn = CrossEntropyLossConfig::new().init(&mesh);

    let (mut first, mut last, mut fallbacks) = (None, 0.0, 0);
    let mut routes = std::collections::BTreeMap::new();
    let start = Instant::now();
    let mut position = SamplerPosition::default();
    let mut step = 0;
    while step < args.steps {
        for batch in sampler.batches_from(position) {
            if step == args.steps {
                break;
            }
            position = batch.position;
            let shards = shard_image_batch::<B, _>(&data, &batch.indices, mesh.devices())?;
            let (images, labels): (Vec<_>, Vec<_>) =
                shards.into_iter().map(|s| (s.images, s.labels)).unzip();
            let images = from_shards::<Ad<B>, 4>(&mesh, images, 0)?;
            let labels = from_shards_int::<Ad<B>, 1>(&mesh, labels, 0)?;
            // Forward, backward and the optimizer step (where the gradients are all-reduced).
            let ((loss, new_model), counts) = stats::count(|| {
                let loss = loss_fn.forward(model.forward(images), labels);
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                (loss, optimizer.step(args.lr, model, grads))
            });
            model = new_model;
            fallbacks += counts.total_fallbacks();
            for (route, k) in counts.routes {
                *routes.entry(route).or_default() += k;
            }
            let loss: f64 = loss.into_scalar().elem();
            first.get_or_insert(loss);
            last = loss;
            step += 1;
            if step % args.log_every.max(1) == 0 || step == args.steps {
                let rate = (step * global_batch) as f64 / start.elapsed().as_secs_f64();
                println!(
                    "  step {step:>4}/{}  loss {loss:.4}  {rate:.1} images/s",
                    args.steps
                );
            }
        }
        position = SamplerPosition {
            epoch: position.epoch + 1,
            step: 0,
        };
    }
    let images_per_second = (args.steps * global_batch) as f64 / start.elapsed().as_secs_f64();
    Ok(TrainReport {
        first_loss: first.unwrap_or(0.0),
        last_loss: last,
        batch: global_batch,
        images_per_second,
        fallbacks,
        routes,
    })
}
