//! The collective suite on CUDA GPUs: the ranks are the GPUs present, or N logical ranks on one
//! GPU. Skipped with a message where no GPU is present (`FIREMESH_REQUIRE_CUDA=1` fails instead,
//! as `scripts/gpu-check.sh` sets).

use crate::common;

use common::DeviceHarness;
use cubecl::cuda::{CudaDevice, CudaRuntime};
use firemesh_collective::{probe, DType};

/// `n` ranks over the GPUs present (round-robin when there are fewer GPUs than ranks).
fn cuda_ranks(n: usize) -> Option<Vec<CudaDevice>> {
    let gpus = common::or_skip(probe::usable_cuda_devices(), "FIREMESH_REQUIRE_CUDA", "")?;
    Some((0..n).map(|r| gpus[r % gpus.len()].clone()).collect())
}

const CUDA: DeviceHarness<CudaRuntime> = DeviceHarness {
    devices: cuda_ranks,
    shared: true,
};

#[test]
fn cuda_every_op_dtype_and_length() {
    common::run_matrix(&CUDA, 8);
}

#[test]
fn cuda_rounding_and_agreement() {
    common::run_rounding(&CUDA, 4, 100_003);
}

#[test]
fn cuda_four_million_elements() {
    for dtype in DType::ALL {
        common::run_large(&CUDA, 8, 4 * 1024 * 1024 + 3, dtype);
    }
}

#[test]
fn cuda_inputs_uploaded_and_results_read_on_other_threads() {
    // 64 MiB per rank: a copy that does not wait for an upload still in flight on another
    // thread's stream reads stale memory.
    for n in [2, 8] {
        common::run_inputs_from_other_threads(&CUDA, n, 16 * 1024 * 1024);
    }
}
