//! One setup's training steps, timed: forward, backward, the gradient sums and the optimizer
//! step of a zoo model on synthetic data, through `Autodiff<Sharded<B>>` on a mesh or through
//! `Autodiff<B>` on one device.

use super::{BenchOptions, Sizes};
use crate::train::{default_optimizer, ModelName};
use crate::{Error, Result};
use burn::backend::Autodiff;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use firemesh::optim::AnyOptimizer;
use firemesh::{Precision, Trainer};
use firemesh_backend::{from_shards, from_shards_int, stats, Mesh, Sharded};
use firemesh_zoo::{Batch, Net, NetConfig};
use std::time::Instant;

/// Tokens per sequence unless asked: 1,024 on a GPU, 128 on a CPU (at most the context).
fn default_seq_len(gpu: bool) -> usize {
    if gpu {
        1024
    } else {
        128
    }
}

/// A model and its per-rank batch, ready to measure.
#[derive(Debug, Clone)]
pub struct Work {
    pub model: ModelName,
    pub net: NetConfig,
    /// Images or sequences per rank.
    pub per_rank: usize,
    pub image_size: usize,
    pub seq_len: usize,
    pub bucket_bytes: usize,
    /// ZeRO-3 rows: bytes of parameter gathers issued ahead of use (0: each at use).
    pub gather_ahead_bytes: usize,
    /// The precision firemesh's rows sum their gradient buckets in.
    pub comm_precision: Precision,
    pub warmup: usize,
    pub steps: usize,
}

impl Work {
    pub fn new(model: ModelName, sizes: Sizes, o: &BenchOptions) -> Result<Self> {
        let per_rank = sizes
            .batch_per_rank
            .unwrap_or(match (model.is_gpt(), sizes.gpu) {
                (false, false) => 4,
                (false, true) => 64,
                (true, false) => 4,
                (true, true) => 8,
            });
        // The model as published, so that peers elsewhere (PyTorch's) train the same sizes:
        // ImageNet's 1,000 classes for ResNet-50, GPT-2's 50,257 tokens for GPT-2 small.
        let classes = model.published_classes().unwrap_or_default(); // a GPT takes none
        let net = model.net(classes, sizes.image_size)?;
        let seq_len = match (&net, sizes.seq_len) {
            (NetConfig::Gpt(c), Some(s)) if s > c.context_length => {
                return Err(Error::Invalid(format!(
                    "--seq-len {s}: longer than {model}'s context of {} tokens",
                    c.context_length
                )))
            }
            (_, Some(s)) => s,
            (NetConfig::Gpt(c), None) => default_seq_len(sizes.gpu).min(c.context_length),
            (NetConfig::ResNet(_), None) => default_seq_len(sizes.gpu),
        };
        Ok(Self {
            model,
            net,
            per_rank,
            image_size: sizes.image_size,
            seq_len,
            bucket_bytes: o.sums.bucket_bytes()?,
            gather_ahead_bytes: o.sums.gather_ahead_bytes()?,
            comm_precision: o.sums.comm_precision(),
            warmup: o.warmup,
            steps: o.steps,
        })
    }

    /// Images or tokens a rank trains on per step (a sequence of L tokens predicts L - 1).
    pub fn per_rank_samples(&self) -> f64 {
        self.peer().samples_per_device()
    }

    pub fn unit(&self) -> &'static str {
        self.net.unit()
    }

    fn optimizer<A: AutodiffBackend>(&self) -> AnyOptimizer<Net<A>, A> {
        AnyOptimizer::new(default_optimizer(&self.net), 0.9, 1e-4)
    }

    /// Rank `rank`'s synthetic batch on `device`, the same at every rank count: the samples
    /// `rank · per_rank..` of the synthetic set the peers train on too.
    pub fn batch<B: Backend>(&self, rank: usize, device: &B::Device) -> Batch<B> {
        self.peer()
            .batch(rank * self.per_rank, self.per_rank, device)
    }

    /// The same model and batches as burn-train's peers train them.
    pub fn peer(&self) -> firemesh_peers::Work {
        firemesh_peers::Work {
            model: self.net.clone(),
            per_device: self.per_rank,
            image_size: self.image_size,
            seq_len: self.seq_len,
            warmup: self.warmup,
            steps: self.steps,
        }
    }
}

