//! The world of processes a launcher started: found from its environment at the program's edge
//! (`firemesh` reads the variables; everything here works on a lookup it is handed).
//!
//! Recognised, in this order: OpenMPI's `mpirun`/`mpiexec` (`OMPI_COMM_WORLD_RANK`, `_SIZE`,
//! `_LOCAL_RANK`), MPICH-style process managers (Hydra's `mpiexec`, Intel MPI: `PMI_RANK`,
//! `PMI_SIZE`), torchrun-style variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
//! `MASTER_PORT`) and Slurm's `srun` (`SLURM_PROCID`, `SLURM_STEP_NUM_TASKS`, `SLURM_LOCALID`).
//! torchrun comes before Slurm because `srun` often starts torchrun, whose processes inherit
//! the step's one-task variables; Slurm's step variables, not `SLURM_NTASKS`, because a batch
//! script run without `srun` is one process of a job of several tasks. With none of them the
//! world is this one process. A build with the `mpi` feature joins the world of an MPI launcher
//! (`mpirun`, `mpiexec` or `srun`) through MPI; a build without it refuses such a world before
//! anything is written, since N processes each training the whole job into one run folder
//! would overwrite each other's checkpoints. Torchrun-style variables start NCCL's own
//! bootstrap instead, in a build with the `experimental` feature: process 0 listens at `MASTER_ADDR`, on the two ports after
//! `MASTER_PORT` (torchrun's own store holds `MASTER_PORT`), for the world's two communicators
//! ([`World::nccl_meeting`]); such a world trains CUDA meshes only, one process per node.
//! `firemesh train --dry-run` describes the world either way.

use crate::{Error, Result};
use std::fmt;

/// Who started the processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// No launcher variables: one process.
    None,
    OpenMpi,
    /// An MPICH-style process manager (PMI).
    Pmi,
    Torchrun,
    Slurm,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "none (one process)",
            Self::OpenMpi => "mpirun (OpenMPI)",
            Self::Pmi => "mpiexec (PMI: MPICH, Intel MPI)",
            Self::Slurm => "srun (Slurm)",
            Self::Torchrun => "torchrun-style variables",
        })
    }
}

/// This process's place among the processes its launcher started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    pub launcher: Launcher,
    /// This process, from 0.
    pub process: usize,
    pub processes: usize,
    /// This process's index on its node, where the launcher says.
    pub local_process: Option<usize>,
    /// Where the processes meet (torchrun's `MASTER_ADDR:MASTER_PORT`), where the launcher
    /// names one; MPI and Slurm bring their own.
    pub bootstrap: Option<String>,
    /// The processes on this node, where the launcher says (torchrun's `LOCAL_WORLD_SIZE`).
    pub local_processes: Option<usize>,
}

impl Default for World {
    fn default() -> Self {
        Self::single()
    }
}

impl World {
    /// This process alone.
    pub fn single() -> Self {
        Self {
            launcher: Launcher::None,
            process: 0,
            processes: 1,
            local_process: None,
            bootstrap: None,
            local_processes: None,
        }
    }

    /// The world `var` (an environment lookup) describes. Variables that are there but do not
    /// make a world (not numbers, a rank outside the size, a torchrun world of several
    /// processes without `MASTER_ADDR`/`MASTER_PORT`) are a one-line error naming them.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let number = |name: &str| -> Result<Option<usize>> {
            var(name)
                .map(|v| {
                    v.trim().parse::<usize>().map_err(|_| {
                        Error::Invalid(format!("{name}={v:?}: not a process number or count"))
                    })
                })
                .transpose()
        };
        let found = [
            (
                Launcher::OpenMpi,
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
            ),
            (Launcher::Pmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            (Launcher::Torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK"),
            (
                Launcher::Slurm,
                "SLURM_PROCID",
                "SLURM_STEP_NUM_TASKS",
                "SLURM_LOCALID",
            ),
        ];
        for (launcher, rank, size, local) in found {
            let (Some(process), Some(processes)) = (number(rank)?, number(size)?) else {
                continue;
            };
            if processes == 0 || process >= processes {
                return Err(Error::Invalid(format!(
                    "{rank}={process} and {size}={processes}: not a process of that world"
                )));
            }
            let (bootstrap, local_processes) = match launcher {
                Launcher::Torchrun if processes > 1 => (
                    Some(meeting_place(&var, size, processes)?),
                    number("LOCAL_WORLD_SIZE")?,
                ),
                _ => (None, None),
            };
            return Ok(Self {
                launcher,
                process,
                processes,
                local_process: number(local)?,
                bootstrap,
                local_processes,
            });
        }
        Ok(Self::single())
    }

    /// Where NCCL's own bootstrap meets, in a torchrun-style world of several processes: the
    /// addresses of the world's two communicators (its link and the link's side channel),
    /// `MASTER_ADDR` at `MASTER_PORT` + 1 and + 2, where process 0 listens. `None` in other
    /// worlds (MPI brings its own bootstrap).
    pub fn nccl_meeting(&self) -> Option<[String; 2]> {
        let place = self.bootstrap.as_deref()?;
        let (addr, port) = place.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        let at = |k: u16| Some(format!("{addr}:{}", port.checked_add(k)?));
        Some([at(1)?, at(2)?])
    }

    /// One process, however it was launched.
    pub fn is_single(&self) -> bool {
        self.processes == 1
    }

    /// A refusal of a world of several processes by a firemesh built without MPI, naming what
    /// was found.
    pub fn check_single(&self) -> Result<()> {
        if self.is_single() {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "{} started {} processes (this is process {}), but this firemesh was built without \
             MPI, so it trains in one process: build it with `--features mpi` (`firemesh train \
             --dry-run` shows the world)",
            self.launcher, self.processes, self.process
        )))
    }

    /// `path` for this process: as it is in a world of one process, else with the process's
    /// number before its extension (`trace.json` -> `trace.process1.json`).
    pub fn own_file(&self, path: &std::path::Path) -> std::path::PathBuf {
        if self.is_single() {
            return path.to_path_buf();
        }
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.process{}.{}", self.process, ext.to_string_lossy()),
            None => format!("{stem}.process{}", self.process),
        };
        path.with_file_name(name)
    }
}

/// torchrun's `MASTER_ADDR:MASTER_PORT`, which a world of several processes needs.
fn meeting_place(
    var: &impl Fn(&str) -> Option<String>,
    size: &str,
    processes: usize,
) -> Result<String> {
    let (Some(addr), Some(port)) = (var("MASTER_ADDR"), var("MASTER_PORT")) else {
        return Err(Error::Invalid(format!(
            "{size}={processes} names a world without a place to meet: set MASTER_ADDR and \
             MASTER_PORT"
        )));
    };
    // NCCL's bootstrap takes the two ports after it (`World::nccl_meeting`).
    match port.trim().parse::<u16>() {
        Ok(p) if p > 0 && p <= u16::MAX - 2 => Ok(format!("{addr}:{p}")),
        _ => Err(Error::Invalid(format!(
            "MASTER_PORT={port:?}: not a TCP port with two more after it (1-65533; NCCL's \
             bootstrap listens on the two ports after MASTER_PORT)"
        ))),
    }
}
