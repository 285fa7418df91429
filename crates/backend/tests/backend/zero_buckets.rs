//! The buckets of ZeRO-1: `Partial` tensors reduce-scattered into `Shard(0)` blocks (one
//! collective per bucket, each rank receiving the sum of its rows), and `Shard(0)` tensors
//! gathered back whole; both equal the one-device sums, on the CPU mesh (the portable path)
//! and on wgpu clients (the CubeCL group's kernels).

use crate::common::{assert_close, lift, mesh, rand, Layout, Ref, S};
use burn::tensor::{FloatDType, Tensor, TensorPrimitive};
use firemesh_backend::buckets::{gather_in_buckets, reduce_scatter_in_buckets};
use firemesh_backend::{Placement, ShardedTensor};

type F = ShardedTensor<Ref, firemesh_backend::kind::FloatKind>;

fn sharded<const D: usize>(
    t: &Tensor<Ref, D>,
    m: &firemesh_backend::Mesh<crate::common::Dev>,
    l: Layout,
) -> F {
    lift::<S, D>(t, m, l).into_primitive().tensor()
}

fn value<const D: usize>(t: F) -> burn::tensor::TensorData {
    Tensor::<S, D>::from_primitive(TensorPrimitive::Float(t)).into_data()
}

#[test]
fn partial_gradients_reduce_scatter_to_their_blocks_and_gather_back() {
    let mesh = mesh(3);
    // 7 rows (blocks 3, 2, 2), 4 rows, and 2 rows (fewer than ranks: summed whole).
    let (a, b, c) = (rand([7, 5], 1), rand([4, 3, 2], 2), rand([2, 6], 3));
    for wire in [None, Some(FloatDType::BF16)] {
        let parts = vec![
            sharded(&a, &mesh, Layout::Partial),
            sharded(&b, &mesh, Layout::Partial),
            sharded(&c, &mesh, Layout::Partial),
        ];
        // Buckets of 200 bytes: a (140 bytes) alone, then b (96 bytes) alone.
        let (out, collectives) = reduce_scatter_in_buckets::<Ref>(parts, 200, wire);
        assert_eq!(collectives, 3, "two buckets and the short tensor's sum");
        let placements: Vec<Placement> = out.iter().map(|t| t.placement()).collect();
        assert_eq!(
            placements,
            [
                Placement::Shard(0),
                Placement::Shard(0),
                Placement::Replicated
            ]
        );
        assert_eq!(out[0].shard_sizes(), Some(vec![3, 2, 2]));
        let tolerance = if wire.is_some() { 1e-2 } else { 1e-6 };
        let mut out = out.into_iter();
        let (sa, sb, sc) = (
            out.next().unwrap(),
            out.next().unwrap(),
            out.next().unwrap(),
        );
        let (ga, n) = gather_in_buckets::<Ref>(vec![sa.clone(), sb.clone()], 1 << 20);
        assert_eq!(n, 1, "both in one bucket");
        assert!(ga.iter().all(|t| t.placement() == Placement::Replicated));
        let mut ga = ga.into_iter();
        assert_close(
            value::<2>(ga.next().unwrap()),
            a.to_data(),
            tolerance,
            "a gathered",
        );
        assert_close(
            value::<3>(ga.next().unwrap()),
            b.to_data(),
            tolerance,
            "b gathered",
        );
        assert_close(value::<2>(sa), a.to_data(), tolerance, "a's blocks");
        assert_close(value::<3>(sb), b.to_data(), tolerance, "b's blocks");
        assert_close(value::<2>(sc), c.to_data(), tolerance, "c summed whole");
    }
}

#[test]
fn on_wgpu_clients_the_group_reduce_scatters_a_bucket() {
    use burn_wgpu::Wgpu;
    use firemesh_backend::{shard, stats, Route, Sharded};
    type W = Sharded<Wgpu>;
    let Some(devices) = crate::wgpu::devices(3) else {
        return;
    };
    let mesh = W::mesh(devices.clone()).expect("lavapipe clients work");
    let group = firemesh_collective::Group::<cubecl::wgpu::WgpuRuntime>::new(devices).unwrap();
    mesh.use_collectives::<Wgpu>(group);
    let x = rand([6, 5], 7);
    let want = x.clone().transpose().matmul(x.clone());
    let xs = shard(Tensor::<W, 2>::from_data(x.to_data(), &mesh), 0).unwrap();
    // x^T x over a row-sharded x: one addend per rank.
    let gram: ShardedTensor<Wgpu, _> = xs.clone().transpose().matmul(xs).into_primitive().tensor();
    assert_eq!(gram.placement(), Placement::Partial);
    let ((out, n), counts) =
        stats::count(|| reduce_scatter_in_buckets::<Wgpu>(vec![gram], 1 << 20, None));
    assert_eq!(
        (
            n,
            counts.route(Route::MeshGroup),
            counts.route(Route::PortableGroup)
        ),
        (1, 1, 0)
    );
    assert_eq!(out[0].shard_sizes(), Some(vec![2, 2, 1]));
    let got =
        Tensor::<W, 2>::from_primitive(TensorPrimitive::Float(out.into_iter().next().unwrap()));
    assert_close(
        got.into_data(),
        want.to_data(),
        1e-5,
        "x^T x reduce-scattered",
    );
}

