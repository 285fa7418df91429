//! `ddp_step`: burn-train's DDP strategy on the zoo's models, the CUDA peer of `firemesh bench`.
//! In one run, on the same GPUs: burn-train's `Learner` on one device, then its DDP strategy
//! (one worker thread and one model copy per GPU, gradients summed by NCCL through CubeCL)
//! over N GPUs. The report gives throughput, the ratio to one device and the scaling
//! efficiency throughput(N) / (N · throughput(1)), as `ddp.md` and `ddp.json`.
//!
//! Built by `scripts/gpu-check.sh build` with `--features ddp`; without it only the one-device
//! rows are measured. NCCL (libnccl) is loaded at run time; it takes each GPU once per
//! communicator, so N is at most the number of GPUs.

use burn::train::ExecutionStrategy;
use burn_cuda::{Cuda, CudaDevice};
use clap::Parser;
use firemesh_gpt::GptConfig;
use firemesh_peers::{step_seconds, Work};
use firemesh_resnet::{ResNetConfig, StemKind};
use firemesh_zoo::NetConfig;
use std::process::ExitCode;

/// The models this program trains, at the sizes of `firemesh bench` on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ModelName {
    Resnet50,
    Gpt2Small,
}

impl ModelName {
    fn name(self) -> &'static str {
        match self {
            Self::Resnet50 => "resnet50",
            Self::Gpt2Small => "gpt2-small",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Self::Resnet50 => "images/s",
            Self::Gpt2Small => "tokens/s",
        }
    }

    /// The model as `firemesh bench` makes it, as published: ImageNet's 1,000 classes, or
    /// GPT-2's vocabulary of 50,257 tokens.
    fn model(self, image_size: usize) -> NetConfig {
        match self {
            Self::Resnet50 => {
                let config = ResNetConfig::from_depth(50, 1000).expect("50 is a ResNet depth");
                NetConfig::ResNet(config.with_stem(StemKind::for_image_size(image_size)))
            }
            Self::Gpt2Small => NetConfig::Gpt(GptConfig::gpt2_small()),
        }
    }
}

#[derive(Parser, Debug)]
struct Args {
    /// Models to train.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ModelName::Resnet50, ModelName::Gpt2Small])]
    models: Vec<ModelName>,
    /// GPU counts for DDP [default: 1, 2, 4, 8 up to the GPUs present].
    #[arg(long, value_delimiter = ',')]
    ranks: Vec<usize>,
    /// Images or sequences per GPU and step [default: 64 images or 8 sequences, as
    /// `firemesh bench` on a GPU].
    #[arg(long)]
    batch_per_gpu: Option<usize>,
    /// Image side in pixels.
    #[arg(long, default_value_t = 224)]
    image_size: usize,
    /// Tokens per GPT sequence.
    #[arg(long, default_value_t = 1024)]
    seq_len: usize,
    /// Timed steps per setup.
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// Untimed steps per epoch before the timed one.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Folder for ddp.md and ddp.json.
    #[arg(long, default_value = "benches/results")]
    out: String,
}

