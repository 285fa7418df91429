//! The training loop, for any inner backend: `Autodiff<Sharded<B>>` with the parameters
//! replicated over the ranks and each batch sharded over them. Gradients are summed over the
//! ranks before the optimizer step; the optimizer state is replicated, or sharded over the
//! ranks under ZeRO-1 (`--zero 1`). A checkpoint holds exactly what the next step needs.

use super::agree::Processes;
use super::charts;
use super::config::{Length, TrainConfig};
use super::data::{RunData, Split};
use super::gpu::{self, GpuMonitor};
use super::metrics::{MetricsLog, Record, Summary};
use super::pipeline::{build, eval_chunks, share_of, Order, Parts, Prefetcher};
use super::progress::{Progress, Update};
use super::stop::Stop;
use crate::{Error, Result};
use burn::backend::Autodiff;
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use firemesh::checkpoint::{Checkpoint, CheckpointDir, Header};
use firemesh::optim::OptimizerKind;
use firemesh::optim::{AnyOptimizer, Schedule};
use firemesh::precision::ScalerState;
use firemesh::{Precision, Trainer};
use firemesh_backend::{from_shards, from_shards_int, Mesh, MeshBackend, Route, Sharded};
use firemesh_datasets::SamplerPosition;
use firemesh_gpt::Sampling;
use firemesh_zoo::{Batch, EvalCounts, Net, NetConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

type Ad<B> = Autodiff<Sharded<B>>;
type Bytes = BinBytesRecorder<FullPrecisionSettings>;

/// What a checkpoint of `firemesh train` says of its run, beside the library's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub model: super::ModelName,
    /// The model's configuration: checkpoints only load into the same shapes.
    pub model_config: String,
    pub optimizer: OptimizerKind,
    /// Where the next batch comes from.
    pub position: SamplerPosition,
}

/// A run, checked and ready: everything but the mesh's backend.
pub struct Job {
    pub config: TrainConfig,
    pub data: RunData,
    pub net: NetConfig,
    pub order: Order,
    pub run_dir: PathBuf,
    pub mesh_name: String,
    pub gpus: GpuMonitor,
    /// Asks the run to stop after its current step, with a checkpoint (a termination signal).
    pub stop: Stop,
    /// The processes training this run together; process 0 writes the run folder and prints.
    pub processes: Processes,
}

impl Job {
    /// Optimizer steps of the whole run.
    pub fn total_steps(&self) -> usize {
        match self.config.length {
            Length::Steps(s) => s,
            Length::Epochs(e) => e * self.order.steps_per_epoch,
        }
    }

    fn unit(&self) -> &'static str {
        if self.data.window.is_some() {
            "tokens/s"
        } else {
            "images/s"
        }
    }

    /// Images or tokens per sample.
    fn per_sample(&self) -> usize {
        self.data.window.map_or(1, |w| w - 1)
    }

    fn schedule(&self) -> Schedule {
        let total = self.total_steps();
        Schedule {
            kind: self.config.schedule,
            peak: self.config.lr,
            warmup: self.config.warmup_steps.unwrap_or(total / 20).min(total),
            total,
        }
    }
}

