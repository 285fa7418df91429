//! The `firemesh` command line.

use burn_tensor::Tensor;
use clap::{Parser, Subcommand};
use firemesh::mesh::{DeviceMesh, RuntimeConfig};
use firemesh_cli::options::{MeshOptions, RuntimeOptions};
use firemesh_cli::train::{Stop, TrainConfig, TrainOptions};
use firemesh_cli::{Error, Result};
use firemesh_collective::{CollectiveRuntime, Collectives, DType, Group, ReduceOp};
use std::time::Instant;

/// mimalloc, keeping freed memory for reuse (see `firemesh::alloc`).
#[global_allocator]
static ALLOCATOR: firemesh::alloc::Allocator = firemesh::alloc::Allocator;

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

// Parsed once per process: the size difference of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Train a zoo model (ResNet or GPT) with its batch sharded over the devices found.
    Train {
        #[command(flatten)]
        options: TrainOptions,
        /// Write a per-rank timeline of the run (each rank's ops, the sums and gathers between
        /// ranks) as a Chrome trace, for chrome://tracing or ui.perfetto.dev. Large: a few
        /// steps are enough.
        #[arg(long, value_name = "FILE.json")]
        trace: Option<std::path::PathBuf>,
        /// SIGTERM or SIGINT ends the run after its current step, with a checkpoint (exit code
        /// 0; `--resume` goes on from it); a second signal, or this many seconds after the
        /// first, ends it at once, naming the last good checkpoint (exit code 143). Preemptible
        /// cloud machines give about 30 s of notice.
        #[arg(long, value_name = "SECONDS", default_value_t = 25.0)]
        stop_deadline: f64,
        /// In a world of several processes (mpirun, srun): a process that waits longer than
        /// this for the others at one exchange (one of them lost or stopped) ends the whole
        /// world with an error naming itself, instead of hanging.
        #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
        world_timeout: f64,
        /// Print the world the run would form (the launcher's processes, this process's ranks
        /// and devices, the transport on each level) after the same checks as a run, and exit
        /// without writing anything.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        runtime: RuntimeOptions,
    },
    /// Predict step time and scaling efficiency on 1..64 ranks of a given link, from a
    /// measured one-device step.
    Simulate {
        #[command(flatten)]
        options: firemesh_cli::simulate::SimulateOptions,
    },
    /// Measure training throughput of the zoo's models on N ranks of every runtime present,
    /// against the peers, with scaling efficiency and communication share.
    Bench {
        #[command(flatten)]
        options: firemesh_cli::bench::BenchOptions,
        #[command(flatten)]
        runtime: RuntimeOptions,
    },
    /// Put runs of `firemesh train` side by side (in f32, bf16 and f16, say): a table of their
    /// final numbers against the first run's, and their curves on one chart each.
    Compare {
        #[command(flatten)]
        options: firemesh_cli::compare::CompareOptions,
    },
    /// All-reduce a buffer across the devices found and report bandwidth and correctness.
    Demo {
        #[command(flatten)]
        mesh: MeshOptions,
        /// Message size per rank, in MiB.
        #[arg(long, default_value_t = 16)]
        mib: usize,
        /// Timed repetitions.
        #[arg(long, default_value_t = 5)]
        iters: usize,
        #[command(flatten)]
        runtime: RuntimeOptions,
    },
}

fn main() {
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            // One line: clap's message and its hint (possible values), without the usage.
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.is_empty())
                .collect();
            eprintln!("{}", line.join(" "));
            std::process::exit(2);
        }
        Err(e) => e.exit(), // --help, --version
    };
    // A run's `--config` file is read once, here, under the command line's values.
    if let Command::Train { options, .. } = &mut cli.command {
        match options.clone().with_config_file() {
            Ok(merged) => *options = merged,
            Err(e) => {
                say_error(&e);
                std::process::exit(1);
            }
        }
    }
    // The launcher's world, from its environment: read here, at the program's edge, before
    // anything is written (the trace file included).
    let world = match &cli.command {
        Command::Train { .. } => {
            let world = firemesh_cli::world::World::from_env(|name| std::env::var(name).ok());
            match world {
                Ok(world) => world,
                Err(e) => {
                    say_error(&e);
                    std::process::exit(1);
                }
            }
        }
        _ => firemesh_cli::world::World::single(),
    };
    // A run in a world of several processes joins it first (through MPI, or by NCCL's own
    // bootstrap under torchrun-style variables), or is refused, before anything is written;
    // MPI's join is kept until the run ends (dropping it finalises MPI, which mpirun expects
    // of a process that ends well).
    let (_mpi, processes) = match &cli.command {
        Command::Train {
            dry_run: false,
            world_timeout,
            options,
            ..
        } => match join(&world, options, *world_timeout) {
            Ok(joined) => joined,
            Err(e) => {
                say_error(&e);
                std::process::exit(1);
            }
        },
        _ => Default::default(),
    };
    // In a world of several processes, each writes its own timeline.
    let trace = match &cli.command {
        Command::Train {
            trace: Some(path),
            dry_run: false,
            ..
        } => Some(world.own_file(path)),
        _ => None,
    };
    let flush = match init_tracing(trace.as_deref()) {
        Ok(flush) => flush,
        Err(e) => {
            say_error(&e);
            std::process::exit(1);
        }
    };
    let result = match cli.command {
        Command::Train {
            options,
            runtime,
            stop_deadline,
            dry_run,
            ..
        } => train(
            options,
            &runtime.config(),
            stop_deadline,
            dry_run.then_some(&world),
            &processes,
        ),
        Command::Simulate { options } => firemesh_cli::simulate::run(&options).map(|_| ()),
        Command::Bench { options, runtime } => {
            firemesh_cli::bench::run(&options, &runtime.config()).map(|_| ())
        }
        Command::Compare { options } => firemesh_cli::compare::run(&options).map(|_| ()),
        Command::Demo {
            mesh,
            mib,
            iters,
            runtime,
        } => demo(&mesh, mib, iters.max(1), &runtime.config()),
    };
    drop(flush); // completes the trace file, also when the run failed
    if let Err(e) = result {
        // A refusal the whole world reached together: every process has printed it before any
        // exits (mpirun ends the job at the first process that fails).
        let together = matches!(e, Error::World(_));
        say_error(&e);
        if together {
            let _ = processes.barrier();
        }
        std::process::exit(1);
    }
}

