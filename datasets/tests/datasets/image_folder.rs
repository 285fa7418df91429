//! Image folders (ImageNet layout) decoded with the `image` crate: PNG and JPEG files in class
//! sub-folders, resized to a square side; every way a folder can be unusable is a named error.

use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;
use firemesh_datasets::{DatasetError, ImageFolder};
use image::{ImageFormat, Rgb, RgbImage};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "firemesh-image-folder-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, width: u32, height: u32, rgb: [u8; 3], format: ImageFormat) {
    RgbImage::from_pixel(width, height, Rgb(rgb))
        .save_with_format(path, format)
        .unwrap();
}

#[test]
fn class_folders_become_labels_and_pixels_become_resized_planes() {
    let root = scratch("classes");
    for class in ["cat", "dog"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
    }
    write(&root.join("cat/a.png"), 2, 2, [255, 0, 0], ImageFormat::Png);
    write(&root.join("dog/b.PNG"), 5, 3, [0, 0, 255], ImageFormat::Png);
    write(
        &root.join("dog/c.jpg"),
        8,
        8,
        [0, 255, 0],
        ImageFormat::Jpeg,
    );
    std::fs::write(root.join("dog/notes.txt"), "not an image").unwrap();

    let data = ImageFolder::open(&root, 4).unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data.classes(), ["cat", "dog"]);
    let cat = data.get(0).unwrap();
    assert_eq!((cat.label, cat.shape), (0, [3, 4, 4]));
    assert_eq!(cat.pixels, [[1.0; 16], [0.0; 16], [0.0; 16]].concat());
    let dog = data.get(1).unwrap();
    assert_eq!((dog.label, dog.shape), (1, [3, 4, 4]));
    assert_eq!(&dog.pixels[32..], [1.0; 16]);
    // JPEG is lossy: a flat green image stays close to green.
    let green = data.load(2).unwrap();
    assert!(
        green.pixels[16..32].iter().all(|&v| v > 0.9),
        "{:?}",
        green.pixels
    );
    assert!(green.pixels[..16].iter().all(|&v| v < 0.1));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn unusable_folders_and_files_are_named_errors() {
    let missing = std::env::temp_dir().join("firemesh-no-such-image-folder");
    let err = ImageFolder::open(&missing, 8).unwrap_err();
    assert!(
        matches!(&err, DatasetError::Io { path, .. } if path == &missing),
        "{err}"
    );

    let flat = scratch("flat");
    write(&flat.join("a.png"), 2, 2, [1, 2, 3], ImageFormat::Png);
    let err = ImageFolder::open(&flat, 8).unwrap_err();
    assert!(err.to_string().contains("no class sub-folders"), "{err}");

    let empty = scratch("empty-classes");
    std::fs::create_dir_all(empty.join("cat")).unwrap();
    let err = ImageFolder::open(&empty, 8).unwrap_err();
    assert!(
        err.to_string().contains("no .png, .jpg or .jpeg images"),
        "{err}"
    );

    let corrupt = scratch("corrupt");
    std::fs::create_dir_all(corrupt.join("cat")).unwrap();
    std::fs::write(
        corrupt.join("cat/broken.png"),
        b"\x89PNG\r\n\x1a\nnot really",
    )
    .unwrap();
    let data = ImageFolder::open(&corrupt, 8).unwrap();
    let err = data.load(0).unwrap_err();
    assert!(
        matches!(&err, DatasetError::Malformed { path, .. } if path.ends_with("cat/broken.png")),
        "{err}"
    );
    assert!(data.get(0).is_none());
    for dir in [flat, empty, corrupt] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}
