//! Burn ops and collectives on the same CubeCL devices from several threads at once, for a
//! bounded time: the wrong element that collectives met beside Burn ops came from
//! buffers that crossed CubeCL streams. Every result is checked exactly.
//!
//! Five threads share the devices:
//! - an uploader makes each rank's input with plain Burn ops on its own thread (every fourth
//!   round a transposed matrix, which the collective must copy into a contiguous buffer);
//! - a summer all-reduces them through the CubeCL group and through the portable group, and
//!   drops the inputs while the other threads work;
//! - a reader reads the sums back on a third thread;
//! - a churner computes with Burn ops on every device (allocating and freeing);
//! - a trainer runs SGD steps of a small MLP on `Sharded` over the same devices, with early
//!   buckets summed during each backward pass, and compares every run with the first one,
//!   bit for bit.

use crate::common;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use firemesh_backend::{buckets, shard, Sharded};
use firemesh_collective::{Group, PortableGroup, ReduceOp, TensorCollectives};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    a: Linear<B>,
    b: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            a: LinearConfig::new(8, 32).init(device),
            b: LinearConfig::new(32, 4).init(device),
        }
    }

    fn loss(&self, x: Tensor<B, 2>) -> Tensor<B, 1> {
        self.b
            .forward(self.a.forward(x).tanh())
            .powf_scalar(2.0)
            .mean()
    }
}

/// Integer values in [-15, 15]: sums over a few ranks are exact in f32.
fn integers(seed: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed * 13 + i / 5) % 31) as f32 - 15.0)
        .collect()
}

fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// Lengths the uploader cycles through: small and large, so freed memory is handed out again.
const LENGTHS: [usize; 4] = [1 << 10, (1 << 18) + 3, 1 << 16, (1 << 20) + 7];

/// Rank r's input of round `round`: a `[rows, 4]` matrix (`len` values rounded down to whole
/// rows) on `device`, transposed every fourth round (a non-contiguous tensor, which the
/// collective copies into a contiguous buffer); and its values in row-major order.
fn input<B: Backend>(
    round: usize,
    r: usize,
    len: usize,
    device: &B::Device,
) -> (Tensor<B, 2>, Vec<f32>) {
    let rows = len / 4;
    let matrix = integers(round + r, rows * 4);
    if round % 4 != 3 {
        let t = Tensor::from_data(TensorData::new(matrix.clone(), [rows, 4]), device);
        return (t, matrix);
    }
    let seen = (0..4 * rows)
        .map(|k| matrix[(k % rows) * 4 + k / rows])
        .collect();
    let t = Tensor::<B, 2>::from_data(TensorData::new(matrix, [rows, 4]), device);
    (t.transpose(), seen)
}

