//! The tests of the firemesh command line (`firemesh train`, `bench`, `simulate`) and its
//! modules, in one binary. (The library's are in crates/firemesh.)

mod bad_input;
mod bench;
mod common;
mod deploy;
mod gpu_check;
mod memory_plan;
#[cfg(feature = "mpi")]
mod mpi;
mod readme;
mod resume;
mod simulate;
mod sources;
mod train_job;
mod world;
