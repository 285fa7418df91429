//! A guard against sizes that cannot fit: an estimate of a run's memory per rank (parameters,
//! gradients and optimizer state as the ZeRO stage shards them, plus the activations kept for
//! the backward pass), compared with what the machine has, so that an impossible size is a
//! clear error naming a stage that would fit, not an aborted allocation. `--dry-run` prints it.

use super::config::TrainConfig;
use crate::{Error, Result};
use firemesh::mesh::{available_host_bytes, DeviceMesh};
use firemesh::optim::OptimizerKind;
use firemesh_resnet::{BlockKind, StemKind};
use firemesh_simulate::{model_state, StateShape};
use firemesh_zoo::NetConfig;

const GIB: f64 = (1u64 << 30) as f64;

/// The estimated bytes one rank holds at the peak of a step.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PerRank {
    pub parameters: f64,
    pub gradients: f64,
    pub optimizer_state: f64,
    pub activations: f64,
}

impl PerRank {
    pub fn total(&self) -> f64 {
        self.parameters + self.gradients + self.optimizer_state + self.activations
    }

    /// One line for `--dry-run`.
    pub fn describe(&self, zero: u8) -> String {
        format!(
            "about {} per rank under ZeRO-{zero} (parameters {}, gradients {}, optimizer state \
             {}, activations {})",
            size(self.total()),
            size(self.parameters),
            size(self.gradients),
            size(self.optimizer_state),
            size(self.activations)
        )
    }
}

/// `bytes` in GiB, or in MiB below one GiB.
fn size(bytes: f64) -> String {
    match bytes >= GIB {
        true => format!("{:.2} GiB", bytes / GIB),
        false => format!("{:.1} MiB", bytes / (1u64 << 20) as f64),
    }
}

/// What an estimate needs besides the model and the stage.
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    /// Samples in one rank's share of the batch (images, or sequences).
    pub samples_per_rank: usize,
    pub image_size: usize,
    /// A GPT's sequence length (its context when `None`).
    pub seq_len: Option<usize>,
    /// Optimizer moments per parameter: AdamW 2, SGD with momentum 1, SGD 0.
    pub moments: f64,
    pub bucket_bytes: f64,
}

impl Inputs {
    /// A training run's, on `ranks` ranks.
    pub fn of(config: &TrainConfig, ranks: usize, seq_len: Option<usize>) -> Self {
        Self {
            samples_per_rank: config.batch.div_ceil(ranks.max(1)),
            image_size: config.image_size,
            seq_len,
            moments: match config.optimizer {
                OptimizerKind::Adamw => 2.0,
                OptimizerKind::Sgd if config.momentum > 0.0 => 1.0,
                OptimizerKind::Sgd => 0.0,
            },
            bucket_bytes: config.bucket_bytes as f64,
        }
    }
}

/// The model's sizes, in floats: its parameters, its largest parameter tensor, and what its
/// backward pass keeps per sample.
struct Sizes {
    params: f64,
    largest: f64,
    per_sample: f64,
}

fn sizes(net: &NetConfig, image_size: usize, seq_len: Option<usize>) -> Sizes {
    match net {
        NetConfig::ResNet(c) => {
            let stages = &c.blocks_per_stage;
            let widest = (c.base_width << stages.len().saturating_sub(1)) as f64;
            let out = widest * c.block.expansion() as f64;
            Sizes {
                params: resnet_params(c.num_classes, stages, c.base_width, c.block),
                largest: (9.0 * widest * widest)
                    .max(widest * out)
                    .max(out * c.num_classes as f64),
                per_sample: resnet_activations(image_size, c.base_width, stages, c.block, c.stem),
            }
        }
        NetConfig::Gpt(c) => {
            let seq = seq_len.unwrap_or(c.context_length) as f64;
            let d = c.d_model as f64;
            let per_layer = seq * d * 20.0 + 3.0 * c.n_heads as f64 * seq * seq;
            let logits = 3.0 * seq * c.vocab_size as f64;
            Sizes {
                params: c.num_params() as f64,
                largest: (c.vocab_size as f64 * d).max(c.mlp_ratio as f64 * d * d),
                per_sample: c.n_layers as f64 * per_layer + logits,
            }
        }
    }
}

