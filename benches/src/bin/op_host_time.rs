//! Host time of one small op through `Sharded<B>`: how long the calling thread spends issuing
//! `x + b` on 8-element tensors, for N = 1, 2, 4 and 8 ranks, against the inner backend alone.
//! On Flex (ranks in turn, and on the thread pool) and on wgpu (separate clients; work is
//! queued, so the figure is issue time, the queue drained outside the timing).
//! Writes `benches/results/op_host_time.{json,md}`.

use burn::tensor::backend::Backend;
use burn_flex::{Flex, FlexDevice};
use burn_wgpu::Wgpu;
use clap::Parser;
use firemesh::simulate::per_op_seconds;
use firemesh_backend::{Mesh, Sharded};
use firemesh_benches::write_results;
use serde::Serialize;

#[derive(Parser)]
struct Args {
    /// Ops per timed sample.
    #[arg(long, default_value_t = 2000)]
    ops: usize,
    /// Timed samples per setup (the median is reported).
    #[arg(long, default_value_t = 7)]
    samples: usize,
    /// Where to write op_host_time.{md,json}.
    #[arg(long, default_value = "benches/results")]
    out: String,
}

#[derive(Serialize)]
struct Row {
    runtime: &'static str,
    setup: String,
    ranks: usize,
    host_us_per_op: f64,
    /// Over the inner backend's own op.
    vs_inner: f64,
}

/// Median host microseconds per `x + b` on `device`.
fn per_op<B: Backend>(device: &B::Device, args: &Args) -> f64 {
    per_op_seconds::<B>(device, args.ops, args.samples) * 1e6
}

fn rows_of<B: Backend>(
    runtime: &'static str,
    devices: &[B::Device],
    pool: bool,
    args: &Args,
) -> Vec<Row> {
    let inner = per_op::<B>(&devices[0], args);
    let mut rows = vec![Row {
        runtime,
        setup: format!("{runtime} alone"),
        ranks: 1,
        host_us_per_op: inner,
        vs_inner: 1.0,
    }];
    let modes: &[bool] = if pool { &[false, true] } else { &[false] };
    for &parallel in modes {
        for n in [1, 2, 4, 8] {
            if parallel && n == 1 {
                continue;
            }
            let mesh = Mesh::new(devices[..n].to_vec()).expect("mesh");
            mesh.set_parallel(parallel);
            let us = per_op::<Sharded<B>>(&mesh, args);
            let how = if parallel { "thread pool" } else { "in turn" };
            println!("{runtime} N={n} {how}: {us:.2} µs per op");
            rows.push(Row {
                runtime,
                setup: format!("Sharded<{runtime}> N={n}, {how}"),
                ranks: n,
                host_us_per_op: us,
                vs_inner: us / inner,
            });
        }
    }
    rows
}

fn main() {
    let args = Args::parse();
    let mut rows = rows_of::<Flex>("Flex", &[FlexDevice; 8], true, &args);
    match firemesh_collective::wgpu_devices::wgpu_devices(8) {
        Ok(devices) => rows.extend(rows_of::<Wgpu>("Wgpu", &devices, false, &args)),
        Err(e) => println!("SKIPPED wgpu rows: {e}"),
    }
    let mut md = format!(
        "# Host time of one small op (`x + b`, 8 elements), {} ops per sample, median of {}\n\n\
         Time the calling thread spends issuing the op: Flex computes on it (or on the thread \
         pool), wgpu queues the work (separate clients, one per rank; the queue drains outside \
         the timing). Absolute times of this machine ({} CPU cores); ratios from this run.\n\n\
         | setup | ranks | host µs per op | vs the backend alone |\n|---|---|---|---|\n",
        args.ops,
        args.samples,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for r in &rows {
        md += &format!(
            "| {} | {} | {:.2} | {:.1}× |\n",
            r.setup, r.ranks, r.host_us_per_op, r.vs_inner
        );
    }
    print!("{md}");
    write_results(&args.out, "op_host_time", &rows, &md).expect("write results");
}
