//! Saving and loading a model record with Burn's recorder restores every value bit for bit,
//! BatchNorm running statistics included.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::Distribution;
use firemesh_resnet::ResNetConfig;

#[path = "../../../test_support/record_roundtrip.rs"]
mod support;

type Inner = Flex;

#[test]
fn named_mpk_record_roundtrips_bit_exactly() {
    let device = Default::default();
    let config = ResNetConfig::tiny(3);
    let trained = config.init::<Autodiff<Inner>>(&device).unwrap();
    // A training-mode forward moves the running statistics away from their initial values.
    let images = Tensor::random([4, 3, 16, 16], Distribution::Normal(0.5, 2.0), &device);
    let _ = trained.forward(images);
    let fresh = config.init::<Inner>(&device).unwrap();
    support::assert_record_roundtrip(trained.valid(), fresh, "resnet", &device);
}
