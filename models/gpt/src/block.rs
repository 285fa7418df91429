//! A pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x)).

use burn::nn::{Dropout, DropoutConfig, LayerNorm, LayerNormConfig, Linear};
use burn::prelude::*;
use burn::tensor::activation::gelu_approximate;

use crate::attention::CausalSelfAttention;
use crate::init::{linear, INIT_STD};

/// Position-wise feed-forward network: linear, GELU (tanh approximation, as GPT-2), linear.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// `d_model` → `mlp_ratio * d_model` (GPT-2's `c_fc`).
    pub expand: Linear<B>,
    /// Back to `d_model` (GPT-2's `c_proj`).
    pub proj: Linear<B>,
}

/// One decoder block.
#[derive(Module, Debug)]
pub struct TransformerBlock<B: Backend> {
    /// LayerNorm before attention.
    pub norm_attn: LayerNorm<B>,
    /// Causal self-attention.
    pub attn: CausalSelfAttention<B>,
    /// LayerNorm before the MLP.
    pub norm_mlp: LayerNorm<B>,
    /// Feed-forward network.
    pub mlp: Mlp<B>,
    /// Dropout on each residual branch.
    pub dropout: Dropout,
}

/// Sizes a block is built from.
pub(crate) struct BlockShape {
    pub d_model: usize,
    pub n_heads: usize,
    pub d_hidden: usize,
    pub layer_norm_eps: f64,
    pub dropout: f64,
    /// Initialization std of the two projections into the residual stream.
    pub residual_std: f64,
}

impl<B: Backend> TransformerBlock<B> {
    pub(crate) fn new(shape: &BlockShape, device: &B::Device) -> Self {
        let norm = || {
            LayerNormConfig::new(shape.d_model)
                .with_epsilon(shape.layer_norm_eps)
                .init(device)
        };
        Self {
            norm_attn: norm(),
            attn: CausalSelfAttention::new(
                shape.d_model,
                shape.n_heads,
                shape.residual_std,
                device,
            ),
            norm_mlp: norm(),
            mlp: Mlp {
                expand: linear(shape.d_model, shape.d_hidden, INIT_STD, device),
                proj: linear(shape.d_hidden, shape.d_model, shape.residual_std, device),
            },
            dropout: DropoutConfig::new(shape.dropout).init(),
        }
    }

    /// `[batch, seq, d_model]` → `[batch, seq, d_model]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let attended = self.attn.forward(self.norm_attn.forward(x.clone()));
        let x = x + self.dropout.forward(attended);
        let hidden = gelu_approximate(self.mlp.expand.forward(self.norm_mlp.forward(x.clone())));
        x + self.dropout.forward(self.mlp.proj.forward(hidden))
    }
}
