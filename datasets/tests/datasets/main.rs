//! The tests of firemesh-datasets, in one binary (one link of the Burn stack).

mod batcher;
mod image_folder;
mod image_sources;
mod sampler;
mod text;
