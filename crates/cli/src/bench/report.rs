//! The benchmark's report: one row per setup and rank count, ratios taken within one run,
//! written as bench.json, bench.md and bench.png.

use super::step::{Measured, Work};
use super::{BenchOptions, Runtime};
use crate::train::charts::{line_chart, Series};
use crate::train::ModelName;
use crate::{Error, Result};
use firemesh::Precision;
use firemesh_zoo::NetConfig;
use plotters::style::{RGBColor, BLACK, BLUE, GREEN, MAGENTA, RED};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// What was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    /// `Autodiff<Sharded<B>>` over N ranks, the batch sharded, gradients summed in buckets.
    Firemesh,
    /// `Autodiff<B>` on one device with one rank's batch.
    Inner,
    /// burn-train's Learner with its `MultiDevice` strategy over the same N devices.
    MultiDevice,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Firemesh => "firemesh Sharded",
            Setup::Inner => "inner backend, one device",
            Setup::MultiDevice => "burn-train MultiDevice",
        }
    }
}

/// A setup as measured: firemesh's rows also by precision and ZeRO stage (the peers: f32,
/// stage 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub setup: Setup,
    pub precision: Precision,
    pub zero: u8,
}

impl Variant {
    /// Its name in progress lines: "firemesh", "firemesh bf16", "firemesh bf16 zero-1"….
    pub fn label(&self) -> String {
        let mut label = match self.setup {
            Setup::Firemesh => "firemesh".to_string(),
            Setup::Inner => "inner".to_string(),
            Setup::MultiDevice => "multi-device".to_string(),
        };
        if self.precision != Precision::F32 {
            label += &format!(" {}", self.precision);
        }
        if self.zero > 0 {
            label += &format!(" zero-{}", self.zero);
        }
        label
    }
}

/// One setup on one rank count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub runtime: Runtime,
    pub model: ModelName,
    pub setup: Setup,
    /// What firemesh's products computed in (the peers: f32).
    pub precision: Precision,
    /// firemesh's ZeRO stage: 1 shards the optimizer state, 3 the parameters too (the peers: 0).
    pub zero: u8,
    pub ranks: usize,
    /// Images or sequences per rank and step, and their size.
    pub per_rank_batch: usize,
    pub image_size: Option<usize>,
    pub seq_len: Option<usize>,
    /// The classifier's classes (a ResNet) or the vocabulary (a GPT): the model as published.
    pub classes: Option<usize>,
    pub vocab: Option<usize>,
    pub unit: &'static str,
    /// The first repeat's first warm-up step, in seconds: kernel compilation and autotuning,
    /// apart from the timed steps.
    pub first_step_s: Option<f64>,
    /// Median step time over every repeat (absolute, this machine), in seconds; and every
    /// timed step, repeat after repeat.
    pub step_s: f64,
    pub steps_s: Vec<f64>,
    /// Images or tokens per second over all ranks, from `step_s`; and of each repeat alone
    /// (from its median step), of which the ratios below are taken. `None` for a repeat whose
    /// median step took no measurable time (the peer's step is a difference of two epochs,
    /// which noise can make zero on tiny models).
    pub throughput: f64,
    pub repeat_throughputs: Vec<Option<f64>>,
    /// firemesh: throughput(N) / (N · throughput(firemesh, N = 1)); median over repeats.
    pub scaling_efficiency: Option<f64>,
    /// throughput / (N · throughput(inner backend alone)): against N perfectly parallel devices.
    pub vs_inner: Option<f64>,
    /// firemesh: throughput / throughput(MultiDevice, same N).
    pub vs_multi_device: Option<f64>,
    /// firemesh in bf16 or f16: throughput / throughput(firemesh in f32, same N and stage).
    pub vs_f32: Option<f64>,
    /// firemesh with ZeRO-1 or 3: throughput / throughput(firemesh at stage 0, same N and
    /// precision).
    pub vs_zero0: Option<f64>,
    /// How far each ratio moved between repeats: its interquartile range over its median
    /// (`None` with fewer than 3 repeats, where no spread is known).
    pub spread: Spread,
    /// Whether any ratio of this row has a spread above [`UNSTEADY`] or none known: no claim
    /// should rest on its ratios.
    pub unsteady: bool,
    /// Median time per step inside sums and gathers across ranks, and its share of the step.
    pub comm_s: Option<f64>,
    pub comm_share: Option<f64>,
    /// Median share of a step's communication hidden behind other work (early buckets summed
    /// on the communication thread while the step's thread did not wait for them).
    pub hidden_comm_share: Option<f64>,
    /// Collectives per step: gradient buckets (of which summed during the backward pass), and
    /// the other sums and gathers.
    pub gradient_collectives: Option<usize>,
    pub early_gradient_collectives: Option<usize>,
    /// Gradient collectives per step of one sum per parameter tensor (before buckets).
    pub gradient_tensors: usize,
    /// Gathers of the updated parameters per step (ZeRO-1).
    pub parameter_collectives: Option<usize>,
    pub other_collectives: Option<u64>,
    pub fallbacks: Option<u64>,
    /// Products per step that ran in f32 under a lower precision (convolutions no kernel adding
    /// in f32 took).
    pub products_in_f32: Option<u64>,
    /// The most device memory a rank held at the end of the forward pass (CubeCL runtimes).
    pub peak_bytes_per_rank: Option<u64>,
    /// The most optimizer-state bytes a rank holds (AdamW's moments; `None` for SGD).
    pub optimizer_state_bytes_per_rank: Option<u64>,
    /// The loss of the first and the last step.
    pub loss_first: Option<f64>,
    pub loss_last: Option<f64>,
}

