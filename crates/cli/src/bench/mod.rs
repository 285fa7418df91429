//! `firemesh bench`: how fast the zoo's models train on N ranks, for every runtime present,
//! side by side in one run with the peers: the inner backend alone on one device, and
//! burn-train's `MultiDevice` strategy over the same devices. The report gives throughput,
//! scaling efficiency throughput(N) / (N · throughput(1)), the share of a step spent in
//! communication, collectives per step and peak memory, as `bench.md`, `bench.json` and
//! `bench.png` in the output folder.
//!
//! Scaling is weak: each rank gets the same per-rank batch at every N, as in data-parallel
//! training on more GPUs. On a CPU mesh the ranks share the host's cores, so N > 1 measures
//! the mesh's overhead there, not a speed-up.

mod multi;
mod report;
mod step;

pub use report::{source_commit, BenchReport, Row, Setup, Variant};

use crate::options::{self, at_least_one, StepOptions};
use crate::train::ModelName;
use crate::{Error, Result};
use burn::tensor::backend::Backend;
use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::wgpu::WgpuRuntime;
use firemesh::mesh::{RuntimeConfig, MAX_WGPU_RANKS};
use firemesh::Precision;
use firemesh_backend::{Mesh, MeshConfig};
use firemesh_collective::probe;
use firemesh_collective::wgpu_devices::{wgpu_adapter, wgpu_devices};
use std::path::PathBuf;
use step::{Measured, Work};

/// What `firemesh bench` measures.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchOptions {
    /// Runtimes to measure [default: the CPU; CUDA when it can run kernels; wgpu when its
    /// adapter is a GPU (a software driver is measured only when asked for)].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub runtimes: Vec<Runtime>,
    /// Models [default: resnet50 and gpt-tiny on a CPU or a software adapter, resnet50 and
    /// gpt2-small on a GPU].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub models: Vec<ModelName>,
    /// Rank counts [default: 1,2,4 on the CPU; 1,2 on wgpu; 1,2,4,8 up to the GPU count on
    /// CUDA].
    #[arg(long, value_delimiter = ',')]
    pub ranks: Vec<usize>,
    /// Images or sequences per rank and step: the global batch is N times this [default: 4
    /// images or 4 sequences on a CPU, 64 images or 8 sequences on a GPU].
    #[arg(long)]
    pub batch_per_rank: Option<usize>,
    /// Image side in pixels [default: 32 on a CPU, 224 on a GPU].
    #[arg(long)]
    pub image_size: Option<usize>,
    /// Tokens per GPT sequence [default: 128 on a CPU, 1024 on a GPU, at most the model's
    /// context].
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Timed steps per setup.
    #[arg(long, default_value_t = 3)]
    pub steps: usize,
    /// Untimed steps before them (kernel compilation, allocator warm-up).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Times each setup is measured, setups of a model taking turns, so that every ratio is
    /// taken repeat by repeat and reported with its spread (3 or more give one).
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    #[command(flatten)]
    pub sums: StepOptions,
    /// Precisions of firemesh's rows, measured side by side (e.g. f32,bf16); the peers run in
    /// f32. A precision a runtime's devices lack is left out with a note [default: f32].
    #[arg(long, value_delimiter = ',', value_parser = crate::options::named::<Precision>())]
    pub precision: Vec<Precision>,
    /// ZeRO stages of firemesh's rows, measured side by side (e.g. 0,1,3): 1 shards the
    /// optimizer state over the ranks (its bytes per rank are in the report), 3 the parameters
    /// too [default: 0].
    #[arg(long, value_delimiter = ',')]
    pub zero: Vec<u8>,
    /// Measure firemesh only, without the peers.
    #[arg(long)]
    pub no_peers: bool,
    /// Time communication alone: every sum and gather across ranks first waits for the work
    /// queued on every rank, so the comm share holds no compute. It costs any overlap of
    /// communication with the backward pass: throughput is not what a training run gets.
    #[arg(long)]
    pub settle_before_comm: bool,
    /// Folder for bench.md, bench.json and bench.png.
    #[arg(long, default_value = "benches/results")]
    pub out: PathBuf,
}

/// A runtime to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// Burn's Flex backend, every rank on the host.
    Cpu,
    /// CubeCL's wgpu runtime, one client per rank.
    Wgpu,
    /// CubeCL's CUDA runtime, one rank per GPU (round-robin beyond the GPU count).
    Cuda,
}

