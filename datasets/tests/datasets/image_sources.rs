//! Synthetic images are deterministic and separable; CIFAR-10 binary files are read exactly
//! and bad files are errors naming them.

use std::path::PathBuf;

use burn::data::dataset::Dataset;
use firemesh_datasets::{Cifar10, DatasetError, SyntheticImages, SyntheticImagesConfig};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("firemesh-datasets-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn synthetic_images_are_deterministic_and_labelled_round_robin() {
    let config = SyntheticImagesConfig {
        len: 20,
        num_classes: 4,
        shape: [3, 8, 8],
        noise: 0.5,
        seed: 1,
    };
    let a = SyntheticImages::new(config.clone()).unwrap();
    let b = SyntheticImages::new(config.clone()).unwrap();
    assert_eq!(a.len(), 20);
    assert_eq!(a.get(7), b.get(7));
    let item = a.get(7).unwrap();
    assert_eq!(
        (item.label, item.shape, item.pixels.len()),
        (3, [3, 8, 8], 192)
    );
    assert!(item.pixels.iter().all(|p| (0.0..1.0).contains(p)));
    assert_ne!(
        a.get(3).unwrap().pixels,
        item.pixels,
        "same class, different noise"
    );
    assert!(a.get(20).is_none());
    let other = SyntheticImages::new(SyntheticImagesConfig { seed: 2, ..config }).unwrap();
    assert_ne!(other.get(7), a.get(7));
}

#[test]
fn synthetic_images_are_learnable_by_nearest_class_mean() {
    let data = SyntheticImages::new(SyntheticImagesConfig::cifar_like(400, 7)).unwrap();
    let size = 3 * 32 * 32;
    let mut means = vec![vec![0.0f32; size]; 10];
    for item in (0..200).filter_map(|i| data.get(i)) {
        for (m, p) in means[item.label].iter_mut().zip(&item.pixels) {
            *m += p / 20.0;
        }
    }
    let distance =
        |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>();
    for item in (200..400).filter_map(|i| data.get(i)) {
        let nearest = (0..10)
            .min_by(|&a, &b| {
                distance(&means[a], &item.pixels).total_cmp(&distance(&means[b], &item.pixels))
            })
            .unwrap();
        assert_eq!(nearest, item.label);
    }
}

#[test]
fn synthetic_config_errors_name_the_field() {
    let base = SyntheticImagesConfig::cifar_like(10, 0);
    let err = |c| SyntheticImages::new(c).unwrap_err().to_string();
    assert!(err(SyntheticImagesConfig {
        num_classes: 0,
        ..base.clone()
    })
    .contains("num_classes"));
    assert!(err(SyntheticImagesConfig {
        shape: [3, 0, 4],
        ..base.clone()
    })
    .contains("shape"));
    assert!(err(SyntheticImagesConfig { noise: 1.0, ..base }).contains("noise"));
}

/// A CIFAR-10 record: label, then R, G, B planes of 32×32 bytes.
fn record(label: u8, red: u8, green: u8, blue_first: u8) -> Vec<u8> {
    let mut bytes = vec![label];
    bytes.extend(std::iter::repeat_n(red, 1024));
    bytes.extend(std::iter::repeat_n(green, 1024));
    bytes.push(blue_first);
    bytes.extend(std::iter::repeat_n(0, 1023));
    bytes
}

#[test]
fn cifar10_binary_records_are_read_in_order_with_planes_intact() {
    let dir = temp_dir("cifar");
    for (i, labels) in [[3u8, 9], [0, 1], [2, 2], [4, 5], [6, 7]]
        .iter()
        .enumerate()
    {
        let bytes = [record(labels[0], 255, 0, 51), record(labels[1], 0, 255, 0)].concat();
        std::fs::write(dir.join(format!("data_batch_{}.bin", i + 1)), bytes).unwrap();
    }
    let data = Cifar10::train(&dir).unwrap();
    assert_eq!(data.len(), 10);
    let first = data.get(0).unwrap();
    assert_eq!((first.label, first.shape), (3, [3, 32, 32]));
    assert_eq!(first.pixels[0], 1.0); // red plane
    assert_eq!(first.pixels[1024], 0.0); // green plane
    assert_eq!(first.pixels[2048], 0.2); // first blue byte 51 / 255
    assert_eq!(data.get(1).unwrap().label, 9);
    assert_eq!(data.get(9).unwrap().label, 7);
    assert!(data.get(10).is_none());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cifar10_bad_or_missing_files_are_errors_naming_them() {
    let dir = temp_dir("cifar-bad");
    let short = dir.join("short.bin");
    std::fs::write(&short, &record(1, 0, 0, 0)[..3000]).unwrap();
    let err = Cifar10::from_files(&[&short]).unwrap_err();
    assert!(
        matches!(&err, DatasetError::Malformed { path, .. } if path == &short),
        "{err}"
    );
    assert!(err.to_string().contains("short.bin") && err.to_string().contains("3073"));

    let bad_label = dir.join("bad_label.bin");
    std::fs::write(
        &bad_label,
        [record(1, 0, 0, 0), record(10, 0, 0, 0)].concat(),
    )
    .unwrap();
    let err = Cifar10::from_files(&[&bad_label]).unwrap_err().to_string();
    assert!(
        err.contains("bad_label.bin") && err.contains("record 1") && err.contains("10"),
        "{err}"
    );

    let err = Cifar10::test(&dir).unwrap_err();
    assert!(
        matches!(&err, DatasetError::Io { path, .. } if path.ends_with("test_batch.bin")),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
