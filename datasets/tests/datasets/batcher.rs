//! Batchers hand each rank its slice of a global batch as tensors on that rank's device.

use burn::backend::flex::FlexDevice;
use burn::backend::Flex;
use burn::data::dataset::Dataset;
use firemesh_datasets::{
    shard_image_batch, shard_token_batch, DatasetError, DistributedSampler, ImageItem,
    SamplerPosition, SyntheticImages, SyntheticImagesConfig, TailPolicy, TextCorpus,
};

type B = Flex;

fn synthetic() -> SyntheticImages {
    let config = SyntheticImagesConfig {
        len: 30,
        num_classes: 5,
        shape: [2, 4, 4],
        noise: 0.3,
        seed: 4,
    };
    SyntheticImages::new(config).unwrap()
}

#[test]
fn image_batches_are_each_ranks_slice_in_order() {
    let data = synthetic();
    let devices = [FlexDevice; 3];
    let sampler = DistributedSampler::new(data.len(), 3, 9, 8, TailPolicy::DropLast).unwrap();
    let global = sampler
        .batches_from(SamplerPosition::default())
        .next()
        .unwrap();
    let batches = shard_image_batch::<B, _>(&data, &global.indices, &devices).unwrap();
    assert_eq!(batches.len(), 3);
    for (rank, batch) in batches.iter().enumerate() {
        assert_eq!(batch.images.dims(), [3, 2, 4, 4]);
        assert_eq!(batch.images.device(), devices[rank]);
        let rank_indices = &global.indices[rank * 3..rank * 3 + 3];
        let labels: Vec<i64> = batch.labels.to_data().convert::<i64>().to_vec().unwrap();
        let expected: Vec<i64> = rank_indices.iter().map(|&i| (i % 5) as i64).collect();
        assert_eq!(labels, expected);
        let pixels: Vec<f32> = batch.images.to_data().to_vec().unwrap();
        let expected: Vec<f32> = rank_indices
            .iter()
            .flat_map(|&i| data.get(i).unwrap().pixels)
            .collect();
        assert_eq!(pixels, expected);
    }
}

#[test]
fn uneven_global_batches_give_the_first_ranks_one_more() {
    let data = synthetic();
    let batches = shard_image_batch::<B, _>(&data, &[0, 1, 2, 3, 4], &[FlexDevice; 3]).unwrap();
    let sizes: Vec<usize> = batches.iter().map(|b| b.labels.dims()[0]).collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[test]
fn token_batches_are_windows_per_rank() {
    let corpus = TextCorpus::from_tokens((0..40).collect(), 4).unwrap();
    assert_eq!(corpus.len(), 9);
    let batches = shard_token_batch::<B, _>(&corpus, &[0, 2, 5, 8], &[FlexDevice; 2]).unwrap();
    assert_eq!(batches[0].dims(), [2, 5]);
    let rank1: Vec<i64> = batches[1].to_data().convert::<i64>().to_vec().unwrap();
    assert_eq!(rank1, [20, 21, 22, 23, 24, 32, 33, 34, 35, 36]);
}

#[test]
fn bad_batches_are_errors() {
    let data = synthetic();
    let devices = [FlexDevice; 2];
    let err = shard_image_batch::<B, _>(&data, &[0], &devices).unwrap_err();
    assert!(err.to_string().contains("global_indices"), "{err}");
    let err = shard_image_batch::<B, _>(&data, &[0, 30], &devices).unwrap_err();
    assert!(matches!(
        err,
        DatasetError::IndexOutOfRange { index: 30, len: 30 }
    ));

    let mixed = vec![
        ImageItem {
            pixels: vec![0.0; 4],
            shape: [1, 2, 2],
            label: 0,
        },
        ImageItem {
            pixels: vec![0.0; 9],
            shape: [1, 3, 3],
            label: 1,
        },
    ];
    let mixed = burn::data::dataset::InMemDataset::new(mixed);
    let err = shard_image_batch::<B, _>(&mixed, &[0, 1], &[FlexDevice])
        .unwrap_err()
        .to_string();
    assert!(err.contains("item 1") && err.contains("[1, 3, 3]"), "{err}");
}
