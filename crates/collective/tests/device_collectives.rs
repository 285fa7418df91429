//! The collective suite on CubeCL kernels, over N separate wgpu clients (lavapipe in CI).

mod common;

use common::Harness;
use cubecl::wgpu::WgpuRuntime;
use firemesh_collective::{CollectiveConfig, DType, DeviceBuffer, Group};

struct Wgpu;

impl Harness for Wgpu {
    type G = Group<WgpuRuntime>;

    fn group(&self, n: usize, config: CollectiveConfig) -> Option<Self::G> {
        let devices = common::wgpu_or_skip(n)?;
        Some(Group::new(devices).expect("distinct devices").with_config(config))
    }

    fn dtypes(&self, g: &Self::G) -> Vec<DType> {
        DType::ALL.into_iter().filter(|&d| g.supports(0, d)).collect()
    }

    fn upload(&self, g: &Self::G, rank: usize, dtype: DType, values: &[f64]) -> DeviceBuffer<WgpuRuntime> {
        g.upload(rank, dtype, values).expect("upload")
    }

    fn download(&self, g: &Self::G, buf: &DeviceBuffer<WgpuRuntime>) -> Vec<f64> {
        g.download(buf).expect("download")
    }
}

#[test]
fn every_op_dtype_and_length_for_1_to_8_ranks() {
    common::run_matrix(&Wgpu, 8);
}

#[test]
fn rounding_stays_within_dtype_tolerance_and_ranks_agree() {
    common::run_rounding(&Wgpu, 3, 10_007);
    common::run_rounding(&Wgpu, 8, 4_099);
}

#[test]
fn four_million_elements_f32() {
    for n in 1..=8 {
        common::run_large(&Wgpu, n, 4 * 1024 * 1024 + 3, DType::F32);
    }
}

#[test]
fn four_million_elements_half() {
    // bf16 runs only where the adapter has it (WGSL does not); the portable suite covers it.
    for (n, dtype) in [(2, DType::F16), (5, DType::F16), (8, DType::F16), (4, DType::BF16)] {
        common::run_large(&Wgpu, n, 4 * 1024 * 1024 + 1, dtype);
    }
}

#[test]
fn reports_supported_dtypes() {
    let Some(g) = Wgpu.group(1, CollectiveConfig::default()) else { return };
    let dtypes = Wgpu.dtypes(&g);
    eprintln!("wgpu adapter supports {dtypes:?}");
    assert!(dtypes.contains(&DType::F32), "f32 must be supported everywhere");
}
