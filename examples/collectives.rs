//! firemesh's collectives through the library API: all-reduce, all-gather and broadcast over
//! N ranks. On separate wgpu devices when an adapter is found (a GPU, or Mesa's software
//! Vulkan driver), where the reductions are CubeCL kernels; otherwise with the portable group
//! over CPU tensors. On CUDA GPUs, `Group::<CudaRuntime>::new(probe::usable_cuda_devices()?)`
//! runs the same calls.
//!
//! ```text
//! cargo run -p firemesh-examples --example collectives -- --ranks 4
//! ```

use burn::prelude::*;
use burn_flex::{Flex, FlexDevice};
use clap::Parser;
use cubecl::wgpu::WgpuRuntime;
use firemesh_collective::wgpu_devices::wgpu_devices;
use firemesh_collective::{Collectives, DType, Group, PortableGroup, ReduceOp, Result};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 4)]
    ranks: usize,
    /// Use the portable group on the CPU even when a wgpu adapter is found.
    #[arg(long)]
    cpu: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let n = args.ranks;
    match wgpu_devices(n) {
        Ok(devices) if !args.cpu => {
            println!("{n} ranks on separate wgpu devices");
            let group = Group::<WgpuRuntime>::new(devices)?;
            show(
                &group,
                |rank, values| group.upload(rank, DType::F32, values),
                |buf| group.download(buf),
            )
        }
        other => {
            if let Err(why) = other {
                println!("no wgpu adapter ({why})");
            }
            println!("{n} ranks on the CPU, portable group");
            let group = PortableGroup::<Flex>::new_shared(vec![FlexDevice; n])?;
            show(
                &group,
                |_, values| {
                    let values: Vec<f32> = values.iter().map(|&v| v as f32).collect();
                    Ok(Tensor::from_floats(values.as_slice(), &FlexDevice))
                },
                |t| {
                    let values = t.to_data().iter::<f32>().map(f64::from).collect();
                    Ok(values)
                },
            )
        }
    }
}

/// The three collectives on any group, given how to put values on a rank and read them back.
fn show<C: Collectives>(
    group: &C,
    upload: impl Fn(usize, &[f64]) -> Result<C::Buf>,
    download: impl Fn(&C::Buf) -> Result<Vec<f64>>,
) -> Result<()> {
    let n = group.size();

    // All-reduce: rank r holds [r, r, r]; afterwards every rank holds the sum over ranks.
    let mut bufs = (0..n)
        .map(|r| upload(r, &[r as f64; 3]))
        .collect::<Result<Vec<_>>>()?;
    group.all_reduce(&mut bufs, ReduceOp::Sum)?;
    let sum = (n * (n - 1) / 2) as f64;
    for buf in &bufs {
        assert_eq!(download(buf)?, [sum; 3]);
    }
    println!(
        "all-reduce (sum): every rank holds {:?}",
        download(&bufs[0])?
    );

    // All-gather: rank r holds r + 1 copies of r (uneven lengths); every rank gets them all.
    let shards = (0..n)
        .map(|r| upload(r, &vec![r as f64; r + 1]))
        .collect::<Result<Vec<_>>>()?;
    let gathered = group.all_gather(&shards)?;
    let want: Vec<f64> = (0..n).flat_map(|r| vec![r as f64; r + 1]).collect();
    for buf in &gathered {
        assert_eq!(download(buf)?, want);
    }
    println!("all-gather: every rank holds {:?}", download(&gathered[0])?);

    // Broadcast: the last rank's values overwrite every rank's.
    let mut bufs = (0..n)
        .map(|r| upload(r, &[r as f64, 10.0 * r as f64]))
        .collect::<Result<Vec<_>>>()?;
    group.broadcast(&mut bufs, n - 1)?;
    let root = [(n - 1) as f64, 10.0 * (n - 1) as f64];
    for buf in &bufs {
        assert_eq!(download(buf)?, root);
    }
    println!(
        "broadcast from rank {}: every rank holds {:?}",
        n - 1,
        download(&bufs[0])?
    );
    Ok(())
}
