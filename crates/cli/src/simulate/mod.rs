//! `firemesh simulate`: what a model's step would give on N ranks of a given link, from a
//! measured one-device step ([`firemesh_simulate`] does the arithmetic; this is the command).

mod measure;
mod report;

pub use measure::{measure_firemesh_step, per_op_seconds, per_op_seconds_until, FiremeshStep};

use crate::options::StepOptions;
use crate::train::memory::{self, PerRank};
use crate::train::ModelName;
use crate::{Error, Result};
use firemesh::optim::OptimizerKind;
use firemesh_simulate::{
    Gpu, HostModel, Levels, Link, Prediction, Published, Scenario, Schedule, Sharding, StepProfile,
    Topology, Workload,
};
use firemesh_zoo::NetConfig;
use std::path::PathBuf;

/// The options of `firemesh simulate`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimulateOptions {
    /// Model whose step is simulated.
    #[arg(long, value_enum, default_value_t = ModelName::Resnet50)]
    pub model: ModelName,
    /// Image side in pixels (ResNets).
    #[arg(long, default_value_t = 224)]
    pub image_size: usize,
    /// Classes (ResNets).
    #[arg(long, default_value_t = 1000)]
    pub classes: usize,
    /// Samples in one rank's batch: images, or sequences of the model's context for a GPT
    /// [default: the published run's batch for ResNet-50 (256 images; 112 on V100 in FP32),
    /// else 256 images or 8 sequences].
    #[arg(long)]
    pub batch: Option<usize>,
    /// GPU: v100, a100, h100, h200. Sets the link between the GPUs of a node and, for ResNet-50
    /// at 224 px, the one-GPU throughput NVIDIA published for it (none is built in for H100
    /// and H200: give --throughput).
    #[arg(long, default_value = "a100")]
    pub gpu: String,
    /// Which of NVIDIA's published one-GPU figures of --gpu: amp (mixed precision), tf32 (A100)
    /// or fp32 (V100). (Not `firemesh train --precision`: these are the published runs' modes.)
    #[arg(long, default_value = "amp", value_name = "amp|tf32|fp32")]
    pub published_precision: String,
    /// One device's measured training throughput, images/s or tokens/s [default for ResNet-50
    /// at 224 px: the published figure of --gpu and --published-precision, 2,470 images/s for an A100 in
    /// mixed precision].
    #[arg(long)]
    pub throughput: Option<f64>,
    /// A measured step as JSON (the fields of `firemesh_simulate::StepProfile`), instead of
    /// --model and --throughput.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Link between the ranks of a node: nvlink2, nvlink3, nvlink4, pcie3, pcie4, pcie5,
    /// net100, net200, net400 [default: the GPU's NVLink].
    #[arg(long)]
    pub link: Option<String>,
    /// Replace NCCL's latency model of the link by a plain α per ring step (µs).
    #[arg(long)]
    pub alpha_us: Option<f64>,
    /// Override the link's bus bandwidth (GB/s per rank).
    #[arg(long)]
    pub bandwidth_gbs: Option<f64>,
    /// Link between nodes (one port per rank unless --ports-per-node).
    #[arg(long, default_value = "net200")]
    pub network: String,
    /// How a sum crosses nodes: ring (NCCL's one ring through every rank, as PyTorch DDP),
    /// node-buffer (firemesh across processes: summed in the node, one buffer per node summed
    /// across nodes through one port, shared in the node again), node-blocks (the node's sum
    /// in one block per rank, each across the nodes through its own port) or host-staged
    /// (firemesh across processes as built: node-buffer's bytes, staged through the host and
    /// the node's first GPU for NCCL)
    #[arg(long, default_value = "ring")]
    pub levels: Levels,
    /// Link between each GPU and the host, for --levels host-staged: pcie3, pcie4, pcie5
    /// [default: the GPU's PCIe generation].
    #[arg(long)]
    pub host_link: Option<String>,

    /// Ranks in one node.
    #[arg(long, default_value_t = 8)]
    pub ranks_per_node: usize,
    /// Network ports per node [default: one per rank].
    #[arg(long)]
    pub ports_per_node: Option<usize>,
    /// Rank counts to predict.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    pub ranks: Vec<usize>,
    #[command(flatten)]
    pub sums: StepOptions,
    /// Spread (coefficient of variation) of one rank's step time, if you measured it: a
    /// synchronous step waits for the slowest rank. No published figure is built in, so the
    /// default is 0: ranks that never differ.
    #[arg(long, default_value_t = 0.0)]
    pub straggler_cv: f64,
    /// Bytes of one gradient element on the wire (4: f32, also under mixed precision)
    /// [default: 4, or 2 with --comm-precision bf16 or f16].
    #[arg(long, conflicts_with = "comm_precision")]
    pub grad_element_bytes: Option<u64>,
    /// Simulate firemesh's own step: its op count and the BatchNorm sums of a sharded batch,
    /// counted on a CPU mesh here, and its per-op host time measured here plus --launch-us
    /// per rank and op.
    #[arg(long)]
    pub firemesh: bool,
    /// Host time of one kernel launch on the inner backend (µs), with --firemesh [default 4:
    /// NVIDIA's "Getting Started with CUDA Graphs" blog times short kernels launched back to
    /// back at a few µs each, launch included].
    // Source: https://developer.nvidia.com/blog/cuda-graphs/ (NVIDIA Technical Blog, 2019); its
    // per-kernel figures were not re-checked against a stored copy when this default was set.
    #[arg(long, default_value_t = 4.0)]
    pub launch_us: f64,
    /// With --firemesh: the ranks' ops issued on rank threads (as `firemesh train
    /// --rank-threads on` runs a mesh; a core per rank), each rank's launches on its own
    /// thread, instead of in turn from one.
    #[arg(long)]
    pub rank_threads: bool,
    /// ZeRO stages to compare, side by side: 0 (replicated), 1 (optimizer state sharded), 3
    /// (parameters too; simulated twice: gathered when each layer is reached, as `firemesh
    /// train --gather-ahead-mib 0` does, and ahead of use, as it does by default: the next
    /// layer's gather, and more up to --gather-ahead-mib of bytes, issued while a layer
    /// computes). The first is the stage of the main table. Each
    /// gets its memory per rank, checked against --gpu's memory.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub zero: Vec<u8>,
    /// The optimizer whose state the memory per rank counts: adamw (two moments) or sgd (one
    /// momentum buffer).
    #[arg(long, default_value = "adamw", value_parser = crate::options::named::<OptimizerKind>())]
    pub optimizer: OptimizerKind,
    /// Folder for simulate.json, simulate.md and the charts.
    #[arg(long, default_value = "runs/simulate")]
    pub out: PathBuf,
}

