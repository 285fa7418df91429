//! How a run crosses the processes of a world: the transport each mesh takes (MPI for CPU and
//! wgpu meshes; NCCL for CUDA meshes), NCCL's links, the join by NCCL's own bootstrap
//! (torchrun-style variables, no MPI), and the checks every process makes before the world
//! trains.

use super::{Processes, TrainConfig};
use crate::world::World;
use crate::{Error, Result};
use firemesh::mesh::{DeviceMesh, MeshKind};
use firemesh_collective::{LinkError, ProcessLink};
use firemesh_nccl::{NcclLink, UniqueId};
use std::sync::Arc;
use std::time::Duration;

/// How a run on `mesh` crosses the processes of a world, or why it cannot. Joined by MPI (in a
/// build with the `mpi` feature): CPU and wgpu meshes through MPI, CUDA meshes through NCCL
/// (found at run time). Joined by NCCL's own bootstrap at `nccl_bootstrap` (torchrun-style
/// variables): CUDA meshes from GPU 0 only.
pub(super) fn world_support(mesh: &DeviceMesh, nccl_bootstrap: Option<&str>) -> Result<String> {
    if let Some(place) = nccl_bootstrap {
        return nccl_bootstrapped(mesh, place);
    }
    if !cfg!(feature = "mpi") {
        return Err(Error::Invalid(
            "this firemesh was built without MPI, so it trains in one process: build it with \
             `--features mpi` (needs OpenMPI and libclang) to train across processes"
                .into(),
        ));
    }
    let through_mpi = "MPI, one buffer per process after the process's own ranks";
    match mesh {
        DeviceMesh::Cpu { .. } => Ok(through_mpi.into()),
        DeviceMesh::Wgpu(_) => Ok(format!("{through_mpi} (read back to the host)")),
        DeviceMesh::Cuda(d) => {
            let version = nccl_version(mesh)?;
            Ok(format!(
                "NCCL {version} from each process's first GPU (here GPU {}; NCCL's id sent over \
                 MPI), one buffer per process after the process's own ranks, staged through the \
                 host",
                d[0].index
            ))
        }
    }
}

/// [`world_support`] in a world NCCL's own bootstrap joins at `place`.
fn nccl_bootstrapped(mesh: &DeviceMesh, place: &str) -> Result<String> {
    match mesh {
        DeviceMesh::Cuda(d) if d[0].index == 0 => Ok(format!(
            "NCCL {} from each process's GPU 0 (joined by NCCL's own bootstrap at {place}, no \
             MPI), one buffer per process after the process's own ranks, staged through the host",
            nccl_version(mesh)?
        )),
        DeviceMesh::Cuda(d) => Err(Error::Invalid(format!(
            "a mesh from GPU {} on: NCCL's own bootstrap joins each process from GPU 0, so the \
             mesh must start there",
            d[0].index
        ))),
        _ => Err(Error::Invalid(format!(
            "{} across processes goes through MPI, which torchrun-style variables do not start: \
             launch it with mpirun or srun (torchrun-style variables start NCCL's own \
             bootstrap, for CUDA meshes)",
            mesh.describe()
        ))),
    }
}

fn nccl_version(mesh: &DeviceMesh) -> Result<String> {
    firemesh_nccl::version().map_err(|e| {
        Error::Invalid(format!(
            "{} across processes needs NCCL: {}",
            mesh.describe(),
            e.0
        ))
    })
}

/// The processes of a torchrun-style `world`, joined by NCCL's own bootstrap from each
/// process's GPU 0, for a run on a mesh of `mesh` kind. `id_at` makes the id of a
/// communicator whose process 0 listens at the address it is given (`ncclGetUniqueId` under
/// `NCCL_COMM_ID`, which the program's edge sets): one for the world's link, one for its side
/// channel, both before any join. Refused first, before NCCL is asked: a CPU or wgpu mesh
/// (they cross the processes through MPI), and several processes per node (one process per
/// node drives all its GPUs). A join that does not complete within `timeout` fails (a process
/// missing, or an address that cannot be reached).
pub fn join_by_nccl(
    world: &World,
    mesh: MeshKind,
    mut id_at: impl FnMut(&str) -> std::result::Result<UniqueId, LinkError>,
    timeout: Duration,
) -> Result<Processes> {
    let (p, n) = (world.process, world.processes);
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
    let kind = match mesh {
        MeshKind::Cpu => Some("a CPU mesh"),
        MeshKind::Wgpu => Some("a wgpu mesh"),
        MeshKind::Auto | MeshKind::Cuda => None,
    };
    if let Some(kind) = kind {
        return Err(Error::Invalid(format!(
            "{kind} across processes goes through MPI, which torchrun-style variables do not \
             start: launch it with mpirun or srun (torchrun-style variables start NCCL's own \
             bootstrap, for CUDA meshes)"
        )));
    }
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
pub(super) fn nccl_link(first: usize, processes: &Processes) -> Result<Arc<dyn ProcessLink>> {
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
