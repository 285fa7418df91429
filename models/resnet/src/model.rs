//! The ResNet module: stem, residual stages, global average pooling, linear classifier.

use burn::nn::Linear;
use burn::prelude::*;

use crate::block::ResidualBlock;
use crate::error::ResNetError;
use crate::stem::Stem;

/// A sequence of residual blocks at one resolution.
#[derive(Module, Debug)]
pub struct Stage<B: Backend> {
    /// The blocks, the first of which may downsample.
    pub blocks: Vec<ResidualBlock<B>>,
}

/// A ResNet image classifier. Build it with [`ResNetConfig::init`](crate::ResNetConfig::init).
#[derive(Module, Debug)]
pub struct ResNet<B: Backend> {
    /// Stem before the residual stages.
    pub stem: Stem<B>,
    /// Residual stages.
    pub stages: Vec<Stage<B>>,
    /// Linear classifier on globally pooled features.
    pub classifier: Linear<B>,
    /// Channels of the expected input.
    pub in_channels: usize,
}

impl<B: Backend> ResNet<B> {
    /// Logits `[batch, num_classes]` for images `[batch, in_channels, height, width]`.
    ///
    /// The shape is not checked; use [`ResNet::try_forward`] for inputs you do not control.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let mut x = self.stem.forward(images);
        for stage in &self.stages {
            for block in &stage.blocks {
                x = block.forward(x);
            }
        }
        let [batch, channels, _, _] = x.dims();
        let pooled = x.mean_dim(3).mean_dim(2).reshape([batch, channels]);
        self.classifier.forward(pooled)
    }

    /// [`ResNet::forward`] after checking the input shape.
    pub fn try_forward(&self, images: Tensor<B, 4>) -> Result<Tensor<B, 2>, ResNetError> {
        let dims = images.dims();
        if dims[1] != self.in_channels || dims.contains(&0) {
            return Err(ResNetError::InputShape {
                expected_channels: self.in_channels,
                got: dims,
            });
        }
        Ok(self.forward(images))
    }
}
