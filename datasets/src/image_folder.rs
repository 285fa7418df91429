//! Image folders (`root/<class>/<image>`) through Burn's `ImageFolderDataset`.
//!
//! Behind the `image-folder` cargo feature: it enables burn-dataset's `vision` feature, which
//! pulls image decoders and network crates into the build.

use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;
use burn_dataset::vision::{Annotation, ImageFolderDataset, PixelDepth};

use crate::error::DatasetError;
use crate::image::ImageItem;

/// A classification dataset with one sub-folder per class (classes sorted by name).
///
/// Images may have different sizes; batching checks that a batch's images agree. Burn's loader
/// panics on a file it cannot decode.
pub struct ImageFolder {
    inner: ImageFolderDataset,
    root: PathBuf,
}

impl ImageFolder {
    /// Indexes every supported image under `root`.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, DatasetError> {
        let root = root.as_ref().to_path_buf();
        if !root.is_dir() {
            let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "not a folder");
            return Err(DatasetError::io(root, missing));
        }
        let inner = ImageFolderDataset::new_classification(&root)
            .map_err(|e| DatasetError::malformed(&root, e.to_string()))?;
        if inner.is_empty() {
            return Err(DatasetError::malformed(
                &root,
                "contains no images in class sub-folders",
            ));
        }
        Ok(Self { inner, root })
    }

    /// The folder it was opened from.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Dataset<ImageItem> for ImageFolder {
    fn get(&self, index: usize) -> Option<ImageItem> {
        let item = self.inner.get(index)?;
        let label = match item.annotation {
            Annotation::Label(label) => label,
            _ => return None,
        };
        let channels = item.image.len() / (item.image_width * item.image_height).max(1);
        let values: Vec<f32> = item
            .image
            .into_iter()
            .map(|p| match p {
                PixelDepth::U8(v) => f32::from(v) / 255.0,
                PixelDepth::U16(v) => f32::from(v) / 65_535.0,
                PixelDepth::F32(v) => v,
            })
            .collect();
        let shape = [channels, item.image_height, item.image_width];
        Some(ImageItem::from_interleaved(&values, shape, label))
    }

    fn len(&self) -> usize {
        self.inner.len()
    }
}
