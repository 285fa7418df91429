//! What a run leaves in its folder: `metrics.jsonl` (one line per step and per evaluation,
//! flushed as it goes) and `summary.json` at the end.

use super::gpu::GpuSample;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// One line of `metrics.jsonl`. `step` counts optimizer steps done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Step {
        step: usize,
        epoch: u64,
        loss: f64,
        lr: f64,
        /// Samples (images or sequences) in this step.
        samples: usize,
        /// Images or tokens per second over this step.
        throughput: f64,
        /// Seconds this step waited for its batch.
        data_wait_s: f64,
        elapsed_s: f64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        gpus: Vec<GpuSample>,
        /// The loss scale of this step's gradients (f16).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loss_scale: Option<f64>,
        /// The update was skipped: the scaled gradients held an inf or a NaN.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        skipped: bool,
        /// Bytes each rank put into sums across ranks in this step (gradient buckets, in their
        /// wire precision, and the other sums).
        #[serde(default)]
        comm_bytes: u64,
    },
    Eval {
        step: usize,
        epoch: u64,
        loss: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accuracy: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        perplexity: Option<f64>,
    },
}

impl Record {
    pub fn step(&self) -> usize {
        match self {
            Self::Step { step, .. } | Self::Eval { step, .. } => *step,
        }
    }
}

/// `metrics.jsonl`, appended line by line (or only read, by the processes of a world other than
/// process 0, which writes it).
pub struct MetricsLog {
    path: PathBuf,
    file: Option<File>,
    /// Every record of the run, including those before a resume.
    pub records: Vec<Record>,
}

impl MetricsLog {
    /// Opens the log of `run_dir`. Resuming at `step`, the lines after it (written after the
    /// checkpoint by the interrupted run) are dropped; a fresh run starts an empty log. Unless
    /// `write`, the log is read and kept in memory only.
    pub fn open(run_dir: &Path, resume_at: Option<usize>, write: bool) -> Result<Self> {
        let path = run_dir.join("metrics.jsonl");
        let io = |e: std::io::Error| Error::io(path.display(), e);
        let mut records = Vec::new();
        if let (Some(step), Ok(file)) = (resume_at, File::open(&path)) {
            for line in BufReader::new(file).lines() {
                // A line cut by a kill does not parse: it is dropped with the others after
                // the checkpoint.
                if let Ok(record) = serde_json::from_str::<Record>(&line.map_err(io)?) {
                    if record.step() <= step {
                        records.push(record);
                    }
                }
            }
            if !write {
                return Ok(Self {
                    path,
                    file: None,
                    records,
                });
            }
            let temp = run_dir.join(".metrics.jsonl.tmp");
            let mut out = File::create(&temp).map_err(io)?;
            for r in &records {
                writeln!(out, "{}", json(r)?).map_err(io)?;
            }
            out.sync_all().map_err(io)?;
            std::fs::rename(&temp, &path).map_err(io)?;
        }
        let file = match write {
            true => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(io)?,
            ),
            false => None,
        };
        Ok(Self {
            path,
            file,
            records,
        })
    }

    pub fn push(&mut self, record: Record) -> Result<()> {
        if let Some(file) = &mut self.file {
            writeln!(file, "{}", json(&record)?).map_err(|e| Error::io(self.path.display(), e))?;
        }
        self.records.push(record);
        Ok(())
    }
}

fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::json("metrics", e))
}

