//! The zoo's models behind one module type, so that one training loop serves them all: the
//! loss of a training batch and the numbers of an evaluation batch.

use super::config::ModelName;
use crate::{Error, Result};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use firemesh_gpt::{Gpt, GptConfig};
use firemesh_resnet::{ResNet, ResNetConfig, StemKind};

/// A ResNet or a GPT. (One per run: the size difference of the variants does not matter.)
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Net<B: Backend> {
    ResNet(ResNet<B>),
    Gpt(Gpt<B>),
}

/// One step's input: images with their labels, or token sequences (inputs and targets are
/// the same sequence shifted by one).
#[derive(Debug, Clone)]
pub enum Batch<B: Backend> {
    Images {
        images: Tensor<B, 4>,
        labels: Tensor<B, 1, Int>,
    },
    Tokens(Tensor<B, 2, Int>),
}

/// The configuration of a zoo model, sized for its data.
#[derive(Debug, Clone)]
pub enum NetConfig {
    ResNet(ResNetConfig),
    Gpt(GptConfig),
}

impl NetConfig {
    /// `model` for `classes` classes of `image_size`² images, or a vocabulary of `vocab` tokens.
    pub fn new(model: ModelName, classes: usize, image_size: usize, vocab: usize) -> Result<Self> {
        let stem = StemKind::for_image_size(image_size);
        let depth = |d| -> Result<NetConfig> {
            Ok(Self::ResNet(
                ResNetConfig::from_depth(d, classes)?.with_stem(stem),
            ))
        };
        match model {
            ModelName::ResnetTiny => Ok(Self::ResNet(ResNetConfig::tiny(classes))),
            ModelName::Resnet18 => depth(18),
            ModelName::Resnet34 => depth(34),
            ModelName::Resnet50 => depth(50),
            ModelName::Resnet101 => depth(101),
            ModelName::Resnet152 => depth(152),
            ModelName::GptTiny => Ok(Self::Gpt(GptConfig {
                vocab_size: vocab,
                ..GptConfig::tiny()
            })),
            ModelName::Gpt2Small => Ok(Self::Gpt(GptConfig {
                vocab_size: vocab,
                ..GptConfig::gpt2_small()
            })),
        }
    }

    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Net<B>> {
        Ok(match self {
            Self::ResNet(c) => Net::ResNet(c.init(device)?),
            Self::Gpt(c) => Net::Gpt(c.init(device)?),
        })
    }

    /// A description that differs whenever the parameters' shapes do: checkpoints record it.
    pub fn fingerprint(&self) -> String {
        match self {
            Self::ResNet(c) => format!("{c}"),
            Self::Gpt(c) => format!("{c}"),
        }
    }
}

/// What an evaluation batch gave: the summed loss over its predictions, how many
/// predictions there were and how many were right (images only).
#[derive(Debug, Clone, Copy, Default)]
pub struct EvalCounts {
    pub loss_sum: f64,
    pub predictions: usize,
    pub correct: usize,
}

impl<B: Backend> Net<B> {
    /// The mean loss of a batch.
    pub fn loss(&self, batch: Batch<B>) -> Result<Tensor<B, 1>> {
        match (self, batch) {
            (Net::ResNet(m), Batch::Images { images, labels }) => {
                let logits = m.try_forward(images)?;
                let loss = CrossEntropyLossConfig::new().init(&logits.device());
                Ok(loss.forward(logits, labels))
            }
            (Net::Gpt(m), Batch::Tokens(tokens)) => Ok(m.next_token_loss(tokens)?),
            _ => Err(Error::Invalid("the batch does not suit the model".into())),
        }
    }

    /// The loss and accuracy counts of a batch.
    pub fn evaluate(&self, batch: Batch<B>) -> Result<EvalCounts> {
        match (self, batch) {
            (Net::ResNet(m), Batch::Images { images, labels }) => {
                let n = labels.dims()[0];
                let logits = m.try_forward(images)?;
                let loss = CrossEntropyLossConfig::new().init(&logits.device());
                let mean = loss.forward(logits.clone(), labels.clone());
                let correct = logits.argmax(1).squeeze_dim::<1>(1).equal(labels);
                Ok(EvalCounts {
                    loss_sum: mean.into_scalar().elem::<f64>() * n as f64,
                    predictions: n,
                    correct: correct.int().sum().into_scalar().elem::<i64>() as usize,
                })
            }
            (Net::Gpt(m), Batch::Tokens(tokens)) => {
                let [n, seq] = tokens.dims();
                let mean = m.next_token_loss(tokens)?;
                let predictions = n * (seq - 1);
                Ok(EvalCounts {
                    loss_sum: mean.into_scalar().elem::<f64>() * predictions as f64,
                    predictions,
                    correct: 0,
                })
            }
            _ => Err(Error::Invalid("the batch does not suit the model".into())),
        }
    }
}