/// Trains `job` on `mesh` and writes its folder.
pub fn train_on<B: Backend>(mesh: Mesh<B::Device>, job: Job) -> Result<Summary> {
    let c = &job.config;
    let ranks = mesh.world_len();
    let lead = job.processes.leads();
    let total = job.total_steps();
    let schedule = job.schedule();
    let devices = mesh.devices().to_vec();
    Ad::<B>::seed(&mesh, c.seed);
    let mut model: Net<Ad<B>> = job.net.init(&mesh)?;
    let params = model.num_params();
    let mut optim = AnyOptimizer::<Net<Ad<B>>, Ad<B>>::new(c.optimizer, c.momentum, c.weight_decay);
    let checkpoints = CheckpointDir::new(&job.run_dir);
    let (mut start, mut samples_seen, mut resumed_from) = (0, 0u64, None);
    let mut scaler_state: Option<ScalerState> = None;
    if c.resume {
        match checkpoints.newest_valid::<RunMeta>(|w| eprintln!("warning: {w}")) {
            Some((path, ckpt)) => {
                check_resumable(&job, &ckpt.header, &path, ranks)?;
                let record =
                    Recorder::<Ad<B>>::load(&Bytes::new(), ckpt.model, &mesh).map_err(|e| {
                        Error::checkpoint(format!(
                            "{}: the model does not load: {e}",
                            path.display()
                        ))
                    })?;
                model = model.load_record(record);
                optim = optim.load_bytes(ckpt.optimizer, &mesh)?;
                start = ckpt.header.step.min(total);
                samples_seen = ckpt.header.samples_seen;
                scaler_state = ckpt.header.loss_scaler;
                if lead {
                    println!("resuming from {} (step {start} of {total})", path.display());
                }
                job.stop.checkpoint_written(&path);
                resumed_from = Some(path);
            }
            None if checkpoints.list().is_empty() => {
                if lead {
                    println!(
                        "no checkpoint yet in {}: starting from step 0",
                        job.run_dir.display()
                    );
                }
            }
            None => {
                return Err(Error::checkpoint(format!(
                    "--resume: no readable checkpoint in {}",
                    checkpoints.path().display()
                )))
            }
        }
    }
    // Every process resumes from the same step (they read one folder, which process 0 writes).
    job.processes
        .check_same("the step to start from", &format!("step {start}"))?;
    let mut trainer = Trainer::sharded(model, optim, &mesh, c.bucket_bytes)
        .with_lr(move |step| schedule.lr(step))
        // Random draws (dropout) depend on the seed and the step only: a resumed run makes
        // the same ones.
        .with_step_seeds(c.seed)
        .starting_at(start)
        .with_precision(c.precision)?;
    trainer = trainer.with_zero(c.zero)?;
    if !c.early_buckets {
        trainer = trainer.without_early_buckets();
    }
    if lead
        && c.zero == 1
        && c.optimizer == firemesh::optim::OptimizerKind::Sgd
        && c.momentum == 0.0
    {
        println!(
            "note: --zero 1: SGD without momentum keeps no state, so there is nothing to shard"
        );
    }
    if c.comm_precision != Precision::F32 {
        trainer = trainer.with_gradient_wire(c.comm_precision)?;
    }
    if c.precision.scales_loss() {
        trainer = match scaler_state {
            Some(state) => trainer.with_loss_scaler(c.loss_scaling, state)?,
            None => trainer.with_loss_scaling(c.loss_scaling)?,
        };
    }
    let mut metrics = MetricsLog::open(&job.run_dir, c.resume.then_some(start), lead)?;
    let mut input = Prefetcher::<B>::start(
        job.data.train.clone(),
        job.order.clone(),
        start..total,
        devices.clone(),
        share(&job.processes),
        c.prefetch,
        c.workers,
    )?;
    let progress = match lead {
        true => Progress::new(start, total, c.log_every, job.unit()),
        false => Progress::silent(),
    };
    let mut fallbacks = 0;
    let mut products_in_f32 = BTreeMap::new();
    let handoffs_before = firemesh_collective::stream::handoffs();
    let fallbacks_before = firemesh_collective::transport::synchronous_fallbacks();
    let mut routes = BTreeMap::new();
    let (mut gradient_collectives, mut early_gradient_collectives) = (0, 0);
    let mut comm_bytes = 0;
    let mut last_checkpoint = None;
    let mut last_eval = None;
    let mut stopped_at = None;
    let (begin, mut samples_this_run) = (Instant::now(), 0usize);
    for step in start..total {
        let _span = tracing::info_span!("step", step = step + 1).entered();
        let step_start = Instant::now();
        let waited_before = input.waited;
        let batch_in = input.next()?;
        if batch_in.step != step {
            return Err(Error::Invalid(format!(
                "the input pipeline gave the batch of step {} for step {step}",
                batch_in.step
            )));
        }
        let epoch = batch_in.position.epoch;
        let samples = batch_in.samples;
        let batch = to_mesh::<Ad<B>>(&mesh, batch_in.parts)?;
        let report = trainer.step(|model| model.loss(batch).map_err(firemesh::Error::model))?;
        let (loss, lr, counts) = (report.loss, report.lr, report.counts);
        let (loss_scale, skipped) = (report.loss_scale, report.skipped);
        comm_bytes = counts.summed_bytes;
        gradient_collectives = report.gradient_collectives;
        early_gradient_collectives = report.early_gradient_collectives;
        if !loss.is_finite() {
            progress.finish();
            return Err(Error::NonFinite {
                step: step + 1,
                loss,
                checkpoint: last_checkpoint.or(resumed_from),
            });
        }
        fallbacks += counts.total_fallbacks();
        products_in_f32 = counts
            .products_in_f32
            .iter()
            .map(|(op, k)| (op.to_string(), *k))
            .collect();
        for (route, k) in counts.routes {
            *routes.entry(route_name(route).to_string()).or_default() += k;
        }
        samples_this_run += samples;
        samples_seen += samples as u64;
        let done = step + 1;
        let step_time = step_start.elapsed().as_secs_f64();
        let sampled = done % c.log_every == 0 || done == total;
        let gpus = if sampled {
            job.gpus.sample()
        } else {
            Vec::new()
        };
        let per_sample = job.per_sample() as f64;
        progress.update(&Update {
            step: done,
            epoch,
            loss,
            lr,
            throughput: samples_this_run as f64 * per_sample / begin.elapsed().as_secs_f64(),
            gpus: &gpu::describe(&gpus),
        });
        metrics.push(Record::Step {
            step: done,
            epoch,
            loss,
            lr,
            samples,
            throughput: samples as f64 * per_sample / step_time,
            data_wait_s: (input.waited - waited_before).as_secs_f64(),
            elapsed_s: begin.elapsed().as_secs_f64(),
            gpus,
            loss_scale,
            skipped,
            comm_bytes,
        })?;
        let epoch_end = done % job.order.steps_per_epoch == 0;
        if epoch_end || done == total {
            if let Some(record) = evaluate::<B>(&job, &trainer.model().valid(), &mesh, done, epoch)?
            {
                progress.println(&describe_eval(&record));
                metrics.push(record.clone())?;
                last_eval = Some(record);
            }
        }
        // A stop asked for (a termination signal, on any process) ends the run here, this
        // step checkpointed.
        let stopping = job.processes.any(job.stop.requested())? && done < total;
        let checkpoint_due = done % c.checkpoint_every == 0 || done == total || stopping;
        // Every process serializes the checkpoint (reading a value sharded over the world,
        // ZeRO-1's optimizer state, gathers it across the processes); process 0 writes it.
        if checkpoint_due {
            let header = Header {
                run: RunMeta {
                    model: c.model,
                    model_config: job.net.fingerprint(),
                    optimizer: c.optimizer,
                    position: job.order.position(done),
                },
                step: done,
                schedule,
                seed: c.seed,
                ranks,
                batch: c.batch,
                samples_seen,
                precision: c.precision,
                loss_scaler: trainer.loss_scaler().map(|s| s.state()),
            };
            let checkpoint = Checkpoint {
                header,
                model: Recorder::<Ad<B>>::record(
                    &Bytes::new(),
                    trainer.model().clone().into_record(),
                    (),
                )
                .map_err(|e| Error::checkpoint(format!("cannot serialize the model: {e}")))?,
                optimizer: match job.processes.count() {
                    1 => trainer.optimizer().to_bytes()?,
                    _ => trainer
                        .optimizer()
                        .to_bytes_in_order(trainer.model(), &mesh)?,
                },
            };
            let path = match lead {
                true => {
                    let path = checkpoints.write(&checkpoint, c.keep_checkpoints)?;
                    tracing::debug!(path = %path.display(), "checkpoint written");
                    path
                }
                // Process 0 writes it: a forced stop of this process names it too.
                false => checkpoints.file(done),
            };
            job.stop.checkpoint_written(&path);
            last_checkpoint = Some(path);
        }
        if stopping {
            stopped_at = Some(done);
            break;
        }
    }
    progress.finish();
    let seconds = begin.elapsed().as_secs_f64();
    let scaler = trainer.loss_scaler().map(|s| s.state());
    let state_bytes = firemesh::zero::state_bytes_per_rank(trainer.optimizer(), trainer.model());
    let model = trainer.into_model();
    if start == total {
        let epoch = job.order.position(total).epoch;
        last_eval = evaluate::<B>(&job, &model.valid(), &mesh, total, epoch)?;
        if let (Some(record), true) = (&last_eval, lead) {
            println!("{}", describe_eval(record));
        }
    }
    let sample = match stopped_at {
        // Stopped early: the time left goes to ending cleanly.
        Some(_) => None,
        None => generate_sample::<B>(&job, &model.valid(), &mesh)?,
    };
    let charts = match lead {
        true => charts::draw(&job.run_dir, &metrics.records, job.unit())?,
        false => Vec::new(),
    };
    // Over the whole run, steps before a resume included (the log holds them).
    let step_losses = || {
        metrics.records.iter().filter_map(|r| match r {
            Record::Step { loss, .. } => Some(*loss),
            Record::Eval { .. } => None,
        })
    };
    let summary = Summary {
        model: c.model.to_string(),
        params,
        params_digest: params_digest::<B>(&model),
        data: job.data.describe.clone(),
        mesh: job.mesh_name.clone(),
        ranks,
        batch: c.batch,
        steps: total,
        steps_this_run: stopped_at.unwrap_or(total) - start,
        stopped_at,
        epochs: total as f64 / job.order.steps_per_epoch as f64,
        first_loss: step_losses().next().unwrap_or(f64::NAN),
        last_loss: step_losses().next_back().unwrap_or(f64::NAN),
        throughput_unit: job.unit().into(),
        throughput: samples_this_run as f64 * job.per_sample() as f64 / seconds.max(1e-9),
        seconds,
        precision: c.precision,
        comm_precision: c.comm_precision,
        zero: c.zero,
        optimizer_state_bytes_per_rank: state_bytes,
        comm_bytes_per_step: comm_bytes,
        skipped_steps: scaler.map_or(0, |s| s.skipped_steps),
        loss_scale: scaler.map(|s| s.scale),
        data_wait_fraction: input.waited.as_secs_f64() / seconds.max(1e-9),
        last_eval,
        fallbacks,
        products_in_f32,
        stream_handoffs: firemesh_collective::stream::handoffs() - handoffs_before,
        synchronous_copies: firemesh_collective::transport::synchronous_fallbacks()
            - fallbacks_before,
        routes,
        bucket_bytes: c.bucket_bytes,
        gradient_collectives,
        early_gradient_collectives,
        resumed_from,
        last_checkpoint,
        charts,
        sample,
        run_dir: job.run_dir.clone(),
    };
    if lead {
        summary.write()?;
    }
    Ok(summary)
}

