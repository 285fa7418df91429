//! The first layers of a ResNet, before the residual stages.

use burn::config::Config;
use burn::nn::conv::Conv2d;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, PaddingConfig2d};
use burn::prelude::*;
use burn::tensor::activation::relu;

use crate::layers::{batch_norm, conv};

/// Which stem a ResNet starts with.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum StemKind {
    /// 7×7 stride-2 convolution then 3×3 stride-2 max-pool: 224×224 → 56×56.
    ImageNet,
    /// 3×3 stride-1 convolution, no pooling: for 32×32 inputs such as CIFAR-10.
    Cifar,
}

impl StemKind {
    /// The stem for square images of `side` pixels: the ImageNet stem divides the side by 4
    /// before the stages, so images under 128 pixels take the CIFAR stem.
    pub fn for_image_size(side: usize) -> Self {
        if side >= 128 {
            Self::ImageNet
        } else {
            Self::Cifar
        }
    }
}

/// Convolution, BatchNorm, ReLU and, for the ImageNet stem, a max-pool.
#[derive(Module, Debug)]
pub struct Stem<B: Backend> {
    /// First convolution.
    pub conv: Conv2d<B>,
    /// BatchNorm after the convolution.
    pub norm: BatchNorm<B>,
    /// Max-pool (ImageNet stem only).
    pub pool: Option<MaxPool2d>,
}

impl StemKind {
    /// Builds the stem mapping `in_channels` to `out_channels`.
    pub fn init<B: Backend>(
        self,
        in_channels: usize,
        out_channels: usize,
        device: &B::Device,
    ) -> Stem<B> {
        let (kernel, stride, pool) = match self {
            StemKind::ImageNet => {
                let pool = MaxPool2dConfig::new([3, 3])
                    .with_strides([2, 2])
                    .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                    .init();
                (7, 2, Some(pool))
            }
            StemKind::Cifar => (3, 1, None),
        };
        Stem {
            conv: conv([in_channels, out_channels], kernel, stride, device),
            norm: batch_norm(out_channels, false, device),
            pool,
        }
    }
}

impl<B: Backend> Stem<B> {
    /// `[batch, in, h, w]` → `[batch, out, h', w']`.
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = relu(self.norm.forward(self.conv.forward(input)));
        match &self.pool {
            Some(pool) => pool.forward(x),
            None => x,
        }
    }
}