/// The stress run, for `seconds`, over `devices` (a rank each) of the CubeCL backend `Inner`
/// on runtime `R`, with the group that `$group` makes of them.
macro_rules! stress {
    ($inner:ty, $runtime:ty, $devices:expr, $group:expr, $seconds:expr) => {{
        let stress = Duration::from_secs($seconds);
        type Inner = $inner;
        type Mesh = Sharded<Inner>;
        type MeshAd = burn::backend::Autodiff<Mesh>;
        let devices = $devices;
        let n = devices.len();
        let group: Group<$runtime> = $group(devices.clone());
        let portable = PortableGroup::<Inner>::new_shared(devices.clone()).unwrap();
        let mesh = Mesh::mesh(devices.clone()).expect("the devices work");
        mesh.use_collectives::<Inner>($group(devices.clone()));

        // The reference training run, alone.
        let init = Mlp::<MeshAd>::new(&mesh);
        let _ = common::params(&init); // draws the lazy initial values once
        let inputs: Vec<TensorData> = (0..3)
            .map(|s| TensorData::new(integers(s, 6 * n * 8), [6 * n, 8]))
            .collect();
        let train = |record| {
            let mut model = Mlp::<MeshAd>::new(&mesh).load_record(record);
            let mut optim = SgdConfig::new().init::<MeshAd, Mlp<MeshAd>>();
            let mut losses = Vec::new();
            for x in &inputs {
                let x = shard(Tensor::<MeshAd, 2>::from_data(x.clone(), &mesh), 0).unwrap();
                let loss = model.loss(x.mul_scalar(0.01));
                let early = buckets::EarlyBuckets::new(64);
                let armed = early.arm(&mesh);
                let grads = loss.backward();
                drop(armed);
                assert!(early.close() >= 2, "early buckets were summed");
                losses.push(loss.into_scalar());
                let grads = GradientsParams::from_grads(grads, &model);
                model = optim.step(0.05, model, grads);
            }
            (losses, common::params(&model))
        };
        let want = train(init.clone().into_record());

        let deadline = Instant::now() + stress;
        let (to_summer, uploads) = sync_channel::<(Vec<Tensor<Inner, 2>>, Vec<f32>)>(2);
        let (to_reader, sums) = sync_channel::<(Vec<Tensor<Inner, 2>>, Vec<f32>, &'static str)>(2);
        let (devices, group, portable, train, want) = (&devices, &group, &portable, &train, &want);
        let rounds = std::thread::scope(|s| {
            // Each queue's sender moves into its thread: the next thread stops when it ends.
            let uploader = s.spawn(move || {
                let mut round = 0;
                while Instant::now() < deadline {
                    let len = LENGTHS[round % LENGTHS.len()];
                    let (tensors, values): (Vec<_>, Vec<_>) = devices
                        .iter()
                        .enumerate()
                        .map(|(r, d)| input::<Inner>(round, r, len, d))
                        .unzip();
                    let want: Vec<f32> = (0..values[0].len())
                        .map(|i| values.iter().map(|v| v[i]).sum())
                        .collect();
                    if to_summer.send((tensors, want)).is_err() {
                        break;
                    }
                    round += 1;
                }
                round
            });
            let summer = s.spawn(move || {
                for (round, (tensors, want)) in uploads.iter().enumerate() {
                    let (summed, by) = if round % 2 == 0 {
                        (
                            group.all_reduce_tensors(tensors, ReduceOp::Sum),
                            "the CubeCL group",
                        )
                    } else {
                        (
                            portable.all_reduce_tensors(tensors, ReduceOp::Sum),
                            "the portable group",
                        )
                    };
                    if to_reader
                        .send((summed.expect("all-reduce"), want, by))
                        .is_err()
                    {
                        break;
                    }
                }
            });
            let reader = s.spawn(move || {
                for (round, (sums, want, by)) in sums.iter().enumerate() {
                    for (r, t) in sums.into_iter().enumerate() {
                        let got = host(t);
                        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                            panic!(
                                "round {round}, sum by {by}, rank {r}, {} elements: \
                                 element {i}: got {}, want {}",
                                want.len(),
                                got[i],
                                want[i]
                            );
                        }
                    }
                }
            });
            let churner = s.spawn(move || {
                let mut round = 0;
                while Instant::now() < deadline {
                    for (r, d) in devices.iter().enumerate() {
                        let len = LENGTHS[(round + r) % LENGTHS.len()] / 2;
                        let v = integers(round * 3 + r, len);
                        let t = Tensor::<Inner, 1>::from_data(TensorData::new(v.clone(), [len]), d);
                        let got = host(t.clone().mul_scalar(2.0).add_scalar(1.0) - t);
                        let i = (0..len).find(|&i| got[i] != v[i] + 1.0);
                        assert!(
                            i.is_none(),
                            "churn round {round}, device {r}: element {i:?}"
                        );
                    }
                    round += 1;
                }
                round
            });
            let init = &init;
            let trainer = s.spawn(move || {
                let mut runs = 0;
                while Instant::now() < deadline {
                    let got = train(init.clone().into_record());
                    assert_eq!(
                        got.0, want.0,
                        "training run {runs}: the losses, bit for bit"
                    );
                    assert!(
                        got.1 == want.1,
                        "training run {runs}: the parameters, bit for bit"
                    );
                    runs += 1;
                }
                runs
            });
            let rounds = uploader.join();
            // The summer and the reader end once the uploader's queue closes.
            summer.join().expect("the summer");
            reader.join().expect("the reader");
            let churned = churner.join().expect("the churner");
            let runs = trainer.join().expect("the trainer");
            (rounds.expect("the uploader"), churned, runs)
        });
        println!(
            "{} ranks: {} sums, {} churn rounds, {} training runs in {stress:?}",
            n, rounds.0, rounds.1, rounds.2
        );
        assert!(
            rounds.0 >= 4 && rounds.1 >= 1 && rounds.2 >= 1,
            "{rounds:?}"
        );
    }};
}

#[test]
fn burn_ops_and_collectives_share_wgpu_devices_from_many_threads() {
    let Some(devices) = crate::wgpu::devices(3) else {
        return;
    };
    stress!(
        burn_wgpu::Wgpu,
        cubecl::wgpu::WgpuRuntime,
        devices,
        |d| Group::new(d).unwrap(),
        20
    );
}

