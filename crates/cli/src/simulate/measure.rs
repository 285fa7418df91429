//! firemesh's own step, counted and timed on a CPU mesh: the simulator's inputs for
//! `firemesh simulate --firemesh`.

use crate::train::{default_optimizer, ModelName};
use crate::Result;
use burn::backend::Autodiff;
use burn::prelude::*;
use burn_flex::{Flex, FlexDevice};
use firemesh::optim::AnyOptimizer;
use firemesh::Trainer;
use firemesh_backend::{shard, shard_int, Mesh, Sharded};
use firemesh_zoo::Batch;
use serde::Serialize;
use std::time::Instant;

/// What one training step of a zoo model costs firemesh's host, measured here.
#[derive(Debug, Clone, Serialize)]
pub struct FiremeshStep {
    /// Ops issued through `Sharded` in one step of [`Trainer`]: forward, backward, the
    /// gradient buckets' copies and the optimizer's update.
    pub ops_per_step: u64,
    /// Sums over the ranks other than the gradient buckets (BatchNorm statistics of a sharded
    /// batch and their gradients, the loss): the step waits for each.
    pub blocking_sums: u64,
    /// Host time of one small op through `Sharded<Flex>`, ranks issued in turn:
    /// (ranks, seconds per op).
    pub host_op_s_by_ranks: Vec<(usize, f64)>,
    /// Least-squares line through them: seconds at one rank, and per extra rank.
    pub host_op_s: f64,
    pub host_op_s_per_extra_rank: f64,
    /// On rank threads, what handing one rank's share of an op to its thread adds to the
    /// calling thread: its time per op with 2 ranks on rank threads less its time with 1 rank
    /// (2 ranks: each thread has a core of the machines this runs on).
    pub handoff_s: f64,
}

/// Counts one training step of `model` on a 2-rank CPU mesh (a small batch: the op count does
/// not depend on its size; the ResNets take the CIFAR stem, two ops fewer than the ImageNet
/// stem's max-pool and its gradient) and times one small op for rank counts up to 8.
pub fn measure_firemesh_step(
    model: ModelName,
    ranks: &[usize],
    bucket_bytes: usize,
) -> Result<FiremeshStep> {
    type Ad = Autodiff<Sharded<Flex>>;
    let mesh = Mesh::replicate(FlexDevice, 2)?;
    let net_config = model.config(10, 16, 256)?;
    let net = net_config.init::<Ad>(&mesh)?;
    let batch = if model.is_gpt() {
        let tokens: Vec<i32> = (0..2 * 9).map(|i| i * 37 % 256).collect();
        let t = Tensor::<Ad, 2, Int>::from_data(TensorData::new(tokens, [2, 9]), &mesh);
        Batch::Tokens(shard_int(t, 0)?)
    } else {
        let values: Vec<f32> = (0..4 * 3 * 16 * 16)
            .map(|i| (i % 17) as f32 / 17.0)
            .collect();
        let images = Tensor::<Ad, 4>::from_data(TensorData::new(values, [4, 3, 16, 16]), &mesh);
        let labels = Tensor::<Ad, 1, Int>::from_data(TensorData::new(vec![1, 2, 3, 4], [4]), &mesh);
        Batch::Images {
            images: shard(images, 0)?,
            labels: shard_int(labels, 0)?,
        }
    };
    let optimizer = AnyOptimizer::new(default_optimizer(&net_config), 0.9, 1e-4);
    let mut trainer = Trainer::sharded(net, optimizer, &mesh, bucket_bytes);
    let step = trainer.step(|net| net.loss(batch).map_err(firemesh::Error::model))?;
    let mut counts: Vec<usize> = ranks.iter().copied().filter(|&n| n <= 8).collect();
    counts.extend([1, 2, 4, 8]);
    counts.sort_unstable();
    counts.dedup();
    let host_op_s_by_ranks = counts
        .iter()
        .map(|&n| Ok((n, host_seconds_per_op(n, false)?)))
        .collect::<Result<Vec<_>>>()?;
    let (host_op_s, host_op_s_per_extra_rank) = fit_line(&host_op_s_by_ranks);
    // The counts are sorted and start at 1.
    let one_rank = host_op_s_by_ranks[0].1;
    let handoff_s = (host_seconds_per_op(2, true)? - one_rank).max(0.0);
    Ok(FiremeshStep {
        ops_per_step: step.counts.ops,
        blocking_sums: step.other_collectives(),
        host_op_s_by_ranks,
        host_op_s,
        host_op_s_per_extra_rank,
        handoff_s,
    })
}

/// Median time of the calling thread per `x + b` (8 elements) through `Sharded<Flex>` on `n`
/// ranks: issued in turn from it, as on a CUDA mesh by default (`rank_threads: false`), or
/// its part on rank threads (`true`: rank 0's share and the handoffs; the other shares run on
/// their threads, which this timing does not wait for).
fn host_seconds_per_op(n: usize, rank_threads: bool) -> Result<f64> {
    let mesh = Mesh::replicate(FlexDevice, n)?;
    mesh.set_parallel(rank_threads);
    let seconds = per_op_seconds::<Sharded<Flex>>(&mesh, 2000, 5);
    mesh.set_parallel(false);
    Ok(seconds)
}

/// Median host time of one small op (`x + b`, 8 elements) on `device`, over `samples` runs of
/// `ops` ops, in seconds. A queueing backend's work drains outside the timing.
pub fn per_op_seconds<B: Backend>(device: &B::Device, ops: usize, samples: usize) -> f64 {
    per_op_seconds_until::<B>(device, ops, samples, || ())
}

/// As [`per_op_seconds`], with `settle` inside the timing after the ops (for a mesh whose ranks
/// have their own threads: `Mesh::wait_issued`, so that every rank's issue time counts).
pub fn per_op_seconds_until<B: Backend>(
    device: &B::Device,
    ops: usize,
    samples: usize,
    settle: impl Fn(),
) -> f64 {
    let b = Tensor::<B, 1>::ones([8], device);
    let mut times: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let mut x = b.clone();
            let start = Instant::now();
            for _ in 0..ops {
                x = x + b.clone();
            }
            settle();
            let secs = start.elapsed().as_secs_f64();
            let _ = B::sync(device);
            secs / ops as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Least squares of seconds against (ranks - 1): (intercept, slope), slope at least 0.
fn fit_line(points: &[(usize, f64)]) -> (f64, f64) {
    let k = points.len() as f64;
    let mx = points.iter().map(|p| (p.0 - 1) as f64).sum::<f64>() / k;
    let my = points.iter().map(|p| p.1).sum::<f64>() / k;
    let sxx: f64 = points.iter().map(|p| ((p.0 - 1) as f64 - mx).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .map(|p| ((p.0 - 1) as f64 - mx) * (p.1 - my))
        .sum();
    let slope = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    ((my - slope * mx).max(0.0), slope)
}
