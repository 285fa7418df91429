//! A zoo model as burn-train trains it, and its synthetic batches.

use crate::error::PeerError;
use burn::prelude::*;
use firemesh_zoo::{Batch, Net, NetConfig};

/// A model and the size of one device's batch.
#[derive(Debug, Clone)]
pub struct Work {
    pub model: NetConfig,
    /// Images or sequences per device and step.
    pub per_device: usize,
    /// Image side in pixels (ResNets).
    pub image_size: usize,
    /// Tokens per sequence (GPTs).
    pub seq_len: usize,
    /// Steps of the shorter epoch of each timing (at least 1).
    pub warmup: usize,
    /// Timed steps.
    pub steps: usize,
}

impl Work {
    /// Images or predicted tokens per device and step (a sequence of L tokens predicts L - 1).
    pub fn samples_per_device(&self) -> f64 {
        if self.model.is_gpt() {
            (self.per_device * (self.seq_len.max(1) - 1)) as f64
        } else {
            self.per_device as f64
        }
    }

    /// The model, once the sequence length is checked against a GPT's context.
    pub(crate) fn init<B: Backend>(&self, device: &B::Device) -> Result<Net<B>, PeerError> {
        if let NetConfig::Gpt(c) = &self.model {
            if self.seq_len < 2 || self.seq_len > c.context_length + 1 {
                return Err(PeerError::SequenceLength {
                    seq_len: self.seq_len,
                    most: c.context_length + 1,
                });
            }
        }
        Ok(self.model.init(device)?)
    }

    /// The synthetic batch of the samples `first..first + n`.
    pub fn batch<B: Backend>(&self, first: usize, n: usize, device: &B::Device) -> Batch<B> {
        match &self.model {
            NetConfig::Gpt(c) => {
                let tokens = synthetic_tokens(first, n, self.seq_len, c.vocab_size);
                let data = TensorData::new(tokens, [n, self.seq_len]);
                Batch::Tokens(Tensor::from_data(data, device))
            }
            NetConfig::ResNet(c) => {
                let s = self.image_size;
                let shape = [n, c.in_channels, s, s];
                let (pixels, labels) = synthetic_images(first, shape, c.num_classes);
                Batch::Images {
                    images: Tensor::from_data(TensorData::new(pixels, shape), device),
                    labels: Tensor::from_data(TensorData::new(labels, [n]), device),
                }
            }
        }
    }
}

/// The samples `first..first + n` of a synthetic image set, `shape` = `[n, channels, height,
/// width]`: pixels in [-1, 1), and labels (sample `i` has class `i % classes`).
pub(crate) fn synthetic_images(
    first: usize,
    shape: [usize; 4],
    classes: usize,
) -> (Vec<f32>, Vec<i32>) {
    let [n, channels, height, width] = shape;
    let pixels = channels * height * width;
    let values = (0..n * pixels)
        .map(|k| ((first * pixels + k) * 7919 % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let labels = (first..first + n).map(|i| (i % classes) as i32).collect();
    (values, labels)
}

/// The sequences `first..first + n` of a synthetic token set: `len` tokens below `vocab` each.
pub(crate) fn synthetic_tokens(first: usize, n: usize, len: usize, vocab: usize) -> Vec<i32> {
    (first * len..(first + n) * len)
        .map(|k| ((k * 37 + k / len * 11) % vocab) as i32)
        .collect()
}

#[cfg(all(test, not(feature = "ddp")))]
mod tests {
    use super::*;
    use burn::backend::flex::FlexDevice;
    use burn::backend::Flex;
    use firemesh_gpt::GptConfig;
    use firemesh_resnet::ResNetConfig;

    #[test]
    fn a_sample_is_the_same_in_every_batch_that_holds_it() {
        let (all, all_labels) = synthetic_images(0, [6, 3, 4, 4], 10);
        let (part, part_labels) = synthetic_images(4, [2, 3, 4, 4], 10);
        assert_eq!(part, all[4 * 48..]);
        assert_eq!(part_labels, all_labels[4..]);
        assert_eq!(part_labels, [4, 5]);
        assert!(all.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(all.windows(2).any(|w| w[0] != w[1]), "not a constant image");
        let tokens = synthetic_tokens(0, 6, 8, 256);
        assert_eq!(synthetic_tokens(4, 2, 8, 256), tokens[32..]);
        assert!(tokens.iter().all(|t| (0..256).contains(t)));
        assert!(
            tokens.windows(2).any(|w| w[0] != w[1]),
            "not a constant sequence"
        );
    }

    #[test]
    fn batches_have_the_shapes_of_their_model() {
        let work = |model| Work {
            model,
            per_device: 2,
            image_size: 16,
            seq_len: 12,
            warmup: 1,
            steps: 1,
        };
        let resnet = work(NetConfig::ResNet(ResNetConfig::tiny(10)));
        let Batch::Images {
            images: x,
            labels: y,
        } = resnet.batch::<Flex>(4, 2, &FlexDevice)
        else {
            panic!("a ResNet takes images")
        };
        assert_eq!((x.dims(), y.dims()), ([2, 3, 16, 16], [2]));
        assert_eq!(
            y.into_data().convert::<i64>().to_vec::<i64>().unwrap(),
            [4, 5]
        );
        let gpt = work(NetConfig::Gpt(GptConfig::tiny()));
        let Batch::Tokens(t) = gpt.batch::<Flex>(0, 2, &FlexDevice) else {
            panic!("a GPT takes tokens")
        };
        assert_eq!(t.dims(), [2, 12]);
        assert_eq!(gpt.samples_per_device(), 22.0);
        assert_eq!(resnet.samples_per_device(), 2.0);
    }

    #[test]
    fn a_batch_the_model_cannot_take_is_an_error() {
        let work = |model| Work {
            model,
            per_device: 2,
            image_size: 16,
            seq_len: 8,
            warmup: 1,
            steps: 1,
        };
        let resnet = work(NetConfig::ResNet(ResNetConfig::tiny(10)));
        let gpt = work(NetConfig::Gpt(GptConfig::tiny()));
        let net = resnet.init::<Flex>(&FlexDevice).unwrap();
        let tokens = gpt.batch::<Flex>(0, 2, &FlexDevice);
        let error = net.loss(tokens).unwrap_err().to_string();
        assert_eq!(error, "a ResNet takes images, not token sequences");
        let images = resnet.batch::<Flex>(0, 2, &FlexDevice);
        let net = gpt.init::<Flex>(&FlexDevice).unwrap();
        assert!(net.evaluate(images).is_err());
        let counts = net.evaluate(gpt.batch::<Flex>(0, 2, &FlexDevice)).unwrap();
        assert_eq!(counts.predictions, 2 * 7);
        assert!(counts.loss_sum.is_finite() && counts.loss_sum > 0.0);
    }
}
