//! Shared by the model crates' tests (included with `#[path]`): saving a module with Burn's
//! recorder and loading it into a differently initialized twin restores every value bit for bit.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};

/// Bit patterns of every float tensor (parameters and running statistics) in visiting order.
struct Bits(Vec<Vec<u32>>);

impl<B: Backend> ModuleVisitor<B> for Bits {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let values: Vec<f32> = param.val().into_data().convert::<f32>().to_vec().unwrap();
        self.0.push(values.iter().map(|v| v.to_bits()).collect());
    }
}

fn bits<B: Backend, M: Module<B>>(module: &M) -> Vec<Vec<u32>> {
    let mut visitor = Bits(Vec::new());
    module.visit(&mut visitor);
    visitor.0
}

/// Saves `saved` to a temporary file, loads it into `fresh` and compares all values exactly.
pub fn assert_record_roundtrip<B: Backend, M: Module<B>>(
    saved: M,
    fresh: M,
    name: &str,
    device: &B::Device,
) {
    let before = bits(&saved);
    let path = std::env::temp_dir().join(format!("firemesh-{name}-record-{}", std::process::id()));
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    saved.save_file(path.clone(), &recorder).unwrap();

    assert_ne!(
        bits(&fresh),
        before,
        "a fresh model must differ for the test to mean anything"
    );
    let loaded = fresh.load_file(path.clone(), &recorder, device).unwrap();
    let _ = std::fs::remove_file(path.with_extension("mpk"));
    assert_eq!(bits(&loaded), before);
}