/// The sizes of one runtime's runs.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sizes {
    pub batch_per_rank: Option<usize>,
    pub image_size: usize,
    /// Asked for on the command line, else the runtime's default (capped by the context).
    pub seq_len: Option<usize>,
    /// Whether the defaults are a GPU's (batch per rank, sequence length).
    pub gpu: bool,
}

/// A runtime to measure, with what it runs.
struct Plan {
    runtime: Runtime,
    device: String,
    models: Vec<ModelName>,
    ranks: Vec<usize>,
    sizes: Sizes,
}

/// Runs the benchmark `options` asks for on meshes run as `runtime` says, printing progress and
/// the report; writes the report files and returns the report.
pub fn run(options: &BenchOptions, runtime: &RuntimeConfig) -> Result<BenchReport> {
    check(options)?;
    let (plans, notes) = plan(options)?;
    // Every model's sizes are checked before anything runs or is written.
    let works: Vec<Vec<Work>> = plans
        .iter()
        .map(|p| {
            p.models
                .iter()
                .map(|&m| Work::new(m, p.sizes, options))
                .collect()
        })
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Error::io(format!("cannot create {}", options.out.display()), e))?;
    // As training runs, unless asked to time communication alone.
    let runtime = RuntimeConfig {
        mesh: MeshConfig {
            settle_before_comm: options.settle_before_comm,
            ..runtime.mesh
        },
        ..*runtime
    };
    let devices = plans
        .iter()
        .map(|p| format!("{:?}: {}", p.runtime, p.device).to_lowercase())
        .collect();
    let mut out = Collected {
        rows: Vec::new(),
        notes,
        options,
        devices,
    };
    for (p, works) in plans.iter().zip(&works) {
        for work in works {
            match p.runtime {
                Runtime::Cpu => measure::<burn_flex::Flex>(
                    p,
                    work,
                    options,
                    &mut out,
                    |n| Ok(runtime.cpu_mesh(n)?),
                    |_| None,
                )?,
                Runtime::Wgpu => measure::<burn_wgpu::Wgpu>(
                    p,
                    work,
                    options,
                    &mut out,
                    |n| Ok(runtime.wgpu_mesh(&wgpu_devices(n)?)?),
                    device_bytes::<WgpuRuntime>,
                )?,
                Runtime::Cuda => measure::<burn_cuda::Cuda>(
                    p,
                    work,
                    options,
                    &mut out,
                    |n| Ok(runtime.cuda_mesh(&cuda_ranks(n)?)?),
                    device_bytes::<CudaRuntime>,
                )?,
            }
        }
    }
    let report = out.report(out.rows.clone());
    print!("{}", report.markdown());
    report.write(&options.out)?;
    println!(
        "bench.md, bench.json and bench.png written to {}",
        options.out.display()
    );
    Ok(report)
}

fn check(o: &BenchOptions) -> Result<()> {
    let bad = |m: String| Err(Error::Invalid(m));
    at_least_one("--steps", o.steps)?;
    if !(1..=100).contains(&o.repeats) {
        return bad(format!("--repeats {}: it must be 1 to 100", o.repeats));
    }
    if let Some(&n) = o.ranks.iter().find(|&&n| n == 0 || n > 64) {
        return bad(format!("--ranks {n}: rank counts go from 1 to 64"));
    }
    o.batch_per_rank
        .map(|b| at_least_one("--batch-per-rank", b))
        .transpose()?;
    o.image_size.map(options::image_size).transpose()?;
    o.seq_len.map(options::seq_len).transpose()?;
    o.sums.bucket_bytes()?;
    for &z in &o.zero {
        firemesh::zero::stage(z)?;
    }
    Ok(())
}

