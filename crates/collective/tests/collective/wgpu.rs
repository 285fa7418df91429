//! The collective suite on CubeCL kernels, over N separate wgpu clients (lavapipe in CI).

use crate::common;

use common::{DeviceHarness, Harness};
use cubecl::wgpu::WgpuRuntime;
use firemesh_collective::{CollectiveConfig, DType};

const WGPU: DeviceHarness<WgpuRuntime> = DeviceHarness {
    devices: common::wgpu_or_skip,
    shared: false,
    transfer: firemesh_collective::Transfer::Synchronous,
    one_device_as_peers: false,
};

#[test]
fn every_op_dtype_and_length_for_1_to_8_ranks() {
    common::run_matrix(&WGPU, 8);
}

#[test]
fn many_blocks_gathered_in_place_in_pieces_on_threads() {
    common::run_placed_in_pieces(&WGPU);
}

#[test]
fn rounding_stays_within_dtype_tolerance_and_ranks_agree() {
    common::run_rounding(&WGPU, 3, 10_007);
    common::run_rounding(&WGPU, 8, 4_099);
}

#[test]
fn four_million_elements_f32() {
    // Every rank count runs in the matrix above; at this size, an even, an odd and the
    // largest count (each 16 MiB buffer is checked on the host, element by element).
    for n in [2, 3, 8] {
        common::run_large(&WGPU, n, 4 * 1024 * 1024 + 3, DType::F32);
    }
}

#[test]
fn four_million_elements_half() {
    // bf16 runs only where the runtime has it: WGSL has none, so bf16 is checked by the
    // portable suite (on Flex) and the CUDA suite.
    for (n, dtype) in [
        (2, DType::F16),
        (5, DType::F16),
        (8, DType::F16),
        (4, DType::BF16),
    ] {
        common::run_large(&WGPU, n, 4 * 1024 * 1024 + 1, dtype);
    }
}

#[test]
fn sources_rewritten_after_return_leave_results_unchanged() {
    common::run_sources_rewritten_after_return(&WGPU, 3, 70_001);
}

#[test]
fn inputs_uploaded_and_results_read_on_other_threads() {
    common::run_inputs_from_other_threads(&WGPU, 3, 4 * 1024 * 1024 + 3);
}

#[test]
fn reports_supported_dtypes() {
    let Some(g) = WGPU.group(1, CollectiveConfig::default()) else {
        return;
    };
    let dtypes = WGPU.dtypes(&g);
    eprintln!("wgpu adapter supports {dtypes:?}");
    assert!(
        dtypes.contains(&DType::F32),
        "f32 must be supported everywhere"
    );
}
