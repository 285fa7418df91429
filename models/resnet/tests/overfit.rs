//! A tiny ResNet memorizes two fixed batches: the training loss falls by at least 90%.

use burn::backend::{Autodiff, NdArray};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::Distribution;
use firemesh_resnet::ResNetConfig;

type B = Autodiff<NdArray<f32>>;

#[test]
fn tiny_resnet_overfits_two_batches() {
    let device = Default::default();
    B::seed(&device, 7);
    let mut model = ResNetConfig::tiny(4).init::<B>(&device).unwrap();
    let batches: Vec<_> = [[0, 1, 2, 3, 0, 1, 2, 3], [3, 2, 1, 0, 1, 0, 3, 2]]
        .into_iter()
        .map(|labels| {
            let images = Tensor::<B, 4>::random([8, 3, 16, 16], Distribution::Normal(0.0, 1.0), &device);
            (images, Tensor::<B, 1, Int>::from_ints(labels, &device))
        })
        .collect();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut optim = AdamConfig::new().init();
    let mut losses = Vec::new();
    for step in 0..6 {
        let (images, labels) = &batches[step % 2];
        let loss = loss_fn.forward(model.forward(images.clone()), labels.clone());
        losses.push(loss.clone().into_scalar());
        eprintln!("step {step} loss {} t {:?}", losses[step], std::time::Instant::now());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(5e-3, model, grads);
    }
    let first = (losses[0] + losses[1]) / 2.0;
    let last = (losses[losses.len() - 1] + losses[losses.len() - 2]) / 2.0;
    assert!(last <= 0.1 * first, "loss {first} -> {last}: {losses:?}");
}
