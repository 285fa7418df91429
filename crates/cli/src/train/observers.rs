//! What watches a run's steps, each in turn after every step: the counts its summary adds up
//! ([`Tally`]), the progress line and the metrics log ([`StepLog`]), and the checkpoints
//! ([`Checkpoints`]). Evaluation is in `evaluate.rs`; the loop that calls them in `run.rs`.

use super::gpu;
use super::job::{route_name, Ad, Job, RunMeta, RunTrainer};
use super::metrics::{MetricsLog, Record};
use super::progress::{Progress, Update};
use super::resume::Bytes;
use crate::{Error, Result};
use burn::module::Module;
use burn::prelude::*;
use burn::record::Recorder;
use firemesh::checkpoint::{Checkpoint, CheckpointDir, Header};
use firemesh::StepReport;
use firemesh_backend::Mesh;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// One finished step, as the observers see it.
pub struct StepDone {
    /// Steps done, this one included.
    pub step: usize,
    pub epoch: u64,
    /// Samples of the step's batch, over all ranks.
    pub samples: usize,
    pub seconds: f64,
    /// Of them, waiting for the input pipeline.
    pub data_wait_s: f64,
    pub report: StepReport,
}

/// What the steps of this run add up to, for its summary.
#[derive(Default)]
pub struct Tally {
    pub samples_this_run: usize,
    /// Over the whole run, steps before a resume included.
    pub samples_seen: u64,
    /// Ops that fell back to a slower path.
    pub fallbacks: u64,
    /// Products that ran in f32 instead of the run's precision (the last step's), by op.
    pub products_in_f32: BTreeMap<String, u64>,
    /// Sums and gathers across ranks, by route.
    pub routes: BTreeMap<String, u64>,
    /// The last step's gradient collectives, and of them the early buckets'.
    pub gradient_collectives: usize,
    pub early_gradient_collectives: usize,
    /// The last step's gathers of sharded parameters by the ops that read them (ZeRO-3).
    pub parameter_gathers: u64,
    /// Of those, the ones issued ahead of use on the communication thread, and of these the
    /// ones not done when their op needed them.
    pub parameter_gathers_ahead: u64,
    pub parameter_gathers_waited: u64,
    /// Bytes the last step summed across ranks.
    pub comm_bytes: u64,
    /// The last step's autocast casts: down, up, the bytes they moved, parameter casts made
    /// and reused; its ops that kept narrow operands narrow; the widenings it reused; and the
    /// activation casts it reused.
    pub casts: [u64; 8],
}

impl Tally {
    pub fn starting_at(samples_seen: u64) -> Self {
        Self {
            samples_seen,
            ..Self::default()
        }
    }

    pub fn add(&mut self, s: &StepDone) {
        let (report, counts) = (&s.report, &s.report.counts);
        self.comm_bytes = counts.summed_bytes;
        self.casts = [
            counts.casts_down,
            counts.casts_up,
            counts.cast_bytes,
            counts.parameter_casts,
            counts.casts_reused,
            counts.ops_kept_narrow,
            counts.casts_up_reused,
            counts.activation_casts_reused,
        ];
        self.gradient_collectives = report.gradient_collectives;
        self.early_gradient_collectives = report.early_gradient_collectives;
        self.parameter_gathers = counts.parameter_gathers;
        self.parameter_gathers_ahead = counts.parameter_gathers_ahead;
        self.parameter_gathers_waited = counts.parameter_gathers_waited;
        self.fallbacks += counts.total_fallbacks();
        self.products_in_f32 = counts
            .products_in_f32
            .iter()
            .map(|(op, k)| (op.to_string(), *k))
            .collect();
        for (route, k) in &counts.routes {
            *self
                .routes
                .entry(route_name(*route).to_string())
                .or_default() += k;
        }
        self.samples_this_run += s.samples;
        self.samples_seen += s.samples as u64;
    }
}

/// The progress line on the terminal and the metrics log in the run folder.
pub struct StepLog {
    pub progress: Progress,
    pub metrics: MetricsLog,
    /// When the log opened, just before this run's first step.
    pub begin: Instant,
}

impl StepLog {
    /// The log of `job`'s steps from step `first` on (a resumed run's log keeps the lines up
    /// to it); process 0 alone shows progress and writes the log.
    pub fn open(job: &Job, first: usize) -> Result<Self> {
        let (c, lead) = (&job.config, job.processes.leads());
        let metrics = MetricsLog::open(&job.run_dir, c.resume.then_some(first), lead)?;
        let progress = match lead {
            true => Progress::new(first, job.total_steps(), c.log_every, job.unit()),
            false => Progress::silent(),
        };
        Ok(Self {
            progress,
            metrics,
            begin: Instant::now(),
        })
    }

