//! The user-facing API on Burn tensors: put a batch on the mesh, query and change placements,
//! bring a value back to one device. Works for `Sharded<B>` and `Autodiff<Sharded<B>>`.

use crate::data;
use crate::exec::on_device_stream;
use crate::kind::{FloatKind, IntKind, Kind};
use crate::mesh::Mesh;
use crate::placement::Placement;
use crate::redistribute::{to_placement, to_shard};
use crate::tensor::ShardedTensor;
use crate::Sharded;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::Autodiff;
use burn_backend::{AutodiffBackend, Backend, BackendTypes, TensorMetadata, TensorPrimitive};
use burn_tensor::{Int, Tensor};
use firemesh_collective::stream;

/// Why a sharded tensor could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    #[error("cannot shard dim {dim} of a {rank}-dim tensor")]
    DimOutOfRange { dim: usize, rank: usize },
    #[error("dim {dim} has {len} rows, fewer than the {ranks} ranks of the mesh; use a larger batch or a smaller mesh")]
    TooFewRows {
        dim: usize,
        len: usize,
        ranks: usize,
    },
    #[error("dim {dim} has {len} rows, which do not split into equal shares for the {processes} processes of the world")]
    UnevenProcesses {
        dim: usize,
        len: usize,
        processes: usize,
    },
    #[error("got {got} shards for a mesh of {ranks} ranks")]
    WrongShardCount { got: usize, ranks: usize },
    #[error("shard {rank} is on {found}, but rank {rank} of the mesh is {expected}")]
    WrongDevice {
        rank: usize,
        found: String,
        expected: String,
    },
    #[error("shard {rank} has shape {found:?}, which does not match shard 0's {expected:?} (outside the sharded dim)")]
    ShapeMismatch {
        rank: usize,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
}

/// A backend whose tensors live on a mesh: `Sharded<B>`, and `Autodiff` over it.
pub trait MeshBackend: Backend<Device = Mesh<<Self::Inner as BackendTypes>::Device>> {
    /// The backend each rank runs.
    type Inner: Backend;
    /// The sharded value of a float tensor (not tracked by autodiff).
    fn float_sharded(
        t: burn_backend::tensor::FloatTensor<Self>,
    ) -> ShardedTensor<Self::Inner, FloatKind>;
    fn float_from_sharded(
        t: ShardedTensor<Self::Inner, FloatKind>,
    ) -> burn_backend::tensor::FloatTensor<Self>;
    fn int_sharded(t: burn_backend::tensor::IntTensor<Self>)
        -> ShardedTensor<Self::Inner, IntKind>;
    fn int_from_sharded(
        t: ShardedTensor<Self::Inner, IntKind>,
    ) -> burn_backend::tensor::IntTensor<Self>;
}

impl<B: Backend> MeshBackend for Sharded<B> {
    type Inner = B;
    fn float_sharded(t: ShardedTensor<B, FloatKind>) -> ShardedTensor<B, FloatKind> {
        t
    }
    fn float_from_sharded(t: ShardedTensor<B, FloatKind>) -> ShardedTensor<B, FloatKind> {
        t
    }
    fn int_sharded(t: ShardedTensor<B, IntKind>) -> ShardedTensor<B, IntKind> {
        t
    }
    fn int_from_sharded(t: ShardedTensor<B, IntKind>) -> ShardedTensor<B, IntKind> {
        t
    }
}

/// Placement changes through this API are not recorded by autodiff: use them on inputs
/// (batches, targets), not on tensors that need gradients.
impl<B: Backend, C: CheckpointStrategy> MeshBackend for Autodiff<Sharded<B>, C> {
    type Inner = B;
    fn float_sharded(t: burn_backend::tensor::FloatTensor<Self>) -> ShardedTensor<B, FloatKind> {
        Self::inner(t)
    }
    fn float_from_sharded(
        t: ShardedTensor<B, FloatKind>,
    ) -> burn_backend::tensor::FloatTensor<Self> {
        Self::from_inner(t)
    }
    fn int_sharded(t: burn_backend::tensor::IntTensor<Self>) -> ShardedTensor<B, IntKind> {
        Self::int_inner(t)
    }
    fn int_from_sharded(t: ShardedTensor<B, IntKind>) -> burn_backend::tensor::IntTensor<Self> {
        Self::int_from_inner(t)
    }
}

fn float_of<Bk: MeshBackend, const D: usize>(
    t: Tensor<Bk, D>,
) -> ShardedTensor<Bk::Inner, FloatKind> {
    Bk::float_sharded(t.into_primitive().tensor())
}