/// What the timed steps of one setup gave.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Wall time of each timed step, in seconds, until every device finished it.
    pub step_s: Vec<f64>,
    /// Of each, the time inside sums and gathers across ranks (waiting for early buckets
    /// included).
    pub comm_s: Vec<f64>,
    /// Of each step's communication, the share hidden behind other work: early buckets summed
    /// on the communication thread while the step's thread did not wait for them.
    pub hidden_comm: Vec<f64>,
    /// Collectives of the gradient buckets, per step, and of those the buckets summed during
    /// the backward pass (early buckets).
    pub gradient_collectives: usize,
    pub early_gradient_collectives: usize,
    /// Parameter tensors: the collectives per step of one sum per gradient.
    pub gradient_tensors: usize,
    /// Gathers of the updated parameters per step (ZeRO-1's buckets).
    pub parameter_collectives: usize,
    /// Other sums and gathers across ranks per step (BatchNorm statistics of a sharded batch,
    /// the loss read back).
    pub other_collectives: u64,
    /// Ops with no placement rule, per step.
    pub fallbacks: u64,
    /// Products that ran in f32 under a lower precision, per step (convolutions no kernel
    /// adding in f32 took, `firemesh_backend::NarrowConvs`).
    pub products_in_f32: u64,
    /// Wall time of the first warm-up step, in seconds: with the compilation and autotuning of
    /// the shapes the process had not met yet (`None` without warm-up steps).
    pub first_step_s: Option<f64>,
    /// The most memory any rank's device held at the end of a forward pass, where the
    /// runtime reports it.
    pub peak_bytes_per_rank: Option<u64>,
    /// The loss of the first and of the last step.
    pub losses: (f64, f64),
    /// The most optimizer-state bytes any rank holds after the steps (AdamW's moments; `None`
    /// for SGD, whose momentum Burn keeps private, and for the peers).
    pub optimizer_state_bytes_per_rank: Option<u64>,
}

/// `work` through `Autodiff<Sharded<B>>` on `mesh`, its batch sharded over the ranks, its
/// products in `precision`, its optimizer state sharded as ZeRO stage `zero` says.
pub fn sharded<B: Backend>(
    mesh: &Mesh<B::Device>,
    work: &Work,
    precision: Precision,
    zero: u8,
    memory: &dyn Fn() -> Option<u64>,
    label: &str,
) -> Result<Measured> {
    type Ad<B> = Autodiff<Sharded<B>>;
    Ad::<B>::seed(mesh, 7);
    let net = work.net.init::<Ad<B>>(mesh)?;
    // Made on the device stream, where the mesh computes (`firemesh_collective::stream`).
    let parts: Vec<Batch<B>> = firemesh_collective::DeviceStream::run(|| {
        (0..mesh.len())
            .map(|r| work.batch::<B>(r, mesh.device(r)))
            .collect()
    });
    let batch = || on_mesh::<B>(mesh, &parts);
    // As `firemesh train` does: buckets summed as the backward pass fills them.
    let mut trainer = Trainer::sharded(net, work.optimizer(), mesh, work.bucket_bytes)
        .with_precision(precision)?
        .with_zero(zero)?
        .with_gathers_ahead(work.gather_ahead_bytes);
    if work.comm_precision != Precision::F32 {
        trainer = trainer.with_gradient_wire(work.comm_precision)?;
    }
    let mut m = timed_steps::<Ad<B>>(mesh, &mut trainer, batch, memory, work, label)?;
    let state = firemesh::zero::state_bytes_per_rank(trainer.optimizer(), trainer.model());
    m.optimizer_state_bytes_per_rank = state.and_then(|s| s.into_iter().max()).map(|b| b as u64);
    Ok(m)
}

/// `work`'s per-rank batch through `Autodiff<B>` on one device: the inner backend alone. It runs
/// on the device stream too (`firemesh_collective::stream`), so that its memory is counted from
/// the same pool as the mesh's and both runs reuse one pool rather than each keep its own.
pub fn inner<B: Backend>(
    device: &B::Device,
    work: &Work,
    memory: &dyn Fn() -> Option<u64>,
    label: &str,
) -> Result<Measured> {
    firemesh_collective::DeviceStream::run(|| {
        Autodiff::<B>::seed(device, 7);
        let net = work.net.init::<Autodiff<B>>(device)?;
        let batch = || Ok(work.batch::<Autodiff<B>>(0, device));
        let mut trainer = Trainer::single_device(net, work.optimizer(), device);
        timed_steps::<Autodiff<B>>(device, &mut trainer, batch, memory, work, label)
    })
}

