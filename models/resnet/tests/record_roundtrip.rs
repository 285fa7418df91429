//! Saving and loading a model record with Burn's recorder restores every value bit for bit,
//! BatchNorm running statistics included.

use burn::backend::{Autodiff, NdArray};
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::Distribution;
use firemesh_resnet::{ResNet, ResNetConfig};

type Inner = NdArray<f32>;

/// Bit patterns of every float tensor in visiting order.
struct Bits(Vec<Vec<u32>>);

impl<B: Backend> ModuleVisitor<B> for Bits {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let values: Vec<f32> = param.val().into_data().convert::<f32>().to_vec().unwrap();
        self.0.push(values.iter().map(|v| v.to_bits()).collect());
    }
}

fn bits(model: &ResNet<Inner>) -> Vec<Vec<u32>> {
    let mut visitor = Bits(Vec::new());
    model.visit(&mut visitor);
    visitor.0
}

#[test]
fn named_mpk_record_roundtrips_bit_exactly() {
    let device = Default::default();
    let config = ResNetConfig::tiny(3);
    let trained = config.init::<Autodiff<Inner>>(&device).unwrap();
    // A training-mode forward moves the running statistics away from their initial values.
    let images = Tensor::random([4, 3, 16, 16], Distribution::Normal(0.5, 2.0), &device);
    let _ = trained.forward(images);
    let saved = trained.valid();
    let before = bits(&saved);

    let path = std::env::temp_dir().join(format!("firemesh-resnet-record-{}", std::process::id()));
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    saved.save_file(path.clone(), &recorder).unwrap();

    let fresh = config.init::<Inner>(&device).unwrap();
    assert_ne!(bits(&fresh), before, "a fresh model must differ for the test to mean anything");
    let loaded = fresh.load_file(path.clone(), &recorder, &device).unwrap();
    let _ = std::fs::remove_file(path.with_extension("mpk"));
    assert_eq!(bits(&loaded), before);
}
