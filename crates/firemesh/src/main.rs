//! The `firemesh` command line.

use burn_tensor::Tensor;
use clap::{Parser, Subcommand};
use cubecl::cuda::CudaRuntime;
use cubecl::wgpu::WgpuRuntime;
use firemesh::mesh::{sharded_on_group, DeviceMesh, MeshKind};
use firemesh::train::{train_resnet, TrainArgs};
use firemesh::{Error, Result};
use firemesh_backend::{Mesh, Route};
use firemesh_collective::{CollectiveRuntime, Collectives, DType, Group, ReduceOp};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "firemesh",
    version,
    about = "Multi-GPU data-parallel training for Burn"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a tiny ResNet on synthetic CIFAR-like images, its batch sharded over the mesh.
    Train {
        /// Which devices to use: CUDA GPUs when found (auto), else a CPU mesh.
        #[arg(long, value_enum, default_value_t = MeshKind::Auto)]
        mesh: MeshKind,
        /// Number of ranks (default: one per GPU, or 4 on the CPU).
        #[arg(long)]
        ranks: Option<usize>,
        #[command(flatten)]
        args: TrainArgs,
    },
    /// All-reduce a buffer across the devices found and report bandwidth and correctness.
    Demo {
        /// Which devices to use.
        #[arg(long, value_enum, default_value_t = MeshKind::Auto)]
        mesh: MeshKind,
        /// Number of ranks (default: one per GPU, or 4 on the CPU).
        #[arg(long)]
        ranks: Option<usize>,
        /// Message size per rank, in MiB.
        #[arg(long, default_value_t = 16)]
        mib: usize,
        /// Timed repetitions.
        #[arg(long, default_value_t = 5)]
        iters: usize,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train { mesh, ranks, args } => train(mesh, ranks, &args),
        Command::Demo {
            mesh,
            ranks,
            mib,
            iters,
        } => demo(mesh, ranks, mib, iters.max(1)),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn train(kind: MeshKind, ranks: Option<usize>, args: &TrainArgs) -> Result<()> {
    let mesh = DeviceMesh::discover(kind, ranks)?;
    println!(
        "firemesh train: tiny ResNet, synthetic CIFAR-like images, {} steps of {} images on {}",
        args.steps,
        args.batch_for(mesh.ranks())?,
        mesh.describe()
    );
    let report = match &mesh {
        DeviceMesh::Cuda(d) => train_resnet::<burn_cuda::Cuda>(
            sharded_on_group::<CudaRuntime, burn_cuda::Cuda>(d)?,
            args,
        )?,
        DeviceMesh::Wgpu(d) => train_resnet::<burn_wgpu::Wgpu>(
            sharded_on_group::<WgpuRuntime, burn_wgpu::Wgpu>(d)?,
            args,
        )?,
        DeviceMesh::Cpu { ranks, .. } => {
            let mesh = Mesh::replicate(burn_ndarray::NdArrayDevice::Cpu, *ranks)?;
            // NdArray computes on the calling thread: run the ranks on the thread pool.
            mesh.set_parallel(true);
            train_resnet::<burn_ndarray::NdArray>(mesh, args)?
        }
    };
    println!(
        "  loss {:.4} -> {:.4}, {:.1} images/s, {} fallback op(s)",
        report.first_loss, report.last_loss, report.images_per_second, report.fallbacks
    );
    let via: Vec<String> = report
        .routes
        .iter()
        .map(|(route, k)| match route {
            Route::OneDevice => format!("{k} in place (ranks share one device)"),
            Route::MeshGroup => format!("{k} on the devices (CubeCL group)"),
            Route::PortableGroup => format!("{k} through host memory (portable group)"),
            Route::ThroughHost => format!("{k} through host memory (int/bool parts)"),
        })
        .collect();
    if !via.is_empty() {
        println!("  sums and gathers across ranks: {}", via.join(", "));
    }
    Ok(())
}

fn demo(kind: MeshKind, ranks: Option<usize>, mib: usize, iters: usize) -> Result<()> {
    let mesh = DeviceMesh::discover(kind, ranks)?;
    let len = mib * (1 << 20) / 4;
    println!(
        "firemesh demo: all-reduce (mean) of {mib} MiB f32 per rank on {}",
        mesh.describe()
    );
    let (n, seconds, ok) = match &mesh {
        DeviceMesh::Cuda(d) => device_demo(DeviceMesh::cuda_group(d)?, len, iters)?,
        DeviceMesh::Wgpu(d) => device_demo(DeviceMesh::wgpu_group(d)?, len, iters)?,
        DeviceMesh::Cpu { ranks, .. } => cpu_demo(*ranks, len, iters)?,
    };
    let bytes = (len * 4) as f64;
    let algbw = bytes / seconds / 1e9;
    let busbw = algbw * 2.0 * (n as f64 - 1.0) / n as f64;
    println!(
        "  ranks {n}, {:.3} ms per all-reduce, algbw {algbw:.2} GB/s, busbw {busbw:.2} GB/s",
        seconds * 1e3
    );
    println!(
        "  result on every rank equals the mean over ranks: {}",
        if ok { "yes" } else { "NO" }
    );
    if ok {
        Ok(())
    } else {
        Err(Error::Check("all-reduce gave a wrong result".into()))
    }
}

/// Rank r holds r everywhere, so the mean is (N-1)/2 on every rank.
fn device_demo<R: CollectiveRuntime>(
    group: Group<R>,
    len: usize,
    iters: usize,
) -> Result<(usize, f64, bool)> {
    let n = group.size();
    let inputs: Vec<_> = (0..n).map(|r| vec![r as f64; len]).collect();
    let mut bufs = (0..n)
        .map(|r| group.upload(r, DType::F32, &inputs[r]))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    group.all_reduce(&mut bufs, ReduceOp::Sum)?; // warm-up: compiles the kernels
    group.sync()?;
    let mut total = 0.0;
    for _ in 0..iters {
        let mut fresh = (0..n)
            .map(|r| group.upload(r, DType::F32, &inputs[r]))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        group.sync()?;
        let start = Instant::now();
        group.all_reduce(&mut fresh, ReduceOp::Mean)?;
        group.sync()?;
        total += start.elapsed().as_secs_f64();
        bufs = fresh;
    }
    let want = (n as f64 - 1.0) / 2.0;
    let mut ok = true;
    for b in &bufs {
        ok &= group.download(b)?.iter().all(|&v| v == want);
    }
    Ok((n, total / iters as f64, ok))
}

fn cpu_demo(n: usize, len: usize, iters: usize) -> Result<(usize, f64, bool)> {
    type B = burn_ndarray::NdArray;
    let group = DeviceMesh::cpu_group(n)?;
    let device = burn_ndarray::NdArrayDevice::Cpu;
    let make = || -> Vec<Tensor<B, 1>> {
        (0..n)
            .map(|r| Tensor::<B, 1>::full([len], r as f32, &device))
            .collect()
    };
    let mut total = 0.0;
    let mut bufs = make();
    for _ in 0..iters {
        bufs = make();
        let start = Instant::now();
        group.all_reduce(&mut bufs, ReduceOp::Mean)?;
        total += start.elapsed().as_secs_f64();
    }
    let want = (n as f32 - 1.0) / 2.0;
    let ok = bufs
        .into_iter()
        .all(|t| t.into_data().iter::<f32>().all(|v| v == want));
    Ok((n, total / iters as f64, ok))
}
