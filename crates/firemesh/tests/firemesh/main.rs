//! The tests of the firemesh facade and CLI, in one binary.

mod bad_input;
mod common;
mod resume;
mod sources;
mod train_job;
