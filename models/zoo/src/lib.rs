//! The zoo's models behind one module type, so that one training loop serves them all: a
//! ResNet or a GPT ([`Net`]), its input ([`Batch`]), the loss of a training batch, the numbers
//! of an evaluation batch, and the step burn-train's `Learner` calls.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use firemesh_gpt::{Gpt, GptConfig, GptError};
use firemesh_resnet::{ResNet, ResNetConfig, ResNetError};

mod name;
pub use name::ModelName;

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

/// The configuration of a zoo model.
#[derive(Debug, Clone)]
pub enum NetConfig {
    ResNet(ResNetConfig),
    Gpt(GptConfig),
}

/// Why a zoo model could not be built or called.
#[derive(Debug, thiserror::Error)]
pub enum ZooError {
    #[error(transparent)]
    ResNet(#[from] ResNetError),
    #[error(transparent)]
    Gpt(#[from] GptError),
    /// A model the simulator has no shape for.
    #[error(transparent)]
    Shape(#[from] firemesh_simulate::SimulateError),
    #[error("a {model} takes {takes}, not {got}")]
    WrongBatch {
        model: &'static str,
        takes: &'static str,
        got: &'static str,
    },
}

impl NetConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Net<B>, ZooError> {
        Ok(match self {
            Self::ResNet(c) => Net::ResNet(c.init(device)?),
            Self::Gpt(c) => Net::Gpt(c.init(device)?),
        })
    }

    pub fn is_gpt(&self) -> bool {
        matches!(self, Self::Gpt(_))
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
    pub fn loss(&self, batch: Batch<B>) -> Result<Tensor<B, 1>, ZooError> {
        match (self, batch) {
            (Net::ResNet(m), Batch::Images { images, labels }) => {
                let logits = m.try_forward(images)?;
                let loss = CrossEntropyLossConfig::new().init(&logits.device());
                Ok(loss.forward(logits, labels))
            }
            (Net::Gpt(m), Batch::Tokens(tokens)) => Ok(m.next_token_loss(tokens)?),
            (_, batch) => Err(self.wrong(&batch)),
        }
    }

    /// The loss and accuracy counts of a batch.
    pub fn evaluate(&self, batch: Batch<B>) -> Result<EvalCounts, ZooError> {
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
            (_, batch) => Err(self.wrong(&batch)),
        }
    }

    fn wrong(&self, batch: &Batch<B>) -> ZooError {
        let kind = |b: &Batch<B>| match b {
            Batch::Images { .. } => "images",
            Batch::Tokens(_) => "token sequences",
        };
        let (model, takes) = match self {
            Net::ResNet(_) => ("ResNet", "images"),
            Net::Gpt(_) => ("GPT", "token sequences"),
        };
        ZooError::WrongBatch {
            model,
            takes,
            got: kind(batch),
        }
    }
}

/// burn-train's step: the loss's gradients. The `Learner` hands no error back, so a batch the
/// model cannot take (see [`Net::loss`]) panics there; its loader must make batches that fit.
impl<B: AutodiffBackend> TrainStep for Net<B> {
    type Input = Batch<B>;
    type Output = ();
    fn step(&self, batch: Batch<B>) -> TrainOutput<()> {
        let loss = self
            .loss(batch)
            .unwrap_or_else(|e| panic!("firemesh-zoo: {e}"));
        TrainOutput::new(self, loss.backward(), ())
    }
}

/// burn-train's validation step: nothing (the peers time training alone).
impl<B: Backend> InferenceStep for Net<B> {
    type Input = Batch<B>;
    type Output = ();
    fn step(&self, _batch: Batch<B>) {}
}
