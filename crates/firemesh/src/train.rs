//! `firemesh train`: data-parallel training of a reference model on the devices found.

use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::SgdConfig;
use burn::tensor::backend::AutodiffBackend;
use firemesh_collective::TensorCollectives;
use firemesh_datasets::{
    shard_image_batch, DistributedSampler, SamplerPosition, SyntheticImages, SyntheticImagesConfig,
    TailPolicy,
};
use firemesh_resnet::ResNetConfig;
use firemesh_train::{DataParallel, GradientSync};
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
}

/// Train a tiny CIFAR ResNet on synthetic CIFAR-like images, one replica per device in
/// `devices`, averaging gradients with `group`.
pub fn train_resnet<B, G>(
    devices: Vec<B::Device>,
    group: G,
    args: &TrainArgs,
) -> Result<TrainReport, String>
where
    B: AutodiffBackend,
    G: TensorCollectives<B::InnerBackend>,
{
    let ranks = devices.len();
    if args.batch % ranks != 0 || args.batch < ranks {
        return Err(format!(
            "--batch {} must be a positive multiple of the {ranks} ranks",
            args.batch
        ));
    }
    B::seed(&devices[0], args.seed);
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
    let model = ResNetConfig::tiny(10)
        .init::<B>(&devices[0])
        .map_err(|e| e.to_string())?;
    let momentum = burn::optim::momentum::MomentumConfig::new().with_momentum(0.9);
    let optimizer = || {
        SgdConfig::new()
            .with_momentum(Some(momentum.clone()))
            .init()
    };
    let mut dp = DataParallel::new(
        model,
        devices.clone(),
        optimizer,
        GradientSync::new(group, 25 << 20),
    )
    .map_err(|e| e.to_string())?;
    let loss_fns: Vec<_> = devices
        .iter()
        .map(|d| CrossEntropyLossConfig::new().init(d))
        .collect();

    let (mut first, mut last) = (None, 0.0);
    let start = Instant::now();
    let mut position = SamplerPosition::default();
    let mut step = 0;
    while step < args.steps {
        for batch in sampler.batches_from(position) {
            if step == args.steps {
                break;
            }
            position = batch.position;
            let shards = shard_image_batch::<B, _>(&data, &batch.indices, &devices)
                .map_err(|e| e.to_string())?;
            let loss = dp
                .step(args.lr, |r, model| {
                    let logits = model.forward(shards[r].images.clone());
                    loss_fns[r].forward(logits, shards[r].labels.clone())
                })
                .map_err(|e| e.to_string())?;
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
    check_replicas_agree(&dp)?;
    Ok(TrainReport {
        first_loss: first.unwrap_or(0.0),
        last_loss: last,
        images_per_second,
    })
}

/// Data-parallel replicas must hold the same parameters after every step.
fn check_replicas_agree<B, M, O, G>(dp: &DataParallel<B, M, O, G>) -> Result<(), String>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + Send + Sync,
    O: burn::optim::Optimizer<M, B>,
    G: TensorCollectives<B::InnerBackend>,
{
    match dp.replica_divergence() {
        0.0 => Ok(()),
        d => Err(format!("replicas diverged by {d}: gradient sync is broken")),
    }
}
