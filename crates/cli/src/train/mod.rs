//! `firemesh train`: data-parallel training of the zoo's models on the devices found.
//!
//! [`run`] takes a [`TrainConfig`] and checks everything it can before it touches the disk
//! (options, devices, data, memory); then it trains with `Autodiff<Sharded<B>>` (parameters
//! replicated, each batch sharded over the ranks and built per rank on its own device, ahead of
//! time on worker threads), evaluates on the held-out split after every epoch, checkpoints, and
//! leaves `metrics.jsonl`, `summary.json` and PNG charts in the run folder.

mod across;
pub(crate) mod charts;
mod command;
pub mod config;
mod data;
mod evaluate;
mod gpu;
mod job;
mod join;
pub mod memory;
mod metrics;
mod nccl;
mod observers;
mod pipeline;
mod progress;
mod resume;
mod run;
mod stop;

pub use command::{Joined, TrainCommand};
pub use config::{default_optimizer, DataSpec, Length, ModelName, TrainConfig, TrainOptions};
pub use firemesh::optim::Schedule;
pub use firemesh::world::Processes;
pub use gpu::{describe as describe_gpus, GpuMonitor, GpuSample};
pub use job::route_name;
pub use metrics::{Record, Summary};
pub use nccl::join_by_nccl;
pub use stop::{forced as forced_stop, Stop, FORCED_EXIT_CODE};

use crate::{Error, Result};
use firemesh::mesh::{DeviceMesh, RuntimeConfig};
use firemesh::world::World;
use std::path::{Path, PathBuf};

/// Runs the training `config` asks for, printing progress; returns what it measured. Its meshes
/// run with the default [`RuntimeConfig`].
pub fn run(config: &TrainConfig) -> Result<Summary> {
    run_with(
        config,
        &RuntimeConfig::default(),
        &Stop::never(),
        &Processes::alone(),
    )
}

/// The mesh `config` trains on and its sequence length (GPTs), after every check that needs no
/// data and writes nothing: the batch against the ranks, the model's memory, the precisions.
fn checked_mesh(config: &TrainConfig) -> Result<(DeviceMesh, Option<usize>, memory::PerRank)> {
    let mesh = DeviceMesh::discover(config.mesh, config.ranks, config.share_devices)?;
    let ranks = mesh.ranks();
    if config.batch < ranks {
        return Err(Error::Invalid(format!(
            "--batch {} is smaller than the {ranks} ranks: each rank needs at least one sample",
            config.batch
        )));
    }
    let seq_len = seq_len(config)?;
    // Sizes are checked before any data is read or generated: the model as it will be, but
    // for its class count (a few weights) and, with GPT-2's BPE, the vocabulary of GPT-2.
    let vocab = match config.tokenizer {
        config::TokenizerSpec::Bytes => 256,
        config::TokenizerSpec::Gpt2(_) => 50_257,
    };
    let sizing = config.model.config(10, config.image_size, vocab)?;
    let memory = memory::check(config, &sizing, ranks, seq_len, &mesh)?;
    // Before the run folder exists: a precision a device lacks writes nothing.
    let settings = [
        (config.precision, "--precision"),
        (config.comm_precision, "--comm-precision"),
    ];
    for (precision, setting) in settings {
        let checked = match &mesh {
            DeviceMesh::Cuda(d) => precision.check::<burn_cuda::Cuda>(d),
            DeviceMesh::Wgpu(d) => precision.check::<burn_wgpu::Wgpu>(d),
            DeviceMesh::Cpu { ranks, .. } => {
                let devices = vec![burn_flex::FlexDevice; *ranks];
                precision.check::<burn_flex::Flex>(&devices)
            }
        };
        checked.map_err(|e| Error::in_setting(setting, e))?;
    }
    Ok((mesh, seq_len, memory))
}

