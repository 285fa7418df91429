//! The tests of `Sharded<B>`, in one binary (one link of the Burn stack instead of one per file).

#[macro_use]
mod common;

mod api;
mod autocast;
mod cube_autocast;
mod early_buckets;
mod empty_blocks;
mod errors;
mod gradients;
mod learner;
mod narrow_ops;
mod ops;
mod parameter_casts;
mod parameter_gathers;
mod random;
mod rank_threads;
mod stress;
mod table;
mod training;
mod wgpu;

mod wgpu_world;
mod world_sums;
mod zero_buckets;
