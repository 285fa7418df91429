//! `firemesh train` as a command: the options of the command line, the world joined before
//! anything is written, the run, and what it prints when it ends.

use super::join;
use super::{Processes, Stop, Summary, TrainConfig, TrainOptions};
use crate::options::RuntimeOptions;
use crate::{Error, Result};
use firemesh::world::World;
use std::time::Duration;

/// The options of `firemesh train`.
#[derive(clap::Args, Debug, Clone)]
pub struct TrainCommand {
    #[command(flatten)]
    pub options: TrainOptions,
    /// Write a per-rank timeline of the run (each rank's ops, the sums and gathers between
    /// ranks) as a Chrome trace, for chrome://tracing or ui.perfetto.dev. Large: a few
    /// steps are enough.
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<std::path::PathBuf>,
    /// SIGTERM or SIGINT ends the run after its current step, with a checkpoint (exit code
    /// 0; `--resume` goes on from it); a second signal, or this many seconds after the
    /// first, ends it at once, naming the last good checkpoint (exit code 143). Preemptible
    /// cloud machines give about 30 s of notice.
    #[arg(long, value_name = "SECONDS", default_value_t = 25.0)]
    pub stop_deadline: f64,
    /// In a world of several processes (mpirun, srun): a process that waits longer than
    /// this for the others at one exchange (one of them lost or stopped) ends the whole
    /// world with an error naming itself, instead of hanging.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub world_timeout: f64,
    /// Print the world the run would form (the launcher's processes, this process's ranks
    /// and devices, the transport on each level) after the same checks as a run, and exit
    /// without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub runtime: RuntimeOptions,
}

/// A run's processes, joined: the launcher's world, and its processes while the run lasts
/// (dropping them finalises MPI where they joined through it, which mpirun expects of a process
/// that ends well).
pub struct Joined {
    world: World,
    joined: firemesh::world::Joined,
}

impl Joined {
    pub fn processes(&self) -> &Processes {
        self.joined.processes()
    }
}

impl TrainCommand {
    /// Merges the `--config` file under the command line's values, reads the launcher's world
    /// from `var` (the environment) and joins its processes (through MPI, or by NCCL's own
    /// bootstrap under torchrun-style variables), or refuses: all before anything is written.
    pub fn join(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<Joined> {
        self.options = self.options.clone().with_config_file()?;
        let world = World::from_env(var)?;
        let joined = match self.dry_run {
            true => firemesh::world::Joined::alone(),
            false => join::join(&world, &self.options, self.world_timeout)?,
        };
        Ok(Joined { world, joined })
    }

    /// The run (or with `--dry-run`, the world it would form), its timeline written as
    /// `--trace` asks (one file per process).
    pub fn run(self, joined: &Joined) -> Result<()> {
        let trace = match (&self.trace, self.dry_run) {
            (Some(path), false) => Some(joined.world.own_file(path)),
            _ => None,
        };
        let flush = crate::trace::init(trace.as_deref())?;
        let result = self.train(joined);
        drop(flush); // completes the trace file, also when the run failed
        result
    }

    fn train(self, joined: &Joined) -> Result<()> {
        let config = TrainConfig::resolve(self.options)?;
        if self.dry_run {
            println!("{}", super::plan(&config, &joined.world)?);
            return Ok(());
        }
        let deadline = self.stop_deadline;
        if !(deadline.is_finite() && deadline > 0.0) {
            return Err(Error::Invalid(format!(
                "--stop-deadline {deadline}: must be a positive number of seconds"
            )));
        }
        let stop = Stop::on_signals(Duration::from_secs_f64(deadline))?;
        let runtime = self.runtime.config();
        let summary = super::run_with(&config, &runtime, &stop, joined.processes())?;
        if joined.processes().leads() {
            print_summary(&summary);
        }
        Ok(())
    }
}

/// The lines a run ends with: the losses, throughput, what ran where, where its files are.
fn print_summary(s: &Summary) {
    if s.steps_this_run == 0 {
        println!(
            "the run in {} is already complete: {} steps, loss {:.4} -> {:.4}; nothing left to \
             train (raise --steps or --epochs to go on)",
            s.run_dir.display(),
            s.steps,
            s.first_loss,
            s.last_loss
        );
        return;
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
    for note in notes(s) {
        println!("  {note}");
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
    if s.parameter_gathers_per_step > 0 {
        println!(
            "  ZeRO-3: parameters gathered {} time(s) per step by the ops that read them ({} of \
             them ahead of use, {} of these done before their op needed them); each rank stores \
             {} parameter bytes",
            s.parameter_gathers_per_step,
            s.parameter_gathers_ahead_per_step,
            s.parameter_gathers_ahead_per_step - s.parameter_gathers_waited_per_step,
            s.parameter_bytes_per_rank
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
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
}

/// What a summary says of the step beyond its figures, where there is something to say:
/// products that ran in f32, copies that fell back to synchronous ones, the routes of the sums.
fn notes(s: &Summary) -> Vec<String> {
    let mut notes = Vec::new();
    if !s.products_in_f32.is_empty() {
        let total: u64 = s.products_in_f32.values().sum();
        let ops: Vec<String> = s
            .products_in_f32
            .iter()
            .map(|(o, k)| format!("{k} {o}"))
            .collect();
        notes.push(format!(
            "{total} product(s) per step ran in f32, not {}: {} (this runtime's convolution \
             kernels add in the element type, and no kernel adding in f32 took them)",
            s.precision,
            ops.join(", ")
        ));
    }
    if s.synchronous_copies > 0 {
        notes.push(format!(
            "{} copy(ies) between GPUs fell back to synchronous copies: the driver refused a \
             stream memory operation (RUST_LOG=firemesh=warn names the pairs)",
            s.synchronous_copies
        ));
    }
    if !s.routes.is_empty() {
        let routes: Vec<String> = s.routes.iter().map(|(r, k)| format!("{k} {r}")).collect();
        notes.push(format!(
            "sums and gathers across ranks, by route: {}",
            routes.join(", ")
        ));
    }
    notes
}