/// Evaluation and sampling compute in the run's precision, as its steps do.
fn autocast<D: 'static>(
    mesh: &Mesh<D>,
    precision: Precision,
) -> Option<firemesh_backend::Autocasting<D>> {
    (precision != Precision::F32).then(|| mesh.autocast(precision.dtype()))
}

/// CRC-32 of every parameter's values (f32 bits, in module order), as hex: two runs with the
/// same digest ended with the same parameters, bit for bit.
fn params_digest<B: Backend>(model: &Net<Ad<B>>) -> String {
    struct Digest(crc32fast::Hasher);
    impl<B: Backend> ModuleVisitor<Ad<B>> for Digest {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad<B>, D>>) {
            self.0.update(param.val().into_data().as_bytes());
        }
    }
    let mut digest = Digest(crc32fast::Hasher::new());
    model.visit(&mut digest);
    format!("{:08x}", digest.0.finalize())
}

fn check_resumable(
    job: &Job,
    h: &Header<RunMeta>,
    path: &std::path::Path,
    ranks: usize,
) -> Result<()> {
    let c = &job.config;
    let fingerprint = job.net.fingerprint();
    if h.run.model != c.model || h.run.model_config != fingerprint {
        return Err(Error::checkpoint(format!(
            "{} is a checkpoint of {} ({}), not of this run's {} ({fingerprint})",
            path.display(),
            h.run.model,
            h.run.model_config,
            c.model
        )));
    }
    if h.batch != c.batch || h.seed != c.seed || h.run.optimizer != c.optimizer {
        return Err(Error::checkpoint(format!(
            "{} was written by a run with --batch {} --seed {} --optimizer {}; resume with the same",
            path.display(),
            h.batch,
            h.seed,
            h.run.optimizer
        )));
    }
    if h.precision != c.precision {
        println!(
            "note: the checkpoint was written by a {} run; continuing in {} (parameters and optimizer state are f32 in both)",
            h.precision, c.precision
        );
    }
    if h.ranks != ranks {
        println!(
            "note: the checkpoint was written on {} ranks; continuing on {ranks} with the same global batch of {}",
            h.ranks, h.batch
        );
    }
    Ok(())
}

