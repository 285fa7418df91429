//! A guard against sizes that cannot fit: a rough estimate of a run's memory (parameters,
//! gradients and optimizer state per rank, plus the activations kept for the backward pass),
//! compared with what the machine has, so that an impossible size is a clear error and not an
//! aborted allocation.

use super::config::TrainConfig;
use crate::{Error, Result};
use firemesh::mesh::{available_host_bytes, DeviceMesh};
use firemesh_resnet::{BlockKind, StemKind};
use firemesh_zoo::NetConfig;

const GIB: f64 = (1u64 << 30) as f64;

/// Fails when the estimate exceeds the memory available to the ranks.
pub fn check(
    config: &TrainConfig,
    net: &NetConfig,
    ranks: usize,
    seq_len: Option<usize>,
    mesh: &DeviceMesh,
) -> Result<()> {
    let (params, per_sample) = match net {
        NetConfig::ResNet(c) => (
            resnet_params(c.num_classes, &c.blocks_per_stage, c.base_width, c.block),
            resnet_activations(
                config.image_size,
                c.base_width,
                &c.blocks_per_stage,
                c.block,
                c.stem,
            ),
        ),
        NetConfig::Gpt(c) => {
            let seq = seq_len.unwrap_or(c.context_length) as f64;
            let per_layer = seq * c.d_model as f64 * 20.0 + 3.0 * c.n_heads as f64 * seq * seq;
            let logits = 3.0 * seq * c.vocab_size as f64;
            (
                c.num_params() as f64,
                c.n_layers as f64 * per_layer + logits,
            )
        }
    };
    // Weights, gradients and two optimizer moments per rank; activations of the samples.
    let state = 4.0 * params * 4.0;
    let (needed, available, what) = match mesh {
        DeviceMesh::Cpu { .. } => (
            ranks as f64 * state + config.batch as f64 * per_sample * 4.0,
            available_host_bytes(),
            "available host memory",
        ),
        // Per GPU: its ranks' share; the GPU's size is not known here, so only sizes beyond
        // the largest GPUs made are refused.
        _ => (
            state + config.batch.div_ceil(ranks) as f64 * per_sample * 4.0,
            Some(192.0 * GIB),
            "the memory of any GPU",
        ),
    };
    match available {
        Some(available) if needed > available => Err(Error::Invalid(format!(
            "this run needs about {:.1} GiB, more than {what} ({:.1} GiB): use a smaller --batch, --image-size or --seq-len, or a smaller model",
            needed / GIB,
            available / GIB
        ))),
        _ => Ok(()),
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
