//! Rank-aware sampling for data-parallel training.
//!
//! Every rank builds the same [`DistributedSampler`] (same seed), so all ranks agree on each
//! epoch's order without talking to each other. An epoch is cut into global batches; each global
//! batch is split into contiguous per-rank slices ([`rank_slice`]), so the ranks' shards of an
//! epoch are disjoint. A [`SamplerPosition`] saved in a checkpoint resumes the exact sequence.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::DatasetError;
use firemesh_rng::SplitMix64;

/// What to do when the dataset length is not a multiple of the world size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TailPolicy {
    /// Leave out the last `len % world_size` samples of each (shuffled) epoch.
    DropLast,
    /// Repeat samples from the start of the epoch's order until every rank has as many.
    Pad,
}

/// Where a run stands: the next global batch to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SamplerPosition {
    /// Epoch number (seeds the shuffle).
    pub epoch: u64,
    /// Global batch within the epoch.
    pub step: usize,
}

/// One step's global batch: dataset indices for all ranks together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalBatch {
    /// Position of this batch.
    pub position: SamplerPosition,
    /// Dataset indices; rank `r` takes `indices[rank_slice(indices.len(), world_size, r)]`.
    pub indices: Vec<usize>,
}

/// Deterministic, rank-aware sampler over a dataset of `dataset_len` items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistributedSampler {
    dataset_len: usize,
    world_size: usize,
    global_batch_size: usize,
    seed: u64,
    shuffle: bool,
    tail: TailPolicy,
}

/// The contiguous part of a batch of `len` items that `rank` of `world_size` takes. Sizes
/// differ by at most one; the first `len % world_size` ranks take the larger share.
pub fn rank_slice(len: usize, world_size: usize, rank: usize) -> Range<usize> {
    let base = len / world_size;
    let extra = len % world_size;
    let start = rank * base + rank.min(extra);
    let size = base + usize::from(rank < extra);
    start..start + size
}

impl DistributedSampler {
    /// A shuffling sampler. `global_batch_size` counts samples over all ranks and must be a
    /// positive multiple of `world_size`; the epoch must keep at least one sample per rank.
    pub fn new(
        dataset_len: usize,
        world_size: usize,
        global_batch_size: usize,
        seed: u64,
        tail: TailPolicy,
    ) -> Result<Self, DatasetError> {
        if world_size == 0 {
            return Err(DatasetError::invalid("world_size", "must be at least 1"));
        }
        if global_batch_size == 0 || !global_batch_size.is_multiple_of(world_size) {
            return Err(DatasetError::invalid(
                "global_batch_size",
                format!("must be a positive multiple of the world size {world_size}, got {global_batch_size}"),
            ));
        }
        let sampler = Self {
            dataset_len,
            world_size,
            global_batch_size,
            seed,
            shuffle: true,
            tail,
        };
        if sampler.samples_per_epoch() == 0 {
            return Err(DatasetError::invalid(
                "dataset_len",
                format!("{dataset_len} samples leave nothing for {world_size} ranks with {tail:?}"),
            ));
        }
        Ok(sampler)
    }

    /// Turns shuffling on (the default) or off (epochs visit indices in order).
    pub fn with_shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Samples per epoch over all ranks, after the tail policy: a multiple of the world size.
    pub fn samples_per_epoch(&self) -> usize {
        match self.tail {
            TailPolicy::DropLast => self.dataset_len / self.world_size * self.world_size,
            TailPolicy::Pad => self.dataset_len.div_ceil(self.world_size) * self.world_size,
        }
    }

    /// Global batches per epoch; the last one may be smaller, but is split evenly over ranks.
    pub fn steps_per_epoch(&self) -> usize {
        self.samples_per_epoch().div_ceil(self.global_batch_size)
    }

    /// The epoch's order of dataset indices, identical on every rank for the same seed.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.dataset_len).collect();
        if self.shuffle {
            SplitMix64::from_keys(&[self.seed, epoch]).shuffle(&mut order);
        }
        let samples = self.samples_per_epoch();
        let padding: Vec<usize> = order
            .iter()
            .copied()
            .cycle()
            .take(samples.saturating_sub(order.len()))
            .collect();
        order.truncate(samples);
        order.extend(padding);
        order
    }

    /// Global batches from `position` to the end of its epoch.
    pub fn batches_from(&self, position: SamplerPosition) -> EpochBatches {
        EpochBatches {
            order: self.epoch_order(position.epoch),
            global_batch_size: self.global_batch_size,
            position,
        }
    }

    /// Everything `rank` sees in `epoch`, in order: its slice of every global batch.
    pub fn rank_indices(&self, epoch: u64, rank: usize) -> Result<Vec<usize>, DatasetError> {
        if rank >= self.world_size {
            let reason = format!(
                "must be below the world size {}, got {rank}",
                self.world_size
            );
            return Err(DatasetError::invalid("rank", reason));
        }
        let batches = self.batches_from(SamplerPosition { epoch, step: 0 });
        Ok(batches
            .flat_map(|batch| {
                batch.indices[rank_slice(batch.indices.len(), self.world_size, rank)].to_vec()
            })
            .collect())
    }
}

/// Iterator over the remaining global batches of one epoch.
#[derive(Debug, Clone)]
pub struct EpochBatches {
    order: Vec<usize>,
    global_batch_size: usize,
    position: SamplerPosition,
}

impl EpochBatches {
    /// The position to save so that a resumed run continues with the next batch; after the
    /// last batch of the epoch it is step 0 of the next epoch.
    pub fn next_position(&self) -> SamplerPosition {
        if self.position.step * self.global_batch_size >= self.order.len() {
            SamplerPosition {
                epoch: self.position.epoch + 1,
                step: 0,
            }
        } else {
            self.position
        }
    }
}

impl Iterator for EpochBatches {
    type Item = GlobalBatch;

    fn next(&mut self) -> Option<GlobalBatch> {
        let start = self.position.step.checked_mul(self.global_batch_size)?;
        if start >= self.order.len() {
            return None;
        }
        let end = (start + self.global_batch_size).min(self.order.len());
        let batch = GlobalBatch {
            position: self.position,
            indices: self.order[start..end].to_vec(),
        };
        self.position.step += 1;
        Some(batch)
    }
}
