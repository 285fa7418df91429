//! Autoregressive generation for demos: greedy decoding or temperature sampling.
//!
//! Each step reruns the model on the last `context_length` tokens (no key/value cache), which
//! is plenty for short demos.

use burn::prelude::*;

use crate::error::GptError;
use crate::model::Gpt;
use firemesh_rng::SplitMix64;

/// How the next token is picked from the logits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The most likely token (ties go to the lowest id).
    Greedy,
    /// A draw from `softmax(logits / temperature)`, reproducible for a given `seed`.
    Temperature {
        /// Above 1 flattens the distribution, below 1 sharpens it.
        temperature: f64,
        /// Seed of the sampler's random numbers.
        seed: u64,
    },
}

impl<B: Backend> Gpt<B> {
    /// Extends `prompt` by `max_new_tokens` tokens and returns prompt and continuation.
    pub fn generate(
        &self,
        prompt: &[u32],
        max_new_tokens: usize,
        sampling: Sampling,
        device: &B::Device,
    ) -> Result<Vec<u32>, GptError> {
        if prompt.is_empty() {
            return Err(GptError::SequenceLength {
                len: 0,
                min: 1,
                max: self.context_length,
            });
        }
        if let Some(&token) = prompt.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(GptError::TokenOutOfRange {
                token,
                vocab_size: self.vocab_size,
            });
        }
        let mut rng = match sampling {
            Sampling::Greedy => None,
            Sampling::Temperature { temperature, seed } => {
                if !(temperature.is_finite() && temperature > 0.0) {
                    return Err(GptError::InvalidTemperature(temperature));
                }
                Some((temperature, SplitMix64::new(seed)))
            }
        };
        let mut tokens = prompt.to_vec();
        for _ in 0..max_new_tokens {
            let logits = self.last_logits(&tokens, device);
            let next = match &mut rng {
                None => argmax(&logits),
                Some((temperature, rng)) => sample(&logits, *temperature, rng.next_f64()),
            };
            tokens.push(next as u32);
        }
        Ok(tokens)
    }

    /// Logits of the token after `tokens`, computed from the last `context_length` of them.
    fn last_logits(&self, tokens: &[u32], device: &B::Device) -> Vec<f32> {
        let window = &tokens[tokens.len().saturating_sub(self.context_length)..];
        let ids: Vec<i64> = window.iter().map(|&t| t as i64).collect();
        let input = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [1, window.len()]), device);
        let logits = self.forward(input);
        let last = logits
            .narrow(1, window.len() - 1, 1)
            .reshape([self.vocab_size]);
        last.into_data()
            .convert::<f32>()
            .into_vec()
            .unwrap_or_default()
    }
}

fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &value) in logits.iter().enumerate() {
        if value > logits[best] {
            best = i;
        }
    }
    best
}

/// Inverse-CDF draw from `softmax(logits / temperature)` with `unit` uniform in [0, 1).
fn sample(logits: &[f32], temperature: f64, unit: f64) -> usize {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| ((l as f64 - max) / temperature).exp())
        .collect();
    let mut threshold = unit * weights.iter().sum::<f64>();
    for (i, weight) in weights.iter().enumerate() {
        if threshold < *weight {
            return i;
        }
        threshold -= weight;
    }
    argmax(logits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_prefers_the_first_of_equal_maxima() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, -1.0]), 1);
    }

    #[test]
    fn sampling_follows_the_tempered_distribution() {
        let logits = [0.0_f32, (3.0_f32).ln()]; // probabilities 1/4, 3/4 at temperature 1
        assert_eq!(sample(&logits, 1.0, 0.24), 0);
        assert_eq!(sample(&logits, 1.0, 0.26), 1);
        // Temperature 1/2 squares the odds: 1/10, 9/10.
        assert_eq!(sample(&logits, 0.5, 0.09), 0);
        assert_eq!(sample(&logits, 0.5, 0.11), 1);
    }

    #[test]
    fn splitmix_is_uniform_enough_and_reproducible() {
        let draws: Vec<f64> = {
            let mut rng = SplitMix64::new(5);
            (0..10_000).map(|_| rng.next_f64()).collect()
        };
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        assert_eq!(SplitMix64::new(5).next_f64(), draws[0]);
    }
}
