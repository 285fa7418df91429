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
//! world is this one process. firemesh trains in one process so far, so
//! a world of more than one is described by `firemesh train --dry-run` and refused by a run,
//! before either writes anything: N processes each training the whole job into one run folder
//! would overwrite each other's checkpoints.

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
            let bootstrap = match launcher {
                Launcher::Torchrun if processes > 1 => Some(meeting_place(&var, size, processes)?),
                _ => None,
            };
            return Ok(Self {
                launcher,
                process,
                processes,
                local_process: number(local)?,
                bootstrap,
            });
        }
        Ok(Self::single())
    }

    /// One process, however it was launched.
    pub fn is_single(&self) -> bool {
        self.processes == 1
    }

    /// A run's refusal of a world of several processes, naming what was found.
    pub fn check_single(&self) -> Result<()> {
        if self.is_single() {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "{} started {} processes (this is process {}), but firemesh trains in one process \
             so far: run one process per job (`firemesh train --dry-run` shows the world)",
            self.launcher, self.processes, self.process
        )))
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
    match port.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(format!("{addr}:{p}")),
        _ => Err(Error::Invalid(format!(
            "MASTER_PORT={port:?}: not a TCP port (1-65535)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn world(vars: &[(&str, &str)]) -> Result<World> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        World::from_env(|k| vars.get(k).cloned())
    }

    #[test]
    fn launchers_are_read_from_their_variables() {
        assert_eq!(world(&[]).unwrap(), World::single());
        let mpi = world(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ])
        .unwrap();
        assert_eq!(
            (mpi.launcher, mpi.process, mpi.processes, mpi.local_process),
            (Launcher::OpenMpi, 1, 2, Some(1))
        );
        let slurm = world(&[("SLURM_PROCID", "3"), ("SLURM_STEP_NUM_TASKS", "4")]).unwrap();
        assert_eq!((slurm.launcher, slurm.process), (Launcher::Slurm, 3));
        assert_eq!(slurm.local_process, None);
        // A batch script run without srun: one process of a job of several tasks.
        let batch = world(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")]).unwrap();
        assert_eq!(batch, World::single());
        // srun starting torchrun: torchrun's processes inherit the step's one task.
        let inner = world(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_NUM_TASKS", "1"),
            ("RANK", "5"),
            ("WORLD_SIZE", "8"),
            ("MASTER_ADDR", "node1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_eq!((inner.launcher, inner.processes), (Launcher::Torchrun, 8));
        let pmi = world(&[("PMI_RANK", "1"), ("PMI_SIZE", "3")]).unwrap();
        assert_eq!(
            (pmi.launcher, pmi.process, pmi.processes),
            (Launcher::Pmi, 1, 3)
        );
        let torch = world(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "0"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_eq!(torch.bootstrap.as_deref(), Some("10.0.0.1:29500"));
        assert!(torch
            .check_single()
            .unwrap_err()
            .to_string()
            .contains("8 processes"));
        // mpirun's variables win over torchrun-style ones left in the environment.
        let both = world(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
        ])
        .unwrap();
        assert_eq!((both.launcher, both.processes), (Launcher::OpenMpi, 1));
        assert!(both.check_single().is_ok());
    }

    #[test]
    fn worlds_that_cannot_be_are_named() {
        for (vars, says) in [
            (
                &[("RANK", "2"), ("WORLD_SIZE", "2")][..],
                "RANK=2 and WORLD_SIZE=2",
            ),
            (
                &[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")][..],
                "SLURM_PROCID=\"x\"",
            ),
            (
                &[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "0")][..],
                "not a process",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2")][..],
                "MASTER_ADDR and MASTER_PORT",
            ),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "p"),
                ][..],
                "MASTER_PORT=\"p\": not a TCP port",
            ),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "70000"),
                ][..],
                "not a TCP port",
            ),
        ] {
            let err = world(vars).unwrap_err().to_string();
            assert!(err.contains(says), "{vars:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
}
