//! Host time of one small op through `Sharded<B>`: how long issuing `x + b` on 8-element
//! tensors takes, for N = 1, 2, 4 and 8 ranks, against the inner backend alone. Ranks in turn
//! on the calling thread, or on their own threads (`Mesh::set_parallel`; timed until every
//! rank's thread has issued its share, and the calling thread's share alone). On Flex (which
//! computes where it is called) and on wgpu (separate clients; work is queued, so the figure is
//! issue time, the queue drained outside the timing).
//! Writes `benches/results/op_host_time.{json,md}`.

use burn::tensor::backend::Backend;
use burn_flex::{Flex, FlexDevice};
use burn_wgpu::Wgpu;
use clap::Parser;
use firemesh_backend::{Mesh, Sharded};
use firemesh_benches::write_results;
use firemesh_cli::simulate::{per_op_seconds, per_op_seconds_until};
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
    /// Until every rank's share is issued.
    host_us_per_op: f64,
    /// The calling thread's part (equal to the above when the ranks run in turn).
    caller_us_per_op: f64,
    /// Over the inner backend's own op.
    vs_inner: f64,
    /// Over the same setup with N = 1.
    vs_one_rank: f64,
}

/// Median host microseconds per `x + b` on `device`.
fn per_op<B: Backend>(device: &B::Device, args: &Args) -> f64 {
    per_op_seconds::<B>(device, args.ops, args.samples) * 1e6
}

fn rows_of<B: Backend>(runtime: &'static str, devices: &[B::Device], args: &Args) -> Vec<Row> {
    let inner = per_op::<B>(&devices[0], args);
    let mut rows = vec![Row {
        runtime,
        setup: format!("{runtime} alone"),
        ranks: 1,
        host_us_per_op: inner,
        caller_us_per_op: inner,
        vs_inner: 1.0,
        vs_one_rank: 1.0,
    }];
    for parallel in [false, true] {
        let mut one_rank = None;
        for n in [1, 2, 4, 8] {
            let mesh = Mesh::new(devices[..n].to_vec()).expect("mesh");
            mesh.set_parallel(parallel);
            let all = per_op_seconds_until::<Sharded<B>>(&mesh, args.ops, args.samples, || {
                mesh.wait_issued()
            }) * 1e6;
            let caller = per_op::<Sharded<B>>(&mesh, args);
            mesh.set_parallel(false);
            let one = *one_rank.get_or_insert(all);
            let how = if parallel { "rank threads" } else { "in turn" };
            println!("{runtime} N={n} {how}: {all:.2} µs per op ({caller:.2} µs on the caller)");
            rows.push(Row {
                runtime,
                setup: format!("Sharded<{runtime}> N={n}, {how}"),
                ranks: n,
                host_us_per_op: all,
                caller_us_per_op: caller,
                vs_inner: all / inner,
                vs_one_rank: all / one,
            });
        }
    }
    rows
}

fn main() {
    let args = Args::parse();
    let mut rows = rows_of::<Flex>("Flex", &[FlexDevice; 8], &args);
    match firemesh_collective::wgpu_devices::wgpu_devices(8) {
        Ok(devices) => rows.extend(rows_of::<Wgpu>("Wgpu", &devices, &args)),
        Err(e) => println!("SKIPPED wgpu rows: {e}"),
    }
    let mut md = format!(
        "# Host time of one small op (`x + b`, 8 elements), {} ops per sample, median of {}\n\n\
         Time until every rank's share of the op is issued: Flex computes where it is called, \
         wgpu queues the work (separate clients, one per rank; the queue drains outside the \
         timing). With rank threads, rank 0 runs on the calling thread and ranks 1.. on their \
         own; the caller's column is the calling thread's part alone. Absolute times of this \
         machine ({} CPU cores); ratios from this run. Built: {}.\n\n\
         | setup | ranks | host µs per op | caller µs per op | vs the backend alone | vs N=1 |\n\
         |---|---|---|---|---|---|\n",
        args.ops,
        args.samples,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if cfg!(debug_assertions) {
            "dev profile (firemesh's own crates at opt-level 0: not the build for real runs)"
        } else {
            "release"
        }
    );
    for r in &rows {
        md += &format!(
            "| {} | {} | {:.2} | {:.2} | {:.1}× | {:.2}× |\n",
            r.setup, r.ranks, r.host_us_per_op, r.caller_us_per_op, r.vs_inner, r.vs_one_rank
        );
    }
    let host = |setup: &str| {
        rows.iter()
            .find(|r| r.setup == setup)
            .map(|r| r.host_us_per_op)
    };
    if let (Some(alone), Some(one)) = (host("Flex alone"), host("Sharded<Flex> N=1, in turn")) {
        md += &format!(
            "\nOne op on one rank costs {:.3} µs more through `Sharded<Flex>` than on Flex alone.\n",
            one - alone
        );
    }
    print!("{md}");
    write_results(&args.out, "op_host_time", &rows, &md).expect("write results");
}
