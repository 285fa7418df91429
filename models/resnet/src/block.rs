//! Residual blocks: the basic block (ResNet-18/34) and the bottleneck (ResNet-50/101/152).

use burn::config::Config;
use burn::nn::conv::Conv2d;
use burn::nn::BatchNorm;
use burn::prelude::*;
use burn::tensor::activation::relu;

use crate::layers::{batch_norm, conv};

/// Which residual block a ResNet is made of.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Two 3×3 convolutions; output channels = planes.
    Basic,
    /// 1×1 reduce, 3×3 (carries the stride, "v1.5"), 1×1 expand; output channels = 4 × planes.
    Bottleneck,
}

impl BlockKind {
    /// Ratio of a block's output channels to its `planes`.
    pub fn expansion(self) -> usize {
        match self {
            BlockKind::Basic => 1,
            BlockKind::Bottleneck => 4,
        }
    }

    /// Builds one block taking `in_channels` to `planes * expansion` channels.
    pub fn init<B: Backend>(
        self,
        in_channels: usize,
        planes: usize,
        stride: usize,
        zero_init_last_norm: bool,
        device: &B::Device,
    ) -> ResidualBlock<B> {
        let out_channels = planes * self.expansion();
        let shortcut = (stride != 1 || in_channels != out_channels).then(|| Projection {
            conv: conv([in_channels, out_channels], 1, stride, device),
            norm: batch_norm(out_channels, false, device),
        });
        let zero = zero_init_last_norm;
        match self {
            BlockKind::Basic => ResidualBlock::Basic(BasicBlock {
                conv1: conv([in_channels, planes], 3, stride, device),
                norm1: batch_norm(planes, false, device),
                conv2: conv([planes, planes], 3, 1, device),
                norm2: batch_norm(planes, zero, device),
                shortcut,
            }),
            BlockKind::Bottleneck => ResidualBlock::Bottleneck(Bottleneck {
                conv1: conv([in_channels, planes], 1, 1, device),
                norm1: batch_norm(planes, false, device),
                conv2: conv([planes, planes], 3, stride, device),
                norm2: batch_norm(planes, false, device),
                conv3: conv([planes, out_channels], 1, 1, device),
                norm3: batch_norm(out_channels, zero, device),
                shortcut,
            }),
        }
    }
}

/// 1×1 convolution and BatchNorm that match the identity path to a block's output shape.
#[derive(Module, Debug)]
pub struct Projection<B: Backend> {
    /// 1×1 convolution carrying the block's stride.
    pub conv: Conv2d<B>,
    /// BatchNorm after the projection.
    pub norm: BatchNorm<B>,
}

/// conv3×3 → BN → ReLU → conv3×3 → BN, plus the shortcut, then ReLU.
#[derive(Module, Debug)]
pub struct BasicBlock<B: Backend> {
    /// First 3×3 convolution (carries the stride).
    pub conv1: Conv2d<B>,
    /// BatchNorm after `conv1`.
    pub norm1: BatchNorm<B>,
    /// Second 3×3 convolution.
    pub conv2: Conv2d<B>,
    /// BatchNorm after `conv2` (the one zero-initialized on request).
    pub norm2: BatchNorm<B>,
    /// Projection shortcut when the shape changes; identity otherwise.
    pub shortcut: Option<Projection<B>>,
}

/// conv1×1 → BN → ReLU → conv3×3 (stride) → BN → ReLU → conv1×1 → BN, plus the shortcut, then ReLU.
#[derive(Module, Debug)]
pub struct Bottleneck<B: Backend> {
    /// 1×1 reduction.
    pub conv1: Conv2d<B>,
    /// BatchNorm after `conv1`.
    pub norm1: BatchNorm<B>,
    /// 3×3 convolution (carries the stride).
    pub conv2: Conv2d<B>,
    /// BatchNorm after `conv2`.
    pub norm2: BatchNorm<B>,
    /// 1×1 expansion to 4 × planes.
    pub conv3: Conv2d<B>,
    /// BatchNorm after `conv3` (the one zero-initialized on request).
    pub norm3: BatchNorm<B>,
    /// Projection shortcut when the shape changes; identity otherwise.
    pub shortcut: Option<Projection<B>>,
}

/// One residual block of either kind.
// Blocks live in a `Vec` and hold handles, not weights: the size gap between variants is moot.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum ResidualBlock<B: Backend> {
    /// Basic block.
    Basic(BasicBlock<B>),
    /// Bottleneck block.
    Bottleneck(Bottleneck<B>),
}

impl<B: Backend> Projection<B> {
    fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        self.norm.forward(self.conv.forward(input))
    }
}

/// Adds the (possibly projected) input to the residual branch and applies ReLU.
fn join<B: Backend>(
    residual: Tensor<B, 4>,
    input: Tensor<B, 4>,
    shortcut: &Option<Projection<B>>,
) -> Tensor<B, 4> {
    let identity = match shortcut {
        Some(projection) => projection.forward(input),
        None => input,
    };
    relu(residual + identity)
}

impl<B: Backend> BasicBlock<B> {
    /// `[batch, in, h, w]` → `[batch, planes, h / stride, w / stride]`.
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = relu(self.norm1.forward(self.conv1.forward(input.clone())));
        let x = self.norm2.forward(self.conv2.forward(x));
        join(x, input, &self.shortcut)
    }
}

impl<B: Backend> Bottleneck<B> {
    /// `[batch, in, h, w]` → `[batch, 4 * planes, h / stride, w / stride]`.
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = relu(self.norm1.forward(self.conv1.forward(input.clone())));
        let x = relu(self.norm2.forward(self.conv2.forward(x)));
        let x = self.norm3.forward(self.conv3.forward(x));
        join(x, input, &self.shortcut)
    }
}

impl<B: Backend> ResidualBlock<B> {
    /// Runs whichever block this is.
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            ResidualBlock::Basic(block) => block.forward(input),
            ResidualBlock::Bottleneck(block) => block.forward(input),
        }
    }
}
