//! All-reduce bandwidth: ours against burn-collective's ring on the same data, side by side in one
//! run, with the host memcpy bound; on CUDA also against NCCL (feature `nccl`) and the device's
//! own copy bandwidth. Writes benches/results/allreduce.{json,md}.
//!
//! cargo run --release -p firemesh-benches --features burn-collective --bin allreduce -- --max-mib 16

use burn_flex::{Flex, FlexDevice};
use burn_tensor::Tensor;
use clap::Parser;
use cubecl::wgpu::WgpuRuntime;
use firemesh_benches::{memcpy_gbps, seconds, size_label, time_median, write_results, Row};
use firemesh_collective::{
    probe, transport::ClientCopy, wgpu_devices::wgpu_devices, CollectiveConfig, CollectiveRuntime,
    Collectives, DType, Engine, Group, PortableGroup, ReduceOp, Transfer,
};
use std::sync::Arc;

type Cpu = Flex;

#[derive(Parser)]
struct Args {
    /// Rank counts to measure.
    #[arg(long, value_delimiter = ',', default_values_t = vec![2, 4, 8])]
    ranks: Vec<usize>,
    /// Smallest message per rank, KiB (sizes grow 4× from here).
    #[arg(long, default_value_t = 4)]
    min_kib: usize,
    /// Largest message per rank, MiB.
    #[arg(long, default_value_t = 256)]
    max_mib: usize,
    /// Timed repetitions per point (the median is reported).
    #[arg(long, default_value_t = 5)]
    iters: usize,
    /// Largest message measured on the CPU (Flex) rows, MiB.
    #[arg(long, default_value_t = 256)]
    cpu_max_mib: usize,
    /// Skip the wgpu (software Vulkan on a machine without GPU) measurements.
    #[arg(long)]
    no_wgpu: bool,
    /// Move wgpu data with the runtime's client copy instead of the default staged transport.
    #[arg(long)]
    wgpu_client_copy: bool,
    /// Also time NCCL's all-reduce on the CUDA rows (needs the `nccl` feature and libnccl).
    #[arg(long)]
    nccl: bool,
    /// Output folder.
    #[arg(long, default_value = "benches/results")]
    out: String,
}