/// The batch whose rank `r` part is `parts[r]`.
fn on_mesh<B: Backend>(
    mesh: &Mesh<B::Device>,
    parts: &[Batch<B>],
) -> Result<Batch<Autodiff<Sharded<B>>>> {
    let (mut images, mut labels, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
    for part in parts.iter().cloned() {
        match part {
            Batch::Images {
                images: x,
                labels: y,
            } => {
                images.push(x);
                labels.push(y);
            }
            Batch::Tokens(t) => tokens.push(t),
        }
    }
    Ok(if tokens.is_empty() {
        Batch::Images {
            images: from_shards::<Autodiff<Sharded<B>>, 4>(mesh, images, 0)?,
            labels: from_shards_int::<Autodiff<Sharded<B>>, 1>(mesh, labels, 0)?,
        }
    } else {
        Batch::Tokens(from_shards_int::<Autodiff<Sharded<B>>, 2>(mesh, tokens, 0)?)
    })
}

/// `warmup + steps` steps of `trainer`, the last `steps` timed, each until `device` (every
/// rank of a mesh) finished it; progress on stderr.
fn timed_steps<A: AutodiffBackend>(
    device: &A::Device,
    trainer: &mut Trainer<A, Net<A>, AnyOptimizer<Net<A>, A>>,
    batch: impl Fn() -> Result<Batch<A>>,
    memory: &dyn Fn() -> Option<u64>,
    work: &Work,
    label: &str,
) -> Result<Measured> {
    let sync = || A::sync(device).map_err(|e| Error::Invalid(format!("{label}: {e:?}")));
    let mut m = Measured {
        gradient_tensors: burn::module::list_param_ids(trainer.model()).len(),
        ..Measured::default()
    };
    let total = work.warmup + work.steps;
    for i in 0..total {
        let batch = batch()?;
        sync()?;
        let start = Instant::now();
        let mut peak = None;
        let report = trainer.step(|net| {
            let loss = net.loss(batch).map_err(firemesh::Error::model)?;
            // The end of the forward pass holds the activations: sampled on the first step,
            // which is not timed unless there is no warm-up.
            if i == 0 {
                peak = memory();
            }
            Ok(loss)
        })?;
        sync()?;
        let secs = start.elapsed().as_secs_f64();
        let (loss, counts) = (report.loss, &report.counts);
        if i == 0 {
            m.losses.0 = loss;
            m.peak_bytes_per_rank = peak;
        }
        m.losses.1 = loss;
        m.gradient_collectives = report.gradient_collectives;
        m.early_gradient_collectives = report.early_gradient_collectives;
        m.parameter_collectives = report.parameter_collectives;
        m.other_collectives = report.other_collectives();
        m.fallbacks = counts.total_fallbacks();
        m.products_in_f32 = counts.total_products_in_f32();
        if i == 0 && work.warmup > 0 {
            m.first_step_s = Some(secs);
        }
        if i >= work.warmup {
            m.step_s.push(secs);
            m.comm_s.push(counts.comm_nanos as f64 * 1e-9);
            m.hidden_comm.push(hidden_share(counts));
        }
        eprintln!(
            "bench: {label}: step {}/{total}{} {:.3} s, loss {loss:.4}",
            i + 1,
            if i < work.warmup { " (warm-up)" } else { "" },
            secs
        );
    }
    Ok(m)
}

/// The share of a step's communication that was hidden: the time early buckets took on the
/// communication thread less the time the step waited for them, over all communication (the
/// step thread's own, its waits excluded, and the communication thread's).
fn hidden_share(c: &stats::Counts) -> f64 {
    let hidden = c.early_comm_nanos.saturating_sub(c.early_wait_nanos);
    let all = c.comm_nanos.saturating_sub(c.early_wait_nanos) + c.early_comm_nanos;
    if all == 0 {
        0.0
    } else {
        hidden as f64 / all as f64
    }
}
