//! A run, checked and ready ([`Job`]), and what its phases share: the trainer's type, what a
//! checkpoint says of the run, this process's share of the world, the routes' names.

use super::config::{Length, TrainConfig};
use super::data::RunData;
use super::gpu::GpuMonitor;
use super::pipeline::Order;
use super::stop::Stop;
use super::Processes;
use burn::backend::Autodiff;
use firemesh::optim::{AnyOptimizer, OptimizerKind, Schedule};
use firemesh::Trainer;
use firemesh_backend::{Route, Sharded};
use firemesh_datasets::SamplerPosition;
use firemesh_zoo::{Net, NetConfig};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub type Ad<B> = Autodiff<Sharded<B>>;
/// The trainer of a run: its model and optimizer on `Autodiff<Sharded<B>>`.
pub type RunTrainer<B> = Trainer<Ad<B>, Net<Ad<B>>, AnyOptimizer<Net<Ad<B>>, Ad<B>>>;

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
    /// What the mesh's sums run on, and why ([`firemesh::mesh::RuntimeConfig::engine_on`]).
    pub engine: (String, String),
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

    pub fn unit(&self) -> &'static str {
        if self.data.window.is_some() {
            "tokens/s"
        } else {
            "images/s"
        }
    }

    /// Images or tokens per sample.
    pub fn per_sample(&self) -> usize {
        self.data.window.map_or(1, |w| w - 1)
    }

    pub fn schedule(&self) -> Schedule {
        let total = self.total_steps();
        Schedule {
            kind: self.config.schedule,
            peak: self.config.lr,
            warmup: self.config.warmup_steps.unwrap_or(total / 20).min(total),
            total,
        }
    }
}

/// This process's place among the processes: (index, count).
pub fn share(processes: &Processes) -> (usize, usize) {
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
