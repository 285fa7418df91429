//! CIFAR-10 in its binary format, read from files the user already has.
//!
//! Each `data_batch_N.bin` / `test_batch.bin` is a sequence of 3,073-byte records: one label
//! byte (0–9), then 1,024 red, 1,024 green and 1,024 blue bytes of a 32×32 image, row-major.

use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;

use crate::error::DatasetError;
use crate::image::ImageItem;

/// Bytes of one image: 3 planes of 32×32.
const IMAGE_BYTES: usize = 3 * 32 * 32;
/// Bytes of one record: label + image.
const RECORD_BYTES: usize = 1 + IMAGE_BYTES;

/// CIFAR-10 images held in memory as bytes (about 150 MB for the 50,000 training images).
#[derive(Debug, Clone)]
pub struct Cifar10 {
    labels: Vec<u8>,
    images: Vec<u8>,
}

impl Cifar10 {
    /// Number of classes.
    pub const NUM_CLASSES: usize = 10;
    /// Class names, by label.
    pub const CLASSES: [&'static str; 10] = [
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    ];

    /// Reads `data_batch_1.bin` … `data_batch_5.bin` from `dir` (the `cifar-10-batches-bin` folder).
    pub fn train(dir: impl AsRef<Path>) -> Result<Self, DatasetError> {
        let files: Vec<PathBuf> = (1..=5)
            .map(|i| dir.as_ref().join(format!("data_batch_{i}.bin")))
            .collect();
        Self::from_files(&files)
    }

    /// Reads `test_batch.bin` from `dir`.
    pub fn test(dir: impl AsRef<Path>) -> Result<Self, DatasetError> {
        Self::from_files(&[dir.as_ref().join("test_batch.bin")])
    }

    /// Reads and concatenates the given batch files, in order.
    pub fn from_files(files: &[impl AsRef<Path>]) -> Result<Self, DatasetError> {
        if files.is_empty() {
            return Err(DatasetError::invalid(
                "files",
                "must name at least one batch file",
            ));
        }
        let mut dataset = Self {
            labels: Vec::new(),
            images: Vec::new(),
        };
        for file in files {
            dataset.append(file.as_ref())?;
        }
        Ok(dataset)
    }

    fn append(&mut self, path: &Path) -> Result<(), DatasetError> {
        let bytes = std::fs::read(path).map_err(|e| DatasetError::io(path, e))?;
        if bytes.is_empty() || bytes.len() % RECORD_BYTES != 0 {
            let reason = format!(
                "{} bytes is not a positive multiple of the {RECORD_BYTES}-byte CIFAR-10 record",
                bytes.len()
            );
            return Err(DatasetError::malformed(path, reason));
        }
        for (record, chunk) in bytes.chunks_exact(RECORD_BYTES).enumerate() {
            if usize::from(chunk[0]) >= Self::NUM_CLASSES {
                let reason = format!("record {record} has label byte {}, expected 0-9", chunk[0]);
                return Err(DatasetError::malformed(path, reason));
            }
            self.labels.push(chunk[0]);
            self.images.extend_from_slice(&chunk[1..]);
        }
        Ok(())
    }
}

impl Dataset<ImageItem> for Cifar10 {
    fn get(&self, index: usize) -> Option<ImageItem> {
        let label = usize::from(*self.labels.get(index)?);
        let bytes = &self.images[index * IMAGE_BYTES..(index + 1) * IMAGE_BYTES];
        // The file already stores channel planes, the layout `ImageItem` uses.
        let pixels = bytes.iter().map(|&b| f32::from(b) / 255.0).collect();
        Some(ImageItem {
            pixels,
            shape: [3, 32, 32],
            label,
        })
    }

    fn len(&self) -> usize {
        self.labels.len()
    }
}