/// What a simulation was given and what it predicted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Simulation {
    pub profile: StepProfile,
    pub scenario: Scenario,
    /// Where the profile's step time came from.
    pub source: String,
    /// The GPU preset (what it is).
    pub gpu: String,
    /// The published run whose one-GPU figure was used, if one was: its 8-GPU figure is shown
    /// beside the prediction.
    pub published: Option<Published>,
    pub predictions: Vec<Prediction>,
    /// The same rank counts without overlap, with one collective per tensor, and both.
    pub no_overlap: Vec<Prediction>,
    pub per_tensor: Vec<Prediction>,
    pub per_tensor_no_overlap: Vec<Prediction>,
    /// (bucket bytes, step seconds) at the largest rank count.
    pub bucket_sweep: Vec<(u64, f64)>,
    pub firemesh_step: Option<FiremeshStep>,
    /// Each ZeRO stage of --zero (ZeRO-3 as built and prefetched) at each rank count.
    pub stages: Vec<StagePlan>,
    /// The device memory the plans are checked against, bytes.
    pub device_bytes: f64,
}

/// One ZeRO stage's predictions and memory per rank at each rank count.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StagePlan {
    pub stage: u8,
    /// ZeRO-3's gathers issued ahead of use: the next layer's, and more up to a bucket of
    /// bytes.
    pub prefetch: bool,
    pub predictions: Vec<Prediction>,
    /// Bytes one rank holds at each rank count; `None` where the model's shape is not known
    /// (a profile file).
    pub memory: Vec<Option<PerRank>>,
}