fn main() {
    let args = Args::parse();
    let (cuda, no_cuda) = match probe::usable_cuda_devices() {
        Ok(devices) => (devices, None),
        Err(reason) => {
            eprintln!("no CUDA rows: {reason}");
            (Vec::new(), Some(reason))
        }
    };
    let wgpu = if args.no_wgpu {
        None
    } else {
        wgpu_devices(*args.ranks.iter().max().unwrap_or(&2)).ok()
    };
    let mut sizes = vec![];
    let mut b = args.min_kib << 10;
    while b <= args.max_mib << 20 {
        sizes.push(b);
        b *= 4;
    }
    let mut rows = Vec::new();
    let mut md = String::from("# All-reduce (sum, f32) bus bandwidth, GB/s\n\n");
    md += "busbw = algbw·2(N-1)/N. `ours` and `burn-collective` on Flex run on the same data in the same run;\n";
    md += "burn-collective 0.21 cannot move tensors between wgpu devices, so it is compared on Flex only.\n\n";
    md += "| N | size | ours cuda | ours cuda stream | stream/sync | NCCL cuda | ours/NCCL | ours NCCL engine | ring/engine | cuda copy | ours cuda / copy | ours wgpu | ours flex | burn-collective flex | ours/peer (flex) | host memcpy | ours wgpu / memcpy | ours flex / memcpy |\n";
    md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    let mut nccl_notes = Vec::new();
    // The device's copy bandwidth per size (on the first GPU), measured once.
    let copies: Vec<Option<f64>> = sizes
        .iter()
        .map(|&bytes| {
            let device = cuda.first()?;
            let row = copy_point::<burn_cuda::Cuda>(device, bytes / 4, args.iters);
            let gbps = row.algbw_gbps;
            rows.push(row);
            Some(gbps)
        })
        .collect();
    for &n in &args.ranks {
        for (&bytes, copy) in sizes.iter().zip(&copies) {
            let len = bytes / 4;
            let memcpy = memcpy_gbps(bytes);
            let nccl_row = (args.nccl && !cuda.is_empty())
                .then(|| {
                    let devices: Vec<_> = (0..n).map(|r| cuda[r % cuda.len()].clone()).collect();
                    nccl_point(&devices, len, args.iters)
                        .map_err(|e| nccl_notes.push(format!("N={n}, {}: {e}", size_label(bytes))))
                        .ok()
                })
                .flatten();
            // Both CUDA transfers on the same buffers: each transfer waiting on the host, and
            // transfers ordered on the devices' streams.
            let mut cuda_point = |implementation: &str, transfer: Transfer, engine: Engine| {
                if cuda.is_empty() {
                    return None;
                }
                let devices: Vec<_> = (0..n).map(|r| cuda[r % cuda.len()].clone()).collect();
                let config = CollectiveConfig {
                    engine,
                    ..CollectiveConfig::with_transfer(transfer)
                };
                let group = Group::<cubecl::cuda::CudaRuntime>::new_shared(devices)
                    .expect("cuda group")
                    .with_config(config);
                if let Err(e) = group.engine() {
                    nccl_notes.push(format!("N={n}, {}: {e}", size_label(bytes)));
                    return None;
                }
                device_point(implementation, "cuda", group, len, args.iters)
            };
            let cuda_row = cuda_point("ours", Transfer::Synchronous, Engine::Cubecl);
            let cuda_stream_row =
                cuda_point("ours-stream", Transfer::StreamOrdered, Engine::Cubecl);
            // The NCCL engine of our groups, on buffers of the same size and op.
            let engine_row = match args.nccl {
                true => cuda_point("ours-nccl-engine", Transfer::StreamOrdered, Engine::Nccl),
                false => None,
            };
            let wgpu_row = wgpu.as_ref().and_then(|d| {
                let group = Group::<WgpuRuntime>::new(d[..n].to_vec()).expect("wgpu group");
                let group = if args.wgpu_client_copy {
                    group.with_transport(Arc::new(ClientCopy))
                } else {
                    group
                };
                device_point("ours", "wgpu", group, len, args.iters)
            });
            let on_cpu = bytes <= args.cpu_max_mib << 20;
            let ours_cpu = on_cpu.then(|| portable_point(n, len, args.iters));
            let peer_cpu = if on_cpu {
                peer_point(n, len, args.iters)
            } else {
                None
            };
            let bw = |r: &Option<Row>| {
                r.as_ref()
                    .map_or("–".into(), |r| format!("{:.3}", r.busbw_gbps))
            };
            let ratio = match (&peer_cpu, &ours_cpu) {
                (Some(p), Some(o)) => format!("{:.2}×", p.seconds / o.seconds),
                _ => "–".into(),
            };
            let vs_memcpy = |r: &Option<Row>| {
                r.as_ref()
                    .map_or("–".into(), |r| format!("{:.3}", r.busbw_gbps / memcpy))
            };
            let vs_nccl = match (&nccl_row, &cuda_row) {
                (Some(p), Some(o)) => format!("{:.2}×", p.seconds / o.seconds),
                _ => "–".into(),
            };
            let ring_vs_engine = match (&engine_row, &cuda_stream_row) {
                (Some(e), Some(r)) => format!("{:.2}×", e.seconds / r.seconds),
                _ => "–".into(),
            };
            let stream_vs_sync = match (&cuda_row, &cuda_stream_row) {
                (Some(sync), Some(stream)) => format!("{:.2}×", sync.seconds / stream.seconds),
                _ => "–".into(),
            };
            let vs_copy = match (copy, &cuda_row) {
                (Some(c), Some(o)) => format!("{:.3}", o.busbw_gbps / c),
                _ => "–".into(),
            };
            let line = format!(
                "| {n} | {} | {} | {} | {stream_vs_sync} | {} | {vs_nccl} | {} | {ring_vs_engine} | {} | {vs_copy} | {} | {} | {} | {ratio} | {memcpy:.2} | {} | {} |\n",
                size_label(bytes),
                bw(&cuda_row),
                bw(&cuda_stream_row),
                bw(&nccl_row),
                bw(&engine_row),
                copy.map_or("–".into(), |c| format!("{c:.1}")),
                bw(&wgpu_row),
                bw(&ours_cpu),
                bw(&peer_cpu),
                vs_memcpy(&wgpu_row),
                vs_memcpy(&ours_cpu)
            );
            print!("{line}");
            md += &line;
            rows.extend(
                [
                    cuda_row,
                    cuda_stream_row,
                    nccl_row,
                    engine_row,
                    wgpu_row,
                    ours_cpu,
                    peer_cpu,
                ]
                .into_iter()
                .flatten(),
            );
            rows.push(Row::new(
                "host-memcpy",
                "host",
                1,
                bytes,
                bytes as f64 / memcpy / 1e9,
            ));
        }
        // Rows so far, so that a run stopped by a time limit still leaves its table.
        let partial = format!("{md}\n_Partial: rows up to N = {n}; the run had not finished._\n");
        if let Err(e) = write_results(&args.out, "allreduce", &rows, &partial) {
            eprintln!("could not write results: {e}");
        }
    }
    md +=
        "\nOn Flex every rank shares one device: our all-reduce then adds the N buffers into rank \
           0's buffer in place and gives every rank the result, as a shared-memory \
           transport would; burn-collective runs its own algorithm on the same tensors. Each of its N-1 \
           in-place additions moves about the bytes of one memcpy (read both, write one back), so \
           its busbw cannot pass 2/N of memcpy: 1 for N=2, 0.5 for N=4, 0.25 for N=8.\n\n\
           On wgpu each rank is its own device (a separate lavapipe device on a machine without \
           GPU): a transfer is a read-back, one host copy into the destination's reused upload \
           buffer (transfers of 1 MiB or more; smaller ones use the queue's own write) and a copy \
           on the destination's queue; the reduction is a kernel. A `–` in a \
           device column is a size the device could not allocate (reason on stderr).\n";
    md += &format!(
        "\nwgpu transport in this run: `{}`.\n",
        if args.wgpu_client_copy {
            "client-copy"
        } else {
            "wgpu-staged"
        }
    );
    if args.cpu_max_mib < args.max_mib {
        md += &format!(
            "\nThe Flex columns stop at {} MiB (`--cpu-max-mib`).\n",
            args.cpu_max_mib
        );
    }
    md += "\nOn CUDA, `ours cuda` waits on the host for both devices around each transfer \
           (`Transfer::Synchronous`, `--cuda-copy sync` in the CLI); `ours cuda stream` queues transfers on raw \
           streams ordered against CubeCL's with flags in device memory \
           (`Transfer::StreamOrdered`, the default); `stream/sync` is the \
           ratio of their times (above 1: stream-ordered is faster). ";
    md += "`NCCL` is NCCL's all-reduce as Burn's `DistributedBackend::all_reduce` \
           issues it (through CubeCL, one thread per rank), on buffers of the same size; `cuda copy` \
           is one device copy of the buffer (bytes copied per second, each read once and written \
           once) on the first GPU: an all-reduce over ranks that share one GPU moves at least \
           (3N - 1) buffers through its memory, so its busbw stays below 4(N-1)/(N(3N-1)) of it. \
           `ours NCCL engine` is the same group with `--engine nccl` (NCCL through CubeCL's \
           communication stream, on the group's own buffers, summing) and `ring/engine` the \
           ratio of its time to the stream-ordered ring's (below 1: the engine is faster); NCCL \
           takes each GPU once, so it has no points where ranks share a GPU.\n";
    if args.nccl && !nccl_notes.is_empty() {
        md += "\nNCCL points left out:\n";
        for note in &nccl_notes {
            md += &format!("- {note}\n");
        }
    }
    if let Some(reason) = no_cuda {
        md += &format!("\nNo CUDA rows on the machine that ran this table: {reason}.\n");
    }
    match write_results(&args.out, "allreduce", &rows, &md) {
        Ok(()) => println!("wrote {}/allreduce.json and .md", args.out),
        Err(e) => eprintln!("could not write results: {e}"),
    }
}

