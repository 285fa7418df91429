//! CUDA meshes across processes through NCCL: what every build checks first (a torchrun-style
//! world's place to meet, one process per node, a CUDA mesh), and the gate of the
//! `experimental` feature before the EXPERIMENTAL joins of `firemesh::world::nccl` (they have
//! not run on GPUs yet; a run reaches them only in a build with the feature).

use crate::{Error, Result};
use firemesh::mesh::{DeviceMesh, MeshKind};
use firemesh::world::nccl::UniqueId;
use firemesh::world::{Joined, LinkError, World};
use std::time::Duration;

/// Where the processes of a torchrun-style `world` meet for NCCL's own bootstrap, for a run on
/// a mesh of `mesh` kind; refused, before NCCL is asked: what `World::torchrun_meeting`
/// refuses (no place to meet, several processes per node), and CPU and wgpu meshes (they
/// cross the processes through MPI).
fn torchrun_meeting(world: &World, mesh: MeshKind) -> Result<[String; 2]> {
    let meeting = world.torchrun_meeting()?;
    match mesh {
        MeshKind::Cpu => Err(not_through_torchrun("a CPU mesh")),
        MeshKind::Wgpu => Err(not_through_torchrun("a wgpu mesh")),
        MeshKind::Auto | MeshKind::Cuda => Ok(meeting),
    }
}

/// Why a mesh described as `mesh` cannot cross the processes of a torchrun-style world.
pub(super) fn not_through_torchrun(mesh: &str) -> Error {
    Error::Invalid(format!(
        "{mesh} across processes goes through MPI, which torchrun-style variables do not start: \
         launch it with mpirun or srun (torchrun-style variables start NCCL's own bootstrap, \
         for CUDA meshes)"
    ))
}

/// `what` (NCCL across processes: it has not run on GPUs yet) in a build with the
/// `experimental` feature, or why a build without it refuses it. The code is built either way,
/// so that it is checked and its parts that run here are tested.
pub(super) fn experimental(what: &str) -> Result<()> {
    if cfg!(feature = "experimental") {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "{what}: NCCL across processes is experimental (it has not run on GPUs yet), so this \
         build leaves it out: build firemesh with `--features experimental` to try it, or join \
         CPU and wgpu meshes through MPI (`--features mpi`, mpirun or srun)"
    )))
}

/// How a mesh crosses the processes through NCCL, or why it cannot: a CUDA mesh joined over
/// MPI, or any mesh under torchrun-style variables (NCCL's own bootstrap at `bootstrap`, for a
/// CUDA mesh from GPU 0).
pub(super) fn transport(mesh: &DeviceMesh, bootstrap: Option<&str>) -> Result<String> {
    let name = mesh.describe();
    let DeviceMesh::Cuda(devices) = mesh else {
        return Err(not_through_torchrun(&name));
    };
    let first = devices[0].index;
    match bootstrap {
        Some(place) => experimental(&format!(
            "torchrun-style variables (NCCL's own bootstrap at {place})"
        ))?,
        None => experimental("a CUDA mesh across processes (through NCCL)")?,
    }
    if bootstrap.is_some() && first != 0 {
        return Err(Error::Invalid(format!(
            "a mesh from GPU {first} on: NCCL's own bootstrap joins each process from GPU 0, so \
             the mesh must start there"
        )));
    }
    let version = firemesh::world::nccl::version()
        .map_err(|e| Error::Invalid(format!("{name} across processes needs NCCL: {}", e.0)))?;
    Ok(match bootstrap {
        Some(place) => format!(
            "NCCL {version} from each process's GPU 0 (joined by NCCL's own bootstrap at \
             {place}, no MPI), one buffer per process after the process's own ranks, staged \
             through the host"
        ),
        None => format!(
            "NCCL {version} from each process's first GPU (here GPU {first}; NCCL's id sent \
             over MPI), one buffer per process after the process's own ranks, staged through \
             the host"
        ),
    })
}

/// The processes of a torchrun-style `world`, joined by NCCL's own bootstrap
/// (`World::join_by_nccl`) for a run on a mesh of `mesh` kind, after the checks every build
/// makes ([`torchrun_meeting`]) and, without the `experimental` feature, refused as
/// experimental. `id_at` makes each communicator's id (the program's edge sets
/// `NCCL_COMM_ID`).
pub fn join_by_nccl(
    world: &World,
    mesh: MeshKind,
    id_at: impl FnMut(&str) -> std::result::Result<UniqueId, LinkError>,
    timeout: Duration,
) -> Result<Joined> {
    let [place, _] = torchrun_meeting(world, mesh)?;
    experimental(&format!(
        "{}: NCCL's own bootstrap at {place}",
        world.launcher
    ))?;
    Ok(world.join_by_nccl(id_at, timeout)?)
}
