//! GPT-2 initialization: weights N(0, 0.02), biases zero, residual projections scaled down.

use burn::module::Initializer;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::prelude::*;

/// Standard deviation of GPT-2's weight initialization.
pub(crate) const INIT_STD: f64 = 0.02;

fn normal(std: f64) -> Initializer {
    Initializer::Normal { mean: 0.0, std }
}

/// A linear layer with N(0, `std`) weights and a zero bias.
pub(crate) fn linear<B: Backend>(
    d_in: usize,
    d_out: usize,
    std: f64,
    device: &B::Device,
) -> Linear<B> {
    let mut layer = LinearConfig::new(d_in, d_out)
        .with_initializer(normal(std))
        .init(device);
    layer.bias = Some(Initializer::Zeros.init([d_out], device));
    layer
}

/// An embedding table with N(0, 0.02) entries.
pub(crate) fn embedding<B: Backend>(
    rows: usize,
    d_model: usize,
    device: &B::Device,
) -> Embedding<B> {
    EmbeddingConfig::new(rows, d_model)
        .with_initializer(normal(INIT_STD))
        .init(device)
}