/// `error: E` on stderr in one write, so that the lines of a world's processes, which mpirun
/// forwards through one stream, do not interleave.
fn say_error(e: &dyn std::fmt::Display) {
    use std::io::Write;
    let line = format!("error: {e}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `RUST_LOG=firemesh=debug` (say) prints tracing output; `trace` writes the per-rank
/// timeline (spans of targets `firemesh::rank` and `firemesh::comm`) as a Chrome trace, whose
/// file is complete when the returned guard drops.
fn init_tracing(trace: Option<&std::path::Path>) -> Result<Option<tracing_chrome::FlushGuard>> {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let log = std::env::var_os("RUST_LOG").is_some().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(EnvFilter::from_default_env())
    });
    let (chrome, flush) = match trace {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| {
                Error::Invalid(format!("--trace {}: cannot create it: {e}", path.display()))
            })?;
            let (layer, flush) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(std::io::BufWriter::new(file))
                .include_args(true)
                .include_locations(false)
                .build();
            let timeline = Targets::new()
                .with_target("firemesh::rank", LevelFilter::TRACE)
                .with_target("firemesh::comm", LevelFilter::TRACE);
            (Some(layer.with_filter(timeline)), Some(flush))
        }
        None => (None, None),
    };
    if log.is_some() || chrome.is_some() {
        tracing_subscriber::registry().with(log).with(chrome).init();
    }
    Ok(flush)
}

/// Trains on `options` (their `--config` file merged in `main`).
fn train(
    options: TrainOptions,
    runtime: &RuntimeConfig,
    stop_deadline: f64,
    dry_run: Option<&firemesh_cli::world::World>,
    processes: &firemesh_cli::train::Processes,
) -> Result<()> {
    let config = TrainConfig::resolve(options)?;
    if let Some(world) = dry_run {
        println!("{}", firemesh_cli::train::plan(&config, world)?);
        return Ok(());
    }
    if !(stop_deadline.is_finite() && stop_deadline > 0.0) {
        return Err(Error::Invalid(format!(
            "--stop-deadline {stop_deadline}: must be a positive number of seconds"
        )));
    }
    let stop = Stop::on_signals(std::time::Duration::from_secs_f64(stop_deadline))?;
    let s = firemesh_cli::train::run_with(&config, runtime, &stop, processes)?;
    if !processes.leads() {
        return Ok(());
    }
    if s.steps_this_run == 0 {
        println!(
            "the run in {} is already complete: {} steps, loss {:.4} -> {:.4}; nothing left to \
             train (raise --steps or --epochs to go on)",
            s.run_dir.display(),
            s.steps,
            s.first_loss,
            s.last_loss
        );
        return Ok(());
    }
    let (outcome, steps) = match s.stopped_at {
        Some(step) => ("stopped", format!("{step} of {}", s.steps)),
        None => ("done", s.steps.to_string()),
    };
    println!(
        "{outcome}: loss {:.4} -> {:.4} over {steps} steps ({} in this run), {:.1} {}, {:.1}% of the time waiting for data, {} fallback op(s)",
        s.first_loss,
        s.last_loss,
        s.steps_this_run,
        s.throughput,
        s.throughput_unit,
        100.0 * s.data_wait_fraction,
        s.fallbacks
    );
    if !s.products_in_f32.is_empty() {
        let total: u64 = s.products_in_f32.values().sum();
        let ops: Vec<String> = s
            .products_in_f32
            .iter()
            .map(|(o, k)| format!("{k} {o}"))
            .collect();
        println!(
            "  {total} product(s) per step ran in f32, not {}: {} (this runtime's convolution \
             kernels add in the element type, and no kernel adding in f32 took them)",
            s.precision,
            ops.join(", ")
        );
    }
    if s.synchronous_copies > 0 {
        println!(
            "  {} copy(ies) between GPUs fell back to synchronous copies: the driver refused a \
             stream memory operation (RUST_LOG=firemesh=warn names the pairs)",
            s.synchronous_copies
        );
    }
    if !s.routes.is_empty() {
        let routes: Vec<String> = s.routes.iter().map(|(r, k)| format!("{k} {r}")).collect();
        println!(
            "  sums and gathers across ranks, by route: {}",
            routes.join(", ")
        );
    }
    let bucket = match s.bucket_bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    };
    println!(
        "  gradients summed in {} collective(s) per step, {} of them during the backward pass \
         (buckets of {bucket})",
        s.gradient_collectives, s.early_gradient_collectives,
    );
    println!(
        "  metrics, summary, charts and checkpoints: {}",
        s.run_dir.display()
    );
    if let Some(step) = s.stopped_at {
        let checkpoint = s
            .last_checkpoint
            .as_deref()
            .map_or(String::new(), |p| format!(", checkpoint {}", p.display()));
        println!(
            "stopped by a signal after step {step} of {}{checkpoint}; `--resume` goes on from there",
            s.steps
        );
    }
    Ok(())
}

