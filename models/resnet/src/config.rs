//! `ResNetConfig`: the standard depths, a tiny CPU-sized variant, validation and `init`.

use burn::config::Config;
use burn::nn::LinearConfig;
use burn::prelude::*;

use crate::block::BlockKind;
use crate::error::ResNetError;
use crate::model::{ResNet, Stage};
use crate::stem::StemKind;

/// Configuration of a ResNet. Stage `i` has `base_width * 2^i` planes; every stage but the
/// first halves the spatial size in its first block.
#[derive(Config, Debug)]
pub struct ResNetConfig {
    /// Basic blocks or bottlenecks.
    pub block: BlockKind,
    /// Number of blocks in each stage (ResNet-50: `[3, 4, 6, 3]`).
    pub blocks_per_stage: Vec<usize>,
    /// Size of the classifier output.
    pub num_classes: usize,
    /// ImageNet stem (7×7 conv + max-pool) or CIFAR stem (3×3 conv).
    #[config(default = "StemKind::ImageNet")]
    pub stem: StemKind,
    /// Channels of the stem and planes of the first stage (64 in the paper).
    #[config(default = 64)]
    pub base_width: usize,
    /// Channels of the input images.
    #[config(default = 3)]
    pub in_channels: usize,
    /// Start each block's last BatchNorm scale at zero, so every block starts as the identity.
    #[config(default = false)]
    pub zero_init_residual: bool,
}

impl ResNetConfig {
    /// ResNet-18: basic blocks `[2, 2, 2, 2]`.
    pub fn resnet18(num_classes: usize) -> Self {
        Self::new(BlockKind::Basic, vec![2, 2, 2, 2], num_classes)
    }

    /// ResNet-34: basic blocks `[3, 4, 6, 3]`.
    pub fn resnet34(num_classes: usize) -> Self {
        Self::new(BlockKind::Basic, vec![3, 4, 6, 3], num_classes)
    }

    /// ResNet-50: bottlenecks `[3, 4, 6, 3]`.
    pub fn resnet50(num_classes: usize) -> Self {
        Self::new(BlockKind::Bottleneck, vec![3, 4, 6, 3], num_classes)
    }

    /// ResNet-101: bottlenecks `[3, 4, 23, 3]`.
    pub fn resnet101(num_classes: usize) -> Self {
        Self::new(BlockKind::Bottleneck, vec![3, 4, 23, 3], num_classes)
    }

    /// ResNet-152: bottlenecks `[3, 8, 36, 3]`.
    pub fn resnet152(num_classes: usize) -> Self {
        Self::new(BlockKind::Bottleneck, vec![3, 8, 36, 3], num_classes)
    }

    /// The standard configuration for `depth` ∈ {18, 34, 50, 101, 152}.
    pub fn from_depth(depth: usize, num_classes: usize) -> Result<Self, ResNetError> {
        match depth {
            18 => Ok(Self::resnet18(num_classes)),
            34 => Ok(Self::resnet34(num_classes)),
            50 => Ok(Self::resnet50(num_classes)),
            101 => Ok(Self::resnet101(num_classes)),
            152 => Ok(Self::resnet152(num_classes)),
            other => Err(ResNetError::UnsupportedDepth(other)),
        }
    }

    /// A small CPU-sized ResNet for 16×16 or 32×32 inputs: CIFAR stem, three stages of one
    /// basic block, widths 8/16/32.
    pub fn tiny(num_classes: usize) -> Self {
        Self::new(BlockKind::Basic, vec![1, 1, 1], num_classes)
            .with_stem(StemKind::Cifar)
            .with_base_width(8)
    }

    /// Channels entering the classifier.
    pub fn feature_channels(&self) -> usize {
        let last_stage = self.blocks_per_stage.len().saturating_sub(1);
        (self.base_width << last_stage) * self.block.expansion()
    }

    /// Checks that every field can be built from.
    pub fn validate(&self) -> Result<(), ResNetError> {
        let positive = [
            ("num_classes", self.num_classes),
            ("base_width", self.base_width),
            ("in_channels", self.in_channels),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(invalid(field, "must be at least 1"));
            }
        }
        if self.blocks_per_stage.is_empty() || self.blocks_per_stage.contains(&0) {
            return Err(invalid(
                "blocks_per_stage",
                format!(
                    "must list at least one stage, each with at least one block, got {:?}",
                    self.blocks_per_stage
                ),
            ));
        }
        if self.blocks_per_stage.len() > 8 {
            return Err(invalid("blocks_per_stage", "must have at most 8 stages"));
        }
        Ok(())
    }

    /// Builds the model on `device` (parameters are initialized lazily, on first use).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<ResNet<B>, ResNetError> {
        self.validate()?;
        let stem = self.stem.init(self.in_channels, self.base_width, device);
        let mut channels = self.base_width;
        let mut stages = Vec::with_capacity(self.blocks_per_stage.len());
        for (index, &blocks) in self.blocks_per_stage.iter().enumerate() {
            let planes = self.base_width << index;
            let first_stride = if index == 0 { 1 } else { 2 };
            let blocks = (0..blocks)
                .map(|i| {
                    let stride = if i == 0 { first_stride } else { 1 };
                    let block =
                        self.block
                            .init(channels, planes, stride, self.zero_init_residual, device);
                    channels = planes * self.block.expansion();
                    block
                })
                .collect();
            stages.push(Stage { blocks });
        }
        let classifier = LinearConfig::new(channels, self.num_classes).init(device);
        Ok(ResNet {
            stem,
            stages,
            classifier,
            in_channels: self.in_channels,
        })
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ResNetError {
    ResNetError::InvalidConfig {
        field,
        reason: reason.into(),
    }
}
