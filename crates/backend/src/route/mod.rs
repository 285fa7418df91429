//! The one route for sums and gathers of parts across the ranks of a mesh, used by
//! redistribution (`Partial`→`Replicated`, `Shard`→`Replicated`) and by read-back alike:
//! - every rank on one device: summed or concatenated in place, the result shared;
//! - float parts on several devices: through the collective group registered on the mesh
//!   ([`Mesh::use_collectives`], e.g. a `firemesh_collective::Group` reducing in device memory
//!   with our CubeCL kernels), or else a `firemesh_collective::PortableGroup`;
//! - other kinds on several devices: through host memory;
//! - a mesh that is one process's share of a world of processes (`across.rs`): a sum inside
//!   the process (reduce-scattered by the group where there is one), then across the
//!   processes on one buffer per process (`across.rs`), then shared inside the process again
//!   (the group's all-gather); a gather: its ranks' parts across the processes on one buffer,
//!   then shared inside the process the same way; a reduce-scatter: through the group, then
//!   one all-to-all across the processes.

use crate::kind::{FloatKind, Kind};
use crate::mesh::Mesh;
use crate::stats;
use burn_backend::{Backend, Shape, Slice, TensorMetadata, TensorPrimitive};
use burn_tensor::Tensor;
use firemesh_collective::{CollectiveError, PortableGroup, ReduceOp, TensorCollectives};
use std::any::{Any, TypeId};
use std::ops::Range;
use std::sync::Arc;

pub use crate::stats::Route;

mod in_world;
mod placed;

pub(crate) use placed::gather_placed;

/// Which ranks need the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum To {
    EveryRank,
    /// Rank 0 only (reading a value back): the result is one part.
    FirstRank,
}

/// A sum or gather across the ranks, as a `tracing` span (target `firemesh::comm`, level
/// debug): the communication of a per-rank timeline, from when every rank's part is there.
fn comm_span(kind: &'static str, ranks: usize, elements: usize) -> tracing::span::EnteredSpan {
    tracing::debug_span!(target: "firemesh::comm", "comm", kind, ranks, elements).entered()
}

/// Sum and gather of one flat float tensor per rank, each on its rank's device: what a mesh
/// needs from a collective group ([`Mesh::use_collectives`]).
pub trait MeshCollectives<B: Backend>: Send + Sync + 'static {
    fn sum(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError>;
    fn gather(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError>;
    /// Every rank's part on every rank, in one flat tensor of `len` elements laid out by
    /// `places`: `places[r]` are the ranges rank r's part fills, its elements in order, not
    /// overlapping (`firemesh_collective::Collectives::all_gather_placed`).
    fn gather_placed(
        &self,
        parts: Vec<Tensor<B, 1>>,
        places: &[Vec<Range<usize>>],
        len: usize,
    ) -> Result<Vec<Tensor<B, 1>>, CollectiveError>;
    /// Rank r receives `lens[r]` elements of the sum, after those of the ranks before it.
    fn reduce_scatter(
        &self,
        parts: Vec<Tensor<B, 1>>,
        lens: &[usize],
    ) -> Result<Vec<Tensor<B, 1>>, CollectiveError>;
}

impl<B: Backend, G: TensorCollectives<B> + Send + Sync + 'static> MeshCollectives<B> for G {
    fn sum(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError> {
        self.all_reduce_tensors(parts, ReduceOp::Sum)
    }
    fn gather(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError> {
        self.all_gather_tensors(parts)
    }
    fn gather_placed(
        &self,
        parts: Vec<Tensor<B, 1>>,
        places: &[Vec<Range<usize>>],
        len: usize,
    ) -> Result<Vec<Tensor<B, 1>>, CollectiveError> {
        self.all_gather_placed_tensors(parts, places, len)
    }
    fn reduce_scatter(
        &self,
        parts: Vec<Tensor<B, 1>>,
        lens: &[usize],
    ) -> Result<Vec<Tensor<B, 1>>, CollectiveError> {
        self.reduce_scatter_flat_parts(parts, ReduceOp::Sum, lens)
    }
}

/// The sum of the parts (one addend per rank, one shape), summed in rank order so that every
/// rank holds the same bits.
pub(crate) fn sum<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    mesh: &Mesh<B::Device>,
    to: To,
) -> Vec<K::P> {
    let elements = parts[0].shape().num_elements();
    let _span = comm_span("sum", mesh.len(), elements);
    stats::summed(elements, elements * parts[0].dtype().size());
    let _clock = stats::comm_clock::<B>(mesh);
    if mesh.processes() > 1 {
        stats::route(Route::AcrossProcesses);
        return in_world::sum_in_world::<B, K>(parts, mesh, to);
    }
    match route::<B, K>(mesh).1 {
        Way::Moves => deliver::<B, K>(sum_on_rank_0::<B, K>(parts, mesh), mesh, to),
        Way::Group(group) => {
            let shape = parts[0].shape();
            let flats = float_parts::<B, K>(parts).map(|p| flat::<B>(p, shape.num_elements()));
            let sums = group_call("all-reduce", group.sum(flats.collect()));
            let sums = sums
                .into_iter()
                .map(|t| B::float_reshape(unflat(t), shape.clone()));
            kind_parts::<B, K>(take(sums, to))
        }
    }
}

/// The sum of the parts on rank 0's device, added in rank order.
fn sum_on_rank_0<B: Backend, K: Kind<B>>(parts: Vec<K::P>, mesh: &Mesh<B::Device>) -> K::P {
    let home = mesh.device(0);
    let mut it = parts.into_iter().map(|p| K::move_to(p, home));
    let first = it.next().expect("a mesh has at least one rank");
    it.fold(first, K::add)
}

/// The parts (blocks along `dim`) concatenated.
pub(crate) fn gather<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    dim: usize,
    mesh: &Mesh<B::Device>,
    to: To,
) -> Vec<K::P> {
    let elements = parts.iter().map(|p| p.shape().num_elements()).sum();
    let _span = comm_span("gather", mesh.len(), elements);
    let _clock = stats::comm_clock::<B>(mesh);
    if mesh.processes() > 1 {
        stats::route(Route::AcrossProcesses);
        return in_world::gather_in_world::<B, K>(parts, dim, mesh, to);
    }
    match route::<B, K>(mesh) {
        (Route::OneDevice, _) => deliver::<B, K>(K::cat(parts, dim), mesh, to),
        (_, Way::Moves) => {
            let devices = match to {
                To::EveryRank => mesh.devices(),
                To::FirstRank => &mesh.devices()[..1],
            };
            let on = |d: &B::Device| {
                K::cat(
                    parts.iter().map(|p| K::move_to(p.clone(), d)).collect(),
                    dim,
                )
            };
            devices.iter().map(on).collect()
        }
        (_, Way::Group(group)) => {
            // The sharded dim goes first, so that the flat blocks concatenate in order.
            let parts: Vec<_> = float_parts::<B, K>(parts)
                .map(|p| B::float_swap_dims(p, 0, dim))
                .collect();
            let mut shape = parts[0].shape();
            shape[0] = parts.iter().map(|p| p.shape()[0]).sum();
            let flats = parts.into_iter().map(|p| {
                let len = p.shape().num_elements();
                flat::<B>(p, len)
            });
            let wholes = group_call("all-gather", group.gather(flats.collect()));
            let wholes = wholes
                .into_iter()
                .map(|t| B::float_swap_dims(B::float_reshape(unflat(t), shape.clone()), 0, dim));
            kind_parts::<B, K>(take(wholes, to))
        }
    }
}