/// Our all-reduce on CubeCL devices, timed from queued to finished on every device; `None`
/// (with the reason on stderr) where the devices cannot hold the buffers.
fn device_point<R: CollectiveRuntime>(
    implementation: &str,
    backend: &str,
    group: Group<R>,
    len: usize,
    iters: usize,
) -> Option<Row> {
    let n = group.size();
    let values: Vec<f64> = (0..len).map(|i| (i % 7) as f64).collect();
    let first_try = (0..n)
        .map(|r| group.upload(r, DType::F32, &values))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|mut bufs| {
            group.all_reduce(&mut bufs, ReduceOp::Sum)?;
            group.sync()?;
            Ok(bufs)
        });
    let mut bufs = match first_try {
        Ok(bufs) => bufs,
        Err(e) => {
            eprintln!("{backend}: N={n}, {}: skipped: {e}", size_label(len * 4));
            return None;
        }
    };
    let secs = time_median(iters, || {
        group.sync().expect("sync");
        seconds(|| {
            group
                .all_reduce(&mut bufs, ReduceOp::Sum)
                .expect("all_reduce");
            group.sync().expect("sync");
        })
    });
    Some(Row::new(implementation, backend, n, len * 4, secs))
}

fn cpu_inputs(n: usize, len: usize) -> Vec<Tensor<Cpu, 1>> {
    (0..n)
        .map(|r| Tensor::<Cpu, 1>::full([len], r as f32, &FlexDevice))
        .collect()
}