impl StagePlan {
    /// Whether the plan at rank count index `i` fits `device_bytes` (unknown sizes fit).
    pub fn fits(&self, i: usize, device_bytes: f64) -> bool {
        self.memory[i].is_none_or(|m| m.total() <= device_bytes)
    }
}

/// Runs `firemesh simulate`: predicts, prints the table, writes the report files.
pub fn run(o: &SimulateOptions) -> Result<Simulation> {
    let sim = simulate(o)?;
    report::print(&sim);
    let files = report::write(&sim, &o.out)?;
    println!("  written: {}", files.join(", "));
    Ok(sim)
}

/// The predictions of `o`, without printing or writing.
pub fn simulate(o: &SimulateOptions) -> Result<Simulation> {
    crate::options::image_size(o.image_size)?;
    if let Some(batch) = o.batch {
        crate::options::at_least_one("--batch", batch)?;
    }
    let gpu = Gpu::preset(&o.gpu).map_err(|e| Error::Invalid(format!("--gpu: {e}")))?;
    if !["amp", "tf32", "fp32"].contains(&o.published_precision.to_ascii_lowercase().as_str()) {
        return Err(Error::Invalid(format!(
            "--published-precision {:?}: amp, tf32 or fp32",
            o.published_precision
        )));
    }
    let (mut profile, source, workload, published) = profile(o, gpu)?;
    let scenario_base = scenario(o, gpu)?;
    if o.ranks.is_empty() || o.ranks.iter().any(|&n| n == 0 || n > 65_536) {
        return Err(Error::Invalid(
            "--ranks: give rank counts from 1 to 65536, like 1,2,4,8".into(),
        ));
    }
    let stages = stages(&o.zero)?;
    let mut scenario = scenario_base;
    scenario.sharding = Sharding {
        stage: stages[0].0,
        prefetch: None,
        grad_element_bytes: grad_element_bytes(o),
        gather_element_bytes: gather_element_bytes(o),
    };
    let device_bytes = gpu.memory_gb * 1e9;
    let model = memory_inputs(o, &profile)?;
    let ahead = match o.sums.gather_ahead_bytes()? {
        0 => None,
        bytes => Some(bytes as u64),
    };
    // Memory does not depend on the step's time: a run that fits nowhere is refused before
    // firemesh's step is measured.
    let mut stages = plan_stages(o, &stages, model.as_ref(), ahead);
    refuse_if_nothing_fits(o, &stages, device_bytes, gpu, model.as_ref())?;
    let mut firemesh_step = None;
    if o.firemesh {
        // firemesh's host time per op, measured here as benches/results/op_host_time.md
        // records it (Sharded<Flex>, ranks in turn or on rank threads), plus one launch.
        let measured = measure_firemesh_step(o.model, &o.ranks, o.sums.bucket_bytes()?)?;
        profile.ops_per_step = measured.ops_per_step as usize;
        profile.blocking_sums = measured.blocking_sums as usize;
        profile.blocking_sum_bytes = workload.as_ref().map(mean_batch_norm_bytes).unwrap_or(0.0);
        let launch = o.launch_us * 1e-6;
        scenario.host = HostModel {
            op_s: measured.host_op_s + launch,
            op_s_per_extra_rank: measured.host_op_s_per_extra_rank + launch,
            handoff_s: o.rank_threads.then_some(measured.handoff_s),
        };
        firemesh_step = Some(measured);
    }
    let at = |s: &Scenario| firemesh_simulate::sweep(&profile, s, &o.ranks);
    let variant = |schedule: Option<Schedule>, overlap: bool| {
        let mut s = scenario.clone();
        if let Some(schedule) = schedule {
            s.schedule = schedule;
        }
        s.overlap = overlap;
        at(&s)
    };
    let largest = *o.ranks.iter().max().expect("checked non-empty");
    let bucket_sweep = firemesh_simulate::validate::sweep_sizes()
        .into_iter()
        .map(|bytes| {
            let mut s = scenario.clone();
            s.schedule = Schedule::Buckets { bytes };
            (
                bytes,
                firemesh_simulate::predict(&profile, &s, largest).step_s,
            )
        })
        .collect();
    predict_stages(&mut stages, &profile, &scenario, &o.ranks, ahead);
    Ok(Simulation {
        stages,
        device_bytes,
        predictions: at(&scenario),
        no_overlap: variant(None, false),
        per_tensor: variant(Some(Schedule::PerTensor), true),
        per_tensor_no_overlap: variant(Some(Schedule::PerTensor), false),
        bucket_sweep,
        profile,
        scenario,
        source,
        gpu: gpu.about.to_string(),
        published,
        firemesh_step,
    })
}

