//! [`World::join`]: the processes a launcher started, joined. One process needs no join; a
//! world that `mpirun`, `mpiexec` or `srun` started joins through MPI (the `mpi` feature); a
//! torchrun-style world joins by NCCL's own bootstrap instead ([`World::join_by_nccl`], the
//! experimental `nccl` feature).

use crate::error::{Error, Result};
use crate::launcher::World;
use crate::processes::Processes;
use std::time::Duration;

/// A world's processes, joined: their [`Processes`], and MPI while they last (dropping a
/// [`Joined`] finalises MPI, which `mpirun` expects of a process that ends well).
#[derive(Default)]
pub struct Joined {
    processes: Processes,
    #[cfg(feature = "mpi")]
    _mpi: Option<crate::mpi::Mpi>,
}

impl Joined {
    /// The processes of a world that is this process alone.
    pub fn alone() -> Self {
        Self::default()
    }

    #[cfg(feature = "nccl")]
    pub(crate) fn by(processes: Processes) -> Self {
        Self {
            processes,
            ..Self::default()
        }
    }

    pub fn processes(&self) -> &Processes {
        &self.processes
    }
}

impl World {
    /// Joins this world's processes, each exchange waiting at most `timeout` for the others.
    /// One process needs no join. A world an MPI launcher started joins through MPI, which
    /// must see the same world (a build without the `mpi` feature refuses it, since processes
    /// that each trained alone would overwrite each other's files). A torchrun-style world is
    /// refused here: it joins by NCCL's own bootstrap ([`World::join_by_nccl`]).
    pub fn join(&self, timeout: Duration) -> Result<Joined> {
        if self.is_single() {
            return Ok(Joined::alone());
        }
        if self.bootstrap.is_some() {
            return Err(Error::Launcher(format!(
                "{} started {} processes: they join by NCCL's own bootstrap \
                 (World::join_by_nccl), not through MPI",
                self.launcher, self.processes
            )));
        }
        self.join_through_mpi(timeout)
    }

    #[cfg(feature = "mpi")]
    fn join_through_mpi(&self, timeout: Duration) -> Result<Joined> {
        use crate::link::ProcessLink;
        let mpi = crate::mpi::Mpi::init(timeout).map_err(|e| Error::Launcher(e.to_string()))?;
        let link = mpi.link();
        if (link.process(), link.processes()) != (self.process, self.processes) {
            return Err(Error::Launcher(format!(
                "{} started {} processes (this is process {}), but MPI's world holds {} (this \
                 is process {}): firemesh joins processes through MPI, so start them with \
                 mpirun, mpiexec or srun",
                self.launcher,
                self.processes,
                self.process,
                link.processes(),
                link.process()
            )));
        }
        Ok(Joined {
            processes: Processes::joined(link, timeout),
            _mpi: Some(mpi),
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn join_through_mpi(&self, _: Duration) -> Result<Joined> {
        Err(Error::Launcher(format!(
            "{} started {} processes (this is process {}), but this build joins no processes \
             through MPI: build firemesh with its `mpi` feature (`--features mpi`)",
            self.launcher, self.processes, self.process
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(vars: &[(&str, &str)]) -> World {
        World::from_env(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap()
    }

    fn refused(joined: Result<Joined>) -> String {
        match joined {
            Ok(_) => panic!("joined"),
            Err(e) => e.to_string(),
        }
    }

    const TORCHRUN: &[(&str, &str)] = &[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "node0"),
        ("MASTER_PORT", "29500"),
    ];

    #[test]
    fn one_process_joins_alone_and_others_are_joined_by_their_launchers_engine() {
        let second = Duration::from_secs(1);
        let alone = World::single().join(second).unwrap();
        assert_eq!(alone.processes().count(), 1);
        assert!(alone.processes().link().is_none());
        let e = refused(world(TORCHRUN).join(second));
        assert!(e.contains("join by NCCL's own bootstrap"), "{e}");
        let crowded = world(&[TORCHRUN, &[("LOCAL_WORLD_SIZE", "2")]].concat());
        let e = crowded.torchrun_meeting().unwrap_err().to_string();
        assert!(
            e.contains("(LOCAL_WORLD_SIZE=2): firemesh runs one process per node"),
            "{e}"
        );
        assert_eq!(
            world(TORCHRUN).torchrun_meeting().unwrap()[1],
            "node0:29502"
        );
        #[cfg(not(feature = "mpi"))]
        {
            let mpirun = world(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]);
            let e = refused(mpirun.join(second));
            assert!(e.contains("started 2 processes (this is process 0), but this build joins no processes through MPI"), "{e}");
        }
    }
}
