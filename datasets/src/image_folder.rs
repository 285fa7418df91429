//! Images in class sub-folders (ImageNet layout: `ROOT/CLASS/*.png|jpg|jpeg`), decoded when an
//! item is read and resized to a square side.

use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;
use image::imageops::FilterType;

use crate::error::DatasetError;
use crate::image::ImageItem;

const EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// Class-labelled images from a folder: classes are the sub-folders in name order.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    files: Vec<(PathBuf, usize)>,
    side: u32,
}

impl ImageFolder {
    /// Lists `root`'s class sub-folders and their PNG and JPEG files; items are RGB images
    /// resized to `side`×`side`. Nothing is decoded yet.
    pub fn open(root: impl AsRef<Path>, side: usize) -> Result<Self, DatasetError> {
        let root = root.as_ref().to_path_buf();
        if side == 0 || side > u32::MAX as usize {
            return Err(DatasetError::invalid(
                "side",
                format!("must be positive, got {side}"),
            ));
        }
        let mut classes: Vec<(String, PathBuf)> = read_dir(&root)?
            .into_iter()
            .filter(|p| p.is_dir())
            .filter_map(|p| Some((p.file_name()?.to_str()?.to_string(), p)))
            .collect();
        classes.sort();
        let mut files = Vec::new();
        for (label, (_, dir)) in classes.iter().enumerate() {
            let mut images: Vec<PathBuf> = read_dir(dir)?
                .into_iter()
                .filter(|p| p.is_file() && is_image(p))
                .collect();
            images.sort();
            files.extend(images.into_iter().map(|p| (p, label)));
        }
        if classes.is_empty() {
            return Err(DatasetError::malformed(
                &root,
                "has no class sub-folders (expected ROOT/CLASS/image.png)",
            ));
        }
        if files.is_empty() {
            return Err(DatasetError::malformed(
                &root,
                "has class sub-folders but no .png, .jpg or .jpeg images in them",
            ));
        }
        Ok(Self {
            root,
            classes: classes.into_iter().map(|(name, _)| name).collect(),
            files,
            side: side as u32,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Class names, in label order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Decodes item `index`: an error names the file that cannot be read or decoded.
    pub fn load(&self, index: usize) -> Result<ImageItem, DatasetError> {
        let (path, label) = self.files.get(index).ok_or(DatasetError::IndexOutOfRange {
            index,
            len: self.files.len(),
        })?;
        let reader = image::ImageReader::open(path).map_err(|e| DatasetError::io(path, e))?;
        let decoded = reader
            .with_guessed_format()
            .map_err(|e| DatasetError::io(path, e))?
            .decode()
            .map_err(|e| DatasetError::malformed(path, e.to_string()))?;
        let rgb = decoded
            .resize_exact(self.side, self.side, FilterType::Triangle)
            .into_rgb8();
        let values: Vec<f32> = rgb.as_raw().iter().map(|&v| f32::from(v) / 255.0).collect();
        let side = self.side as usize;
        Ok(ImageItem::from_interleaved(
            &values,
            [3, side, side],
            *label,
        ))
    }
}

impl Dataset<ImageItem> for ImageFolder {
    /// `None` past the end, and for an image that cannot be decoded ([`ImageFolder::load`]
    /// says why).
    fn get(&self, index: usize) -> Option<ImageItem> {
        self.load(index).ok()
    }

    fn len(&self) -> usize {
        self.files.len()
    }
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, DatasetError> {
    let entries = std::fs::read_dir(dir).map_err(|e| DatasetError::io(dir, e))?;
    entries
        .map(|e| {
            e.map(|e| e.path())
                .map_err(|err| DatasetError::io(dir, err))
        })
        .collect()
}

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}