/// A ratio whose interquartile range over repeats exceeds this share of its median is flagged.
pub const UNSTEADY: f64 = 0.10;

/// The relative spread (interquartile range / median) of each ratio over the repeats.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub scaling_efficiency: Option<f64>,
    pub vs_inner: Option<f64>,
    pub vs_multi_device: Option<f64>,
    pub vs_f32: Option<f64>,
    pub vs_zero0: Option<f64>,
}

fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// The `q` quantile of `values`, interpolated between the nearest two (NaN when empty).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let at = q * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

/// The median of a ratio's values over the repeats, and its relative interquartile range when
/// there are at least 3.
fn summarize(values: &[f64]) -> (Option<f64>, Option<f64>) {
    if values.is_empty() {
        return (None, None);
    }
    let mid = median(values);
    let iqr = quantile(values, 0.75) - quantile(values, 0.25);
    (Some(mid), (values.len() >= 3).then(|| iqr / mid.abs()))
}

impl Row {
    /// The row of one setup from its `repeats` (one `Measured` each, in the order they ran).
    pub fn new(
        runtime: Runtime,
        work: &Work,
        variant: Variant,
        ranks: usize,
        repeats: &[Measured],
    ) -> Self {
        let Variant {
            setup,
            precision,
            zero,
        } = variant;
        let all = |f: fn(&Measured) -> &Vec<f64>| -> Vec<f64> {
            repeats.iter().flat_map(|m| f(m).iter().copied()).collect()
        };
        let steps_s = all(|m| &m.step_s);
        let step_s = median(&steps_s);
        let samples = ranks as f64 * work.per_rank_samples();
        let measured_comm = setup != Setup::MultiDevice;
        let comm_s = measured_comm.then(|| median(&all(|m| &m.comm_s)));
        // Counted the same in every repeat: the last one's; the losses of the first.
        let (first, last) = (&repeats[0], &repeats[repeats.len() - 1]);
        Row {
            runtime,
            model: work.model,
            setup,
            precision,
            zero,
            ranks,
            per_rank_batch: work.per_rank,
            image_size: (!work.model.is_gpt()).then_some(work.image_size),
            seq_len: work.model.is_gpt().then_some(work.seq_len),
            classes: match &work.net {
                NetConfig::ResNet(c) => Some(c.num_classes),
                NetConfig::Gpt(_) => None,
            },
            vocab: match &work.net {
                NetConfig::Gpt(c) => Some(c.vocab_size),
                NetConfig::ResNet(_) => None,
            },
            unit: work.unit(),
            first_step_s: first.first_step_s,
            step_s,
            steps_s,
            throughput: samples / step_s,
            repeat_throughputs: repeats
                .iter()
                .map(|m| {
                    Some(median(&m.step_s))
                        .filter(|s| *s > 0.0)
                        .map(|s| samples / s)
                })
                .collect(),
            scaling_efficiency: None,
            vs_inner: None,
            vs_multi_device: None,
            vs_f32: None,
            vs_zero0: None,
            spread: Spread::default(),
            unsteady: false,
            comm_s,
            comm_share: comm_s.map(|c| c / step_s),
            hidden_comm_share: measured_comm.then(|| median(&all(|m| &m.hidden_comm))),
            gradient_collectives: measured_comm.then_some(last.gradient_collectives),
            early_gradient_collectives: measured_comm.then_some(last.early_gradient_collectives),
            gradient_tensors: last.gradient_tensors,
            parameter_collectives: measured_comm.then_some(last.parameter_collectives),
            other_collectives: measured_comm.then_some(last.other_collectives),
            fallbacks: measured_comm.then_some(last.fallbacks),
            products_in_f32: measured_comm.then_some(last.products_in_f32),
            peak_bytes_per_rank: first.peak_bytes_per_rank,
            optimizer_state_bytes_per_rank: last.optimizer_state_bytes_per_rank,
            loss_first: measured_comm.then_some(first.losses.0),
            loss_last: measured_comm.then_some(first.losses.1),
        }
    }