/// This process's place among the processes: (index, count).
fn share(processes: &Processes) -> (usize, usize) {
    (processes.index(), processes.count())
}

/// The name a route has in summaries.
pub fn route_name(route: Route) -> &'static str {
    match route {
        Route::OneDevice => "one-device",
        Route::MeshGroup => "mesh-group",
        Route::PortableGroup => "portable-group",
        Route::ThroughHost => "through-host",
        Route::AcrossProcesses => "across-processes",
    }
}

/// The per-rank parts of a batch as one batch sharded over the mesh.
fn to_mesh<Bk: MeshBackend>(
    mesh: &Mesh<burn::tensor::Device<Bk::Inner>>,
    parts: Parts<Bk::Inner>,
) -> Result<Batch<Bk>> {
    Ok(match parts {
        Parts::Images(p) => {
            let (images, labels): (Vec<_>, Vec<_>) =
                p.into_iter().map(|b| (b.images, b.labels)).unzip();
            Batch::Images {
                images: from_shards::<Bk, 4>(mesh, images, 0)?,
                labels: from_shards_int::<Bk, 1>(mesh, labels, 0)?,
            }
        }
        Parts::Tokens(p) => Batch::Tokens(from_shards_int::<Bk, 2>(mesh, p, 0)?),
    })
}