/// What `firemesh train --dry-run` prints: the world `config` would train in, after the checks a
/// run makes before it reads data (devices, batch, memory, precisions), writing nothing (see
/// [`firemesh::world`]).
pub fn plan(config: &TrainConfig, world: &World) -> Result<String> {
    let (mesh, _, memory) = checked_mesh(config)?;
    let ranks = mesh.ranks();
    let devices = match &mesh {
        DeviceMesh::Cuda(d) => d.iter().map(|d| format!("cuda:{}", d.index)).collect(),
        DeviceMesh::Wgpu(d) => d.iter().map(|d| format!("{d:?}")).collect(),
        DeviceMesh::Cpu { ranks, .. } => vec!["cpu".to_string(); *ranks],
    };
    let one_device = devices.windows(2).all(|w| w[0] == w[1]);
    let in_process = match &mesh {
        _ if one_device => {
            "one device holds every rank: sums and gathers are tensor ops on it, nothing is copied"
        }
        DeviceMesh::Cuda(_) => {
            "firemesh's CubeCL collectives between the GPUs (one-shot or ring, by size)"
        }
        DeviceMesh::Wgpu(_) => {
            "firemesh's CubeCL collectives between the wgpu clients (one-shot or ring, by size)"
        }
        DeviceMesh::Cpu { .. } => unreachable!("CPU ranks share the host device"),
    };
    let across = if world.is_single() {
        "none (one process)".to_string()
    } else {
        match across::world_support(&mesh, world.nccl_meeting().map(|m| m[0].clone()).as_deref()) {
            Ok(how) => format!("{how} (process 0 writes the run folder)"),
            Err(e) => format!("none: {e}"),
        }
    };
    let world_ranks = world.processes * ranks;
    if config.batch < world_ranks {
        return Err(Error::Invalid(format!(
            "--batch {} is smaller than the world's {world_ranks} ranks: each rank needs at least one sample",
            config.batch
        )));
    }
    let per_rank = config.batch as f64 / world_ranks as f64;
    let local = world
        .local_process
        .map_or(String::new(), |l| format!(", process {l} on its node"));
    Ok(format!(
        "firemesh train --dry-run: {} on {}\n\
         \x20 launcher: {}\n\
         \x20 processes: {} (this is process {}{local})\n\
         \x20 ranks: {ranks} in this process, {world_ranks} in the world\n\
         \x20 devices of this process: {}\n\
         \x20 batch: {} samples a step, {per_rank:.1} per rank\n\
         \x20 transport in the process: {in_process}\n\
         \x20 transport across processes: {across}\n\
         \x20 memory (estimate): {}",
        config.model,
        mesh.describe(),
        world.launcher,
        world.processes,
        world.process,
        devices.join(", "),
        config.batch,
        memory.describe(config.zero),
    ))
}

/// [`run`], its meshes run as `runtime` says; `stop` ends it early, after a step and its
/// checkpoint ([`Summary::stopped_at`]). With several `processes` (a launcher's world joined
/// by MPI) they train one run together: each on its own ranks, process 0 writing the run
/// folder.
pub fn run_with(
    config: &TrainConfig,
    runtime: &RuntimeConfig,
    stop: &Stop,
    processes: &Processes,
) -> Result<Summary> {
    let (mesh, seq_len, _) = checked_mesh(config)?;
    across::check_world(config, &mesh, processes)?;
    let engine = runtime.engine_on(&mesh)?;
    let job = prepare(config, &mesh, seq_len, engine, stop, processes)?;
    train_on_mesh(&mesh, runtime, job)
}

/// What a run on `mesh` needs before its trainer: the data, the model, the order of samples,
/// the run folder (process 0 finds or makes it; the others take the one it names) and the GPU
/// monitor; process 0 prints what the run will train.
fn prepare(
    config: &TrainConfig,
    mesh: &DeviceMesh,
    seq_len: Option<usize>,
    engine: (String, String),
    stop: &Stop,
    processes: &Processes,
) -> Result<job::Job> {
    let data = data::open(config, seq_len.unwrap_or(0))?;
    let net = config
        .model
        .config(data.classes, config.image_size, data.classes)?;
    let order = pipeline::Order::new(data.train.len(), config.batch, config.seed)?;
    let run_dir = PathBuf::from(
        processes
            .decided_by_lead(|| Ok::<_, Error>(run_dir(config)?.to_string_lossy().into_owned()))?,
    );
    let (gpus, gpu_note) = match mesh {
        DeviceMesh::Cuda(devices) => gpu::GpuMonitor::cuda(devices.iter().map(|d| d.index)),
        _ => (gpu::GpuMonitor::none(), None),
    };
    let world = match processes.count() {
        1 => String::new(),
        n => format!(
            " in each of {n} processes ({} ranks in the world)",
            n * mesh.ranks()
        ),
    };
    if processes.leads() {
        println!(
            "firemesh train: {} on {}{world}\n  data: {}\n  {} samples per step, {}, run folder {}",
            config.model,
            mesh.describe(),
            data.describe,
            config.batch,
            match config.length {
                Length::Epochs(e) => format!("{e} epoch(s) of {} steps", order.steps_per_epoch),
                Length::Steps(s) => format!("{s} steps ({} per epoch)", order.steps_per_epoch),
            },
            run_dir.display()
        );
        if let Some(note) = gpu_note {
            println!("  {note}");
        }
        println!("  sums: {} ({})", engine.0, engine.1);
    }
    Ok(job::Job {
        config: config.clone(),
        data,
        net,
        order,
        run_dir,
        mesh_name: mesh.describe(),
        engine,
        gpus,
        stop: stop.clone(),
        processes: processes.clone(),
    })
}