/// In a world of 3 processes (threads joined by a `ThreadWorld`) of 2 ranks each, a bucket is
/// reduce-scattered across the processes: each process receives the sum of its ranks' rows
/// (an all-to-all of one chunk per process, added in process order), and each rank its block
/// of the world's split. The blocks hold the bits of the whole sum across the processes; a
/// tensor whose rows do not split into equal shares per process (7 rows), or give a rank no
/// row (3 rows for 6 ranks), is summed whole.
#[test]
fn across_processes_a_bucket_reduce_scatters_to_the_bits_of_the_whole_sum() {
    use firemesh_backend::{stats, Route};
    let (a, b, c) = (rand([12, 5], 4), rand([7, 3], 5), rand([3, 2], 6));
    let (a, b, c) = (&a, &b, &c);
    let processes = on_cpu_world(|mesh| {
        let partial = || {
            vec![
                sharded(a, mesh, Layout::Partial),
                sharded(b, mesh, Layout::Partial),
                sharded(c, mesh, Layout::Partial),
            ]
        };
        let ((out, collectives), counts) =
            stats::count(|| reduce_scatter_in_buckets::<Ref>(partial(), 1 << 20, None));
        let whole = |t: F| {
            let t = Tensor::<S, 2>::from_primitive(TensorPrimitive::Float(t));
            firemesh_backend::redistribute(t, Placement::Replicated).into_data()
        };
        let sums: Vec<_> = partial().into_iter().map(whole).collect();
        let placements: Vec<_> = out.iter().map(|t| t.placement()).collect();
        let sizes = out[0].shard_sizes();
        let values: Vec<_> = out.into_iter().map(value::<2>).collect();
        (collectives, counts, placements, sizes, values, sums)
    });
    for (p, (collectives, counts, placements, sizes, values, sums)) in
        processes.into_iter().enumerate()
    {
        assert_eq!(
            collectives, 2,
            "process {p}: a's bucket, and b and c summed whole"
        );
        assert!(counts.route(Route::AcrossProcesses) >= 2, "{counts:?}");
        assert_eq!(
            placements,
            [
                Placement::Shard(0),
                Placement::Replicated,
                Placement::Replicated
            ]
        );
        assert_eq!(
            sizes,
            Some(vec![2; 6]),
            "process {p}: 12 rows, 2 per world rank"
        );
        for (i, (got, want)) in values.iter().zip([a, b, c]).enumerate() {
            assert_close(got.clone(), want.to_data(), 1e-6, &format!("tensor {i}"));
        }
        assert_eq!(values, sums, "process {p}: not the bits of the whole sum");
    }
}

/// A bucket of `Shard(0)` tensors (uneven blocks, an empty last block, three shapes) gathered
/// on the CPU mesh, where the ranks share one device: the bits of each tensor gathered alone,
/// each tensor's blocks joined once into a buffer of its own size that every rank shares (no
/// buffer per rank, no bucket buffer cut up after).
#[test]
fn on_one_device_each_gathered_tensor_is_one_buffer_the_ranks_share() {
    let mesh = mesh(3);
    let (a, b, c) = (rand([7, 5], 11), rand([4, 3, 2], 12), rand([5, 2], 13));
    let bucket = vec![
        sharded(&a, &mesh, Layout::Shard(0)),
        sharded(&b, &mesh, Layout::ShardEmptyLast(0)),
        sharded(&c, &mesh, Layout::Shard(0)),
    ];
    let alone = vec![
        gathered_alone::<2>(bucket[0].clone()),
        gathered_alone::<3>(bucket[1].clone()),
        gathered_alone::<2>(bucket[2].clone()),
    ];
    let (gathered, collectives) = gather_in_buckets::<Ref>(bucket, 1 << 20);
    assert_eq!(collectives, 1);
    let want = [a.to_data(), b.to_data(), c.to_data()];
    for (i, (got, alone)) in gathered.into_iter().zip(alone).enumerate() {
        let (buffers, got, alone) = match i {
            1 => (
                buffers::<3>(got.clone()),
                value::<3>(got),
                value::<3>(alone),
            ),
            _ => (
                buffers::<2>(got.clone()),
                value::<2>(got),
                value::<2>(alone),
            ),
        };
        for (rank, buffer) in buffers.iter().enumerate() {
            assert!(
                std::sync::Arc::ptr_eq(buffer, &buffers[0]),
                "tensor {i}, rank {rank}: a buffer of its own"
            );
        }
        assert_eq!(buffers[0].len(), want[i].num_elements() * 4, "tensor {i}");
        assert_eq!(got, alone, "tensor {i}: not the bits of its own gather");
        assert_eq!(got, want[i], "tensor {i}");
    }
}

/// Each rank's buffer under `t`.
fn buffers<const D: usize>(t: F) -> Vec<std::sync::Arc<burn::tensor::Bytes>> {
    let t = Tensor::<S, D>::from_primitive(TensorPrimitive::Float(t));
    (firemesh_backend::shards(t).into_iter())
        .map(|p| p.into_primitive().tensor().data_arc())
        .collect()
}

