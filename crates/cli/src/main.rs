//! The `firemesh` command line: parses the command and hands it to its module.

use clap::{Parser, Subcommand};
use firemesh_cli::train::TrainCommand;
use firemesh_cli::{bench, compare, demo, simulate, Error};
use std::process::ExitCode;

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
    Train(TrainCommand),
    /// Predict step time and scaling efficiency on 1..64 ranks of a given link, from a
    /// measured one-device step.
    Simulate(simulate::SimulateOptions),
    /// Measure training throughput of the zoo's models on N ranks of every runtime present,
    /// against the peers, with scaling efficiency and communication share.
    Bench {
        #[command(flatten)]
        options: bench::BenchOptions,
        #[command(flatten)]
        runtime: firemesh_cli::options::RuntimeOptions,
    },
    /// Put runs of `firemesh train` side by side (in f32, bf16 and f16, say): a table of their
    /// final numbers against the first run's, and their curves on one chart each.
    Compare(compare::CompareOptions),
    /// All-reduce a buffer across the devices found and report bandwidth and correctness.
    Demo(demo::DemoOptions),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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
            return ExitCode::from(2);
        }
        Err(e) => e.exit(), // --help, --version
    };
    let result = match cli.command {
        Command::Train(command) => return train(command),
        Command::Simulate(o) => logged(|| simulate::run(&o).map(drop)),
        Command::Bench { options, runtime } => {
            logged(|| bench::run(&options, &runtime.config()).map(drop))
        }
        Command::Compare(o) => logged(|| compare::run(&o).map(drop)),
        Command::Demo(o) => logged(|| demo::run(&o)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

/// `job`, its tracing output printed as `RUST_LOG` asks.
fn logged(job: impl FnOnce() -> firemesh_cli::Result<()>) -> firemesh_cli::Result<()> {
    let _log = firemesh_cli::trace::init(None)?;
    job()
}

/// A run joins its world first; a refusal the whole world reached together is printed by
/// every process before any exits (mpirun ends the job at the first process that fails).
fn train(mut command: TrainCommand) -> ExitCode {
    let joined = match command.join(|name| std::env::var(name).ok()) {
        Ok(joined) => joined,
        Err(e) => return failed(&e),
    };
    match command.run(&joined) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let code = failed(&e);
            if matches!(e, Error::World(_)) {
                let _ = joined.processes().barrier();
            }
            code
        }
    }
}

/// `error: E` on stderr in one write, so that the lines of a world's processes, which mpirun
/// forwards through one stream, do not interleave.
fn failed(e: &Error) -> ExitCode {
    use std::io::Write;
    let line = format!("error: {e}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    ExitCode::FAILURE
}