/// `job` trained on the mesh of `mesh`'s devices, made as `runtime` says: this process's alone,
/// or its share of the world the job's processes form (every process makes its own at once).
fn train_on_mesh(mesh: &DeviceMesh, runtime: &RuntimeConfig, job: job::Job) -> Result<Summary> {
    let processes = job.processes.clone();
    match mesh {
        DeviceMesh::Cuda(d) => {
            let mesh = match processes.link() {
                None => runtime.cuda_mesh(d)?,
                // Experimental: `check_world` refused it, on every process, without the feature.
                Some(_) => {
                    let link = processes.nccl_link(d[0].index)?;
                    processes.agree(runtime.cuda_world_mesh(d, link).map_err(Error::from))?
                }
            };
            run::train_on::<burn_cuda::Cuda>(mesh, job)
        }
        DeviceMesh::Wgpu(d) => {
            let mesh = match processes.link() {
                None => runtime.wgpu_mesh(d)?,
                Some(link) => {
                    let mesh = runtime.wgpu_world_mesh(d, link.clone());
                    processes.agree(mesh.map_err(Error::from))?
                }
            };
            run::train_on::<burn_wgpu::Wgpu>(mesh, job)
        }
        // Flex computes where it is called: the ranks run at once on their own threads (the
        // mesh's default; `--rank-threads off` runs them in turn).
        DeviceMesh::Cpu { ranks, .. } => {
            let mesh = match processes.link() {
                None => runtime.cpu_mesh(*ranks)?,
                Some(link) => {
                    let mesh = runtime.cpu_world_mesh(*ranks, link.clone());
                    processes.agree(mesh.map_err(Error::from))?
                }
            };
            run::train_on::<burn_flex::Flex>(mesh, job)
        }
    }
}

/// Tokens per training sequence of a GPT run.
fn seq_len(config: &TrainConfig) -> Result<Option<usize>> {
    let Some(context) = config.model.net(10, 32)?.context_length() else {
        return Ok(None);
    };
    match config.seq_len {
        Some(s) if s > context => Err(Error::Invalid(format!(
            "--seq-len {s} is longer than {}'s context of {context} tokens",
            config.model
        ))),
        Some(s) => Ok(Some(s)),
        None => Ok(Some(context.min(256))),
    }
}

/// The run folder: the one given (new, or holding the run to resume: with no checkpoint yet,
/// the run starts over), else the next free `runs/MODEL-NNN` (or, resuming, the newest one with
/// checkpoints). A run never writes into a folder that holds another run unless it resumes it.
fn run_dir(config: &TrainConfig) -> Result<PathBuf> {
    let holds_run = |dir: &Path| {
        ["metrics.jsonl", "summary.json", "checkpoints"]
            .iter()
            .any(|f| dir.join(f).exists())
    };
    let has_checkpoints = |dir: &Path| {
        !firemesh::checkpoint::CheckpointDir::new(dir)
            .list()
            .is_empty()
    };
    let dir = match (&config.run_dir, config.resume) {
        (Some(dir), false) if holds_run(dir) => {
            return Err(Error::Invalid(format!(
                "{} already holds a run: pass --resume to continue it, or choose another --run-dir",
                dir.display()
            )))
        }
        (Some(dir), _) => dir.clone(),
        (None, resume) => {
            let numbered =
                |n: usize| PathBuf::from("runs").join(format!("{}-{n:03}", config.model));
            let taken = (1..).take_while(|&n| numbered(n).exists()).count();
            if resume {
                (1..=taken)
                    .rev()
                    .map(numbered)
                    .find(|d| has_checkpoints(d))
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "--resume: no earlier run of {} with checkpoints under runs/; pass --run-dir",
                            config.model
                        ))
                    })?
            } else {
                numbered(taken + 1)
            }
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    Ok(dir)
}
