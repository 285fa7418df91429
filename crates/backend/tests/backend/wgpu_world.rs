//! Worlds of processes (threads joined by a `ThreadWorld`) whose meshes are separate lavapipe
//! clients with the CubeCL group registered: sums go inside each process through the group,
//! across the processes on one buffer, and back through the group.

use crate::common::assert_close;
use crate::wgpu::devices;
use burn::tensor::{Tensor, TensorData};
use burn_wgpu::Wgpu;
use firemesh_backend::{redistribute, MeshCollectives, Placement, Route, Sharded};
use firemesh_collective::CollectiveError;
use firemesh_world::{ProcessLink, ThreadWorld};
use std::sync::{Arc, Mutex};

type W = Sharded<Wgpu>;
type Mesh = firemesh_backend::Mesh<burn_wgpu::WgpuDevice>;
type Flat = Tensor<Wgpu, 1>;

/// The CubeCL group of a process's clients, counting what the mesh asks of it in `tally`.
struct Counted {
    group: firemesh_collective::Group<cubecl::wgpu::WgpuRuntime>,
    tally: Tally,
}

/// The group's collectives since they were last taken.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Calls {
    sums: usize,
    reduce_scatters: usize,
    gathers: usize,
}

#[derive(Clone, Default)]
struct Tally(Arc<Mutex<Calls>>);

