//! GPT-2 small has 124,439,808 parameters with the output head tied to the token embedding.

use burn::backend::Flex;
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use firemesh_gpt::GptConfig;

type B = Flex;

/// Sums parameter shapes without materializing lazily initialized parameters; Burn's
/// `num_params` would draw all 124M initial values first (about a minute at opt-level 0).
struct LazyCount(usize);

impl<B: Backend> ModuleVisitor<B> for LazyCount {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0 += param.lazy_shape().num_elements();
    }
}

/// GPT-2 XL's configuration counts the published checkpoint's 1,557,611,200 parameters (not
/// built: 6.2 GB of f32).
#[test]
fn gpt2_xl_config_has_the_published_count() {
    assert_eq!(GptConfig::gpt2_xl().num_params(), 1_557_611_200);
    assert!(GptConfig::gpt2_xl().validate().is_ok());
}

#[test]
fn gpt2_small_built_module_has_the_gpt2_count() {
    let config = GptConfig::gpt2_small();
    assert_eq!(config.num_params(), 124_439_808);
    let model = config.init::<B>(&Default::default()).unwrap();
    let mut count = LazyCount(0);
    model.visit(&mut count);
    assert_eq!(count.0, 124_439_808);
}

#[test]
fn tiny_built_module_matches_the_config_count_without_a_separate_head() {
    let config = GptConfig::tiny();
    let model = config.init::<B>(&Default::default()).unwrap();
    assert_eq!(model.num_params(), config.num_params());
    let mut count = LazyCount(0);
    model.visit(&mut count);
    assert_eq!(count.0, config.num_params());
    // 256×32 tokens + 16×32 positions + 2 blocks × 12,704 + final norm 64.
    assert_eq!(model.num_params(), 8_192 + 512 + 2 * 12_704 + 64);
}
