//! A tiny ResNet memorizes two fixed batches: the training loss falls by at least 90%.

use burn::backend::{Autodiff, Flex};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::Distribution;
use firemesh_resnet::ResNetConfig;

type B = Autodiff<Flex>;

/// Steps allowed; the loss usually gets there in about 14.
const MAX_STEPS: usize = 24;

#[test]
fn tiny_resnet_overfits_two_batches() {
    let device = Default::default();
    B::seed(&device, 7);
    let mut model = ResNetConfig::tiny(4)
        .with_base_width(4)
        .init::<B>(&device)
        .unwrap();
    let batches: Vec<_> = [[0, 1, 2, 3], [1, 2, 3, 0]]
        .into_iter()
        .map(|labels| {
            let images =
                Tensor::<B, 4>::random([4, 3, 16, 16], Distribution::Normal(0.0, 1.0), &device);
            (images, Tensor::<B, 1, Int>::from_ints(labels, &device))
        })
        .collect();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut optim = AdamConfig::new().init();
    let mut losses: Vec<f32> = Vec::new();
    // Mean loss over the last two steps, i.e. over both batches.
    let pair_mean = |l: &[f32]| (l[l.len() - 1] + l[l.len() - 2]) / 2.0;
    for step in 0..MAX_STEPS {
        let (images, labels) = &batches[step % 2];
        let loss = loss_fn.forward(model.forward(images.clone()), labels.clone());
        losses.push(loss.clone().into_scalar());
        if step % 2 == 1 && pair_mean(&losses) <= 0.1 * pair_mean(&losses[..2]) {
            return;
        }
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-2, model, grads);
    }
    panic!("loss did not fall by 90% in {MAX_STEPS} steps: {losses:?}");
}
