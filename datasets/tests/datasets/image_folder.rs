//! Image folders through Burn's ImageFolderDataset (cargo feature `image-folder`).
#![cfg(feature = "image-folder")]

use std::path::Path;

use burn::data::dataset::Dataset;
use firemesh_datasets::{DatasetError, ImageFolder};

/// Writes an uncompressed 24-bit BMP filled with one colour.
fn write_bmp(path: &Path, width: u32, height: u32, rgb: [u8; 3]) {
    let row = (width * 3).div_ceil(4) * 4;
    let size = 54 + row * height;
    let mut bytes = b"BM".to_vec();
    for value in [size, 0, 54, 40, width, height] {
        bytes.extend(value.to_le_bytes());
    }
    bytes.extend(1u16.to_le_bytes()); // planes
    bytes.extend(24u16.to_le_bytes()); // bits per pixel
    for value in [0, row * height, 2835, 2835, 0, 0] {
        bytes.extend(value.to_le_bytes());
    }
    for _ in 0..height {
        let mut line: Vec<u8> = (0..width).flat_map(|_| [rgb[2], rgb[1], rgb[0]]).collect();
        line.resize(row as usize, 0);
        bytes.extend(line);
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn class_folders_become_labels_and_pixels_become_planes() {
    let root = std::env::temp_dir().join(format!("firemesh-image-folder-{}", std::process::id()));
    for class in ["cat", "dog"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
    }
    write_bmp(&root.join("cat/a.bmp"), 2, 2, [255, 0, 0]);
    write_bmp(&root.join("dog/b.bmp"), 2, 2, [0, 0, 255]);
    write_bmp(&root.join("dog/c.bmp"), 3, 1, [0, 255, 0]);

    let data = ImageFolder::open(&root).unwrap();
    assert_eq!(data.len(), 3);
    let cat = data.get(0).unwrap();
    assert_eq!((cat.label, cat.shape), (0, [3, 2, 2]));
    assert_eq!(cat.pixels, [[1.0; 4], [0.0; 4], [0.0; 4]].concat());
    let dog = data.get(1).unwrap();
    assert_eq!(dog.label, 1);
    assert_eq!(&dog.pixels[8..], [1.0; 4]);
    assert_eq!(data.get(2).unwrap().shape, [3, 1, 3]);
    std::fs::remove_dir_all(&root).unwrap();

    let err = ImageFolder::open(&root).err().unwrap();
    assert!(
        matches!(&err, DatasetError::Io { path, .. } if path == &root),
        "{err}"
    );
}