impl Tally {
    fn take(&self) -> Calls {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
    fn count(&self, f: impl FnOnce(&mut Calls)) {
        f(&mut self.0.lock().unwrap());
    }
}

impl MeshCollectives<Wgpu> for Counted {
    fn sum(&self, parts: Vec<Flat>) -> Result<Vec<Flat>, CollectiveError> {
        self.tally.count(|c| c.sums += 1);
        self.group.sum(parts)
    }
    fn gather(&self, parts: Vec<Flat>) -> Result<Vec<Flat>, CollectiveError> {
        self.tally.count(|c| c.gathers += 1);
        self.group.gather(parts)
    }
    fn gather_placed(
        &self,
        parts: Vec<Flat>,
        places: &[Vec<std::ops::Range<usize>>],
        len: usize,
    ) -> Result<Vec<Flat>, CollectiveError> {
        self.tally.count(|c| c.gathers += 1);
        self.group.gather_placed(parts, places, len)
    }
    fn reduce_scatter(
        &self,
        parts: Vec<Flat>,
        lens: &[usize],
    ) -> Result<Vec<Flat>, CollectiveError> {
        self.tally.count(|c| c.reduce_scatters += 1);
        self.group.reduce_scatter(parts, lens)
    }
}

/// Runs `job(process, mesh, tally)` on `processes` thread processes of `ranks` wgpu clients
/// each, every mesh summing through a CubeCL group whose calls `tally` counts; their results
/// in process order (`None` without a wgpu adapter).
fn on_world<T: Send>(
    processes: usize,
    ranks: usize,
    job: impl Fn(usize, &Mesh, &Tally) -> T + Sync,
) -> Option<Vec<T>> {
    let devices = devices(processes * ranks)?;
    let links = ThreadWorld::links(processes, std::time::Duration::from_secs(60));
    let job = &job;
    Some(std::thread::scope(|s| {
        let handles: Vec<_> = (links.into_iter().zip(devices.chunks(ranks)))
            .map(|(link, devices)| {
                let devices = devices.to_vec();
                s.spawn(move || {
                    let p = link.process();
                    let link: Arc<dyn ProcessLink> = Arc::new(link);
                    let mesh = W::world_mesh(devices.clone(), link).unwrap();
                    let tally = Tally::default();
                    mesh.use_collectives::<Wgpu>(Counted {
                        group: firemesh_collective::Group::new(devices).unwrap(),
                        tally: tally.clone(),
                    });
                    job(p, &mesh, &tally)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }))
}

/// The calls a step expects of the group.
fn calls(sums: usize, reduce_scatters: usize, gathers: usize) -> Calls {
    Calls {
        sums,
        reduce_scatters,
        gathers,
    }
}

/// A world of 2 processes (threads joined by a `ThreadWorld`) of 2 wgpu clients each, with
/// the CubeCL group registered: a `Partial` sum goes inside each process through the group
/// (reduce-scatter, then all-gather), across the processes on one buffer, and ends as the
/// one-process sum of all 4 addends on every client of every process; a gather crosses the
/// processes and is shared inside each through the group's all-gather.
#[test]
fn a_world_sums_inside_each_process_through_its_group_then_across() {
    let len = 1001;
    let addend = |r: usize| -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 31 + r * 17) % 97) as f32 / 97.0 - 0.5)
            .collect()
    };
    let want: Vec<f32> = (0..len)
        .map(|i| (0..4).map(|r| addend(r)[i]).sum())
        .collect();
    let got = on_world(2, 2, |p, mesh, group| {
        let parts = (0..2)
            .map(|r| {
                let values = addend(2 * p + r);
                Tensor::<Wgpu, 1>::from_floats(values.as_slice(), mesh.device(r))
            })
            .collect();
        let (values, counts) = firemesh_backend::stats::count(|| {
            let t = firemesh_backend::from_parts::<W, 1>(mesh, parts, Placement::Partial).unwrap();
            let summed = redistribute(t, Placement::Replicated);
            let parts = firemesh_backend::shards(summed);
            parts.into_iter().map(|t| t.into_data()).collect::<Vec<_>>()
        });
        assert_eq!(group.take(), calls(0, 1, 1), "the sum: in, across, back");
        // A gather: world rank w holds rows 250 w.. of 0..1000; every client of
        // every process ends with all of them.
        let rows = (0..2)
            .map(|r| {
                let w = 2 * p + r;
                let values: Vec<f32> = (250 * w..250 * (w + 1)).map(|i| i as f32).collect();
                Tensor::<Wgpu, 1>::from_floats(values.as_slice(), mesh.device(r))
            })
            .collect();
        let (gathered, gather_counts) = firemesh_backend::stats::count(|| {
            let t = firemesh_backend::from_parts::<W, 1>(mesh, rows, Placement::Shard(0)).unwrap();
            let whole = redistribute(t, Placement::Replicated);
            let parts = firemesh_backend::shards(whole);
            parts.into_iter().map(|t| t.into_data()).collect::<Vec<_>>()
        });
        assert_eq!(
            gather_counts.route(Route::MeshGroup),
            1,
            "{gather_counts:?}"
        );
        assert_eq!(
            group.take(),
            calls(0, 0, 1),
            "the gather: across, then back"
        );
        let all: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        for data in gathered {
            assert_eq!(
                data.to_vec::<f32>().unwrap(),
                all,
                "process {p}: a gathered part"
            );
        }
        (values, counts)
    });
    let Some(got) = got else { return };
    for (p, (values, counts)) in got.iter().enumerate() {
        assert_eq!(counts.route(Route::AcrossProcesses), 1, "{counts:?}");
        assert_eq!(counts.route(Route::MeshGroup), 1, "{counts:?}");
        for (r, data) in values.iter().enumerate() {
            let what = format!("process {p}, client {r}");
            let want = burn::tensor::TensorData::new(want.clone(), [len]);
            assert_close(data.clone(), want, 1e-6, &what);
            assert_eq!(data, &values[0], "{what}: the clients differ");
        }
        assert_eq!(values[0], got[0].0[0], "process {p} differs from process 0");
    }
}

/// 3 processes of 2 wgpu clients each: a `Partial` sum of 1001 elements crosses the processes
/// whole, one of 20,000 (80 KB) by blocks (an all-to-all, each process summing its block, an
/// all-gather). Either way each rank adds every process's block of the group's reduce-scatter
/// on its own client, and every client of every process ends with the bits of the f32 sum
/// `((a0 + a1) + (a2 + a3)) + (a4 + a5)`: each process's sum, added in process order. Read back
/// (rank 0 only) it is the same bits.
#[test]
fn a_world_of_3_processes_sums_whole_and_by_blocks_on_each_client_in_process_order() {
    let addend = |w: usize, len: usize| -> Vec<f32> {
        (0..len)
            .map(|i| (((i * 7919 + w * 104_729) % 10_007) as f32 / 1_001.0).sin() * 3.0)
            .collect()
    };
    for len in [1001, 20_000] {
        let a: Vec<Vec<f32>> = (0..6).map(|w| addend(w, len)).collect();
        let want: Vec<f32> = (0..len)
            .map(|i| {
                let node = |p: usize| a[2 * p][i] + a[2 * p + 1][i];
                (node(0) + node(1)) + node(2)
            })
            .collect();
        let got = on_world(3, 2, |p, mesh, group| {
            let partial = || {
                let parts = (0..2)
                    .map(|r| {
                        Tensor::<Wgpu, 1>::from_floats(a[2 * p + r].as_slice(), mesh.device(r))
                    })
                    .collect();
                firemesh_backend::from_parts::<W, 1>(mesh, parts, Placement::Partial).unwrap()
            };
            let (on_clients, counts) = firemesh_backend::stats::count(|| {
                let summed = redistribute(partial(), Placement::Replicated);
                let parts = firemesh_backend::shards(summed);
                parts.into_iter().map(|t| t.into_data()).collect::<Vec<_>>()
            });
            assert_eq!(counts.route(Route::MeshGroup), 1, "{counts:?}");
            assert_eq!(
                group.take(),
                calls(0, 1, 1),
                "{len} elements, to every rank"
            );
            let read_back = partial().into_data();
            assert_eq!(group.take(), calls(0, 1, 0), "{len} elements, read back");
            (on_clients, read_back)
        });
        let Some(got) = got else { return };
        let want = TensorData::new(want, [len]);
        for (p, (on_clients, read_back)) in got.into_iter().enumerate() {
            for (r, data) in on_clients.into_iter().enumerate() {
                assert_eq!(data, want, "{len} elements: process {p}, client {r}");
            }
            assert_eq!(read_back, want, "{len} elements: process {p}, read back");
        }
    }
}

/// 3 processes of 2 wgpu clients each: a tensor sharded along dim 1 in uneven blocks (each
/// process holds 7 columns of a 3 × 21 matrix, its rank 0 four and its rank 1 three) gathers
/// through the processes and the group to the whole matrix on every client of every process,
/// and reads back (rank 0 only, without the group) the same.
#[test]
fn a_world_of_3_processes_gathers_an_uneven_dim_1_shard_on_every_client() {
    let value = |row: usize, col: usize| (100 * row + col) as f32;
    let want: Vec<f32> = (0..3)
        .flat_map(|row| (0..21).map(move |col| value(row, col)))
        .collect();
    let got = on_world(3, 2, |p, mesh, group| {
        let sharded = || {
            let parts = (0..2)
                .map(|r| {
                    let (first, cols) = [(7 * p, 4), (7 * p + 4, 3)][r];
                    let block: Vec<f32> = (0..3)
                        .flat_map(|row| (first..first + cols).map(move |col| value(row, col)))
                        .collect();
                    let data = TensorData::new(block, [3, cols]);
                    Tensor::<Wgpu, 2>::from_data(data, mesh.device(r))
                })
                .collect();
            firemesh_backend::from_parts::<W, 2>(mesh, parts, Placement::Shard(1)).unwrap()
        };
        let (on_clients, counts) = firemesh_backend::stats::count(|| {
            let whole = redistribute(sharded(), Placement::Replicated);
            let parts = firemesh_backend::shards(whole);
            parts.into_iter().map(|t| t.into_data()).collect::<Vec<_>>()
        });
        assert_eq!(counts.route(Route::MeshGroup), 1, "{counts:?}");
        assert_eq!(
            group.take(),
            calls(0, 0, 1),
            "across, then the group's gather"
        );
        let read_back = sharded().into_data();
        assert_eq!(group.take(), calls(0, 0, 0), "read back on rank 0");
        (on_clients, read_back)
    });
    let Some(got) = got else { return };
    let want = TensorData::new(want, [3, 21]);
    for (p, (on_clients, read_back)) in got.into_iter().enumerate() {
        for (r, data) in on_clients.into_iter().enumerate() {
            assert_eq!(data, want, "process {p}, client {r}");
        }
        assert_eq!(read_back, want, "process {p}, read back");
    }
}

/// 3 processes of 2 wgpu clients each: ZeRO-1's bucket of three gradients (12 × 5, 18 × 3, and
/// 21 × 2, whose 7 rows per process split 4 and 3; one addend per client) is reduce-scattered
/// through each process's group and one all-to-all across the processes; every world rank
/// receives its rows of the world's sum, with the bits of the whole sum (each process's sum of
/// its 2 addends, added in process order).
#[test]
fn a_world_of_3_processes_reduce_scatters_a_bucket_through_its_groups() {
    use burn::tensor::TensorPrimitive;
    use firemesh_backend::buckets::reduce_scatter_in_buckets;
    type F = firemesh_backend::ShardedTensor<Wgpu, firemesh_backend::kind::FloatKind>;
    let addend = |w: usize, rows: usize, cols: usize| -> TensorData {
        let values = (0..rows * cols)
            .map(|i| (((i * 7919 + w * 104_729) % 10_007) as f32 / 1_001.0).sin() * 3.0)
            .collect();
        TensorData::new(values, [rows, cols])
    };
    let shapes = [(12, 5), (18, 3), (21, 2)];
    let got = on_world(3, 2, |p, mesh, group| {
        let partial = |(rows, cols): (usize, usize)| -> F {
            let parts = (0..2)
                .map(|r| {
                    Tensor::<Wgpu, 2>::from_data(addend(2 * p + r, rows, cols), mesh.device(r))
                })
                .collect();
            let t = firemesh_backend::from_parts::<W, 2>(mesh, parts, Placement::Partial).unwrap();
            t.into_primitive().tensor()
        };
        let read = |t: F| {
            let t = Tensor::<W, 2>::from_primitive(TensorPrimitive::Float(t));
            redistribute(t, Placement::Replicated).into_data()
        };
        let ((out, collectives), counts) = firemesh_backend::stats::count(|| {
            reduce_scatter_in_buckets::<Wgpu>(shapes.map(partial).to_vec(), 1 << 20, None)
        });
        assert_eq!(collectives, 1, "one bucket");
        assert_eq!(counts.route(Route::MeshGroup), 1, "{counts:?}");
        assert_eq!(
            group.take(),
            calls(0, 1, 0),
            "the group's reduce-scatter, then across"
        );
        let sizes: Vec<_> = out.iter().map(|t| t.shard_sizes()).collect();
        let uneven = Some(vec![4, 3, 4, 3, 4, 3]);
        assert_eq!(sizes, [Some(vec![2; 6]), Some(vec![3; 6]), uneven]);
        let scattered: Vec<_> = out.into_iter().map(read).collect();
        let whole: Vec<_> = shapes.map(partial).into_iter().map(read).collect();
        (scattered, whole)
    });
    let Some(got) = got else { return };
    for (p, (scattered, whole)) in got.iter().enumerate() {
        assert_eq!(
            scattered, whole,
            "process {p}: not the bits of the whole sum"
        );
        assert_eq!(
            scattered, &got[0].1,
            "process {p}: another sum than process 0's"
        );
    }
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let want: Vec<f32> = (0..rows * cols)
            .map(|j| {
                let a = |w: usize| addend(w, rows, cols).to_vec::<f32>().unwrap()[j];
                (a(0) + a(1)) + (a(2) + a(3)) + (a(4) + a(5))
            })
            .collect();
        assert_eq!(
            got[0].1[i],
            TensorData::new(want, [rows, cols]),
            "gradient {i}"
        );
    }
}
