//! The collective suite on CUDA GPUs: the ranks are the GPUs present, or N logical ranks on one
//! GPU. Skipped with a message where no GPU is present (`FIREMESH_REQUIRE_CUDA=1` fails instead,
//! as `scripts/gpu-check.sh` sets).

mod common;

use common::Harness;
use cubecl::cuda::{CudaDevice, CudaRuntime};
use firemesh_collective::{probe, CollectiveConfig, DType, DeviceBuffer, Group};

struct Cuda;

/// `n` ranks over the GPUs present (round-robin when there are fewer GPUs than ranks).
fn cuda_ranks(n: usize) -> Option<Vec<CudaDevice>> {
    if let Some(reason) = probe::cuda_unavailable_reason() {
        if std::env::var("FIREMESH_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
            panic!("FIREMESH_REQUIRE_CUDA=1 but {reason}");
        }
        eprintln!("SKIPPED: {reason}");
        return None;
    }
    let gpus = probe::cuda_devices();
    Some((0..n).map(|r| gpus[r % gpus.len()].clone()).collect())
}

impl Harness for Cuda {
    type G = Group<CudaRuntime>;

    fn group(&self, n: usize, config: CollectiveConfig) -> Option<Self::G> {
        Some(Group::new_shared(cuda_ranks(n)?).expect("cuda group").with_config(config))
    }

    fn dtypes(&self, g: &Self::G) -> Vec<DType> {
        DType::ALL.into_iter().filter(|&d| g.supports(0, d)).collect()
    }

    fn upload(&self, g: &Self::G, rank: usize, dtype: DType, values: &[f64]) -> DeviceBuffer<CudaRuntime> {
        g.upload(rank, dtype, values).expect("upload")
    }

    fn download(&self, g: &Self::G, buf: &DeviceBuffer<CudaRuntime>) -> Vec<f64> {
        g.download(buf).expect("download")
    }
}

#[test]
fn cuda_every_op_dtype_and_length() {
    common::run_matrix(&Cuda, 8);
}

#[test]
fn cuda_rounding_and_agreement() {
    common::run_rounding(&Cuda, 4, 100_003);
}

#[test]
fn cuda_four_million_elements() {
    for dtype in DType::ALL {
        common::run_large(&Cuda, 8, 4 * 1024 * 1024 + 3, dtype);
    }
}
