//! Deterministic synthetic images that a model can learn: each class has a fixed random
//! prototype image, and every sample is its class prototype blended with per-sample noise.

use burn::data::dataset::Dataset;

use crate::error::DatasetError;
use crate::image::ImageItem;
use firemesh_rng::SplitMix64;

/// Shape and content of a [`SyntheticImages`] dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticImagesConfig {
    /// Number of samples.
    pub len: usize,
    /// Number of classes; sample `i` has label `i % num_classes`.
    pub num_classes: usize,
    /// `[channels, height, width]`.
    pub shape: [usize; 3],
    /// Weight of the noise in [0, 1): 0 gives exact prototypes, near 1 almost pure noise.
    pub noise: f32,
    /// Seed of prototypes and noise.
    pub seed: u64,
}

impl SyntheticImagesConfig {
    /// `len` CIFAR-shaped (3×32×32) samples over 10 classes, noise 0.5.
    pub fn cifar_like(len: usize, seed: u64) -> Self {
        Self {
            len,
            num_classes: 10,
            shape: [3, 32, 32],
            noise: 0.5,
            seed,
        }
    }
}

/// Samples are computed on demand from (seed, index): nothing is stored but the prototypes.
#[derive(Debug, Clone)]
pub struct SyntheticImages {
    config: SyntheticImagesConfig,
    prototypes: Vec<Vec<f32>>,
}

impl SyntheticImages {
    /// Checks the configuration and draws the class prototypes.
    pub fn new(config: SyntheticImagesConfig) -> Result<Self, DatasetError> {
        if config.num_classes == 0 {
            return Err(DatasetError::invalid("num_classes", "must be at least 1"));
        }
        if config.shape.contains(&0) {
            return Err(DatasetError::invalid(
                "shape",
                format!("has a zero size: {:?}", config.shape),
            ));
        }
        if !(0.0..1.0).contains(&config.noise) {
            return Err(DatasetError::invalid(
                "noise",
                format!("must be in [0, 1), got {}", config.noise),
            ));
        }
        let size: usize = config.shape.iter().product();
        let prototypes = (0..config.num_classes as u64)
            .map(|class| {
                let mut rng = SplitMix64::from_keys(&[config.seed, 0, class]);
                (0..size).map(|_| rng.next_f32()).collect()
            })
            .collect();
        Ok(Self { config, prototypes })
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &SyntheticImagesConfig {
        &self.config
    }
}

impl Dataset<ImageItem> for SyntheticImages {
    fn get(&self, index: usize) -> Option<ImageItem> {
        if index >= self.config.len {
            return None;
        }
        let label = index % self.config.num_classes;
        let noise = self.config.noise;
        let mut rng = SplitMix64::from_keys(&[self.config.seed, 1, index as u64]);
        let pixels = self.prototypes[label]
            .iter()
            .map(|&p| (1.0 - noise) * p + noise * rng.next_f32())
            .collect();
        Some(ImageItem {
            pixels,
            shape: self.config.shape,
            label,
        })
    }

    fn len(&self) -> usize {
        self.config.len
    }
}
