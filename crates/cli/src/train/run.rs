//! A training run, for any inner backend: `Autodiff<Sharded<B>>` with the parameters
//! replicated over the ranks and each batch sharded over them. Gradients are summed over the
//! ranks before the optimizer step; the optimizer state is replicated, or sharded over the
//! ranks under ZeRO-1 (`--zero 1`). It reads as its phases: where it starts (`resume.rs`), the
//! trainer, the loop whose observers (`observers.rs`, `evaluate.rs`) watch each step, and the
//! summary. A checkpoint holds exactly what the next step needs.

use super::charts;
use super::evaluate::{describe_eval, evaluate, generate_sample};
use super::job::{share, Ad, Job, RunTrainer};
use super::metrics::{Record, Summary};
use super::observers::{Checkpoints, StepDone, StepLog, Tally};
use super::pipeline::{to_mesh, Prefetcher};
use super::resume;
use crate::{Error, Result};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::prelude::*;
use firemesh::optim::{AnyOptimizer, OptimizerKind};
use firemesh::precision::ScalerState;
use firemesh::{Precision, Trainer};
use firemesh_backend::Mesh;
use firemesh_zoo::Net;
use std::time::Instant;

/// Trains `job` on `mesh` and writes its folder: where it starts (a checkpoint, when it
/// resumes), the trainer, the loop of steps and their observers, the summary.
pub fn train_on<B: Backend>(mesh: Mesh<B::Device>, job: Job) -> Result<Summary> {
    let start = resume::start::<B>(&mesh, &job)?;
    // Every process resumes from the same step (they read one folder, which process 0 writes).
    job.processes
        .check_same("the step to start from", &format!("step {}", start.step))?;
    let first = start.step;
    let (model, optimizer) = (start.model, start.optimizer);
    let mut trainer = build_trainer::<B>(&mesh, &job, model, optimizer, first, start.scaler)?;
    let c = &job.config;
    let log = StepLog::open(&job, first)?;
    let mut input = Prefetcher::<B>::start(
        job.data.train.clone(),
        job.order.clone(),
        first..job.total_steps(),
        mesh.devices().to_vec(),
        share(&job.processes),
        c.prefetch,
        c.workers,
    )?;
    let before = Before::now();
    let mut watch = Observers {
        tally: Tally::starting_at(start.samples_seen),
        log,
        checkpoints: Checkpoints::new(&job, start.checkpoint),
        last_eval: None,
    };
    let stopped_at = train_loop::<B>(&mesh, &job, &mut trainer, &mut input, first, &mut watch)?;
    watch.log.progress.finish();
    let ended = Ended {
        first,
        stopped_at,
        seconds: watch.log.begin.elapsed().as_secs_f64(),
        data_wait: input.waited.as_secs_f64(),
        before,
    };
    summarize::<B>(&mesh, &job, trainer, watch, ended)
}

/// The trainer of `job`, `steps_done` steps in: its schedule, seeds, precision, ZeRO stage,
/// gradient sums and loss scaling (from `scaler`, a checkpoint's) as the run's configuration
/// says.
fn build_trainer<B: Backend>(
    mesh: &Mesh<B::Device>,
    job: &Job,
    model: Net<Ad<B>>,
    optimizer: AnyOptimizer<Net<Ad<B>>, Ad<B>>,
    steps_done: usize,
    scaler: Option<ScalerState>,
) -> Result<RunTrainer<B>> {
    let c = &job.config;
    let schedule = job.schedule();
    let mut trainer = Trainer::sharded(model, optimizer, mesh, c.bucket_bytes)
        .with_lr(move |step| schedule.lr(step))
        // Random draws (dropout) depend on the seed and the step only: a resumed run makes
        // the same ones.
        .with_step_seeds(c.seed)
        .starting_at(steps_done)
        .with_precision(c.precision)?
        .with_zero(c.zero)?
        .with_gathers_ahead(c.gather_ahead_bytes);
    if !c.early_buckets {
        trainer = trainer.without_early_buckets();
    }
    let stateless = c.optimizer == OptimizerKind::Sgd && c.momentum == 0.0;
    if job.processes.leads() && c.zero == 1 && stateless {
        println!(
            "note: --zero 1: SGD without momentum keeps no state, so there is nothing to shard"
        );
    }
    if c.comm_precision != Precision::F32 {
        trainer = trainer.with_gradient_wire(c.comm_precision)?;
    }
    if c.precision.scales_loss() {
        trainer = match scaler {
            Some(state) => trainer.with_loss_scaler(c.loss_scaling, state)?,
            None => trainer.with_loss_scaling(c.loss_scaling)?,
        };
    }
    Ok(trainer)
}

