//! The tests of the firemesh library, in one binary. (The command line's are in crates/cli.)

mod alloc;
mod casts;
mod features;
mod memory;
mod mesh;
mod named;
mod precision;
mod spy;
mod step;
mod world;
mod zero;
mod zero3;