/// The same kind of bucket on wgpu clients gathered through the CubeCL group's placed
/// all-gather: one collective, the bits of each tensor gathered alone, and each tensor whose
/// bytes are a multiple of the 512-byte alignment a view of the bucket's buffer at its aligned
/// offset (a 140-byte tensor is copied out of it: Burn's slice makes a view only of aligned
/// ends). Then in a world of 3 processes of 2 CPU ranks (gathered rank after rank across the
/// processes, then joined per tensor): the bits of each tensor gathered alone.
#[test]
fn a_bucket_gathers_in_place_through_the_group_and_across_processes() {
    use burn_wgpu::Wgpu;
    use firemesh_backend::{shard, stats, Route, Sharded};
    if let Some(devices) = crate::wgpu::devices(3) {
        type W = Sharded<Wgpu>;
        let mesh = W::mesh(devices.clone()).expect("lavapipe clients work");
        let group = firemesh_collective::Group::<cubecl::wgpu::WgpuRuntime>::new(devices).unwrap();
        mesh.use_collectives::<Wgpu>(group);
        // 512, 1536 and 140 bytes: at 0, 512 and 2048 in the bucket's buffer.
        let inputs = [rand([32, 4], 21), rand([8, 48], 22), rand([5, 7], 23)];
        let blocks = |t: &Tensor<Ref, 2>| {
            let t = Tensor::<W, 2>::from_data(t.to_data(), &mesh);
            shard(t, 0).unwrap().into_primitive().tensor()
        };
        let bucket: Vec<_> = inputs.iter().map(blocks).collect();
        let alone: Vec<_> = (bucket.iter().cloned())
            .map(|t| Tensor::<W, 2>::from_primitive(TensorPrimitive::Float(t)))
            .map(|t| firemesh_backend::redistribute(t, Placement::Replicated).into_data())
            .collect();
        let ((out, n), counts) = stats::count(|| gather_in_buckets::<Wgpu>(bucket, 1 << 20));
        assert_eq!((n, counts.route(Route::MeshGroup)), (1, 1));
        for (i, (got, want)) in out.into_iter().zip(&inputs).enumerate() {
            let got = Tensor::<W, 2>::from_primitive(TensorPrimitive::Float(got));
            let starts: Vec<Option<u64>> = (firemesh_backend::shards(got.clone()).into_iter())
                .map(|p| p.into_primitive().tensor().handle.offset_start)
                .collect();
            match i {
                2 => assert_ne!(starts, vec![Some(2048); 3], "tensor 2: copied out"),
                _ => assert_eq!(starts, vec![Some(512 * i as u64); 3], "tensor {i}: a view"),
            }
            let got = got.into_data();
            assert_eq!(got, alone[i], "tensor {i}: not the bits of its own gather");
            assert_eq!(got, want.to_data(), "tensor {i}");
        }
    }
    let (a, b) = (rand([12, 5], 24), rand([6, 6], 25));
    let (a, b) = (&a, &b);
    let processes = on_cpu_world(|mesh| {
        let bucket = || {
            vec![
                sharded(a, mesh, Layout::Shard(0)),
                sharded(b, mesh, Layout::Shard(0)),
            ]
        };
        let (out, n) = gather_in_buckets::<Ref>(bucket(), 1 << 20);
        let alone: Vec<_> = (bucket().into_iter())
            .map(|t| value::<2>(gathered_alone::<2>(t)))
            .collect();
        (
            n,
            out.into_iter().map(value::<2>).collect::<Vec<_>>(),
            alone,
        )
    });
    for (p, (n, got, alone)) in processes.into_iter().enumerate() {
        assert_eq!(n, 1, "process {p}");
        assert_eq!(
            got, alone,
            "process {p}: not the bits of each tensor's gather"
        );
        assert_eq!(got, [a.to_data(), b.to_data()], "process {p}");
    }
}

/// `t` gathered whole by itself (`Replicated`).
fn gathered_alone<const D: usize>(t: F) -> F {
    let t = Tensor::<S, D>::from_primitive(TensorPrimitive::Float(t));
    let whole = firemesh_backend::redistribute(t, Placement::Replicated);
    whole.into_primitive().tensor()
}

/// `job` on each process of a world of 3 processes (threads joined by a `ThreadWorld`) of 2
/// CPU ranks each; the results in process order.
fn on_cpu_world<T: Send>(
    job: impl Fn(&firemesh_backend::Mesh<crate::common::Dev>) -> T + Sync,
) -> Vec<T> {
    use firemesh_world::{ProcessLink, ThreadWorld};
    let links = ThreadWorld::links(3, std::time::Duration::from_secs(60));
    let job = &job;
    std::thread::scope(|s| {
        let handles: Vec<_> = (links.into_iter())
            .map(|link| {
                s.spawn(move || {
                    let link: std::sync::Arc<dyn ProcessLink> = std::sync::Arc::new(link);
                    let cpus = vec![crate::common::CPU; 2];
                    job(&firemesh_backend::Mesh::in_world(cpus, link).unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