fn demo(mesh: &MeshOptions, mib: usize, iters: usize, runtime: &RuntimeConfig) -> Result<()> {
    let mesh = mesh.discover()?;
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

/// The processes of a torchrun-style `world`, joined by NCCL's own bootstrap (`None` for other
/// worlds). NCCL reads where process 0 listens from `NCCL_COMM_ID` (in `ncclGetUniqueId`, and
/// in process 0's `ncclCommInitRank`, which then listens at the id's address): set here, at the
/// program's edge, while this process has one thread, once for each of the world's two
/// communicators, and left set.
fn join_by_nccl(
    world: &firemesh_cli::world::World,
    options: &TrainOptions,
    timeout: f64,
) -> Result<Option<firemesh_cli::train::Processes>> {
    if world.nccl_meeting().is_none() {
        return Ok(None);
    }
    let mesh = options
        .devices
        .mesh
        .unwrap_or(firemesh::mesh::MeshKind::Auto);
    let id_at = |place: &str| {
        std::env::set_var("NCCL_COMM_ID", place);
        firemesh_nccl::UniqueId::new()
    };
    firemesh_cli::train::join_by_nccl(world, mesh, id_at, world_timeout(timeout)?).map(Some)
}

/// The processes of `world` joined through MPI (nothing to join for one process), or by NCCL's
/// own bootstrap (torchrun-style variables).
#[cfg(feature = "mpi")]
fn join(
    world: &firemesh_cli::world::World,
    options: &TrainOptions,
    timeout: f64,
) -> Result<(Option<firemesh_mpi::Mpi>, firemesh_cli::train::Processes)> {
    use firemesh_cli::train::Processes;
    use firemesh_collective::ProcessLink;
    if world.is_single() {
        return Ok((None, Processes::alone()));
    }
    if let Some(processes) = join_by_nccl(world, options, timeout)? {
        return Ok((None, processes));
    }
    let timeout = world_timeout(timeout)?;
    let mpi = firemesh_mpi::Mpi::init(timeout).map_err(|e| Error::Invalid(e.to_string()))?;
    let link = mpi.link();
    if (link.process(), link.processes()) != (world.process, world.processes) {
        return Err(Error::Invalid(format!(
            "{} started {} processes (this is process {}), but MPI's world holds {} (this is \
             process {}): firemesh joins processes through MPI, so start them with mpirun, \
             mpiexec or srun",
            world.launcher,
            world.processes,
            world.process,
            link.processes(),
            link.process()
        )));
    }
    Ok((Some(mpi), Processes::joined(link, timeout)))
}

/// `--world-timeout`, checked.
fn world_timeout(seconds: f64) -> Result<std::time::Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(Error::Invalid(format!(
            "--world-timeout {seconds}: must be a positive number of seconds"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Without MPI only one process trains, or a torchrun-style world joined by NCCL's own
/// bootstrap.
#[cfg(not(feature = "mpi"))]
fn join(
    world: &firemesh_cli::world::World,
    options: &TrainOptions,
    timeout: f64,
) -> Result<((), firemesh_cli::train::Processes)> {
    world_timeout(timeout)?;
    if let Some(processes) = join_by_nccl(world, options, timeout)? {
        return Ok(((), processes));
    }
    world.check_single()?;
    Ok(((), firemesh_cli::train::Processes::alone()))
}