    /// The setup's name with what varies among firemesh's rows: "firemesh Sharded (bf16,
    /// ZeRO-1)".
    pub fn name(&self) -> String {
        let mut what = Vec::new();
        if self.precision != Precision::F32 {
            what.push(self.precision.to_string());
        }
        if self.zero > 0 {
            what.push(format!("ZeRO-{}", self.zero));
        }
        match what.is_empty() {
            true => self.setup.name().to_string(),
            false => format!("{} ({})", self.setup.name(), what.join(", ")),
        }
    }

    /// The names of this row's ratios that are unsteady (spread above [`UNSTEADY`] or unknown).
    pub fn unsteady_ratios(&self) -> Vec<&'static str> {
        [
            (
                "scaling efficiency",
                self.scaling_efficiency,
                self.spread.scaling_efficiency,
            ),
            ("vs N × inner", self.vs_inner, self.spread.vs_inner),
            (
                "vs MultiDevice",
                self.vs_multi_device,
                self.spread.vs_multi_device,
            ),
            ("vs f32", self.vs_f32, self.spread.vs_f32),
            ("vs ZeRO-0", self.vs_zero0, self.spread.vs_zero0),
        ]
        .into_iter()
        .filter(|(_, ratio, spread)| ratio.is_some() && !spread.is_some_and(|s| s <= UNSTEADY))
        .map(|(name, ..)| name)
        .collect()
    }
}

/// Fills the ratios of `runtime` and `model`'s rows, from rows of the same run: each ratio is
/// taken repeat by repeat (setups measured in turn within a repeat), then summarized.
pub fn fill_ratios(rows: &mut [Row], runtime: Runtime, model: ModelName) {
    let of = |rows: &[Row], setup: Setup, precision: Precision, zero: u8, n: usize| {
        rows.iter()
            .find(|r| {
                (r.runtime, r.model, r.setup, r.precision, r.zero, r.ranks)
                    == (runtime, model, setup, precision, zero, n)
            })
            .map(|r| r.repeat_throughputs.clone())
    };
    let inner = of(rows, Setup::Inner, Precision::F32, 0, 1);
    // For each row: firemesh at N = 1 in its precision and stage, MultiDevice at its N,
    // firemesh in f32 at its N and stage, firemesh at stage 0 at its N and precision.
    let peers: Vec<[Option<Vec<Option<f64>>>; 4]> = rows
        .iter()
        .map(|r| {
            [
                of(rows, Setup::Firemesh, r.precision, r.zero, 1),
                of(rows, Setup::MultiDevice, Precision::F32, 0, r.ranks),
                of(rows, Setup::Firemesh, Precision::F32, r.zero, r.ranks),
                of(rows, Setup::Firemesh, r.precision, 0, r.ranks),
            ]
        })
        .collect();
    // Repeat by repeat, where both were measured: `ours[k] / (scale · theirs[k])`.
    let ratio = |ours: &[Option<f64>], theirs: &Option<Vec<Option<f64>>>, scale: f64| {
        let per: Vec<f64> = match theirs {
            Some(t) => ours
                .iter()
                .zip(t)
                .filter_map(|(o, t)| Some(o.as_ref()? / (scale * t.as_ref()?)))
                .collect(),
            None => Vec::new(),
        };
        summarize(&per)
    };
    for (r, [one, multi, f32_run, zero0]) in rows.iter_mut().zip(peers) {
        if r.runtime != runtime || r.model != model {
            continue;
        }
        let n = r.ranks as f64;
        (r.vs_inner, r.spread.vs_inner) = ratio(&r.repeat_throughputs, &inner, n);
        if r.setup == Setup::Firemesh {
            (r.scaling_efficiency, r.spread.scaling_efficiency) =
                ratio(&r.repeat_throughputs, &one, n);
            (r.vs_multi_device, r.spread.vs_multi_device) =
                ratio(&r.repeat_throughputs, &multi, 1.0);
            if r.precision != Precision::F32 {
                (r.vs_f32, r.spread.vs_f32) = ratio(&r.repeat_throughputs, &f32_run, 1.0);
            }
            if r.zero != 0 {
                (r.vs_zero0, r.spread.vs_zero0) = ratio(&r.repeat_throughputs, &zero0, 1.0);
            }
        }
        r.unsteady = !r.unsteady_ratios().is_empty();
    }
}

