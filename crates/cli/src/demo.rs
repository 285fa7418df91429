//! `firemesh demo`: one all-reduce across the devices found, timed, its result checked.

use crate::options::{MeshOptions, RuntimeOptions};
use crate::{Error, Result};
use burn_tensor::Tensor;
use firemesh::mesh::DeviceMesh;
use firemesh_collective::{CollectiveRuntime, Collectives, DType, Group, ReduceOp};
use std::time::Instant;

/// The options of `firemesh demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoOptions {
    #[command(flatten)]
    pub mesh: MeshOptions,
    /// Message size per rank, in MiB.
    #[arg(long, default_value_t = 16)]
    pub mib: usize,
    /// Timed repetitions.
    #[arg(long, default_value_t = 5)]
    pub iters: usize,
    #[command(flatten)]
    pub runtime: RuntimeOptions,
}

/// Runs the demo `o` asks for.
pub fn run(o: &DemoOptions) -> Result<()> {
    let (mib, iters, runtime) = (o.mib, o.iters.max(1), o.runtime.config());
    let mesh = o.mesh.discover()?;
    if mib == 0 || mib > 4096 {
        return Err(Error::Invalid(format!(
            "--mib {mib}: the message must be 1 to 4096 MiB per rank"
        )));
    }
    // Inputs and results of every rank, on the host for a CPU mesh.
    let needed = (3 * mesh.ranks() * mib) as f64 * (1u64 << 20) as f64;
    if let (DeviceMesh::Cpu { .. }, Some(free)) = (&mesh, firemesh::mesh::available_host_bytes()) {
        if needed > free {
            return Err(Error::Invalid(format!(
                "{} ranks of {mib} MiB need about {:.1} GiB, more than the {:.1} GiB of host memory available",
                mesh.ranks(),
                needed / (1u64 << 30) as f64,
                free / (1u64 << 30) as f64
            )));
        }
    }
    let len = mib * (1 << 20) / 4;
    println!(
        "firemesh demo: all-reduce (mean) of {mib} MiB f32 per rank on {}",
        mesh.describe()
    );
    let (n, seconds, ok) = match &mesh {
        DeviceMesh::Cuda(d) => {
            let transfer = firemesh::collective::CollectiveConfig::with_transfer(runtime.cuda_copy);
            device_demo(DeviceMesh::cuda_group(d)?.with_config(transfer), len, iters)?
        }
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
    type B = burn_flex::Flex;
    let group = DeviceMesh::cpu_group(n)?;
    let device = burn_flex::FlexDevice;
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