/// Our portable all-reduce over Flex tensors.
fn portable_point(n: usize, len: usize, iters: usize) -> Row {
    let group = PortableGroup::<Cpu>::new_shared(vec![FlexDevice; n]).expect("group");
    let secs = time_median(iters, || {
        let mut bufs = cpu_inputs(n, len);
        seconds(|| {
            group
                .all_reduce(&mut bufs, ReduceOp::Sum)
                .expect("all_reduce")
        })
    });
    Row::new("ours", "flex", n, len * 4, secs)
}

/// burn-collective's ring all-reduce on the same Flex data: one thread per rank.
#[cfg(feature = "burn-collective")]
fn peer_point(n: usize, len: usize, iters: usize) -> Option<Row> {
    use burn_collective::{
        all_reduce, finish_collective, register, AllReduceStrategy, CollectiveConfig, PeerId,
        ReduceOperation,
    };
    use std::sync::{Barrier, Mutex};
    if len % n != 0 || len < n {
        return None; // its ring needs equal slices
    }
    let config = CollectiveConfig::default()
        .with_num_devices(n)
        .with_local_all_reduce_strategy(AllReduceStrategy::Ring);
    let barrier = Barrier::new(n);
    let samples = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (r, input) in cpu_inputs(n, len).into_iter().enumerate() {
            let (config, barrier, samples) = (config.clone(), &barrier, &samples);
            s.spawn(move || {
                let id = PeerId::from(r);
                register::<Cpu>(id, FlexDevice, config).expect("register");
                for i in 0..=iters {
                    let t = input.clone().into_primitive().tensor();
                    barrier.wait();
                    let secs = seconds(|| {
                        all_reduce::<Cpu>(id, t, ReduceOperation::Sum).expect("all_reduce");
                    });
                    if r == 0 && i > 0 {
                        samples.lock().unwrap().push(secs);
                    }
                }
                finish_collective::<Cpu>(id).expect("finish");
            });
        }
    });
    let mut samples = samples.into_inner().unwrap();
    Some(Row::new(
        "burn-collective",
        "flex",
        n,
        len * 4,
        firemesh_benches::median(&mut samples),
    ))
}

