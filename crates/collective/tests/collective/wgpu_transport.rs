//! The wgpu transport: staged through a reused upload buffer per destination, with the
//! runtime's client copy for devices this crate did not create.

use crate::common;

use common::{check_all_reduce, check_broadcast, DeviceHarness, Harness};
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use firemesh_collective::transport::WgpuStagedCopy;
use firemesh_collective::{Algorithm, CollectiveConfig, DType, ReduceOp};
use std::sync::Arc;

const POOL: DeviceHarness<WgpuRuntime> = DeviceHarness {
    devices: common::wgpu_or_skip,
    shared: false,
    transfer: firemesh_collective::Transfer::Synchronous,
    one_device_as_peers: false,
};

/// Rank 0 from the pool (staged uploads reach it), rank 1 a device cubecl opened on its own
/// (its queue is out of reach, so copies into it take the fallback).
fn pool_and_foreign(n: usize) -> Option<Vec<WgpuDevice>> {
    assert_eq!(n, 2);
    let mut devices = common::wgpu_or_skip(1)?;
    devices.push(WgpuDevice::Cpu);
    Some(devices)
}

const MIXED: DeviceHarness<WgpuRuntime> = DeviceHarness {
    devices: pool_and_foreign,
    shared: false,
    transfer: firemesh_collective::Transfer::Synchronous,
    one_device_as_peers: false,
};

/// The ring without sub-chunks (as wgpu groups run by default): each step moves whole chunks,
/// so the bigger lengths below are staged and the smaller ones take the queue's own write.
fn ring() -> CollectiveConfig {
    CollectiveConfig {
        pipeline_depth: 1,
        ..CollectiveConfig::with_algorithm(Algorithm::Ring)
    }
}

#[test]
fn staged_copy_is_the_default_and_survives_growing_and_shrinking_transfers() {
    let Some(g) = POOL.group(3, ring()) else {
        return;
    };
    assert_eq!(g.transport_name(), "wgpu-staged");
    let transport = Arc::new(WgpuStagedCopy::default());
    let g = g.with_transport(transport.clone());
    // One group, one upload buffer per destination: it grows to the largest sub-chunk and is
    // then reused for smaller ones, each transfer waiting for the copy out of it before.
    for len in [1 << 20, 1000, 3 << 20, 64, 1 << 16] {
        check_all_reduce(&POOL, &g, DType::F32, len, ReduceOp::Sum);
        check_broadcast(&POOL, &g, DType::F32, len, 2);
    }
    // Chunks of 1 MiB and more were staged, smaller ones took the queue's own write.
    let moved = transport.transfers();
    assert!(moved.staged > 0 && moved.client_copy > 0, "{moved:?}");
}

#[test]
fn devices_outside_the_pool_fall_back_to_the_client_copy() {
    let Some(g) = MIXED.group(2, ring()) else {
        return;
    };
    let transport = Arc::new(WgpuStagedCopy::default());
    let g = g.with_transport(transport.clone());
    // Only transfers of at least 1 MiB to the pool's rank are staged; anything to rank 1 takes
    // the client copy.
    for len in [1, 4099, 1 << 18, 1 << 20] {
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            check_all_reduce(&MIXED, &g, DType::F32, len, op);
        }
        check_broadcast(&MIXED, &g, DType::F32, len, 0);
        check_broadcast(&MIXED, &g, DType::F32, len, 1);
        let moved = transport.transfers();
        assert!(
            moved.client_copy > 0,
            "rank 1 is reached by the client copy: {moved:?}"
        );
        if len <= 4099 {
            assert_eq!(moved.staged, 0, "nothing under 1 MiB is staged: {moved:?}");
        }
    }
    let moved = transport.transfers();
    assert!(
        moved.staged > 0,
        "transfers of 1 MiB to rank 0 are staged: {moved:?}"
    );
}
