//! Data for firemesh's data-parallel training: a rank-aware sampler, image and text sources,
//! and batchers that build each rank's slice directly on that rank's device.
//!
//! - [`DistributedSampler`]: every rank derives the same shuffled order from (seed, epoch),
//!   takes a disjoint slice of each global batch, drops or pads the tail, resumes from a
//!   [`SamplerPosition`].
//! - Sources (Burn [`Dataset`](burn::data::dataset::Dataset)s): [`SyntheticImages`],
//!   [`Cifar10`] (binary format, local files), [`ImageFolder`] (PNG and JPEG in class
//!   sub-folders), and [`TextCorpus`] with a [`ByteTokenizer`] or GPT-2's BPE ([`Gpt2Bpe`])
//!   from local `encoder.json` / `vocab.bpe`.
//! - Batchers: [`shard_image_batch`], [`shard_token_batch`].
//!
//! Nothing is downloaded; a missing or malformed file is a [`DatasetError`] naming it.
//!
//! ```no_run
//! # use burn::prelude::*;
//! # fn demo<B: Backend>(devices: &[B::Device]) -> Result<(), firemesh_datasets::DatasetError> {
//! use burn::data::dataset::Dataset;
//! use firemesh_datasets::{shard_image_batch, Cifar10, DistributedSampler, SamplerPosition, TailPolicy};
//! let data = Cifar10::train("/data/cifar-10-batches-bin")?;
//! let sampler = DistributedSampler::new(data.len(), devices.len(), 256, 42, TailPolicy::DropLast)?;
//! for batch in sampler.batches_from(SamplerPosition::default()) {
//!     let per_rank = shard_image_batch::<B, _>(&data, &batch.indices, devices)?;
//! }
//! # Ok(()) }
//! ```

mod batcher;
mod cifar10;
mod error;
mod image;
mod image_folder;
mod sampler;
mod synthetic;
mod text;

pub use batcher::{shard_batch, shard_image_batch, shard_token_batch, ImageBatch};
pub use cifar10::Cifar10;
pub use error::DatasetError;
pub use image::ImageItem;
pub use image_folder::ImageFolder;
pub use sampler::{
    rank_slice, DistributedSampler, EpochBatches, GlobalBatch, SamplerPosition, TailPolicy,
};
pub use synthetic::{SyntheticImages, SyntheticImagesConfig};
pub use text::{ByteTokenizer, Gpt2Bpe, TextCorpus, Tokenizer};
