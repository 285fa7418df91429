//! The world of processes a launcher started, read from its variables: the program's edge reads
//! them (`firemesh train` from its environment) and hands this module a lookup.
//!
//! Recognised, in this order: OpenMPI's `mpirun`/`mpiexec` (`OMPI_COMM_WORLD_RANK`, `_SIZE`,
//! `_LOCAL_RANK`), MPICH-style process managers (Hydra's `mpiexec`, Intel MPI: `PMI_RANK`,
//! `PMI_SIZE`), torchrun-style variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
//! `MASTER_PORT`) and Slurm's `srun` (`SLURM_PROCID`, `SLURM_STEP_NUM_TASKS`, `SLURM_LOCALID`).
//! torchrun comes before Slurm because `srun` often starts torchrun, whose processes inherit
//! the step's one-task variables; Slurm's step variables, not `SLURM_NTASKS`, because a batch
//! script run without `srun` is one process of a job of several tasks. With none of them the
//! world is this one process. `join.rs` joins the world the variables describe.

use crate::error::{Error, Result};
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
                        Error::Launcher(format!("{name}={v:?}: not a process number or count"))
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
                return Err(Error::Launcher(format!(
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

    /// [`Self::nccl_meeting`], or why this world cannot meet there: it names no place, or
    /// several processes on this node (NCCL takes one GPU per process, and a process drives
    /// all its node's GPUs).
    pub fn torchrun_meeting(&self) -> Result<[String; 2]> {
        let meeting = self.nccl_meeting().ok_or_else(|| {
            Error::Launcher(format!("{}: no place for NCCL to meet", self.launcher))
        })?;
        if let Some(k) = self.local_processes.filter(|&k| k > 1) {
            return Err(Error::Launcher(format!(
                "torchrun-style variables name {k} processes on this node (LOCAL_WORLD_SIZE={k}): \
                 firemesh runs one process per node, its mesh on all the node's GPUs (torchrun \
                 --nproc-per-node 1)"
            )));
        }
        Ok(meeting)
    }

    /// One process, however it was launched.
    pub fn is_single(&self) -> bool {
        self.processes == 1
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
        return Err(Error::Launcher(format!(
            "{size}={processes} names a world without a place to meet: set MASTER_ADDR and \
             MASTER_PORT"
        )));
    };
    // NCCL's bootstrap takes the two ports after it (`World::nccl_meeting`).
    match port.trim().parse::<u16>() {
        Ok(p) if p > 0 && p <= u16::MAX - 2 => Ok(format!("{addr}:{p}")),
        _ => Err(Error::Launcher(format!(
            "MASTER_PORT={port:?}: not a TCP port with two more after it (1-65533; NCCL's \
             bootstrap listens on the two ports after MASTER_PORT)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The world the variables `vars` describe.
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
        // NCCL's own bootstrap meets on the two ports after MASTER_PORT (torchrun's store holds
        // MASTER_PORT itself); LOCAL_WORLD_SIZE counts the node's processes.
        let meeting = torch.nccl_meeting().unwrap();
        assert_eq!(meeting, ["10.0.0.1:29501", "10.0.0.1:29502"]);
        assert_eq!(torch.local_processes, None);
        let per_gpu = world(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_eq!(per_gpu.local_processes, Some(4));
        assert_eq!(per_gpu.nccl_meeting().unwrap()[0], "node0:29501");
        assert!(world(&[("RANK", "0"), ("WORLD_SIZE", "1")])
            .unwrap()
            .nccl_meeting()
            .is_none());
        // mpirun's variables win over torchrun-style ones left in the environment.
        let both = world(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
        ])
        .unwrap();
        assert_eq!((both.launcher, both.processes), (Launcher::OpenMpi, 1));
        assert!(both.is_single());
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
            // NCCL's bootstrap takes the two ports after MASTER_PORT.
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "65534"),
                ][..],
                "two more after it",
            ),
        ] {
            let err = world(vars).unwrap_err().to_string();
            assert!(err.contains(says), "{vars:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
}