/// What watches the steps, called in turn after each.
struct Observers {
    tally: Tally,
    log: StepLog,
    checkpoints: Checkpoints,
    last_eval: Option<Record>,
}

/// The steps from `first` to the run's end, or to the step a stop was asked in (returned).
fn train_loop<B: Backend>(
    mesh: &Mesh<B::Device>,
    job: &Job,
    trainer: &mut RunTrainer<B>,
    input: &mut Prefetcher<B>,
    first: usize,
    watch: &mut Observers,
) -> Result<Option<usize>> {
    let total = job.total_steps();
    for step in first..total {
        let _span = tracing::info_span!("step", step = step + 1).entered();
        let done = one_step::<B>(mesh, trainer, input, step)?;
        if !done.report.loss.is_finite() {
            watch.log.progress.finish();
            return Err(Error::NonFinite {
                step: done.step,
                loss: done.report.loss,
                checkpoint: watch.checkpoints.newest(),
            });
        }
        watch.tally.add(&done);
        watch.log.record(job, &done, &watch.tally)?;
        if done.step % job.order.steps_per_epoch == 0 || done.step == total {
            let model = trainer.model().valid();
            if let Some(record) = evaluate::<B>(job, &model, mesh, done.step, done.epoch)? {
                watch.log.record_eval(&record)?;
                watch.last_eval = Some(record);
            }
        }
        // A stop asked for (a termination signal, on any process) ends the run here, this
        // step checkpointed.
        let stopping = job.processes.any(job.stop.requested())? && done.step < total;
        if Checkpoints::due(job, done.step, stopping) {
            let seen = watch.tally.samples_seen;
            watch
                .checkpoints
                .save::<B>(job, mesh, trainer, done.step, seen)?;
        }
        if stopping {
            return Ok(Some(done.step));
        }
    }
    Ok(None)
}

/// Step `step`: its batch from the input pipeline, through the trainer.
fn one_step<B: Backend>(
    mesh: &Mesh<B::Device>,
    trainer: &mut RunTrainer<B>,
    input: &mut Prefetcher<B>,
    step: usize,
) -> Result<StepDone> {
    let began = Instant::now();
    let waited_before = input.waited;
    let batch = input.next()?;
    if batch.step != step {
        return Err(Error::Invalid(format!(
            "the input pipeline gave the batch of step {} for step {step}",
            batch.step
        )));
    }
    let data_wait_s = (input.waited - waited_before).as_secs_f64();
    let (epoch, samples) = (batch.position.epoch, batch.samples);
    let batch = to_mesh::<Ad<B>>(mesh, batch.parts)?;
    let report = trainer.step(|model| model.loss(batch).map_err(firemesh::Error::model))?;
    Ok(StepDone {
        step: step + 1,
        epoch,
        samples,
        seconds: began.elapsed().as_secs_f64(),
        data_wait_s,
        report,
    })
}

/// The process-wide counters at the start of the loop, so that the summary counts this run's.
struct Before {
    handoffs: u64,
    synchronous_copies: u64,
}

impl Before {
    fn now() -> Self {
        Self {
            handoffs: firemesh_collective::stream::handoffs(),
            synchronous_copies: firemesh_collective::transport::synchronous_fallbacks(),
        }
    }
}

/// How the loop ended.
struct Ended {
    /// The step this run started from.
    first: usize,
    stopped_at: Option<usize>,
    seconds: f64,
    /// Seconds the loop waited for input.
    data_wait: f64,
    before: Before,
}

