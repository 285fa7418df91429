//! Ranks on their own threads (`Mesh::set_parallel`): the calling thread runs rank 0 and goes
//! on; ranks 1.. run their shares on their threads, waited for only where their data is read.

use crate::common::{mesh, CPU, S};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use firemesh_backend::{from_shards_int, shards, stats, Mesh};

/// A mesh of 6 ranks that no other test uses, on rank threads.
fn threaded() -> Mesh<crate::common::Dev> {
    let m = mesh(6);
    m.set_parallel(true);
    m
}

/// Rank r's block of a [12] int tensor holds `f(r)` twice.
fn blocks(m: &Mesh<crate::common::Dev>, f: impl Fn(i64) -> i64) -> Tensor<S, 1, Int> {
    let parts = (0..6)
        .map(|r| Tensor::<crate::common::Ref, 1, Int>::from_data([f(r), f(r)], &CPU))
        .collect();
    from_shards_int::<S, 1>(m, parts, 0).expect("six blocks of two")
}

#[test]
fn a_chain_of_ops_is_issued_without_waiting_and_reads_right() {
    let m = threaded();
    let x = Tensor::<S, 2>::ones([12, 3], &m);
    let x = firemesh_backend::shard(x, 0).expect("12 rows over 6 ranks");
    let (y, counts) = stats::count(|| {
        let mut y = x.clone();
        for _ in 0..50 {
            y = (y * 2.0 + 1.0) / 2.0; // y + 0.5, kept in range
        }
        y
    });
    assert_eq!(counts.on_rank_threads, counts.ops, "{counts:?}");
    // Every rank's block, read back: 1 + 50 · 0.5.
    for block in shards(y.clone()) {
        let v: Vec<f32> = block.into_data().to_vec().expect("f32");
        assert_eq!(v, vec![26.0; 6]);
    }
    assert_eq!(y.sum().into_scalar(), 26.0 * 36.0);
    S::sync(&m).expect("sync waits for the rank threads");
}

/// Rank 3 divides by zero on its own thread: the op returns, and reading the result raises the
/// rank's panic, naming it.
#[test]
fn a_panic_on_a_rank_thread_is_raised_where_the_result_is_read() {
    let m = threaded();
    let x = blocks(&m, |r| r + 1);
    let d = blocks(&m, |r| if r == 3 { 0 } else { 1 });
    let q = x / d; // returns: rank 3's share fails on its thread
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.into_data()));
    let message = read.expect_err("the read fails");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("rank 3"), "{message}");
    assert!(message.contains("divide by zero"), "{message}");

    // The rank's thread lives on: the next op on the mesh runs and reads right.
    let x = blocks(&m, |r| r + 1);
    let got = (x * 2).into_data().convert::<i64>();
    let want: Vec<i64> = (0..6).flat_map(|r| [2 * (r + 1), 2 * (r + 1)]).collect();
    assert_eq!(got, TensorData::new(want, [12]));
}

/// Meshes of CPU devices and CUDA GPUs run their ranks on rank threads, meshes of wgpu devices
/// in turn, unless their configuration says otherwise.
#[test]
fn rank_threads_are_the_default_on_the_cpu_and_cuda_but_not_on_wgpu() {
    use firemesh_backend::MeshConfig;
    use firemesh_collective::stream::has_streams;
    assert!(mesh(7).parallel());
    assert!(!has_streams::<crate::common::Dev>());
    assert!(has_streams::<burn_wgpu::WgpuDevice>());
    let wgpu = Mesh::replicate(burn_wgpu::WgpuDevice::Cpu, 2).expect("mesh");
    assert!(!wgpu.parallel());
    // A mesh is only a list of devices until it is used: no GPU is needed to make this one.
    let cuda = Mesh::replicate(cubecl::cuda::CudaDevice::new(0), 2).expect("mesh");
    assert!(cuda.parallel());

    // Configured: the setting holds for every device, and the mesh made with it runs so.
    let in_turn = MeshConfig {
        rank_threads: Some(false),
        ..MeshConfig::default()
    };
    let threads = MeshConfig {
        rank_threads: Some(true),
        lane_poll: Some(std::time::Duration::ZERO),
        ..MeshConfig::default()
    };
    assert!(!in_turn.rank_threads_for::<crate::common::Dev>());
    assert!(threads.rank_threads_for::<burn_wgpu::WgpuDevice>());
    let devices = vec![crate::common::Dev::default(); 11];
    let m = Mesh::with_config(devices.clone(), &in_turn).expect("mesh");
    assert!(!m.parallel());
    let m = Mesh::with_config(devices, &threads).expect("mesh");
    assert!(m.parallel());
    // Rank threads that sleep at once (no polling) run ops as well.
    let x =
        firemesh_backend::shard_int(Tensor::<S, 1, Int>::arange(0..22, &m), 0).expect("22 over 11");
    let got = (x * 2).into_data().convert::<i64>();
    let want: Vec<i64> = (0..22).map(|v| 2 * v).collect();
    assert_eq!(got, TensorData::new(want, [22]));
    m.set_parallel(false);
}
