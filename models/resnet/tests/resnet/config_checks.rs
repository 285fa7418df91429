//! Bad configurations and inputs are errors, not panics; initialization follows the paper.

use burn::backend::Flex;
use burn::prelude::*;
use firemesh_resnet::{ResNetConfig, ResNetError, ResidualBlock};

type B = Flex;

#[test]
fn unsupported_depth_is_an_error_naming_it() {
    let err = ResNetConfig::from_depth(19, 10).unwrap_err();
    assert!(matches!(err, ResNetError::UnsupportedDepth(19)));
    assert!(err.to_string().contains("19"));
}

#[test]
fn invalid_fields_are_errors_naming_the_field() {
    let device = Default::default();
    let cases = [
        (ResNetConfig::tiny(0), "num_classes"),
        (ResNetConfig::tiny(10).with_base_width(0), "base_width"),
        (ResNetConfig::tiny(10).with_in_channels(0), "in_channels"),
        (
            ResNetConfig {
                blocks_per_stage: vec![],
                ..ResNetConfig::tiny(10)
            },
            "blocks_per_stage",
        ),
        (
            ResNetConfig {
                blocks_per_stage: vec![1, 0],
                ..ResNetConfig::tiny(10)
            },
            "blocks_per_stage",
        ),
    ];
    for (config, field) in cases {
        let err = config.init::<B>(&device).unwrap_err();
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn wrong_input_channels_is_an_error() {
    let device = Default::default();
    let model = ResNetConfig::tiny(10).init::<B>(&device).unwrap();
    let err = model
        .try_forward(Tensor::zeros([2, 1, 16, 16], &device))
        .unwrap_err();
    assert!(matches!(
        err,
        ResNetError::InputShape {
            expected_channels: 3,
            got: [2, 1, 16, 16]
        }
    ));
    let logits = model
        .try_forward(Tensor::zeros([2, 3, 16, 16], &device))
        .unwrap();
    assert_eq!(logits.dims(), [2, 10]);
}

#[test]
fn convolutions_are_he_normal_with_fan_out() {
    let device = Default::default();
    let model = ResNetConfig::resnet18(10).init::<B>(&device).unwrap();
    let ResidualBlock::Basic(block) = &model.stages[3].blocks[1] else {
        panic!("basic block expected")
    };
    // 512 × 512 × 3 × 3 weights; fan-out = 512 · 9.
    let weights: Vec<f32> = block.conv2.weight.val().into_data().to_vec().unwrap();
    let n = weights.len() as f64;
    let mean = weights.iter().map(|&w| w as f64).sum::<f64>() / n;
    let std = (weights
        .iter()
        .map(|&w| (w as f64 - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let expected = (2.0_f64 / (512.0 * 9.0)).sqrt();
    assert!(mean.abs() < 1e-3, "mean {mean}");
    assert!(
        (std / expected - 1.0).abs() < 0.01,
        "std {std}, expected {expected}"
    );
}

#[test]
fn zero_init_residual_zeroes_only_each_blocks_last_norm_scale() {
    let device = Default::default();
    let model = ResNetConfig::resnet50(10)
        .with_base_width(4)
        .with_zero_init_residual(true);
    let model = model.init::<B>(&device).unwrap();
    for block in model.stages.iter().flat_map(|s| &s.blocks) {
        let ResidualBlock::Bottleneck(block) = block else {
            panic!("bottleneck expected")
        };
        assert_eq!(block.norm3.gamma.val().abs().max().into_scalar(), 0.0);
        assert_eq!(block.norm2.gamma.val().min().into_scalar(), 1.0);
    }
}