fn float_tensor<Bk: MeshBackend, const D: usize>(
    t: ShardedTensor<Bk::Inner, FloatKind>,
) -> Tensor<Bk, D> {
    Tensor::from_primitive(TensorPrimitive::Float(Bk::float_from_sharded(t)))
}

fn check_rows<D: burn_backend::DeviceOps>(
    shape: &[usize],
    dim: usize,
    mesh: &Mesh<D>,
) -> Result<(), ShardError> {
    let len = *shape.get(dim).ok_or(ShardError::DimOutOfRange {
        dim,
        rank: shape.len(),
    })?;
    let ranks = mesh.world_len();
    if len < ranks {
        return Err(ShardError::TooFewRows { dim, len, ranks });
    }
    let processes = mesh.processes();
    if !len.is_multiple_of(processes) {
        return Err(ShardError::UnevenProcesses {
            dim,
            len,
            processes,
        });
    }
    Ok(())
}

/// `t` split along `dim` over the ranks of its mesh, as evenly as possible (the first ranks
/// get one more row when the length does not divide). In a world of processes
/// ([`Mesh::in_world`]) over the world's ranks, each process the same share.
pub fn shard<Bk: MeshBackend, const D: usize>(
    t: Tensor<Bk, D>,
    dim: usize,
) -> Result<Tensor<Bk, D>, ShardError> {
    let s = float_of(t);
    check_rows(&s.shape(), dim, &s.mesh)?;
    Ok(float_tensor(on_device_stream::<Bk::Inner, _>(|| {
        to_shard(s, dim, None)
    })))
}

/// [`shard`] for int tensors (class targets, token ids).
pub fn shard_int<Bk: MeshBackend, const D: usize>(
    t: Tensor<Bk, D, Int>,
    dim: usize,
) -> Result<Tensor<Bk, D, Int>, ShardError> {
    let s = Bk::int_sharded(t.into_primitive());
    check_rows(&s.shape(), dim, &s.mesh)?;
    let s = on_device_stream::<Bk::Inner, _>(|| to_shard(s, dim, None));
    Ok(Tensor::from_primitive(Bk::int_from_sharded(s)))
}

/// A tensor sharded along `dim` from one part per rank, each already on its rank's device
/// (what a rank-aware data loader produces). In a world of processes ([`Mesh::in_world`]),
/// this process's ranks' blocks, of the sizes every other process gives
/// ([`shard_sizes`]).
pub fn from_shards<Bk: MeshBackend, const D: usize>(
    mesh: &Mesh<<Bk::Inner as BackendTypes>::Device>,
    shards: Vec<Tensor<Bk::Inner, D>>,
    dim: usize,
) -> Result<Tensor<Bk, D>, ShardError> {
    from_parts(mesh, shards, Placement::Shard(dim))
}

/// A tensor from one part per rank with any placement: for `Partial`, the parts are addends of
/// one shape; for `Replicated`, identical copies; for `Shard(d)`, blocks along `d`.
pub fn from_parts<Bk: MeshBackend, const D: usize>(
    mesh: &Mesh<<Bk::Inner as BackendTypes>::Device>,
    parts: Vec<Tensor<Bk::Inner, D>>,
    placement: Placement,
) -> Result<Tensor<Bk, D>, ShardError> {
    let parts: Vec<_> = parts
        .into_iter()
        .map(|t| t.into_primitive().tensor())
        .collect();
    let free_dim = match placement {
        Placement::Shard(d) => Some(d),
        _ => None,
    };
    check_parts::<Bk::Inner, FloatKind>(mesh, &parts, free_dim)?;
    Ok(float_tensor(ShardedTensor::new(
        handed_over::<Bk::Inner, FloatKind>(parts, mesh),
        placement,
        mesh.clone(),
    )))
}

/// [`from_shards`] for int tensors.
pub fn from_shards_int<Bk: MeshBackend, const D: usize>(
    mesh: &Mesh<<Bk::Inner as BackendTypes>::Device>,
    shards: Vec<Tensor<Bk::Inner, D, Int>>,
    dim: usize,
) -> Result<Tensor<Bk, D, Int>, ShardError> {
    let parts: Vec<_> = shards.into_iter().map(|t| t.into_primitive()).collect();
    check_parts::<Bk::Inner, IntKind>(mesh, &parts, Some(dim))?;
    let parts = handed_over::<Bk::Inner, IntKind>(parts, mesh);
    let t = ShardedTensor::new(parts, Placement::Shard(dim), mesh.clone());
    Ok(Tensor::from_primitive(Bk::int_from_sharded(t)))
}