/// The same with two ranks on one wgpu device, as on a machine with one GPU: the portable group
/// then adds the ranks' tensors into one in place and drops the others.
#[test]
fn burn_ops_and_collectives_share_one_wgpu_device_from_many_threads() {
    let Some(devices) = crate::wgpu::devices(1) else {
        return;
    };
    stress!(
        burn_wgpu::Wgpu,
        cubecl::wgpu::WgpuRuntime,
        vec![devices[0].clone(); 2],
        |d| Group::new_shared(d).unwrap(),
        15
    );
}

/// The same on CUDA: the GPUs present, or two ranks on one GPU (`FIREMESH_REQUIRE_CUDA=1`, as
/// `scripts/gpu-check.sh` sets, makes a missing GPU a failure). CUDA's streams run side by side
/// on the device, so a buffer crossing them races for real there.
#[test]
fn burn_ops_and_collectives_share_cuda_devices_from_many_threads() {
    use cubecl::cuda::CudaRuntime;
    let Some(gpus) = crate::common::cuda_gpus() else {
        return;
    };
    let devices: Vec<_> = (0..gpus.len().max(2))
        .map(|r| gpus[r % gpus.len()].clone())
        .collect();
    stress!(
        burn_cubecl::CubeBackend<CudaRuntime, f32, i32, u8>,
        CudaRuntime,
        devices,
        |d| Group::new_shared(d).unwrap(),
        30
    );
}

/// Every part that `Sharded<Wgpu>` makes lives on the device stream, from rank threads as from
/// the calling thread: the parameters and gradients of a run with early buckets summed by the
/// CubeCL group, and a batch given as parts made on this test's own thread (handed over).
#[test]
fn every_part_of_a_wgpu_run_lives_on_the_device_stream() {
    use burn::module::{ModuleVisitor, Param};
    use firemesh_backend::{from_shards, shards};
    use firemesh_collective::stream::primitive_stream;
    use firemesh_collective::DeviceStream;
    type W = Sharded<burn_wgpu::Wgpu>;
    type WAd = burn::backend::Autodiff<W>;

    /// The CubeCL streams of the parts of every parameter, and of its gradient.
    struct Streams<'g>(
        &'g <WAd as burn::tensor::backend::AutodiffBackend>::Gradients,
        Vec<String>,
    );
    impl ModuleVisitor<WAd> for Streams<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<WAd, D>>) {
            let grad = param
                .val()
                .grad(self.0)
                .expect("every parameter has a gradient");
            let parts = shards(param.val()).into_iter().chain(shards(grad));
            for (i, part) in parts.enumerate() {
                let stream = primitive_stream(&part.into_primitive().tensor());
                if stream != Some(DeviceStream::id()) {
                    self.1
                        .push(format!("parameter {:?} part {i}: {stream:?}", param.id));
                }
            }
        }
    }

    let Some(devices) = crate::wgpu::devices(4) else {
        return;
    };
    let mesh = W::mesh(devices.clone()).expect("the devices work");
    mesh.use_collectives::<burn_wgpu::Wgpu>(Group::new(devices.clone()).unwrap());
    for parallel in [false, true] {
        mesh.set_parallel(parallel);
        let model = Mlp::<WAd>::new(&mesh);
        // The batch's parts are made here, on this thread's own stream, and handed over.
        let parts: Vec<Tensor<burn_wgpu::Wgpu, 2>> = devices
            .iter()
            .enumerate()
            .map(|(r, d)| Tensor::from_data(TensorData::new(integers(r, 16), [2, 8]), d))
            .collect();
        let x = from_shards::<WAd, 2>(&mesh, parts, 0).expect("one part per rank");
        for (r, part) in shards(x.clone()).into_iter().enumerate() {
            let stream = primitive_stream(&part.into_primitive().tensor());
            assert_eq!(
                stream,
                Some(DeviceStream::id()),
                "batch part {r} handed over"
            );
        }
        let early = buckets::EarlyBuckets::new(64);
        let armed = early.arm(&mesh);
        let grads = model.loss(x.mul_scalar(0.01)).backward();
        drop(armed);
        assert!(early.close() >= 2, "early buckets were summed");
        let mut streams = Streams(&grads, Vec::new());
        model.visit(&mut streams);
        assert!(
            streams.1.is_empty(),
            "rank threads {parallel}: {:#?}",
            streams.1
        );
    }
    mesh.set_parallel(false);
}
