//! Forward and backward on Flex for GPT-2 small (short sequence) and the tiny config;
//! attention is causal; bad inputs are errors.

use burn::backend::{Autodiff, Flex};
use burn::prelude::*;
use burn::tensor::{Device, Distribution};
use firemesh_gpt::{GptConfig, GptError};

type B = Autodiff<Flex>;

fn random_tokens(batch: usize, seq: usize, vocab: usize, device: &Device<B>) -> Tensor<B, 2, Int> {
    Tensor::<B, 2, Int>::random(
        [batch, seq],
        Distribution::Uniform(0.0, vocab as f64),
        device,
    )
}

fn forward_backward(config: GptConfig, batch: usize, seq: usize) {
    let device = Default::default();
    // Seeded, for a draw that does not depend on the run; Flex's generator is one for the
    // process, so a test seeding it at once may still change the draw.
    B::seed(&device, 11);
    let model = config.init::<B>(&device).unwrap();
    let tokens = random_tokens(batch, seq, config.vocab_size, &device);
    let logits = model
        .try_forward(tokens.clone().narrow(1, 0, seq - 1))
        .unwrap();
    assert_eq!(logits.dims(), [batch, seq - 1, config.vocab_size]);
    let loss = model.next_token_loss(tokens).unwrap();
    let value = loss.clone().into_scalar();
    // An untrained model predicts roughly uniformly: loss ≈ ln(vocab). Unseeded draws of
    // GPT-2 small's weights and tokens gave 6.10 to 6.47 in 8 runs, and once 6.75, against
    // ln(50257) = 6.24.
    let uniform = (config.vocab_size as f32).ln();
    assert!(
        (value - uniform).abs() < 1.0,
        "loss {value}, ln(vocab) {uniform}"
    );
    let grads = loss.backward();
    for (name, grad) in [
        ("token embedding", model.token_embedding.weight.grad(&grads)),
        (
            "position embedding",
            model.position_embedding.weight.grad(&grads),
        ),
        ("first qkv", model.blocks[0].attn.qkv.weight.grad(&grads)),
    ] {
        let norm = grad
            .unwrap_or_else(|| panic!("no gradient for {name}"))
            .abs()
            .sum()
            .into_scalar();
        assert!(norm.is_finite() && norm > 0.0, "{name}: |grad| = {norm}");
    }
}

/// GPT-2 small's width, heads and MLP on one layer with a small vocabulary: materializing all
/// 124M parameters would take about a minute here (random init runs at opt-level 0).
#[test]
fn gpt2_small_block_forward_and_backward_on_a_short_sequence() {
    let config = GptConfig {
        n_layers: 1,
        vocab_size: 512,
        context_length: 32,
        ..GptConfig::gpt2_small()
    };
    forward_backward(config, 2, 9);
}

#[test]
fn tiny_forward_and_backward_at_full_context() {
    forward_backward(GptConfig::tiny(), 3, 17);
}

#[test]
fn changing_a_token_only_changes_logits_at_and_after_it() {
    let device = Default::default();
    let model = GptConfig::tiny().init::<Flex>(&device).unwrap();
    let a: Vec<i64> = (0..16).map(|i| (i * 7) % 256).collect();
    let mut b = a.clone();
    b[9] = 200;
    let logits = |ids: Vec<i64>| {
        let tokens = Tensor::<Flex, 2, Int>::from_data(TensorData::new(ids, [1, 16]), &device);
        model.forward(tokens).into_data().to_vec::<f32>().unwrap()
    };
    let (la, lb) = (logits(a), logits(b));
    let row = |l: &[f32], pos: usize| l[pos * 256..(pos + 1) * 256].to_vec();
    for pos in 0..9 {
        assert_eq!(
            row(&la, pos),
            row(&lb, pos),
            "position {pos} saw the future"
        );
    }
    for pos in 9..16 {
        assert_ne!(
            row(&la, pos),
            row(&lb, pos),
            "position {pos} ignored the past"
        );
    }
}

#[test]
fn bad_lengths_and_configs_are_errors() {
    let device = Default::default();
    let model = GptConfig::tiny().init::<Flex>(&device).unwrap();
    let tokens = |seq| Tensor::<Flex, 2, Int>::zeros([1, seq], &device);
    let too_long = model.try_forward(tokens(17)).unwrap_err();
    assert!(matches!(
        too_long,
        GptError::SequenceLength {
            len: 17,
            min: 1,
            max: 16
        }
    ));
    assert!(model.next_token_loss(tokens(17)).is_ok());
    let too_short = model.next_token_loss(tokens(1)).unwrap_err();
    assert!(matches!(
        too_short,
        GptError::SequenceLength {
            len: 1,
            min: 2,
            max: 17
        }
    ));

    let err = GptConfig {
        n_heads: 3,
        ..GptConfig::tiny()
    }
    .init::<Flex>(&device)
    .unwrap_err();
    assert!(err.to_string().contains("n_heads"), "{err}");
    let err = GptConfig::tiny().with_dropout(1.5).validate().unwrap_err();
    assert!(err.to_string().contains("dropout"), "{err}");
}