/// The estimate for one of `ranks` ranks under ZeRO `zero`: the model state as
/// [`firemesh_simulate::model_state`] shares it (f32 parameters, gradients and optimizer
/// moments; ZeRO-3's largest parameter tensor gathered whole), and the f32 activations of the
/// rank's share of the batch.
pub fn per_rank(
    config: &TrainConfig,
    net: &NetConfig,
    ranks: usize,
    seq_len: Option<usize>,
    zero: u8,
) -> PerRank {
    estimate(net, &Inputs::of(config, ranks, seq_len), ranks, zero)
}

/// [`per_rank`] from its inputs.
pub fn estimate(net: &NetConfig, inputs: &Inputs, ranks: usize, zero: u8) -> PerRank {
    let s = sizes(net, inputs.image_size, inputs.seq_len);
    let shape = StateShape {
        parameters: s.params,
        largest: s.largest,
        moments: inputs.moments,
        bucket_bytes: inputs.bucket_bytes,
    };
    let state = model_state(&shape, zero, ranks);
    PerRank {
        parameters: state.parameters,
        gradients: state.gradients,
        optimizer_state: state.optimizer_state,
        activations: inputs.samples_per_rank as f64 * s.per_sample * 4.0,
    }
}

/// Fails when the estimate exceeds the memory available to the ranks, naming a ZeRO stage that
/// would fit where one would; returns the estimate.
pub fn check(
    config: &TrainConfig,
    net: &NetConfig,
    ranks: usize,
    seq_len: Option<usize>,
    mesh: &DeviceMesh,
) -> Result<PerRank> {
    let plan = |zero| per_rank(config, net, ranks, seq_len, zero);
    // A CPU mesh holds every rank in this process; a GPU holds its own ranks, and its size is
    // not known here, so only sizes beyond the largest GPUs made are refused.
    let (on_one, available, what) = match mesh {
        DeviceMesh::Cpu { .. } => (
            ranks as f64,
            available_host_bytes(),
            "available host memory",
        ),
        _ => (1.0, Some(192.0 * GIB), "the memory of any GPU"),
    };
    let estimate = plan(config.zero);
    let needed = |p: PerRank| on_one * p.total();
    match available {
        Some(available) if needed(estimate) > available => {
            let fitting = [1u8, 3]
                .into_iter()
                .filter(|z| *z > config.zero)
                .find(|z| needed(plan(*z)) <= available)
                .map_or(String::new(), |z| {
                    format!(
                        "; with --zero {z} it would need about {:.1} GiB",
                        needed(plan(z)) / GIB
                    )
                });
            Err(Error::Invalid(format!(
                "this run needs about {:.1} GiB, more than {what} ({:.1} GiB){fitting}: use a smaller --batch, --image-size or --seq-len, or a smaller model",
                needed(estimate) / GIB,
                available / GIB
            )))
        }
        _ => Ok(estimate),
    }
}

/// Floats kept for the backward pass per image: about three tensors (convolution, norm,
/// activation) per convolution.
fn resnet_activations(
    side: usize,
    base: usize,
    stages: &[usize],
    block: BlockKind,
    stem: StemKind,
) -> f64 {
    let side = side as f64;
    let (stem_side, stage_side) = match stem {
        StemKind::ImageNet => (side / 2.0, side / 4.0),
        StemKind::Cifar => (side, side),
    };
    let mut floats = 3.0 * stem_side * stem_side * base as f64;
    for (i, &blocks) in stages.iter().enumerate() {
        let s = stage_side / f64::from(1u32 << i);
        let width = (base << i) as f64;
        let per_block = match block {
            BlockKind::Basic => 2.0 * 3.0 * width,
            BlockKind::Bottleneck => 3.0 * (2.0 * width + 4.0 * width),
        };
        floats += blocks as f64 * per_block * s * s;
    }
    floats
}

/// An upper bound of a ResNet's parameter count.
fn resnet_params(classes: usize, stages: &[usize], base: usize, block: BlockKind) -> f64 {
    let expansion = block.expansion() as f64;
    let mut params = 49.0 * 3.0 * base as f64;
    let mut width_in = base as f64;
    for (i, &blocks) in stages.iter().enumerate() {
        let w = (base << i) as f64;
        let out = w * expansion;
        let per_block = 9.0 * w * w * 2.0 + 2.0 * width_in.max(w) * out + w * out;
        params += blocks as f64 * per_block + width_in * out;
        width_in = out;
    }
    params + width_in * classes as f64
}