/// The parts a caller made, each on the device stream of its device: a part made on another
/// CubeCL stream is read back and uploaded there, the one handoff between streams for parts
/// (`firemesh_collective::stream`).
fn handed_over<B: Backend, K: Kind<B>>(parts: Vec<K::P>, mesh: &Mesh<B::Device>) -> Vec<K::P> {
    on_device_stream::<B, _>(|| {
        parts
            .into_iter()
            .enumerate()
            .map(|(rank, p)| {
                if !stream::is_foreign_primitive(&p) {
                    return p;
                }
                stream::record_handoff(1, "a part given to Sharded");
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::warn!(
                        target: "firemesh::stream",
                        "parts made on another CubeCL stream are copied to the device stream \
                         through host memory; make them under firemesh_collective::DeviceStream::run"
                    )
                });
                K::from_data(K::into_data(p), mesh.device(rank))
            })
            .collect()
    })
}

/// One part per rank, each on its rank's device, with one shape except along `free_dim` (the
/// sharded dim; `None`: the same shape everywhere).
fn check_parts<B: Backend, K: crate::kind::Kind<B>>(
    mesh: &Mesh<B::Device>,
    parts: &[K::P],
    free_dim: Option<usize>,
) -> Result<(), ShardError> {
    if parts.len() != mesh.len() {
        return Err(ShardError::WrongShardCount {
            got: parts.len(),
            ranks: mesh.len(),
        });
    }
    let first = parts[0].shape().to_vec();
    if let Some(dim) = free_dim.filter(|d| *d >= first.len()) {
        return Err(ShardError::DimOutOfRange {
            dim,
            rank: first.len(),
        });
    }
    for (rank, p) in parts.iter().enumerate() {
        let (found, expected) = (K::device(p), mesh.device(rank));
        if found != *expected {
            let (found, expected) = (format!("{found:?}"), format!("{expected:?}"));
            return Err(ShardError::WrongDevice {
                rank,
                found,
                expected,
            });
        }
        let shape = p.shape().to_vec();
        let same = shape.len() == first.len()
            && shape
                .iter()
                .zip(&first)
                .enumerate()
                .all(|(i, (a, b))| Some(i) == free_dim || a == b);
        if !same {
            return Err(ShardError::ShapeMismatch {
                rank,
                found: shape,
                expected: first,
            });
        }
    }
    Ok(())
}

/// The placement of a float tensor.
pub fn placement<Bk: MeshBackend, const D: usize>(t: &Tensor<Bk, D>) -> Placement {
    float_of(t.clone()).placement()
}

/// The placement of an int tensor.
pub fn placement_int<Bk: MeshBackend, const D: usize>(t: &Tensor<Bk, D, Int>) -> Placement {
    Bk::int_sharded(t.clone().into_primitive()).placement()
}

/// The same value with placement `p` (`Shard` splits evenly). In a world of processes
/// ([`Mesh::in_world`]) a `Shard(d)` needs a dim whose length every process can hold an equal
/// share of; any other panics.
pub fn redistribute<Bk: MeshBackend, const D: usize>(
    t: Tensor<Bk, D>,
    p: Placement,
) -> Tensor<Bk, D> {
    let t = float_of(t);
    float_tensor(on_device_stream::<Bk::Inner, _>(|| to_placement(t, p)))
}

/// Each rank's part, on its rank's device. The parts live on the device stream
/// (`firemesh_collective::stream`): issue work on them under
/// `firemesh_collective::DeviceStream::run`, or read them back, before you drop them.
pub fn shards<Bk: MeshBackend, const D: usize>(t: Tensor<Bk, D>) -> Vec<Tensor<Bk::Inner, D>> {
    let t = float_of(t);
    let parts = on_device_stream::<Bk::Inner, _>(|| t.into_parts());
    parts
        .into_iter()
        .map(|p| Tensor::from_primitive(TensorPrimitive::Float(p)))
        .collect()
}

/// The tensor's value as one tensor of the inner backend on `device` (gathered or summed over
/// the ranks as its placement requires).
pub fn to_inner<Bk: MeshBackend, const D: usize>(
    t: Tensor<Bk, D>,
    device: &<Bk::Inner as BackendTypes>::Device,
) -> Tensor<Bk::Inner, D> {
    let data = data::into_data::<Bk::Inner, FloatKind>(float_of(t));
    Tensor::from_data(data, device)
}

/// The block sizes of this process's ranks in an even split of `len` rows over the world
/// (over the mesh, without one), or why there is none.
pub fn shard_sizes<D: burn_backend::DeviceOps>(
    mesh: &Mesh<D>,
    len: usize,
) -> Result<Vec<usize>, ShardError> {
    check_rows(&[len], 0, mesh)?;
    Ok(crate::placement::local_split(len, mesh.len(), mesh.processes()).unwrap_or_default())
}