/// The sum of flat float parts (one addend per rank, of one length), rank r receiving the
/// `lens[r]` elements of it that follow those of the ranks before it. In a world, `lens` are
/// the world's ranks' (`in_world::reduce_scatter_in_world`).
pub(crate) fn reduce_scatter<B: Backend>(
    parts: Vec<B::FloatTensorPrimitive>,
    lens: &[usize],
    mesh: &Mesh<B::Device>,
) -> Vec<B::FloatTensorPrimitive> {
    let elements = parts[0].shape().num_elements();
    let _span = comm_span("reduce-scatter", mesh.len(), elements);
    stats::summed(elements, elements * parts[0].dtype().size());
    let _clock = stats::comm_clock::<B>(mesh);
    if mesh.processes() > 1 {
        stats::route(Route::AcrossProcesses);
        return in_world::reduce_scatter_in_world::<B>(parts, lens, mesh);
    }
    match route::<B, FloatKind>(mesh).1 {
        Way::Moves => to_ranks::<B>(sum_on_rank_0::<B, FloatKind>(parts, mesh), lens, mesh),
        Way::Group(group) => {
            let flats = parts.into_iter().map(|p| flat::<B>(p, elements));
            let out = group_call(
                "reduce-scatter",
                group.reduce_scatter(flats.collect(), lens),
            );
            out.into_iter().map(unflat).collect()
        }
    }
}

/// Rank r's `lens[r]` elements of flat `whole` (after those of the ranks before it), on its
/// device.
fn to_ranks<B: Backend>(
    whole: B::FloatTensorPrimitive,
    lens: &[usize],
    mesh: &Mesh<B::Device>,
) -> Vec<B::FloatTensorPrimitive> {
    let starts = crate::placement::offsets(lens);
    (lens.iter().zip(starts).zip(mesh.devices()))
        .map(|((&len, start), device)| {
            let range = [Slice::new(start as isize, Some((start + len) as isize), 1)];
            <FloatKind as Kind<B>>::move_to(B::float_slice(whole.clone(), &range), device)
        })
        .collect()
}

/// How parts on a mesh are summed or gathered.
enum Way<B: Backend> {
    /// On their devices' host-side handles: in place on one device, through host memory
    /// between devices.
    Moves,
    Group(Arc<dyn MeshCollectives<B>>),
}

