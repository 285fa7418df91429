//! How a run crosses the processes of a world: the transport each mesh takes (MPI for CPU and
//! wgpu meshes; NCCL for CUDA meshes, behind the `experimental` feature: `nccl.rs`), and the
//! checks every process makes before the world trains.

use super::{nccl, Processes, TrainConfig};
use crate::{Error, Result};
use firemesh::mesh::DeviceMesh;

/// How a run on `mesh` crosses the processes of a world, or why it cannot. Joined by MPI (in a
/// build with the `mpi` feature): CPU and wgpu meshes through MPI, CUDA meshes through NCCL
/// (found at run time). Joined by NCCL's own bootstrap at `nccl_bootstrap` (torchrun-style
/// variables): CUDA meshes from GPU 0 only. Every NCCL case needs the `experimental` feature
/// (`nccl::transport`).
pub(super) fn world_support(mesh: &DeviceMesh, nccl_bootstrap: Option<&str>) -> Result<String> {
    if nccl_bootstrap.is_none() && !cfg!(feature = "mpi") {
        return Err(Error::Invalid(
            "this firemesh was built without MPI, so it trains in one process: build it with \
             `--features mpi` (needs OpenMPI and libclang) to train across processes"
                .into(),
        ));
    }
    let through_mpi = "MPI, one buffer per process after the process's own ranks";
    match (mesh, nccl_bootstrap) {
        (DeviceMesh::Cpu { .. }, None) => Ok(through_mpi.into()),
        (DeviceMesh::Wgpu(_), None) => Ok(format!("{through_mpi} (read back to the host)")),
        // CUDA meshes, and every mesh under torchrun-style variables.
        _ => nccl::transport(mesh, nccl_bootstrap),
    }
}

/// Checks a world of `processes` before it trains: the same settings on every process first,
/// then (alike on every process, so refused by all of them together) a mesh it can span and a
/// batch that splits into equal shares per process with at least one sample per rank.
pub(super) fn check_world(
    config: &TrainConfig,
    mesh: &DeviceMesh,
    processes: &Processes,
) -> Result<()> {
    let count = processes.count();
    if count == 1 {
        return Ok(());
    }
    let settings = serde_json::to_string(config).map_err(|e| Error::json("the settings", e))?;
    let digest = format!("{:08x}", crc32fast::hash(settings.as_bytes()));
    processes.check_same("the run's settings", &format!("settings digest {digest}"))?;
    // A process whose GPUs were not found would train on its CPU, beside CUDA meshes.
    let kind = match mesh {
        DeviceMesh::Cuda(_) => "CUDA",
        DeviceMesh::Wgpu(_) => "wgpu",
        DeviceMesh::Cpu { .. } => "CPU",
    };
    // Where a process's ranks share one device, its sums take another route (in place, not
    // through the group), and the processes' exchanges would not match.
    let (ranks, devices) = (mesh.ranks(), mesh.distinct_devices());
    processes.check_same(
        "the mesh",
        &format!("a {kind} mesh of {ranks} ranks on {devices} device(s)"),
    )?;
    processes.each(world_support(mesh, processes.nccl_bootstrap()))?;
    let world_ranks = count * mesh.ranks();
    if config.batch < world_ranks || !config.batch.is_multiple_of(count) {
        return Err(Error::World(format!(
            "--batch {} does not fit the world: it needs at least one sample for each of the \
             {world_ranks} ranks and an equal share for each of the {count} processes",
            config.batch
        )));
    }
    Ok(())
}