/// The commit of the source tree this program was built from (`git rev-parse --short HEAD` in
/// it, marked when the tree has uncommitted changes), or "unknown" where that tree or git is
/// gone. Result files name it in their header.
pub fn source_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(hash) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    // Results written by earlier tables of the same run are not source changes.
    let source = [
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ":(top)",
        ":(top,exclude)benches/results",
    ];
    match git(&source) {
        Some(s) if !s.is_empty() => format!("{hash} (with uncommitted changes)"),
        _ => hash,
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// UTC date of the run.
    pub date: String,
    pub host: String,
    pub firemesh: &'static str,
    /// The source commit measured ([`source_commit`]).
    pub commit: String,
    pub burn: &'static str,
    pub cubecl: &'static str,
    /// `dev` or `release`.
    pub build: &'static str,
    /// How CubeCL's kernels were chosen: autotuned (built with the `autotune` feature, as
    /// Burn's default features build them) or fixed.
    pub kernels: &'static str,
    /// Whether every sum and gather first waited for the queued work (`--settle-before-comm`):
    /// communication timed alone, without overlap.
    pub settled: bool,
    pub devices: Vec<String>,
    pub steps: usize,
    pub warmup: usize,
    /// Times each setup was measured, setups taking turns.
    pub repeats: usize,
    pub bucket_mib: f64,
    /// The precision firemesh's rows summed their gradient buckets in.
    pub comm_precision: Precision,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl BenchReport {
    pub fn new(o: &BenchOptions, devices: Vec<String>, rows: Vec<Row>, notes: Vec<String>) -> Self {
        let today = time::OffsetDateTime::now_utc().date();
        BenchReport {
            date: format!(
                "{}-{:02}-{:02}",
                today.year(),
                u8::from(today.month()),
                today.day()
            ),
            host: format!(
                "{}, {} cores, {}",
                super::cpu_name(),
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                std::env::consts::OS
            ),
            firemesh: env!("CARGO_PKG_VERSION"),
            commit: source_commit(),
            burn: "0.21.0",
            cubecl: "0.10.0",
            build: if cfg!(debug_assertions) {
                "dev"
            } else {
                "release"
            },
            kernels: firemesh::KERNELS,
            settled: o.settle_before_comm,
            devices,
            steps: o.steps,
            warmup: o.warmup,
            repeats: o.repeats,
            bucket_mib: o.sums.bucket_mib(),
            comm_precision: o.sums.comm_precision(),
            rows,
            notes,
        }
    }

    /// The report as Markdown (also printed).
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "# Training throughput: `firemesh bench`\n\n\
             {}, {}; firemesh {} at commit {}, Burn {}, CubeCL {}, {} build, CubeCL kernels {}.\n\
             Devices: {}.\n\n\
             Synthetic data; weak scaling (each rank trains the same per-rank batch at every N); \
             {} repeat(s) of every setup, setups taking turns, each of {} timed steps after {} \
             warm-up step(s); gradient buckets of {} MiB summed in {}. Step times (median of every timed \
             step) and throughputs are absolute figures of this machine; efficiencies and `vs` \
             columns are ratios within this run, taken repeat by repeat: their median, ± the \
             interquartile range over repeats as a share of it. ⚑ marks a ratio whose spread \
             exceeds {:.0}% or is unknown (fewer than 3 repeats): base no claim on it.\n",
            self.date,
            self.host,
            self.firemesh,
            self.commit,
            self.burn,
            self.cubecl,
            self.build,
            self.kernels,
            self.devices.join("; "),
            self.repeats,
            self.steps,
            self.warmup,
            self.bucket_mib,
            self.comm_precision,
            100.0 * UNSTEADY
        );
        let mut groups: Vec<(Runtime, ModelName)> = Vec::new();
        for r in &self.rows {
            if !groups.contains(&(r.runtime, r.model)) {
                groups.push((r.runtime, r.model));
            }
        }
        let pct = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1}%", 100.0 * v));
        let spread = |s: Option<f64>| match s {
            Some(s) if s <= UNSTEADY => format!(" ±{:.0}%", 100.0 * s),
            Some(s) => format!(" ±{:.0}% ⚑", 100.0 * s),
            None => " ⚑".into(),
        };
        let eff = |v: Option<f64>, s: Option<f64>| {
            v.map_or("–".into(), |v| format!("{:.1}%{}", 100.0 * v, spread(s)))
        };
        let ratio = |v: Option<f64>, s: Option<f64>| {
            v.map_or("–".into(), |v| format!("{v:.2}×{}", spread(s)))
        };
        let opt = |v: Option<u64>| v.map_or("–".into(), |v| v.to_string());
        let mib = |v: Option<u64>, places: usize| {
            v.map_or("–".into(), |b| {
                format!("{:.places$}", b as f64 / 1048576.0)
            })
        };
        for (runtime, model) in groups {
            let rows: Vec<&Row> = self
                .rows
                .iter()
                .filter(|r| r.runtime == runtime && r.model == model)
                .collect();
            let _ = writeln!(
                md,
                "## {model} on {:?} ({} per rank, {})\n\n\
                 | setup | N | step (ms) | {} | scaling eff. | vs N × inner | vs MultiDevice | vs f32 | vs ZeRO-0 | comm share (hidden) | collectives/step: buckets [early] (one per tensor) [+ parameter gathers] + other | fallbacks | products in f32 | first step (s) | peak MiB/rank | optimizer state MiB/rank |\n\
                 |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
                runtime,
                rows[0].per_rank_batch,
                match (rows[0].image_size, rows[0].seq_len) {
                    (Some(s), _) => format!(
                        "{s}×{s} images, {} classes",
                        rows[0].classes.unwrap_or_default()
                    ),
                    (_, Some(l)) => format!(
                        "sequences of {l} tokens, a vocabulary of {}",
                        rows[0].vocab.unwrap_or_default()
                    ),
                    _ => String::new(),
                },
                rows[0].unit
            );
            for r in rows {
                let collectives = match (
                    r.gradient_collectives,
                    r.early_gradient_collectives,
                    r.other_collectives,
                ) {
                    (Some(g), Some(e), Some(o)) => match r.parameter_collectives {
                        Some(p) if p > 0 => {
                            format!("{g} [{e}] ({}) + {p} gather(s) + {o}", r.gradient_tensors)
                        }
                        _ => format!("{g} [{e}] ({}) + {o}", r.gradient_tensors),
                    },
                    _ => "–".into(),
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {collectives} | {} | {} | {} | {} | {} |",
                    r.name(),
                    r.ranks,
                    r.step_s * 1e3,
                    r.throughput,
                    eff(r.scaling_efficiency, r.spread.scaling_efficiency),
                    ratio(r.vs_inner, r.spread.vs_inner),
                    ratio(r.vs_multi_device, r.spread.vs_multi_device),
                    ratio(r.vs_f32, r.spread.vs_f32),
                    ratio(r.vs_zero0, r.spread.vs_zero0),
                    match r.hidden_comm_share {
                        Some(h) => format!("{} ({})", pct(r.comm_share), pct(Some(h))),
                        None => pct(r.comm_share),
                    },
                    opt(r.fallbacks),
                    opt(r.products_in_f32),
                    r.first_step_s.map_or("–".into(), |s| format!("{s:.1}")),
                    mib(r.peak_bytes_per_rank, 1),
                    mib(r.optimizer_state_bytes_per_rank, 3),
                );
            }
            md.push('\n');
        }
        md.push_str(if self.settled {
            "Settled (`--settle-before-comm`): every sum and gather first waited for the work \
             queued on every rank, so communication overlaps nothing here: throughputs are below \
             a training run's. "
        } else {
            "As training runs: sums and gathers overlap the work queued before them, and the \
             comm share counts the time the step thread spent in them, waits for queued \
             compute included (`--settle-before-comm` times communication alone). "
        });
        md.push_str(
            "On CUDA, f32 matrix products run on tensor cores in TF32 (CubeCL's matmul takes \
             f32 operands as TF32 where the device has it): their PyTorch peer is TF32, not \
             FP32. Products in f32: products per step that ran in f32 under a lower precision \
             (convolutions that no kernel adding in f32 took; CubeCL's direct convolutions add in \
             the element type). First step: the first warm-up step, apart from the timed steps: \
             kernel compilation and autotuning of the shapes this process had not met yet.\n\n",
        );
        md.push_str(
            "Comm share: time inside sums and gathers across ranks over the step time; \
             in brackets, the share of all communication hidden behind other work: gradient \
             buckets summed during the backward pass (early buckets) on the communication \
             thread, while the step did not wait for them (on CubeCL runtimes the step thread \
             goes on queuing the backward pass meanwhile; the sums on the step thread block \
             it until they complete). On a CPU mesh every rank shares the host's cores, so N > 1 shows \
             the mesh's overhead rather than a speed-up, and its sums are local additions. \
             MultiDevice gives each device its own batch in its own model copy; its step is the \
             difference of two Learner epochs of different lengths.\n",
        );
        for n in &self.notes {
            let _ = writeln!(md, "\n- {n}");
        }
        let unsteady: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.unsteady)
            .map(|r| {
                let what = format!("{} on {:?}, {} N={}", r.model, r.runtime, r.name(), r.ranks);
                format!("{what}: {}", r.unsteady_ratios().join(", "))
            })
            .collect();
        if !unsteady.is_empty() {
            let _ = writeln!(
                md,
                "\nUnsteady ratios (⚑; more `--repeats` or a quieter machine may settle them):"
            );
            for u in unsteady {
                let _ = writeln!(md, "- {u}");
            }
        }
        md
    }

    /// Writes bench.json, bench.md and bench.png into `dir`, each whole or not at all (written
    /// aside, then renamed): the report is rewritten after every setup, and a run stopped
    /// while it writes leaves the last whole one.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let io = |name: &str, e| Error::io(format!("cannot write {}", dir.join(name).display()), e);
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::json("bench.json", e))?;
        let put = |name: &str, text: String| {
            let aside = dir.join(format!(".{name}.partial"));
            std::fs::write(&aside, text).map_err(|e| io(name, e))?;
            std::fs::rename(&aside, dir.join(name)).map_err(|e| io(name, e))
        };
        put("bench.md", self.markdown())?;
        let chart = dir.join(".bench.partial.png");
        self.chart(&chart)?;
        std::fs::rename(&chart, dir.join("bench.png")).map_err(|e| io("bench.png", e))?;
        put("bench.json", json + "\n")
    }

    /// Scaling efficiency of firemesh against N, one line per runtime and model.
    fn chart(&self, path: &Path) -> Result<()> {
        const COLORS: [RGBColor; 5] = [BLUE, RED, GREEN, MAGENTA, BLACK];
        let mut series: Vec<Series> = Vec::new();
        for r in self.rows.iter().filter(|r| r.setup == Setup::Firemesh) {
            let Some(e) = r.scaling_efficiency else {
                continue;
            };
            let mut name = format!("{} on {:?}", r.model, r.runtime);
            if r.precision != Precision::F32 {
                name += &format!(" in {}", r.precision);
            }
            if r.zero > 0 {
                name += &format!(", ZeRO-{}", r.zero);
            }
            let name = name.to_lowercase();
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((r.ranks as f64, 100.0 * e)),
                None => series.push(Series {
                    color: COLORS[series.len() % COLORS.len()],
                    name,
                    points: vec![(r.ranks as f64, 100.0 * e)],
                }),
            }
        }
        line_chart(
            path,
            "firemesh scaling efficiency (weak scaling)",
            "ranks",
            "throughput(N) / (N · throughput(1)), %",
            &series,
        )
    }
}
