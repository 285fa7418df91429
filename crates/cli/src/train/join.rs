//! Joining the processes of a world before a run (`firemesh::world`): through MPI (the `mpi`
//! feature), or, under torchrun-style variables, by NCCL's own bootstrap (the `experimental`
//! feature, for CUDA meshes) after the checks every build makes first (`nccl.rs`).

use super::TrainOptions;
use crate::{Error, Result};
use firemesh::mesh::MeshKind;
use firemesh::world::{Joined, World};

/// The processes of `world` joined for a run of `options`, each exchange waiting at most
/// `timeout` seconds (`--world-timeout`) for the others.
pub fn join(world: &World, options: &TrainOptions, timeout: f64) -> Result<Joined> {
    if !(timeout.is_finite() && timeout > 0.0) {
        return Err(Error::Invalid(format!(
            "--world-timeout {timeout}: must be a positive number of seconds"
        )));
    }
    let timeout = std::time::Duration::from_secs_f64(timeout);
    if world.is_single() || world.bootstrap.is_none() {
        return Ok(world.join(timeout)?);
    }
    let mesh = options.devices.mesh.unwrap_or(MeshKind::Auto);
    // NCCL reads where process 0 listens from `NCCL_COMM_ID` (in `ncclGetUniqueId`, and in
    // process 0's `ncclCommInitRank`, which then listens at the id's address): set here, at
    // the program's edge, while this process has one thread, once for each of the world's two
    // communicators, and left set.
    let id_at = |place: &str| {
        std::env::set_var("NCCL_COMM_ID", place);
        firemesh::world::nccl::UniqueId::new()
    };
    super::join_by_nccl(world, mesh, id_at, timeout)
}