/// One measured setup.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    model: &'static str,
    unit: &'static str,
    /// "burn-train one device" or "burn-train DDP".
    setup: &'static str,
    gpus: usize,
    /// Absolute, this machine's.
    median_step_s: f64,
    /// Images or tokens per second, over all GPUs.
    throughput: f64,
    /// Throughput over N times the one-device setup's, from this run.
    scaling_efficiency: Option<f64>,
    step_s: Vec<f64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let zero = args.steps == 0 || args.batch_per_gpu == Some(0) || args.ranks.contains(&0);
    if zero || args.image_size < 8 {
        eprintln!(
            "ddp_step: --steps, --batch-per-gpu and --ranks must be at least 1, --image-size at \
             least 8"
        );
        return ExitCode::from(2);
    }
    let gpus = match firemesh_collective::probe::usable_cuda_devices() {
        Ok(gpus) if !gpus.is_empty() => gpus,
        Ok(_) => return unavailable("no CUDA GPU"),
        Err(e) => return unavailable(&e.to_string()),
    };
    let ranks: Vec<usize> = if args.ranks.is_empty() {
        [1, 2, 4, 8]
            .into_iter()
            .filter(|&n| n <= gpus.len())
            .collect()
    } else {
        args.ranks.clone()
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for &model in &args.models {
        let work = Work {
            model: model.model(args.image_size),
            per_device: args.batch_per_gpu.unwrap_or(match model {
                ModelName::Resnet50 => 64,
                ModelName::Gpt2Small => 8,
            }),
            image_size: args.image_size,
            seq_len: args.seq_len,
            warmup: args.warmup,
            steps: args.steps,
        };
        let one = || ExecutionStrategy::single(gpus[0].clone());
        let label = format!("{} one device", model.name());
        let single = step_seconds::<Cuda>(&gpus[..1], &one, &work, &format!("ddp_step: {label}"))
            .map(|t| push(&mut rows, model, &work, "burn-train one device", 1, t, None));
        let single = match single {
            Ok(throughput) => Some(throughput),
            Err(e) => {
                notes.push(format!("{label}: {e}"));
                None
            }
        };
        for &n in &ranks {
            if n > gpus.len() {
                notes.push(format!(
                    "{} DDP N={n}: left out, NCCL takes each of the {} GPU(s) once",
                    model.name(),
                    gpus.len()
                ));
                continue;
            }
            let label = format!("{} DDP N={n}", model.name());
            match ddp_step_seconds(&gpus[..n], &work, &label) {
                Ok(t) => {
                    push(&mut rows, model, &work, "burn-train DDP", n, t, single);
                }
                Err(e) => notes.push(format!("{label}: {e}")),
            }
        }
    }
    let md = markdown(&args, &gpus, &rows, &notes);
    print!("{md}");
    let json = serde_json::json!({
        "device": format!("{} CUDA GPU(s)", gpus.len()),
        "burn": "0.21.0",
        "rows": rows,
        "notes": notes,
    });
    if let Err(e) = write(&args.out, &json, &md) {
        eprintln!("ddp_step: cannot write to {}: {e}", args.out);
        return ExitCode::FAILURE;
    }
    if rows.is_empty() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn unavailable(why: &str) -> ExitCode {
    eprintln!("ddp_step: CUDA is not usable here ({why}); nothing measured");
    ExitCode::from(2)
}

/// Step times of DDP over `gpus`.
#[cfg(feature = "ddp")]
fn ddp_step_seconds(gpus: &[CudaDevice], work: &Work, label: &str) -> Result<Vec<f64>, String> {
    use burn::backend::Autodiff;
    use burn::tensor::backend::distributed::{DistributedConfig, ReduceOperation};
    let ddp = || -> ExecutionStrategy<Autodiff<Cuda>> {
        let config = DistributedConfig {
            all_reduce_op: ReduceOperation::Mean,
        };
        ExecutionStrategy::ddp(gpus.to_vec(), config)
    };
    step_seconds::<Cuda>(gpus, &ddp, work, &format!("ddp_step: {label}")).map_err(|e| e.to_string())
}

#[cfg(not(feature = "ddp"))]
fn ddp_step_seconds(_: &[CudaDevice], _: &Work, _: &str) -> Result<Vec<f64>, String> {
    Err("built without the `ddp` feature (cargo build -p firemesh-peers --features ddp)".into())
}

/// Appends the row of `step_s`; returns its throughput.
fn push(
    rows: &mut Vec<Row>,
    model: ModelName,
    work: &Work,
    setup: &'static str,
    gpus: usize,
    step_s: Vec<f64>,
    single: Option<f64>,
) -> f64 {
    let mut sorted = step_s.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let throughput = work.samples_per_device() * gpus as f64 / median.max(1e-12);
    rows.push(Row {
        model: model.name(),
        unit: model.unit(),
        setup,
        gpus,
        median_step_s: median,
        throughput,
        scaling_efficiency: single.map(|one| throughput / (gpus as f64 * one)),
        step_s,
    });
    throughput
}

fn markdown(args: &Args, gpus: &[CudaDevice], rows: &[Row], notes: &[String]) -> String {
    let mut md = format!(
        "# burn-train's DDP strategy on the zoo's models ({} CUDA GPU(s))\n\n\
         burn 0.21.0, NCCL through CubeCL. Each GPU takes its own batch per step (64 images \
         of {s}×{s} or 8 sequences of {} tokens unless set); step time = the difference of \
         two epochs of {} and {} steps, median of {}. Step times are this machine's; \
         efficiencies are ratios from this run.\n\n\
         | model | setup | GPUs | median step ms | throughput | scaling efficiency |\n\
         |---|---|---|---|---|---|\n",
        gpus.len(),
        args.seq_len,
        args.warmup.max(1),
        args.warmup.max(1) + 1,
        args.steps,
        s = args.image_size,
    );
    for r in rows {
        let eff = r
            .scaling_efficiency
            .map_or("–".into(), |e| format!("{:.1}%", e * 100.0));
        md += &format!(
            "| {} | {} | {} | {:.1} | {:.0} {} | {eff} |\n",
            r.model,
            r.setup,
            r.gpus,
            r.median_step_s * 1e3,
            r.throughput,
            r.unit
        );
    }
    if !notes.is_empty() {
        md += "\nLeft out:\n";
        for n in notes {
            md += &format!("- {n}\n");
        }
    }
    md
}

fn write(dir: &str, json: &serde_json::Value, md: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(json).map_err(std::io::Error::other)?;
    std::fs::write(format!("{dir}/ddp.json"), text)?;
    std::fs::write(format!("{dir}/ddp.md"), md)
}