/// The route for `K` parts on `mesh` (counted).
fn route<B: Backend, K: Kind<B>>(mesh: &Mesh<B::Device>) -> (Route, Way<B>) {
    let float = TypeId::of::<K>() == TypeId::of::<FloatKind>();
    let (route, way) = match (mesh.single_device(), float, mesh.collectives::<B>()) {
        (true, _, _) => (Route::OneDevice, Way::Moves),
        (false, false, _) => (Route::ThroughHost, Way::Moves),
        (false, true, Some(group)) => (Route::MeshGroup, Way::Group(group)),
        (false, true, None) => {
            let portable = PortableGroup::<B>::new_shared(mesh.devices().to_vec())
                .expect("a mesh has at least one rank");
            (Route::PortableGroup, Way::Group(Arc::new(portable)))
        }
    };
    stats::route(route);
    (route, way)
}

/// One result for every rank (the same handle where ranks share a device, a copy otherwise),
/// or for rank 0 only.
fn deliver<B: Backend, K: Kind<B>>(whole: K::P, mesh: &Mesh<B::Device>, to: To) -> Vec<K::P> {
    match to {
        To::FirstRank => vec![whole],
        To::EveryRank => mesh
            .devices()
            .iter()
            .map(|d| K::move_to(whole.clone(), d))
            .collect(),
    }
}

fn take<T>(all: impl Iterator<Item = T>, to: To) -> Vec<T> {
    match to {
        To::EveryRank => all.collect(),
        To::FirstRank => all.take(1).collect(),
    }
}

fn flat<B: Backend>(p: B::FloatTensorPrimitive, len: usize) -> Tensor<B, 1> {
    Tensor::from_primitive(TensorPrimitive::Float(B::float_reshape(
        p,
        Shape::new([len]),
    )))
}

/// `len` elements of the flat tensor `flat` (of `whole` elements) from `start`: the tensor
/// itself where that is all of it, else a slice (a view where the backend makes one).
pub(crate) fn piece<B: Backend>(
    flat: &B::FloatTensorPrimitive,
    whole: usize,
    start: usize,
    len: usize,
) -> B::FloatTensorPrimitive {
    if start == 0 && len == whole {
        return flat.clone();
    }
    let range = [Slice::new(start as isize, Some((start + len) as isize), 1)];
    B::float_slice(flat.clone(), &range)
}

/// The pieces `pieces` end to end along dim 0: the piece itself where there is one.
pub(crate) fn joined<B: Backend>(
    mut pieces: Vec<B::FloatTensorPrimitive>,
) -> B::FloatTensorPrimitive {
    match pieces.len() {
        1 => pieces.pop().expect("one piece"),
        _ => B::float_cat(pieces, 0),
    }
}

fn unflat<B: Backend>(t: Tensor<B, 1>) -> B::FloatTensorPrimitive {
    t.into_primitive().tensor()
}

fn group_call<T>(what: &str, result: Result<T, CollectiveError>) -> T {
    result.unwrap_or_else(|e| panic!("firemesh: {what} across the mesh failed: {e}"))
}

/// `K` parts as float parts; only called on the group routes, which `route` takes for
/// `FloatKind` alone.
fn float_parts<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
) -> impl Iterator<Item = B::FloatTensorPrimitive> {
    parts.into_iter().map(cast::<K::P, B::FloatTensorPrimitive>)
}

fn kind_parts<B: Backend, K: Kind<B>>(parts: Vec<B::FloatTensorPrimitive>) -> Vec<K::P> {
    parts
        .into_iter()
        .map(cast::<B::FloatTensorPrimitive, K::P>)
        .collect()
}

fn cast<From: 'static, To: 'static>(x: From) -> To {
    match (Box::new(x) as Box<dyn Any>).downcast::<To>() {
        Ok(x) => *x,
        Err(_) => unreachable!("the group routes carry float parts only"),
    }
}

/// The mesh's collective groups: set by the user, read by [`route`].
impl<D: burn_backend::DeviceOps> Mesh<D> {
    /// Sums and gathers of float tensors across this mesh's devices go through `group` (for
    /// example a `firemesh_collective::Group` over the same CubeCL devices, which reduces in
    /// device memory) instead of the portable default. Shared by every handle to this mesh.
    pub fn use_collectives<B>(&self, group: impl MeshCollectives<B>)
    where
        B: burn_backend::Backend<Device = D>,
    {
        let group: Arc<dyn MeshCollectives<B>> = Arc::new(group);
        self.register(group);
    }

    /// The group registered with [`Mesh::use_collectives`] for backend `B`.
    pub fn collectives<B>(&self) -> Option<Arc<dyn MeshCollectives<B>>>
    where
        B: burn_backend::Backend<Device = D>,
    {
        self.registered_value::<Arc<dyn MeshCollectives<B>>>()
    }
}
