//! CUDA meshes across processes through NCCL: what every build checks first (a torchrun-style
//! world's place to meet, one process per node, a CUDA mesh), the gate of the `experimental`
//! feature, and the EXPERIMENTAL code behind it (it has not run on GPUs yet; a run reaches it
//! only in a build with the feature): NCCL's links from each process's first GPU, joined with
//! ids carried over MPI or by NCCL's own bootstrap (torchrun-style variables, no MPI).

use super::Processes;
use crate::world::World;
use crate::{Error, Result};
use firemesh::mesh::{DeviceMesh, MeshKind};
use firemesh_collective::{LinkError, ProcessLink};
use firemesh_nccl::{NcclLink, UniqueId};
use std::sync::Arc;
use std::time::Duration;

/// Where the processes of a torchrun-style `world` meet for NCCL's own bootstrap, for a run on
/// a mesh of `mesh` kind; refused, before NCCL is asked: a world with no place to meet, a CPU
/// or wgpu mesh (they cross the processes through MPI), and several processes per node (one
/// process per node drives all its GPUs).
pub(super) fn torchrun_meeting(world: &World, mesh: MeshKind) -> Result<[String; 2]> {
    let meeting = world
        .nccl_meeting()
        .ok_or_else(|| Error::Invalid(format!("{}: no place for NCCL to meet", world.launcher)))?;
    if let Some(k) = world.local_processes.filter(|&k| k > 1) {
        return Err(Error::Invalid(format!(
            "torchrun-style variables name {k} processes on this node (LOCAL_WORLD_SIZE={k}): \
             firemesh runs one process per node, its mesh on all the node's GPUs (torchrun \
             --nproc-per-node 1)"
        )));
    }
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
    let version = firemesh_nccl::version()
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

/// The processes of a torchrun-style `world`, joined by NCCL's own bootstrap from each
/// process's GPU 0, for a run on a mesh of `mesh` kind. `id_at` makes the id of a
/// communicator whose process 0 listens at the address it is given (`ncclGetUniqueId` under
/// `NCCL_COMM_ID`, which the program's edge sets): one for the world's link, one for its side
/// channel, both before any join. Refused first, before NCCL is asked, as every build refuses
/// them ([`torchrun_meeting`]). A join that does not complete within `timeout` fails (a
/// process missing, or an address that cannot be reached).
pub fn join_by_nccl(
    world: &World,
    mesh: MeshKind,
    mut id_at: impl FnMut(&str) -> std::result::Result<UniqueId, LinkError>,
    timeout: Duration,
) -> Result<Processes> {
    let (p, n) = (world.process, world.processes);
    let meeting = torchrun_meeting(world, mesh)?;
    let failed = |e: LinkError| {
        Error::Invalid(format!(
            "process {p} of {n}, joining by NCCL's own bootstrap at {}: {}",
            meeting[0], e.0
        ))
    };
    // Both ids first: making one sets the environment, which must happen before any thread
    // (NCCL's, CUDA's) exists.
    let main = id_at(&meeting[0]).map_err(failed)?;
    let side = id_at(&meeting[1]).map_err(failed)?;
    let join = |id| NcclLink::connect(0, p, n, id, timeout).map_err(failed);
    let link = join(main)?.with_side_channel(join(side)?);
    let link = link.map_err(failed)?;
    let [place, _] = meeting;
    Ok(Processes::joined_by_nccl(Arc::new(link), timeout, place))
}

/// The NCCL link of a CUDA mesh whose first GPU is `first`, in the world `processes` form:
/// every process joins from its own GPU (two processes on one GPU are refused alike on every
/// process). Joined by MPI: two new communicators (the link and its side channel), with the ids
/// process 0 makes, carried over MPI. Joined by NCCL's own bootstrap: that link.
pub(super) fn link(first: usize, processes: &Processes) -> Result<Arc<dyn ProcessLink>> {
    let mine = firemesh_nccl::gpu_uuid(first).map_err(|e| Error::World(e.0));
    let gpus = processes.each(mine)?;
    for (q, gpu) in gpus.iter().enumerate() {
        if let Some(p) = gpus[..q].iter().position(|g| g == gpu) {
            return Err(Error::World(format!(
                "processes {p} and {q} would both join NCCL from {gpu}: NCCL takes one GPU per \
                 process; start one process per node (its mesh takes all the node's GPUs)"
            )));
        }
    }
    if let (Some(_), Some(link)) = (processes.nccl_bootstrap(), processes.link()) {
        return Ok(link.clone());
    }
    let join = || -> Result<NcclLink> {
        let hex = processes.decided_by_lead(|| {
            let id = UniqueId::new().map_err(|e| Error::World(e.0))?;
            Ok(id.to_hex())
        })?;
        let id = UniqueId::from_hex(&hex).map_err(|e| Error::World(e.0))?;
        let (p, n) = (processes.index(), processes.count());
        let link =
            NcclLink::connect(first, p, n, id, processes.timeout()).map_err(|e| Error::World(e.0));
        processes.agree(link)
    };
    let link = join()?.with_side_channel(join()?);
    Ok(Arc::new(link.map_err(|e| Error::World(e.0))?))
}
