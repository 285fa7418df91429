//! Convolution and normalization layers configured the way ResNet uses them.

use burn::module::Initializer;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::prelude::*;

/// He-normal ("Kaiming normal", fan-out mode, ReLU gain): std = sqrt(2 / fan_out).
fn he_normal() -> Initializer {
    Initializer::KaimingNormal {
        gain: std::f64::consts::SQRT_2,
        fan_out_only: true,
    }
}

/// A bias-free square convolution with "same"-style symmetric padding `kernel / 2`.
pub(crate) fn conv<B: Backend>(
    channels: [usize; 2],
    kernel: usize,
    stride: usize,
    device: &B::Device,
) -> Conv2d<B> {
    let pad = kernel / 2;
    Conv2dConfig::new(channels, [kernel, kernel])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .with_bias(false)
        .with_initializer(he_normal())
        .init(device)
}

/// BatchNorm with scale 1 and shift 0, or scale 0 when `zero_scale` (zero-init residual).
pub(crate) fn batch_norm<B: Backend>(
    channels: usize,
    zero_scale: bool,
    device: &B::Device,
) -> BatchNorm<B> {
    let mut norm = BatchNormConfig::new(channels).init(device);
    if zero_scale {
        norm.gamma = Initializer::Zeros.init([channels], device);
    }
    norm
}
