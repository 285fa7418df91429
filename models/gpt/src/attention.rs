//! Causal multi-head self-attention with a fused query/key/value projection.

use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation::softmax;

use crate::init::linear;

/// Multi-head attention where position `i` attends to positions `0..=i` only.
#[derive(Module, Debug)]
pub struct CausalSelfAttention<B: Backend> {
    /// Projects `d_model` to queries, keys and values, concatenated (GPT-2's `c_attn`).
    pub qkv: Linear<B>,
    /// Output projection back into the residual stream (GPT-2's `c_proj`).
    pub proj: Linear<B>,
    /// Number of heads; `d_model` is a multiple of it.
    pub n_heads: usize,
}

impl<B: Backend> CausalSelfAttention<B> {
    /// Builds the layer; `proj_std` is the output projection's initialization std.
    pub fn new(d_model: usize, n_heads: usize, proj_std: f64, device: &B::Device) -> Self {
        Self {
            qkv: linear(d_model, 3 * d_model, crate::init::INIT_STD, device),
            proj: linear(d_model, d_model, proj_std, device),
            n_heads,
        }
    }

    /// `[batch, seq, d_model]` → `[batch, seq, d_model]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, seq, d_model] = x.dims();
        let head_dim = d_model / self.n_heads;
        let qkv = self.qkv.forward(x);
        // [batch, seq, d_model] → [batch, heads, seq, head_dim]
        let heads = |part: usize| {
            qkv.clone()
                .narrow(2, part * d_model, d_model)
                .reshape([batch, seq, self.n_heads, head_dim])
                .swap_dims(1, 2)
        };
        let (q, k, v) = (heads(0), heads(1), heads(2));
        let scores = q.matmul(k.transpose()).div_scalar((head_dim as f64).sqrt());
        // `tril_mask` is true strictly above the diagonal: the future positions.
        let future = Tensor::<B, 2, Bool>::tril_mask([seq, seq], 0, &scores.device())
            .unsqueeze::<4>()
            .expand([batch, self.n_heads, seq, seq]);
        let weights = softmax(scores.mask_fill(future, f32::NEG_INFINITY), 3);
        let out = weights
            .matmul(v)
            .swap_dims(1, 2)
            .reshape([batch, seq, d_model]);
        self.proj.forward(out)
    }
}