/// The runtimes to measure, with their models, rank counts and sizes, and notes on the
/// runtimes left out.
fn plan(o: &BenchOptions) -> Result<(Vec<Plan>, Vec<String>)> {
    let mut notes = Vec::new();
    let asked = !o.runtimes.is_empty();
    let runtimes = if asked {
        o.runtimes.clone()
    } else {
        vec![Runtime::Cpu, Runtime::Wgpu, Runtime::Cuda]
    };
    let cpu_sizes = Sizes {
        batch_per_rank: o.batch_per_rank,
        image_size: o.image_size.unwrap_or(32),
        seq_len: o.seq_len,
        gpu: false,
    };
    let gpu_sizes = Sizes {
        batch_per_rank: o.batch_per_rank,
        image_size: o.image_size.unwrap_or(224),
        seq_len: o.seq_len,
        gpu: true,
    };
    let models = |gpu: bool| match (o.models.is_empty(), gpu) {
        (false, _) => o.models.clone(),
        (true, false) => vec![ModelName::Resnet50, ModelName::GptTiny],
        (true, true) => vec![ModelName::Resnet50, ModelName::Gpt2Small],
    };
    let ranks = |default: Vec<usize>| {
        if o.ranks.is_empty() {
            default
        } else {
            let mut r = o.ranks.clone();
            r.sort_unstable();
            r.dedup();
            r
        }
    };
    let mut plans = Vec::new();
    for runtime in runtimes {
        match runtime {
            Runtime::Cpu => plans.push(Plan {
                runtime,
                device: format!(
                    "{} ({} cores)",
                    cpu_name(),
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                ),
                models: models(false),
                ranks: ranks(vec![1, 2, 4]),
                sizes: cpu_sizes,
            }),
            Runtime::Wgpu if ranks(vec![1]).iter().any(|&n| n > MAX_WGPU_RANKS) => {
                return Err(Error::Invalid(format!(
                    "--ranks: a wgpu mesh has at most {MAX_WGPU_RANKS} clients"
                )))
            }
            Runtime::Wgpu => match wgpu_adapter() {
                Ok((name, software)) if !software || asked => plans.push(Plan {
                    runtime,
                    device: name,
                    models: models(!software),
                    ranks: ranks(vec![1, 2]),
                    sizes: if software { cpu_sizes } else { gpu_sizes },
                }),
                Ok((name, _)) => notes.push(format!(
                    "wgpu left out: its adapter, {name}, is a software driver on the CPU \
                     (--runtimes wgpu measures it)"
                )),
                Err(e) if asked => return Err(e.into()),
                Err(e) => notes.push(format!("wgpu left out: {e}")),
            },
            Runtime::Cuda => match probe::usable_cuda_devices() {
                Ok(gpus) => {
                    let all = (0..4).map(|k| 1 << k).filter(|&n| n <= gpus.len().max(1));
                    plans.push(Plan {
                        runtime,
                        device: format!("{} CUDA GPU(s)", gpus.len()),
                        models: models(true),
                        ranks: ranks(all.collect()),
                        sizes: gpu_sizes,
                    })
                }
                Err(e) if asked => return Err(e.into()),
                Err(e) => notes.push(format!("CUDA left out: {e}")),
            },
        }
    }
    Ok((plans, notes))
}

/// What the measurements gave so far, and what the report says of the run.
struct Collected<'a> {
    rows: Vec<Row>,
    notes: Vec<String>,
    options: &'a BenchOptions,
    devices: Vec<String>,
}

impl Collected<'_> {
    fn report(&self, rows: Vec<Row>) -> BenchReport {
        BenchReport::new(self.options, self.devices.clone(), rows, self.notes.clone())
    }

    /// Writes the report of the rows so far and `more`: a run cut short leaves what it
    /// measured.
    fn write_with(&self, more: Vec<Row>) -> Result<()> {
        let mut rows = self.rows.clone();
        rows.extend(more);
        self.report(rows).write(&self.options.out)
    }
}

/// `n` ranks over the usable CUDA GPUs, round-robin.
fn cuda_ranks(n: usize) -> Result<Vec<CudaDevice>> {
    let gpus = probe::usable_cuda_devices()?;
    if gpus.is_empty() {
        return Err(Error::Invalid("no usable CUDA GPU".into()));
    }
    Ok(probe::round_robin(&gpus, n))
}

/// The host CPU's model name (Linux), or "CPU".
pub(crate) fn cpu_name() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or_else(|| "CPU".to_string(), |s| s.trim().to_string())
}

/// The most device memory in use on any of `devices`, as CubeCL's allocator counts it for the
/// device stream (where firemesh's work runs, `firemesh_collective::stream`).
fn device_bytes<R: cubecl::Runtime>(devices: &[R::Device]) -> Option<u64> {
    devices
        .iter()
        .filter_map(|d| {
            firemesh_collective::DeviceStream::client::<R>(d)
                .memory_usage()
                .ok()
        })
        .map(|u| u.bytes_in_use)
        .max()
}