#[cfg(not(feature = "burn-collective"))]
fn peer_point(_n: usize, _len: usize, _iters: usize) -> Option<Row> {
    None
}

/// The device's copy bandwidth: `x + 0` into a new buffer reads and writes each byte once, as a
/// copy does (bytes copied per second: the row's algbw).
fn copy_point<B: burn_tensor::backend::Backend>(
    device: &B::Device,
    len: usize,
    iters: usize,
) -> Row {
    let x = Tensor::<B, 1>::ones([len], device);
    let secs = time_median(iters, || {
        B::sync(device).expect("sync");
        let mut out = None;
        let secs = seconds(|| {
            out = Some(x.clone().add_scalar(0.0));
            B::sync(device).expect("sync");
        });
        drop(out);
        secs
    });
    Row::new("device-copy", "cuda", 1, len * 4, secs)
}

/// NCCL's all-reduce on `devices` (one thread per rank, as NCCL needs), through Burn's
/// `DistributedBackend::all_reduce` on CubeCL's CUDA runtime; the error text where NCCL or
/// the devices refuse (NCCL takes each GPU once per communicator).
#[cfg(feature = "nccl")]
fn nccl_point(devices: &[burn_cuda::CudaDevice], len: usize, iters: usize) -> Result<Row, String> {
    use burn_backend::distributed::{DistributedBackend, ReduceOperation};
    use burn_backend::{Backend as _, DeviceOps};
    // The default element types spelled out: `Cuda::sync` alone does not infer them.
    type Cuda = burn_cuda::Cuda<f32, i32>;
    use std::sync::{Barrier, Mutex};
    let n = devices.len();
    let ids: Vec<_> = devices.iter().map(DeviceOps::id).collect();
    if ids.iter().enumerate().any(|(i, id)| ids[..i].contains(id)) {
        return Err("NCCL takes each GPU once per communicator; these ranks share one".into());
    }
    let barrier = Barrier::new(n);
    let samples = Mutex::new(Vec::new());
    let run = |r: usize| {
        let device = &devices[r];
        let mut x = Tensor::<Cuda, 1>::ones([len], device)
            .into_primitive()
            .tensor();
        for i in 0..=iters {
            Cuda::sync(device).map_err(|e| format!("{e:?}"))?;
            barrier.wait();
            let start = std::time::Instant::now();
            // Moved in, so that Burn reduces in place (a shared handle gets a copy first).
            x = Cuda::all_reduce(x, ReduceOperation::Sum, ids.clone()).resolve();
            Cuda::sync(device).map_err(|e| format!("{e:?}"))?;
            let secs = start.elapsed().as_secs_f64();
            if r == 0 && i > 0 {
                samples.lock().unwrap().push(secs);
            }
        }
        Ok::<(), String>(())
    };
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n).map(|r| s.spawn(move || run(r))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(firemesh_collective::panic_message(p.as_ref())))
            })
            .collect()
    });
    outcomes.into_iter().collect::<Result<Vec<()>, String>>()?;
    let mut samples = samples.into_inner().unwrap();
    let secs = firemesh_benches::median(&mut samples);
    Ok(Row::new("nccl", "cuda", n, len * 4, secs))
}

#[cfg(not(feature = "nccl"))]
fn nccl_point(
    _devices: &[burn_cuda::CudaDevice],
    _len: usize,
    _iters: usize,
) -> Result<Row, String> {
    Err("built without the `nccl` feature".into())
}
