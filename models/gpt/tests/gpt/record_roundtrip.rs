//! Saving and loading a model record with Burn's recorder restores every value bit for bit.

use burn::backend::Flex;
use firemesh_gpt::GptConfig;

#[path = "../../../test_support/record_roundtrip.rs"]
mod support;

#[test]
fn named_mpk_record_roundtrips_bit_exactly() {
    let device = Default::default();
    let config = GptConfig::tiny();
    let saved = config.init::<Flex>(&device).unwrap();
    let fresh = config.init::<Flex>(&device).unwrap();
    support::assert_record_roundtrip(saved, fresh, "gpt", &device);
}