    /// Shows step `s` (its throughput over this run so far) and appends it to the log, with
    /// the GPUs' use every `--log-every` steps.
    pub fn record(&mut self, job: &Job, s: &StepDone, tally: &Tally) -> Result<()> {
        let c = &job.config;
        let sampled = s.step.is_multiple_of(c.log_every) || s.step == job.total_steps();
        let gpus = match sampled {
            true => job.gpus.sample(),
            false => Vec::new(),
        };
        let per_sample = job.per_sample() as f64;
        let elapsed = self.begin.elapsed().as_secs_f64();
        let r = &s.report;
        self.progress.update(&Update {
            step: s.step,
            epoch: s.epoch,
            loss: r.loss,
            lr: r.lr,
            throughput: tally.samples_this_run as f64 * per_sample / elapsed,
            gpus: &gpu::describe(&gpus),
        });
        self.metrics.push(Record::Step {
            step: s.step,
            epoch: s.epoch,
            loss: r.loss,
            lr: r.lr,
            samples: s.samples,
            throughput: s.samples as f64 * per_sample / s.seconds,
            data_wait_s: s.data_wait_s,
            elapsed_s: elapsed,
            gpus,
            loss_scale: r.loss_scale,
            skipped: r.skipped,
            comm_bytes: tally.comm_bytes,
        })
    }

    /// An evaluation: its line, and its record in the log.
    pub fn record_eval(&mut self, record: &Record) -> Result<()> {
        self.progress
            .println(&super::evaluate::describe_eval(record));
        self.metrics.push(record.clone())
    }
}

/// The run folder's checkpoints: every process serializes each one (reading a value sharded
/// over the world, ZeRO-1's optimizer state, gathers it across the processes); process 0
/// writes it.
pub struct Checkpoints {
    dir: CheckpointDir,
    /// The checkpoint this run resumed from.
    pub resumed_from: Option<PathBuf>,
    /// The last one this run wrote.
    pub last: Option<PathBuf>,
}

impl Checkpoints {
    pub fn new(job: &Job, resumed_from: Option<PathBuf>) -> Self {
        Self {
            dir: CheckpointDir::new(&job.run_dir),
            resumed_from,
            last: None,
        }
    }

    /// Whether step `done` ends with a checkpoint: every `--checkpoint-every` steps, the last
    /// step, and a step that stops the run.
    pub fn due(job: &Job, done: usize, stopping: bool) -> bool {
        done.is_multiple_of(job.config.checkpoint_every) || done == job.total_steps() || stopping
    }

    /// The newest checkpoint of the run, this run's or the one it resumed from.
    pub fn newest(&self) -> Option<PathBuf> {
        self.last.clone().or_else(|| self.resumed_from.clone())
    }

    /// Writes the checkpoint of step `done` (`samples_seen` samples in).
    pub fn save<B: Backend>(
        &mut self,
        job: &Job,
        mesh: &Mesh<B::Device>,
        trainer: &RunTrainer<B>,
        done: usize,
        samples_seen: u64,
    ) -> Result<()> {
        let c = &job.config;
        let header = Header {
            run: RunMeta {
                model: c.model,
                model_config: job.net.fingerprint(),
                optimizer: c.optimizer,
                position: job.order.position(done),
            },
            step: done,
            schedule: job.schedule(),
            seed: c.seed,
            ranks: mesh.world_len(),
            batch: c.batch,
            samples_seen,
            precision: c.precision,
            loss_scaler: trainer.loss_scaler().map(|s| s.state()),
        };
        let model = trainer.model().clone().into_record();
        let checkpoint = Checkpoint {
            header,
            model: Recorder::<Ad<B>>::record(&Bytes::new(), model, ())
                .map_err(|e| Error::checkpoint(format!("cannot serialize the model: {e}")))?,
            optimizer: match job.processes.count() {
                1 => trainer.optimizer().to_bytes()?,
                _ => trainer
                    .optimizer()
                    .to_bytes_in_order(trainer.model(), mesh)?,
            },
        };
        let path = match job.processes.leads() {
            true => {
                let path = self.dir.write(&checkpoint, c.keep_checkpoints)?;
                tracing::debug!(path = %path.display(), "checkpoint written");
                path
            }
            // Process 0 writes it: a forced stop of this process names it too.
            false => self.dir.file(done),
        };
        job.stop.checkpoint_written(&path);
        self.last = Some(path);
        Ok(())
    }
}
