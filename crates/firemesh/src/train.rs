//! `firemesh train`: data-parallel training of a reference model on the devices found.

use burn::backend::Autodiff;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::Backend;
use burn::tensor::ElementConversion;
use firemesh_backend::{from_shards, from_shards_int, stats, Mesh, Sharded};
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
    /// Images per step over all ranks (each rank gets an equal share).
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
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

/// What a run measured.
pub struct TrainReport {
    pub first_loss: f64,
    pub last_loss: f64,
    pub images_per_second: f64,
    /// Ops that ran replicated for lack of a placement rule, over all forward and backward
    /// passes (0 for this model).
    pub fallbacks: u64,
}

type Ad<B> = Autodiff<Sharded<B>>;

/// Train a tiny CIFAR ResNet on synthetic CIFAR-like images with `Autodiff<Sharded<B>>`: one
/// model whose parameters are replicated over the ranks of `mesh`, each step's batch sharded
/// over them (each rank's slice built on its own device), gradients all-reduced where the
/// optimizer meets them, BatchNorm statistics computed over the whole batch.
pub fn train_resnet<B: Backend>(
    mesh: Mesh<B::Device>,
    args: &TrainArgs,
) -> Result<TrainReport, String> {
    let ranks = mesh.len();
    if args.batch % ranks != 0 || args.batch < ranks {
        return Err(format!(
            "--batch {} must be a positive multiple of the {ranks} ranks",
            args.batch
        ));
    }
    Ad::<B>::seed(&mesh, args.seed);
    let config = SyntheticImagesConfig {
        shape: [3, args.image_size, args.image_size],
        ..SyntheticImagesConfig::cifar_like(args.samples, args.seed)
    };
    let data = SyntheticImages::new(config).map_err(|e| e.to_string())?;
    let sampler = DistributedSampler::new(
        args.samples,
        ranks,
        args.batch,
        args.seed,
        TailPolicy::DropLast,
    )
    .map_err(|e| e.to_string())?;
    let mut model = ResNetConfig::tiny(10)
        .init::<Ad<B>>(&mesh)
        .map_err(|e| e.to_string())?;
    let momentum = burn::optim::momentum::MomentumConfig::new().with_momentum(0.9);
    let mut optimizer = SgdConfig::new().with_momentum(Some(momentum)).init();
    let loss_fn = CrossEntropyLossConfig::new().init(&mesh);

    let (mut first, mut last, mut fallbacks) = (None, 0.0, 0);
    let start = Instant::now();
    let mut position = SamplerPosition::default();
    let mut step = 0;
    while step < args.steps {
        for batch in sampler.batches_from(position) {
            if step == args.steps {
                break;
            }
            position = batch.position;
            let shards = shard_image_batch::<B, _>(&data, &batch.indices, mesh.devices())
                .map_err(|e| e.to_string())?;
            let (images, labels): (Vec<_>, Vec<_>) =
                shards.into_iter().map(|s| (s.images, s.labels)).unzip();
            let images = from_shards::<Ad<B>, 4>(&mesh, images, 0).map_err(|e| e.to_string())?;
            let labels =
                from_shards_int::<Ad<B>, 1>(&mesh, labels, 0).map_err(|e| e.to_string())?;
            let ((loss, grads), counts) = stats::count(|| {
                let loss = loss_fn.forward(model.forward(images), labels);
                let grads = loss.backward();
                (loss, grads)
            });
            fallbacks += counts.total_fallbacks();
            let grads = GradientsParams::from_grads(grads, &model);
            model = optimizer.step(args.lr, model, grads);
            let loss: f64 = loss.into_scalar().elem();
            first.get_or_insert(loss);
            last = loss;
            step += 1;
            if step % args.log_every.max(1) == 0 || step == args.steps {
                let rate = (step * args.batch) as f64 / start.elapsed().as_secs_f64();
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
    let images_per_second = (args.steps * args.batch) as f64 / start.elapsed().as_secs_f64();
    Ok(TrainReport {
        first_loss: first.unwrap_or(0.0),
        last_loss: last,
        images_per_second,
        fallbacks,
    })
}