/// The profile: read from a file, or the model's shape with one measured step time.
type Profiled = (StepProfile, String, Option<Workload>, Option<Published>);

fn profile(o: &SimulateOptions, gpu: &Gpu) -> Result<Profiled> {
    if let Some(path) = &o.profile {
        let p = StepProfile::load(path).map_err(|e| Error::Invalid(e.to_string()))?;
        return Ok((p, format!("profile {}", path.display()), None, None));
    }
    let invalid = |e: firemesh_simulate::SimulateError| Error::Invalid(e.to_string());
    // The model's own shape, from the zoo.
    let (workload, samples) = o
        .model
        .workload(o.classes, o.image_size)
        .map_err(|e| Error::Invalid(format!("simulate: {e} (or give --profile)")))?;
    let context = o
        .model
        .net(o.classes, o.image_size)?
        .context_length()
        .unwrap_or(1);
    let published_shape =
        o.model == ModelName::Resnet50 && o.image_size == 224 && o.classes == 1000;
    let published = published_shape
        .then(|| gpu.resnet50(&o.published_precision))
        .flatten();
    let samples = published.map_or(samples, |p| p.batch as usize);
    let samples = o.batch.map_or(samples, |b| b * context) as f64;
    let (throughput, source) = match (o.throughput, published) {
        (Some(t), _) => (t, format!("{t} {} per second on one device (given)", workload.unit)),
        (None, Some(p)) => (
            p.one_gpu,
            format!(
                "{} images/s on one {}, {}, {} images per GPU: NVIDIA's published {} ResNet-50 v1.5 figure ({})",
                thousands(p.one_gpu),
                gpu.about,
                match p.precision {
                    "amp" => "mixed precision",
                    "tf32" => "TF32",
                    _ => "FP32",
                },
                p.batch,
                p.framework,
                p.source
            ),
        ),
        (None, None) if published_shape => {
            return Err(Error::Invalid(format!(
                "simulate resnet50 on {} in {}: no published one-GPU figure is built in (there are: a100 amp|tf32, v100 amp|fp32); give --throughput",
                gpu.name, o.published_precision
            )))
        }
        (None, None) => {
            return Err(Error::Invalid(format!(
                "simulate {}: give --throughput (one device's {} per second) or --profile",
                o.model, workload.unit
            )))
        }
    };
    if !(throughput.is_finite() && throughput > 0.0) {
        return Err(Error::Invalid(format!(
            "--throughput {throughput}: a finite number above 0"
        )));
    }
    let p = StepProfile::from_workload(
        &workload,
        samples,
        samples / throughput,
        grad_element_bytes(o),
    )
    .map_err(invalid)?;
    // Its 8-GPU figure is shown beside the prediction of the same software's step only.
    let published = published
        .filter(|_| o.throughput.is_none() && !o.firemesh)
        .copied();
    Ok((p, source, Some(workload), published))
}

