//! `GptConfig`: GPT-2 small, a tiny CPU-sized model, validation and `init`.

use burn::config::Config;
use burn::nn::{DropoutConfig, LayerNormConfig};
use burn::prelude::*;

use crate::block::{BlockShape, TransformerBlock};
use crate::error::GptError;
use crate::init::{embedding, INIT_STD};
use crate::model::Gpt;

/// Configuration of a GPT-2-style decoder.
#[derive(Config, Debug)]
pub struct GptConfig {
    /// Number of token ids (50,257 for GPT-2's BPE, 256 for bytes).
    pub vocab_size: usize,
    /// Longest sequence the model accepts (learned position embeddings).
    pub context_length: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Number of transformer blocks.
    pub n_layers: usize,
    /// Attention heads per block; must divide `d_model`.
    pub n_heads: usize,
    /// Hidden width of the MLP as a multiple of `d_model`.
    #[config(default = 4)]
    pub mlp_ratio: usize,
    /// Dropout on embeddings and residual branches (active only on autodiff backends).
    #[config(default = 0.0)]
    pub dropout: f64,
    /// LayerNorm epsilon.
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
}

impl GptConfig {
    /// GPT-2 small: 12 layers, 12 heads, width 768, context 1024, vocabulary 50,257
    /// (124,439,808 parameters with the output head tied to the token embedding).
    pub fn gpt2_small() -> Self {
        Self::new(50_257, 1024, 768, 12, 12)
    }

    /// GPT-2 XL: 1.56 billion parameters (48 layers, 25 heads, width 1600, context 1024).
    pub fn gpt2_xl() -> Self {
        Self::new(50_257, 1024, 1600, 48, 25)
    }

    /// A CPU-sized byte-level model: vocabulary 256, context 16, width 32, 2 layers, 2 heads.
    pub fn tiny() -> Self {
        Self::new(256, 16, 32, 2, 2)
    }

    /// Parameter count computed from the configuration alone.
    pub fn num_params(&self) -> usize {
        let d = self.d_model;
        let hidden = self.mlp_ratio * d;
        let norm = 2 * d;
        let linear = |d_in: usize, d_out: usize| d_in * d_out + d_out;
        let block =
            2 * norm + linear(d, 3 * d) + linear(d, d) + linear(d, hidden) + linear(hidden, d);
        (self.vocab_size + self.context_length) * d + self.n_layers * block + norm
    }

    /// Checks that every field can be built from.
    pub fn validate(&self) -> Result<(), GptError> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("context_length", self.context_length),
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("mlp_ratio", self.mlp_ratio),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(invalid(field, "must be at least 1".into()));
            }
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            let reason = format!("({}) must divide d_model ({})", self.n_heads, self.d_model);
            return Err(invalid("n_heads", reason));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(invalid(
                "dropout",
                format!("must be in [0, 1), got {}", self.dropout),
            ));
        }
        if self.layer_norm_eps.is_nan() || self.layer_norm_eps <= 0.0 {
            return Err(invalid(
                "layer_norm_eps",
                format!("must be positive, got {}", self.layer_norm_eps),
            ));
        }
        Ok(())
    }

    /// Builds the model on `device` (parameters are initialized lazily, on first use).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Gpt<B>, GptError> {
        self.validate()?;
        let shape = BlockShape {
            d_model: self.d_model,
            n_heads: self.n_heads,
            d_hidden: self.mlp_ratio * self.d_model,
            layer_norm_eps: self.layer_norm_eps,
            dropout: self.dropout,
            residual_std: INIT_STD / (2.0 * self.n_layers as f64).sqrt(),
        };
        Ok(Gpt {
            token_embedding: embedding(self.vocab_size, self.d_model, device),
            position_embedding: embedding(self.context_length, self.d_model, device),
            dropout: DropoutConfig::new(self.dropout).init(),
            blocks: (0..self.n_layers)
                .map(|_| TransformerBlock::new(&shape, device))
                .collect(),
            final_norm: LayerNormConfig::new(self.d_model)
                .with_epsilon(self.layer_norm_eps)
                .init(device),
            vocab_size: self.vocab_size,
            context_length: self.context_length,
        })
    }
}

fn invalid(field: &'static str, reason: String) -> GptError {
    GptError::InvalidConfig { field, reason }
}
