//! The tests of the firemesh facade and CLI, in one binary.

mod alloc;
mod bad_input;
mod bench;
mod common;
mod gpu_check;
mod resume;
mod simulate;
mod sources;
mod step;
mod train_job;