/// Loss and accuracy (or perplexity) on the held-out split; `None` when it holds fewer
/// samples than there are ranks.
fn evaluate<B: Backend>(
    job: &Job,
    model: &Net<Sharded<B>>,
    mesh: &Mesh<B::Device>,
    step: usize,
    epoch: u64,
) -> Result<Option<Record>> {
    let _span = tracing::info_span!("evaluate", step).entered();
    let c = &job.config;
    let _autocast = autocast(mesh, c.precision);
    let split = &job.data.eval;
    let mut total = EvalCounts::default();
    let share = share(&job.processes);
    for chunk in eval_chunks(
        split.len(),
        c.eval_samples,
        c.batch,
        mesh.world_len(),
        share.1,
    ) {
        let parts = build::<B>(split, share_of(&chunk, share), mesh.devices(), c.workers)?;
        let counts = model.evaluate(to_mesh::<Sharded<B>>(mesh, parts)?)?;
        total.loss_sum += counts.loss_sum;
        total.predictions += counts.predictions;
        total.correct += counts.correct;
    }
    if total.predictions == 0 {
        return Ok(None);
    }
    let n = total.predictions as f64;
    let loss = total.loss_sum / n;
    let text = matches!(split, Split::Tokens(_));
    Ok(Some(Record::Eval {
        step,
        epoch,
        loss,
        accuracy: (!text).then(|| total.correct as f64 / n),
        perplexity: text.then(|| loss.exp()),
    }))
}

fn describe_eval(r: &Record) -> String {
    match r {
        Record::Eval {
            step,
            loss,
            accuracy,
            perplexity,
            ..
        } => {
            let metric = match (accuracy, perplexity) {
                (Some(a), _) => format!("top-1 accuracy {:.1}%", 100.0 * a),
                (_, Some(p)) => format!("perplexity {p:.2}"),
                _ => String::new(),
            };
            format!("held out after step {step}: loss {loss:.4}, {metric}")
        }
        Record::Step { .. } => String::new(),
    }
}

/// A continuation of the start of the held-out text, sampled from a trained GPT.
fn generate_sample<B: Backend>(
    job: &Job,
    model: &Net<Sharded<B>>,
    mesh: &Mesh<B::Device>,
) -> Result<Option<String>> {
    let (Net::Gpt(gpt), Split::Tokens(corpus), Some(tokenizer)) =
        (model, &job.data.eval, &job.data.tokenizer)
    else {
        return Ok(None);
    };
    let _autocast = autocast(mesh, job.config.precision);
    let prompt: Vec<u32> = corpus.tokens().iter().take(8).copied().collect();
    let sampling = Sampling::Temperature {
        temperature: 0.8,
        seed: job.config.seed,
    };
    let tokens = gpt.generate(&prompt, 32, sampling, mesh)?;
    let text = tokenizer.decode(&tokens)?;
    if job.processes.leads() {
        println!("sample: {text:?}");
    }
    Ok(Some(text))
}
