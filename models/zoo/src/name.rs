//! The zoo's models by name, with the facts that go with each: how it is built, how long its
//! sequences may be, what its throughput counts.

use crate::{NetConfig, ZooError};
use firemesh_gpt::GptConfig;
use firemesh_resnet::{ResNetConfig, StemKind};
use firemesh_simulate::{SimulateError, Workload};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The reference models, by the name the command line gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ModelName {
    /// A 3-stage, 8-wide CIFAR ResNet that trains in seconds on a CPU.
    ResnetTiny,
    Resnet18,
    Resnet34,
    Resnet50,
    Resnet101,
    Resnet152,
    /// 2 layers, 2 heads, width 32, context 16.
    GptTiny,
    /// GPT-2 small: 12 layers, 12 heads, width 768, context 1024.
    Gpt2Small,
    /// GPT-2 XL (1.5 billion parameters): 48 layers, 25 heads, width 1600, context 1024. Its
    /// f32 parameters, gradients and AdamW state take 25 GB: for GPUs, and ZeRO-3's memory
    /// plans (`firemesh simulate`, `firemesh train --dry-run`).
    Gpt2Xl,
}

impl ModelName {
    pub fn is_gpt(self) -> bool {
        matches!(self, Self::GptTiny | Self::Gpt2Small | Self::Gpt2Xl)
    }

    /// The depth of a standard ResNet (18 to 152); `None` for the tiny ResNet and the GPTs.
    pub fn resnet_depth(self) -> Option<usize> {
        match self {
            Self::Resnet18 => Some(18),
            Self::Resnet34 => Some(34),
            Self::Resnet50 => Some(50),
            Self::Resnet101 => Some(101),
            Self::Resnet152 => Some(152),
            Self::ResnetTiny | Self::GptTiny | Self::Gpt2Small | Self::Gpt2Xl => None,
        }
    }

    /// The classes of the dataset the model is published on: ImageNet's 1,000 for the standard
    /// ResNets, CIFAR-10's 10 for the tiny one; `None` for a GPT (its vocabulary is its own,
    /// [`ModelName::net`]).
    pub fn published_classes(self) -> Option<usize> {
        match (self, self.resnet_depth()) {
            (_, Some(_)) => Some(1000),
            (Self::ResnetTiny, _) => Some(10),
            _ => None,
        }
    }

    /// The model for `classes` classes of `image_size`² images, or a vocabulary of `vocab`
    /// tokens (ResNets take the ImageNet stem from 128 px, the CIFAR stem below).
    pub fn config(
        self,
        classes: usize,
        image_size: usize,
        vocab: usize,
    ) -> Result<NetConfig, ZooError> {
        Ok(match self.net(classes, image_size)? {
            NetConfig::Gpt(c) => NetConfig::Gpt(GptConfig {
                vocab_size: vocab,
                ..c
            }),
            resnet => resnet,
        })
    }

    /// The model as published: a GPT with its own vocabulary (bytes for the tiny one, GPT-2's
    /// 50,257 tokens for GPT-2 small and XL).
    pub fn net(self, classes: usize, image_size: usize) -> Result<NetConfig, ZooError> {
        let stem = StemKind::for_image_size(image_size);
        Ok(match (self, self.resnet_depth()) {
            (_, Some(depth)) => {
                NetConfig::ResNet(ResNetConfig::from_depth(depth, classes)?.with_stem(stem))
            }
            (Self::ResnetTiny, _) => NetConfig::ResNet(ResNetConfig::tiny(classes)),
            (Self::GptTiny, _) => NetConfig::Gpt(GptConfig::tiny()),
            (Self::Gpt2Xl, _) => NetConfig::Gpt(GptConfig::gpt2_xl()),
            _ => NetConfig::Gpt(GptConfig::gpt2_small()),
        })
    }

    /// The model's layer shapes for the scaling simulator, on `image_size`² images of `classes`
    /// classes (a ResNet) or over its full context (a GPT, with its own vocabulary), and the
    /// samples of one step on one GPU in the published runs it is compared with: 256 images, or
    /// 8 sequences.
    pub fn workload(
        self,
        classes: usize,
        image_size: usize,
    ) -> Result<(Workload, usize), ZooError> {
        Ok(
            match (self.net(classes, image_size)?, self.resnet_depth()) {
                (NetConfig::ResNet(_), Some(depth)) => {
                    (firemesh_simulate::resnet(depth, image_size, classes)?, 256)
                }
                (NetConfig::ResNet(_), None) => {
                    return Err(SimulateError::Invalid(format!(
                        "{self} has no published shape here; use resnet18 .. resnet152 or a GPT"
                    ))
                    .into())
                }
                (NetConfig::Gpt(c), _) => (
                    firemesh_simulate::gpt(c.n_layers, c.d_model, c.vocab_size, c.context_length)?,
                    8 * c.context_length,
                ),
            },
        )
    }

    /// The name as the command line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ResnetTiny => "resnet-tiny",
            Self::Resnet18 => "resnet18",
            Self::Resnet34 => "resnet34",
            Self::Resnet50 => "resnet50",
            Self::Resnet101 => "resnet101",
            Self::Resnet152 => "resnet152",
            Self::GptTiny => "gpt-tiny",
            Self::Gpt2Small => "gpt2-small",
            Self::Gpt2Xl => "gpt2-xl",
        }
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl NetConfig {
    /// The longest sequence a GPT takes; `None` for a ResNet.
    pub fn context_length(&self) -> Option<usize> {
        match self {
            Self::ResNet(_) => None,
            Self::Gpt(c) => Some(c.context_length),
        }
    }

    /// What its throughput counts.
    pub fn unit(&self) -> &'static str {
        match self {
            Self::ResNet(_) => "images/s",
            Self::Gpt(_) => "tokens/s",
        }
    }
}
