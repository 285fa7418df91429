//! Every standard depth runs forward and backward on Flex at a small width and input size.

use burn::backend::{Autodiff, Flex};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn::tensor::Distribution;
use firemesh_resnet::{ResNetConfig, StemKind};

type B = Autodiff<Flex>;

fn assert_grad_nonzero(grad: Option<Tensor<Flex, 4>>, what: &str) {
    let grad = grad.unwrap_or_else(|| panic!("no gradient for {what}"));
    let norm = grad.abs().sum().into_scalar();
    assert!(norm.is_finite() && norm > 0.0, "{what}: |grad| = {norm}");
}

fn run(config: ResNetConfig, side: usize) {
    let device = Default::default();
    let model = config.init::<B>(&device).unwrap();
    let images =
        Tensor::<B, 4>::random([2, 3, side, side], Distribution::Normal(0.0, 1.0), &device);
    let labels = Tensor::<B, 1, Int>::from_ints([1, 3], &device);
    let logits = model.forward(images);
    assert_eq!(logits.dims(), [2, config.num_classes]);
    let loss = CrossEntropyLossConfig::new()
        .init(&device)
        .forward(logits, labels);
    let grads = loss.backward();
    assert_grad_nonzero(model.stem.conv.weight.grad(&grads), "stem conv");
    let classifier = model
        .classifier
        .weight
        .grad(&grads)
        .map(|g| g.unsqueeze::<4>());
    assert_grad_nonzero(classifier, "classifier");
}

#[test]
fn basic_block_depths_forward_and_backward() {
    for depth in [18, 34] {
        run(
            ResNetConfig::from_depth(depth, 5)
                .unwrap()
                .with_base_width(4),
            32,
        );
    }
}

#[test]
fn bottleneck_depths_forward_and_backward() {
    for depth in [50, 101, 152] {
        run(
            ResNetConfig::from_depth(depth, 5)
                .unwrap()
                .with_base_width(2),
            32,
        );
    }
}

#[test]
fn cifar_stem_and_tiny_config_forward_and_backward() {
    run(
        ResNetConfig::resnet18(4)
            .with_stem(StemKind::Cifar)
            .with_base_width(4),
        16,
    );
    run(ResNetConfig::tiny(4).with_zero_init_residual(true), 16);
}
