//! Batches built per rank, directly on each rank's device.
//!
//! Given one step's global batch of dataset indices, rank `r` gets the items at
//! [`rank_slice`] of it, turned into tensors created on `devices[r]`: nothing is gathered
//! through one device.

use burn::data::dataset::Dataset;
use burn::prelude::*;

use crate::error::DatasetError;
use crate::image::ImageItem;
use crate::sampler::rank_slice;

/// One rank's share of an image batch.
#[derive(Debug, Clone)]
pub struct ImageBatch<B: Backend> {
    /// `[local_batch, channels, height, width]`, values in [0, 1].
    pub images: Tensor<B, 4>,
    /// `[local_batch]` class indices.
    pub labels: Tensor<B, 1, Int>,
}

/// Fetches each rank's slice of `global_indices` and lets `collate` build that rank's batch.
/// Every rank must get at least one item.
pub fn shard_batch<I, D, T>(
    dataset: &D,
    global_indices: &[usize],
    world_size: usize,
    mut collate: impl FnMut(usize, Vec<(usize, I)>) -> Result<T, DatasetError>,
) -> Result<Vec<T>, DatasetError>
where
    D: Dataset<I> + ?Sized,
{
    if world_size == 0 || global_indices.len() < world_size {
        let reason = format!(
            "{} indices cannot give each of {world_size} ranks at least one sample",
            global_indices.len()
        );
        return Err(DatasetError::invalid("global_indices", reason));
    }
    (0..world_size)
        .map(|rank| {
            let items = global_indices[rank_slice(global_indices.len(), world_size, rank)]
                .iter()
                .map(|&index| {
                    let item = dataset.get(index).ok_or(DatasetError::IndexOutOfRange {
                        index,
                        len: dataset.len(),
                    })?;
                    Ok((index, item))
                })
                .collect::<Result<Vec<_>, DatasetError>>()?;
            collate(rank, items)
        })
        .collect()
}

/// Per-rank image batches: rank `r`'s tensors are created on `devices[r]`.
pub fn shard_image_batch<B: Backend, D: Dataset<ImageItem> + ?Sized>(
    dataset: &D,
    global_indices: &[usize],
    devices: &[B::Device],
) -> Result<Vec<ImageBatch<B>>, DatasetError> {
    shard_batch(dataset, global_indices, devices.len(), |rank, items| {
        let (first_index, first) = &items[0];
        let shape = first.shape;
        let mut pixels = Vec::with_capacity(items.len() * first.pixels.len());
        let mut labels = Vec::with_capacity(items.len());
        for (index, item) in &items {
            if item.shape != shape || item.pixels.len() != shape.iter().product::<usize>() {
                let reason = format!(
                    "item {index} has shape {:?} with {} values; item {first_index} in the same batch has shape {shape:?}",
                    item.shape,
                    item.pixels.len()
                );
                return Err(DatasetError::invalid("global_indices", reason));
            }
            pixels.extend_from_slice(&item.pixels);
            labels.push(item.label as i64);
        }
        let [c, h, w] = shape;
        let device = &devices[rank];
        Ok(ImageBatch {
            images: Tensor::from_data(TensorData::new(pixels, [labels.len(), c, h, w]), device),
            labels: Tensor::from_data(TensorData::new(labels.clone(), [labels.len()]), device),
        })
    })
}

/// Per-rank token batches `[local_batch, window]` (e.g. from a
/// [`TextCorpus`](crate::TextCorpus)); rank `r`'s tensor is created on `devices[r]`.
pub fn shard_token_batch<B: Backend, D: Dataset<Vec<u32>> + ?Sized>(
    dataset: &D,
    global_indices: &[usize],
    devices: &[B::Device],
) -> Result<Vec<Tensor<B, 2, Int>>, DatasetError> {
    shard_batch(dataset, global_indices, devices.len(), |rank, items| {
        let window = items[0].1.len();
        let mut ids = Vec::with_capacity(items.len() * window);
        for (index, item) in &items {
            if item.len() != window {
                let reason = format!(
                    "item {index} has {} tokens, others in its batch {window}",
                    item.len()
                );
                return Err(DatasetError::invalid("global_indices", reason));
            }
            ids.extend(item.iter().map(|&t| i64::from(t)));
        }
        Ok(Tensor::from_data(
            TensorData::new(ids, [items.len(), window]),
            &devices[rank],
        ))
    })
}