/// What a run did, written to `summary.json` and printed at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub model: String,
    pub params: usize,
    /// CRC-32 of the final parameters' values: equal digests, equal parameters.
    pub params_digest: String,
    pub data: String,
    pub mesh: String,
    /// What the mesh's sums ran on (`nccl`, `cubecl` or, on a CPU mesh, `portable`), and why
    /// (`--engine`). Empty in summaries written before they were counted.
    #[serde(default)]
    pub collective_engine: String,
    #[serde(default)]
    pub collective_engine_why: String,
    pub ranks: usize,
    /// Samples per step over all ranks.
    pub batch: usize,
    /// Optimizer steps done in all, and in this process.
    pub steps: usize,
    pub steps_this_run: usize,
    /// The step after which a stop (SIGTERM, SIGINT) ended the run, checkpointed: `--resume`
    /// goes on from there. `None` when it ran to its end.
    pub stopped_at: Option<usize>,
    pub epochs: f64,
    /// The loss of the run's first and last step (steps before a resume included).
    pub first_loss: f64,
    pub last_loss: f64,
    /// "images/s" or "tokens/s".
    pub throughput_unit: String,
    /// Over this process's steps, counting the samples actually processed.
    pub throughput: f64,
    pub seconds: f64,
    /// What matrix products and convolutions computed in.
    #[serde(default)]
    pub precision: firemesh::Precision,
    /// What the gradient buckets were summed in, and the bytes each rank put into sums across
    /// ranks in the last step.
    #[serde(default)]
    pub comm_precision: firemesh::Precision,
    #[serde(default)]
    pub comm_bytes_per_step: u64,
    /// Autocast's casts in the last step (none in f32): f32 operands cast down to `precision`
    /// (of them the parameters', each cast once per step, and the parameter casts reused by
    /// their other readers instead of made again), narrow results widened to f32 where read
    /// so (each once for all its readers: the reads that took a widening made already), and
    /// the bytes those casts read and wrote over all ranks.
    #[serde(default)]
    pub casts_down_per_step: u64,
    #[serde(default)]
    pub parameter_casts_per_step: u64,
    #[serde(default)]
    pub casts_reused_per_step: u64,
    #[serde(default)]
    pub casts_up_per_step: u64,
    #[serde(default)]
    pub casts_up_reused_per_step: u64,
    /// Casts down of activations taken from the cast a recent product made of a clone (a
    /// gradient read by both products of a layer's backward pass).
    #[serde(default)]
    pub activation_casts_reused_per_step: u64,
    #[serde(default)]
    pub cast_bytes_per_step: u64,
    /// Elementwise ops and activations of the last step that ran on narrow operands and kept
    /// their result narrow, casting nothing.
    #[serde(default)]
    pub ops_kept_narrow_per_step: u64,
    /// The ZeRO stage, and the bytes of optimizer state each rank held at the end (AdamW's
    /// moments; `None` for SGD, whose state Burn keeps private).
    #[serde(default)]
    pub zero: u8,
    #[serde(default)]
    pub optimizer_state_bytes_per_rank: Option<Vec<usize>>,
    /// The bytes of parameters each rank of this process stored at the end, from the mesh:
    /// all of them on each rank, or about 1/N under ZeRO-3.
    #[serde(default)]
    pub parameter_bytes_per_rank: Vec<usize>,
    /// The most host memory this process held resident at any time until the summary
    /// (Linux's `VmHWM`; `None` elsewhere): on a CPU mesh every rank's tensors, with the data and
    /// the program.
    #[serde(default)]
    pub peak_host_bytes: Option<u64>,
    /// Steps whose update was skipped for non-finite gradients (f16 loss scaling), over the
    /// whole run, and the loss scale at the end.
    #[serde(default)]
    pub skipped_steps: u64,
    #[serde(default)]
    pub loss_scale: Option<f64>,
    /// Share of the training time spent waiting for input batches.
    pub data_wait_fraction: f64,
    pub last_eval: Option<Record>,
    /// Ops that ran replicated for lack of a placement rule.
    pub fallbacks: u64,
    /// Products that ran in f32 under a lower `precision`, by op, in the last step:
    /// convolutions on CubeCL devices that no kernel adding in f32 took (their direct kernels
    /// add in the element type; `firemesh_backend::NarrowConvs`).
    #[serde(default)]
    pub products_in_f32: BTreeMap<String, u64>,
    /// Buffers made on another CubeCL stream that were handed to the device stream in this
    /// process during the run (`firemesh_collective::stream`): 0 unless something else in the
    /// process brought tensors of its own.
    #[serde(default)]
    pub stream_handoffs: u64,
    /// Copies between CUDA GPUs that the stream-ordered transport made synchronously during
    /// the run, because the driver refused a stream memory operation for their pair
    /// (`firemesh_collective::transport::synchronous_fallbacks`; a warning names the pair).
    #[serde(default)]
    pub synchronous_copies: u64,
    /// Sums and gathers of parts across ranks, by route.
    pub routes: BTreeMap<String, u64>,
    /// Gradient bucket size, and the collectives that summed a step's gradients (the last
    /// step's), of which those summed during the backward pass (early buckets).
    pub bucket_bytes: usize,
    pub gradient_collectives: usize,
    pub early_gradient_collectives: usize,
    /// ZeRO-3: sharded parameters gathered by the ops that read them, in the last step (none
    /// under other stages).
    #[serde(default)]
    pub parameter_gathers_per_step: u64,
    /// Of those, the ones issued ahead of use, overlapping the ops before them (the last
    /// step's).
    #[serde(default)]
    pub parameter_gathers_ahead_per_step: u64,
    /// Of those, the ones still under way when their op needed them (the others were done:
    /// hidden whole behind the ops before).
    #[serde(default)]
    pub parameter_gathers_waited_per_step: u64,
    pub resumed_from: Option<PathBuf>,
    pub last_checkpoint: Option<PathBuf>,
    pub charts: Vec<PathBuf>,
    /// A continuation sampled from the trained GPT.
    pub sample: Option<String>,
    pub run_dir: PathBuf,
}

impl Summary {
    pub fn write(&self) -> Result<PathBuf> {
        let path = self.run_dir.join("summary.json");
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::json("the summary", e))?;
        std::fs::write(&path, text + "\n").map_err(|e| Error::io(path.display(), e))?;
        Ok(path)
    }
}

/// This process's peak resident memory in bytes: `VmHWM` of `/proc/self/status` (Linux).
pub fn peak_host_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}