/// Measures `work` on every rank count of `plan`, and the peers, `options.repeats` times with
/// the setups taking turns, appending one row per setup.
fn measure<B: Backend>(
    plan: &Plan,
    work: &Work,
    options: &BenchOptions,
    out: &mut Collected<'_>,
    mesh: impl Fn(usize) -> Result<Mesh<B::Device>>,
    memory: fn(&[B::Device]) -> Option<u64>,
) -> Result<()> {
    let mut precisions = options.precision.clone();
    if precisions.is_empty() {
        precisions.push(Precision::F32);
    }
    precisions.dedup();
    let mut zeros = options.zero.clone();
    if zeros.is_empty() {
        zeros.push(0);
    }
    zeros.dedup();
    let first_mesh = mesh(plan.ranks[0])?;
    // The gradient sums' precision is the same in every row: a runtime that lacks it is an error.
    let wire = work.comm_precision;
    wire.check::<B>(first_mesh.devices())
        .map_err(|e| Error::in_setting("--comm-precision", e))?;
    precisions.retain(|p| match p.check::<B>(first_mesh.devices()) {
        Ok(()) => true,
        Err(e) => {
            out.notes
                .push(format!("{:?} {}: {e}", plan.runtime, work.model).to_lowercase());
            false
        }
    });
    let label = |setup: &str, n: usize, repeat: usize| {
        let of = if options.repeats > 1 {
            format!(" (repeat {}/{})", repeat + 1, options.repeats)
        } else {
            String::new()
        };
        format!("{:?} {} {setup} N={n}{of}", plan.runtime, work.model).to_lowercase()
    };
    // Each setup's repeats, in the order of the report's rows; a peer that fails once is
    // left out, with a note.
    let mut runs: Vec<(Variant, usize, Vec<Measured>)> = Vec::new();
    let mut failed: Vec<usize> = Vec::new();
    let add = |runs: &mut Vec<(Variant, usize, Vec<Measured>)>, variant, n, m| match runs
        .iter_mut()
        .find(|(v, k, _)| *v == variant && *k == n)
    {
        Some((.., repeats)) => repeats.push(m),
        None => runs.push((variant, n, vec![m])),
    };
    let peer = |setup| Variant {
        setup,
        precision: Precision::F32,
        zero: 0,
    };
    for repeat in 0..options.repeats {
        for &n in &plan.ranks {
            let mesh = mesh(n)?;
            let devices = mesh.devices().to_vec();
            let label = |setup: &str, n: usize| label(setup, n, repeat);
            for (&precision, &zero) in precisions
                .iter()
                .flat_map(|p| zeros.iter().map(move |z| (p, z)))
            {
                let variant = Variant {
                    setup: Setup::Firemesh,
                    precision,
                    zero,
                };
                let m = step::sharded::<B>(
                    &mesh,
                    work,
                    precision,
                    zero,
                    &|| memory(&devices),
                    &label(&variant.label(), n),
                )?;
                add(&mut runs, variant, n, m);
                out.write_with(rows_of(plan, work, &runs, &failed))?;
            }
            if options.no_peers {
                continue;
            }
            if n == plan.ranks[0] {
                let one = &devices[..1];
                let m = step::inner::<B>(&devices[0], work, &|| memory(one), &label("inner", 1))?;
                add(&mut runs, peer(Setup::Inner), 1, m);
                out.write_with(rows_of(plan, work, &runs, &failed))?;
            }
            if n > 1 && !failed.contains(&n) {
                match multi::step_seconds::<B>(&devices, work, &label("multi-device", n)) {
                    Ok(m) => {
                        add(&mut runs, peer(Setup::MultiDevice), n, m);
                        out.write_with(rows_of(plan, work, &runs, &failed))?;
                    }
                    Err(e) => {
                        failed.push(n);
                        out.notes.push(format!("{}: {e}", label("multi-device", n)));
                    }
                }
            }
        }
    }
    out.rows.extend(rows_of(plan, work, &runs, &failed));
    Ok(())
}

/// The rows of `work`'s setups measured so far on `plan`'s runtime, with their ratios.
fn rows_of(
    plan: &Plan,
    work: &Work,
    runs: &[(Variant, usize, Vec<Measured>)],
    failed: &[usize],
) -> Vec<Row> {
    let mut rows: Vec<Row> = runs
        .iter()
        // A peer that failed in a later repeat has fewer repeats than the others: left out.
        .filter(|(v, n, _)| !(v.setup == Setup::MultiDevice && failed.contains(n)))
        .map(|(variant, n, repeats)| Row::new(plan.runtime, work, *variant, *n, repeats))
        .collect();
    report::fill_ratios(&mut rows, plan.runtime, work.model);
    rows
}
