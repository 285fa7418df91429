//! Where a run starts: step 0 with a fresh model, or (`--resume`) the newest valid checkpoint
//! of its folder, once it is known to be a checkpoint of this run.

use super::job::{Ad, Job, RunMeta};
use crate::{Error, Result};
use burn::module::Module;
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use firemesh::checkpoint::{CheckpointDir, Header};
use firemesh::optim::AnyOptimizer;
use firemesh::precision::ScalerState;
use firemesh_backend::Mesh;
use firemesh_zoo::Net;
use std::path::{Path, PathBuf};

/// How checkpoints hold the model: every value in f32.
pub type Bytes = BinBytesRecorder<FullPrecisionSettings>;

/// The model and optimizer a run starts from, and where in the run.
pub struct Start<B: Backend> {
    pub model: Net<Ad<B>>,
    pub optimizer: AnyOptimizer<Net<Ad<B>>, Ad<B>>,
    /// Steps already done.
    pub step: usize,
    pub samples_seen: u64,
    /// The loss scaler's state at the checkpoint (f16 runs).
    pub scaler: Option<ScalerState>,
    /// The checkpoint resumed from.
    pub checkpoint: Option<PathBuf>,
}

/// The start of `job` on `mesh`: a model made from the run's seed, with the checkpoint's
/// values and optimizer state loaded over it when the run resumes from one.
pub fn start<B: Backend>(mesh: &Mesh<B::Device>, job: &Job) -> Result<Start<B>> {
    let c = &job.config;
    Ad::<B>::seed(mesh, c.seed);
    let mut start = Start {
        model: job.net.init(mesh)?,
        optimizer: AnyOptimizer::new(c.optimizer, c.momentum, c.weight_decay),
        step: 0,
        samples_seen: 0,
        scaler: None,
        checkpoint: None,
    };
    if !c.resume {
        return Ok(start);
    }
    let lead = job.processes.leads();
    let checkpoints = CheckpointDir::new(&job.run_dir);
    match checkpoints.newest_valid::<RunMeta>(|w| eprintln!("warning: {w}")) {
        Some((path, ckpt)) => {
            check_resumable(job, &ckpt.header, &path, mesh.world_len())?;
            let record = Recorder::<Ad<B>>::load(&Bytes::new(), ckpt.model, mesh).map_err(|e| {
                Error::checkpoint(format!("{}: the model does not load: {e}", path.display()))
            })?;
            start.model = start.model.load_record(record);
            start.optimizer = start.optimizer.load_bytes(ckpt.optimizer, mesh)?;
            start.step = ckpt.header.step.min(job.total_steps());
            start.samples_seen = ckpt.header.samples_seen;
            start.scaler = ckpt.header.loss_scaler;
            if lead {
                let (step, total) = (start.step, job.total_steps());
                println!("resuming from {} (step {step} of {total})", path.display());
            }
            job.stop.checkpoint_written(&path);
            start.checkpoint = Some(path);
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
    Ok(start)
}

/// Whether the checkpoint at `path` (header `h`) continues this run: the same model, batch,
/// seed and optimizer. Another precision or rank count continues, with a note.
fn check_resumable(job: &Job, h: &Header<RunMeta>, path: &Path, ranks: usize) -> Result<()> {
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