fn scenario(o: &SimulateOptions, gpu: &Gpu) -> Result<Scenario> {
    let invalid = |e: firemesh_simulate::SimulateError| Error::Invalid(e.to_string());
    let preset = Link::preset(o.link.as_deref().unwrap_or(gpu.link)).map_err(invalid)?;
    let mut intra = preset.clone();
    if let Some(gb_s) = o.bandwidth_gbs {
        intra = intra.with_bandwidth(gb_s).map_err(invalid)?;
    }
    if let Some(alpha_us) = o.alpha_us {
        let name = format!("{} (custom)", preset.name);
        intra = Link::custom(&name, alpha_us, intra.bytes_per_s / 1e9).map_err(invalid)?;
    }
    let inter = Link::preset(&o.network).map_err(invalid)?;
    let host_name = o.host_link.as_deref().unwrap_or(gpu.host);
    let host = Link::preset(host_name).map_err(|_| {
        let names: Vec<&str> = firemesh_simulate::LINK_PRESETS
            .iter()
            .map(|p| p.name)
            .collect();
        Error::Invalid(format!(
            "--host-link {host_name:?}: not a link preset ({})",
            names.join(", ")
        ))
    })?;
    if o.ranks_per_node == 0 {
        return Err(Error::Invalid("--ranks-per-node must be 1 or more".into()));
    }
    if o.ports_per_node == Some(0) {
        return Err(Error::Invalid("--ports-per-node must be 1 or more".into()));
    }
    let bucket_bytes = o.sums.bucket_bytes()?;
    if !(o.straggler_cv.is_finite() && (0.0..1.0).contains(&o.straggler_cv)) {
        return Err(Error::Invalid(format!(
            "--straggler-cv {}: from 0 to below 1",
            o.straggler_cv
        )));
    }
    if o.rank_threads && !o.firemesh {
        return Err(Error::Invalid(
            "--rank-threads models firemesh's own host time: give --firemesh too".into(),
        ));
    }
    if !(o.launch_us.is_finite() && o.launch_us >= 0.0) {
        return Err(Error::Invalid(format!(
            "--launch-us {}: 0 or more",
            o.launch_us
        )));
    }
    Ok(Scenario {
        topology: Topology {
            intra,
            inter,
            ranks_per_node: o.ranks_per_node,
            ports_per_node: o.ports_per_node,
            levels: o.levels,
            host: Some(host),
        },
        schedule: Schedule::Buckets {
            bytes: wire_bucket_bytes(o, bucket_bytes as u64),
        },
        overlap: true,
        straggler_cv: o.straggler_cv,
        host: HostModel::default(),
        serial: false,
        sharding: Default::default(),
    })
}

/// The (stage, prefetch) pairs of --zero: ZeRO-3 as built and prefetched.
fn stages(zero: &[u8]) -> Result<Vec<(u8, bool)>> {
    let mut out = Vec::new();
    for &z in zero {
        let z = firemesh::zero::stage(z)?;
        let variants: &[bool] = if z == 3 { &[false, true] } else { &[false] };
        for &prefetch in variants {
            if !out.contains(&(z, prefetch)) {
                out.push((z, prefetch));
            }
        }
    }
    match out.is_empty() {
        true => Err(Error::Invalid("--zero: give one or more of 0, 1, 3".into())),
        false => Ok(out),
    }
}

/// The model and the sizes its memory per rank is estimated from: `None` for a profile file.
fn memory_inputs(
    o: &SimulateOptions,
    profile: &StepProfile,
) -> Result<Option<(NetConfig, memory::Inputs)>> {
    if o.profile.is_some() {
        return Ok(None);
    }
    let net = o.model.net(o.classes, o.image_size)?;
    let context = net.context_length().unwrap_or(1) as f64;
    let inputs = memory::Inputs {
        samples_per_rank: (profile.samples_per_rank / context).ceil() as usize,
        image_size: o.image_size,
        seq_len: None,
        moments: match o.optimizer {
            OptimizerKind::Adamw => 2.0,
            OptimizerKind::Sgd => 1.0,
        },
        bucket_bytes: o.sums.bucket_bytes()? as f64,
    };
    Ok(Some((net, inputs)))
}

/// Each stage's memory per rank where the model's shape is known (which does not depend on
/// the step's time), its predictions left for [`predict_stages`].
fn plan_stages(
    o: &SimulateOptions,
    stages: &[(u8, bool)],
    model: Option<&(NetConfig, memory::Inputs)>,
    ahead: Option<u64>,
) -> Vec<StagePlan> {
    let estimate = |n: usize, stage: u8| model.map(|(net, i)| memory::estimate(net, i, n, stage));
    stages
        .iter()
        .map(|&(stage, prefetch)| StagePlan {
            stage,
            prefetch,
            predictions: Vec::new(),
            // Gathered ahead: up to `ahead` bytes of whole parameters more per rank.
            memory: (o.ranks.iter())
                .map(|&n| {
                    let extra = match (prefetch && n > 1, ahead) {
                        (true, Some(bytes)) => bytes as f64,
                        _ => 0.0,
                    };
                    estimate(n, stage).map(|m| PerRank {
                        parameters: m.parameters + extra,
                        ..m
                    })
                })
                .collect(),
        })
        .collect()
}