/// The run's summary (written by process 0), after the evaluation a run that had no step left
/// still owes and the sample of a GPT.
fn summarize<B: Backend>(
    mesh: &Mesh<B::Device>,
    job: &Job,
    trainer: RunTrainer<B>,
    mut watch: Observers,
    ended: Ended,
) -> Result<Summary> {
    let (c, total) = (&job.config, job.total_steps());
    let scaler = trainer.loss_scaler().map(|s| s.state());
    let state_bytes = firemesh::zero::state_bytes_per_rank(trainer.optimizer(), trainer.model());
    let parameter_bytes = firemesh::zero::parameter_bytes_per_rank(trainer.model());
    let model = trainer.into_model();
    let (sample, charts) = closing_work::<B>(mesh, job, &model, &mut watch, &ended)?;
    let records = &watch.log.metrics.records;
    // Over the whole run, steps before a resume included (the log holds them).
    let step_losses = || {
        records.iter().filter_map(|r| match r {
            Record::Step { loss, .. } => Some(*loss),
            Record::Eval { .. } => None,
        })
    };
    let (tally, seconds) = (watch.tally, ended.seconds);
    let summary = Summary {
        model: c.model.to_string(),
        params: model.num_params(),
        params_digest: params_digest::<B>(&model),
        data: job.data.describe.clone(),
        mesh: job.mesh_name.clone(),
        collective_engine: job.engine.0.clone(),
        collective_engine_why: job.engine.1.clone(),
        ranks: mesh.world_len(),
        batch: c.batch,
        steps: total,
        steps_this_run: ended.stopped_at.unwrap_or(total) - ended.first,
        stopped_at: ended.stopped_at,
        epochs: total as f64 / job.order.steps_per_epoch as f64,
        first_loss: step_losses().next().unwrap_or(f64::NAN),
        last_loss: step_losses().next_back().unwrap_or(f64::NAN),
        throughput_unit: job.unit().into(),
        throughput: tally.samples_this_run as f64 * job.per_sample() as f64 / seconds.max(1e-9),
        seconds,
        precision: c.precision,
        comm_precision: c.comm_precision,
        zero: c.zero,
        optimizer_state_bytes_per_rank: state_bytes,
        parameter_bytes_per_rank: parameter_bytes,
        peak_host_bytes: super::metrics::peak_host_bytes(),
        comm_bytes_per_step: tally.comm_bytes,
        casts_down_per_step: tally.casts[0],
        casts_up_per_step: tally.casts[1],
        cast_bytes_per_step: tally.casts[2],
        parameter_casts_per_step: tally.casts[3],
        casts_reused_per_step: tally.casts[4],
        ops_kept_narrow_per_step: tally.casts[5],
        casts_up_reused_per_step: tally.casts[6],
        activation_casts_reused_per_step: tally.casts[7],
        skipped_steps: scaler.map_or(0, |s| s.skipped_steps),
        loss_scale: scaler.map(|s| s.scale),
        data_wait_fraction: ended.data_wait / seconds.max(1e-9),
        last_eval: watch.last_eval,
        fallbacks: tally.fallbacks,
        products_in_f32: tally.products_in_f32,
        stream_handoffs: firemesh_collective::stream::handoffs() - ended.before.handoffs,
        synchronous_copies: firemesh_collective::transport::synchronous_fallbacks()
            - ended.before.synchronous_copies,
        routes: tally.routes,
        bucket_bytes: c.bucket_bytes,
        gradient_collectives: tally.gradient_collectives,
        early_gradient_collectives: tally.early_gradient_collectives,
        parameter_gathers_per_step: tally.parameter_gathers,
        parameter_gathers_ahead_per_step: tally.parameter_gathers_ahead,
        parameter_gathers_waited_per_step: tally.parameter_gathers_waited,
        resumed_from: watch.checkpoints.resumed_from,
        last_checkpoint: watch.checkpoints.last,
        charts,
        sample,
        run_dir: job.run_dir.clone(),
    };
    if job.processes.leads() {
        summary.write()?;
    }
    Ok(summary)
}

/// The work after the last step: the final evaluation (where the run reached its end now: a
/// resumed run that had ended already keeps its last one), a sample of the model's text (not
/// after a stop, whose time left goes to ending cleanly) and, on process 0, the charts.
fn closing_work<B: Backend>(
    mesh: &Mesh<B::Device>,
    job: &Job,
    model: &Net<Ad<B>>,
    watch: &mut Observers,
    ended: &Ended,
) -> Result<(Option<String>, Vec<std::path::PathBuf>)> {
    let (total, lead) = (job.total_steps(), job.processes.leads());
    if ended.first == total {
        let epoch = job.order.position(total).epoch;
        watch.last_eval = evaluate::<B>(job, &model.valid(), mesh, total, epoch)?;
        if let (Some(record), true) = (&watch.last_eval, lead) {
            println!("{}", describe_eval(record));
        }
    }
    let sample = match ended.stopped_at {
        Some(_) => None,
        None => generate_sample::<B>(job, &model.valid(), mesh)?,
    };
    let charts = match lead {
        true => charts::draw(&job.run_dir, &watch.log.metrics.records, job.unit())?,
        false => Vec::new(),
    };
    Ok((sample, charts))
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
