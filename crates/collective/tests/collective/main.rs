//! The tests of firemesh-collective, in one binary: the same suite on wgpu devices (lavapipe
//! in CI), on CUDA GPUs (skipped without one) and on the portable path, plus errors.

mod common;

mod cube_tensors;
mod cuda;
mod errors;
mod portable;
mod wgpu;
mod wgpu_transport;