/// Each stage's predictions at every rank count of `ranks`.
fn predict_stages(
    plans: &mut [StagePlan],
    profile: &StepProfile,
    scenario: &Scenario,
    ranks: &[usize],
    ahead: Option<u64>,
) {
    for plan in plans {
        let mut s = scenario.clone();
        s.sharding.stage = plan.stage;
        // Gathered ahead up to --gather-ahead-mib (the bucket size by default).
        s.sharding.prefetch = plan.prefetch.then_some(ahead).flatten();
        plan.predictions = firemesh_simulate::sweep(profile, &s, ranks);
    }
}

/// Fails when no stage of --zero fits the GPU's memory at any rank count of --ranks, naming the
/// smallest rank count at which ZeRO-3 would.
fn refuse_if_nothing_fits(
    o: &SimulateOptions,
    stages: &[StagePlan],
    device_bytes: f64,
    gpu: &Gpu,
    model: Option<&(NetConfig, memory::Inputs)>,
) -> Result<()> {
    let fits = |p: &StagePlan| (0..o.ranks.len()).any(|i| p.fits(i, device_bytes));
    let Some((net, inputs)) = model.filter(|_| !stages.iter().any(fits)) else {
        return Ok(());
    };
    let least = (stages.iter().flat_map(|p| &p.memory).flatten())
        .map(PerRank::total)
        .fold(f64::INFINITY, f64::min);
    let would = (1..=16)
        .map(|k| 1usize << k)
        .find(|&n| memory::estimate(net, inputs, n, 3).total() <= device_bytes)
        .map_or_else(
            || "; not under ZeRO-3 at any rank count either: use a smaller --batch".to_string(),
            |n| format!("; under --zero 3 it fits from {n} ranks"),
        );
    let zero: Vec<String> = o.zero.iter().map(u8::to_string).collect();
    Err(Error::Invalid(format!(
        "{} at {} per rank does not fit one {} ({} GB) at --ranks {} under --zero {}: it needs at least {:.1} GB per rank{would}",
        o.model,
        inputs.samples_per_rank,
        gpu.name,
        gpu.memory_gb,
        o.ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        zero.join(","),
        least / 1e9
    )))
}

/// The bytes of one BatchNorm statistic sum, averaged over the model's BatchNorm layers (one
/// f32 per channel).
fn mean_batch_norm_bytes(w: &Workload) -> f64 {
    let channels: Vec<u64> = w
        .layers
        .iter()
        .filter(|l| l.name.ends_with(".bn"))
        .map(|l| l.params[0])
        .collect();
    if channels.is_empty() {
        return 0.0;
    }
    4.0 * channels.iter().sum::<u64>() as f64 / channels.len() as f64
}

/// 2470.0 as "2,470".
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A bucket's bytes on the wire. `firemesh train --comm-precision` cuts its buckets by the
/// gradients' f32 bytes and sums each in the lower precision: the same elements as in f32, in
/// fewer bytes.
fn wire_bucket_bytes(o: &SimulateOptions, bucket_bytes: u64) -> u64 {
    match o.sums.comm_precision {
        Some(_) => (bucket_bytes * grad_element_bytes(o) / 4).max(1),
        None => bucket_bytes,
    }
}

/// Bytes of a parameter element as ZeRO-3 gathers it: the compute dtype of the published
/// precision (2 under mixed precision, 4 in TF32 or FP32).
fn gather_element_bytes(o: &SimulateOptions) -> u64 {
    match o.published_precision.eq_ignore_ascii_case("amp") {
        true => 2,
        false => 4,
    }
}

/// Bytes of a gradient element on the wire: `--grad-element-bytes`, or what
/// `--comm-precision` sums in (f32 by default).
fn grad_element_bytes(o: &SimulateOptions) -> u64 {
    match (o.grad_element_bytes, o.sums.comm_precision) {
        (Some(bytes), _) => bytes,
        (None, Some(p)) => burn::tensor::DType::from(p.dtype()).size() as u64,
        (None, None) => 4,
    }
}
