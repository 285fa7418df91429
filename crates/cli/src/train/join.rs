//! Joining the processes of a world before a run: through MPI (the `mpi` feature), or by
//! NCCL's own bootstrap under torchrun-style variables (the `experimental` feature); one
//! process needs no join.

use super::{Processes, TrainOptions};
use crate::world::World;
use crate::{Error, Result};
use firemesh::mesh::MeshKind;

/// What a run keeps of its join while it lasts: MPI, when it joined through MPI.
#[cfg(feature = "mpi")]
pub type MpiJoin = Option<firemesh_mpi::Mpi>;
#[cfg(not(feature = "mpi"))]
pub type MpiJoin = ();

/// The processes of a torchrun-style `world`, joined by NCCL's own bootstrap (`None` for other
/// worlds). NCCL reads where process 0 listens from `NCCL_COMM_ID` (in `ncclGetUniqueId`, and
/// in process 0's `ncclCommInitRank`, which then listens at the id's address): set here, at the
/// program's edge, while this process has one thread, once for each of the world's two
/// communicators, and left set.
fn nccl_join(world: &World, options: &TrainOptions, timeout: f64) -> Result<Option<Processes>> {
    if world.nccl_meeting().is_none() {
        return Ok(None);
    }
    let mesh = options.devices.mesh.unwrap_or(MeshKind::Auto);
    // Refused alike in every build first; then, without the feature, as experimental.
    let [place, _] = super::nccl::torchrun_meeting(world, mesh)?;
    super::nccl::experimental(&format!(
        "{}: NCCL's own bootstrap at {place}",
        world.launcher
    ))?;
    let id_at = |place: &str| {
        std::env::set_var("NCCL_COMM_ID", place);
        firemesh_nccl::UniqueId::new()
    };
    super::join_by_nccl(world, mesh, id_at, world_timeout(timeout)?).map(Some)
}

/// The processes of `world` joined through MPI (nothing to join for one process), or by NCCL's
/// own bootstrap (torchrun-style variables).
#[cfg(feature = "mpi")]
pub fn join(world: &World, options: &TrainOptions, timeout: f64) -> Result<(MpiJoin, Processes)> {
    use firemesh_collective::ProcessLink;
    if world.is_single() {
        return Ok((None, Processes::alone()));
    }
    if let Some(processes) = nccl_join(world, options, timeout)? {
        return Ok((None, processes));
    }
    let timeout = world_timeout(timeout)?;
    let mpi = firemesh_mpi::Mpi::init(timeout).map_err(|e| Error::Invalid(e.to_string()))?;
    let link = mpi.link();
    if (link.process(), link.processes()) != (world.process, world.processes) {
        return Err(Error::Invalid(format!(
            "{} started {} processes (this is process {}), but MPI's world holds {} (this is \
             process {}): firemesh joins processes through MPI, so start them with mpirun, \
             mpiexec or srun",
            world.launcher,
            world.processes,
            world.process,
            link.processes(),
            link.process()
        )));
    }
    Ok((Some(mpi), Processes::joined(link, timeout)))
}

/// `--world-timeout`, checked.
fn world_timeout(seconds: f64) -> Result<std::time::Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(Error::Invalid(format!(
            "--world-timeout {seconds}: must be a positive number of seconds"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Without MPI only one process trains, or a torchrun-style world joined by NCCL's own
/// bootstrap.
#[cfg(not(feature = "mpi"))]
pub fn join(world: &World, options: &TrainOptions, timeout: f64) -> Result<(MpiJoin, Processes)> {
    world_timeout(timeout)?;
    if let Some(processes) = nccl_join(world, options, timeout)? {
        return Ok(((), processes));
    }
    world.check_single()?;
    Ok(((), Processes::alone()))
}
