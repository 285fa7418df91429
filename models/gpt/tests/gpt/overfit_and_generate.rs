//! A tiny byte-level GPT memorizes a few sequences (loss falls by at least 90%), after which
//! greedy generation reproduces them and temperature sampling is reproducible per seed.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::Device;
use firemesh_gpt::{Gpt, GptConfig, GptError, Sampling};

type B = Autodiff<Flex>;

const TEXTS: [&[u8; 17]; 4] = [
    b"the cat sat down.",
    b"a dog ran far off",
    b"firemesh trains!!",
    b"0123456789abcdefg",
];
const MAX_STEPS: usize = 300;
/// Loss at which every continuation is memorized well enough for greedy decoding.
const MEMORIZED: f32 = 0.02;

fn train(device: &Device<B>) -> Gpt<B> {
    let ids: Vec<i64> = TEXTS
        .iter()
        .flat_map(|t| t.iter().map(|&b| b as i64))
        .collect();
    let batch = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [TEXTS.len(), 17]), device);
    let mut model = GptConfig::tiny().init::<B>(device).unwrap();
    let mut optim = AdamConfig::new().init();
    let mut losses = Vec::new();
    for _ in 0..MAX_STEPS {
        let loss = model.next_token_loss(batch.clone()).unwrap();
        losses.push(loss.clone().into_scalar());
        if losses[losses.len() - 1] <= MEMORIZED {
            break;
        }
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-2, model, grads);
    }
    let last = losses[losses.len() - 1];
    assert!(
        last <= 0.1 * losses[0],
        "loss {} -> {last} in {MAX_STEPS} steps",
        losses[0]
    );
    assert!(
        last <= MEMORIZED,
        "loss {} -> {last} in {MAX_STEPS} steps",
        losses[0]
    );
    model
}

#[test]
fn tiny_gpt_overfits_then_generates_what_it_memorized() {
    let device = Default::default();
    B::seed(&device, 3);
    let model = train(&device).valid();
    let bytes = |text: &[u8]| text.iter().map(|&b| b as u32).collect::<Vec<_>>();

    for text in TEXTS {
        let out = model
            .generate(&bytes(&text[..4]), 13, Sampling::Greedy, &device)
            .unwrap();
        assert_eq!(
            out,
            bytes(text),
            "greedy continuation of {:?}",
            String::from_utf8_lossy(&text[..4])
        );
    }

    // Past the context window generation keeps going on the last 16 tokens.
    let long = model
        .generate(&bytes(TEXTS[0]), 20, Sampling::Greedy, &device)
        .unwrap();
    assert_eq!(long.len(), 37);

    let hot = |seed| Sampling::Temperature {
        temperature: 5.0,
        seed,
    };
    let prompt = bytes(b"the ");
    let first = model.generate(&prompt, 24, hot(1), &device).unwrap();
    assert_eq!(first, model.generate(&prompt, 24, hot(1), &device).unwrap());
    assert_ne!(first, model.generate(&prompt, 24, hot(2), &device).unwrap());
}

#[test]
fn generation_rejects_bad_prompts_and_temperatures() {
    let device = Default::default();
    let model = GptConfig::tiny().init::<Flex>(&device).unwrap();
    let err = model
        .generate(&[], 1, Sampling::Greedy, &device)
        .unwrap_err();
    assert!(matches!(err, GptError::SequenceLength { len: 0, .. }));
    let err = model
        .generate(&[256], 1, Sampling::Greedy, &device)
        .unwrap_err();
    assert!(matches!(
        err,
        GptError::TokenOutOfRange {
            token: 256,
            vocab_size: 256
        }
    ));
    let zero = Sampling::Temperature {
        temperature: 0.0,
        seed: 0,
    };
    assert!(matches!(
        model.generate(&[1], 1, zero, &device),
        Err(GptError::InvalidTemperature(_))
    ));
}
