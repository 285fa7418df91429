//! The tensor of `Sharded<B>`: one inner tensor per rank and a placement, or a random draw that
//! no op has used yet (see `draw.rs`). Reading a tensor never changes it: pending draws
//! are taken in one place, [`ShardedTensor::drawn`], which the executor calls.

mod clones;
mod parameter;

use clones::Shared;
pub(crate) use clones::ViewOf;
pub(crate) use parameter::CastSlot;

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::origin::Origin;
use crate::part::Part;
use crate::pending::Pending;
use crate::placement::Placement;
use burn_backend::quantization::QuantScheme;
use burn_backend::{Backend, DType, QTensorPrimitive, Shape, TensorMetadata};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

/// One inner tensor per rank of `mesh`, laid out as its placement says. `K` is the tensor kind
/// (float, int, bool, quantized).
pub struct ShardedTensor<B: Backend, K: Kind<B>> {
    state: State<B, K>,
    pub(crate) mesh: Mesh<B::Device>,
    /// This value in the form its readers take, shared with its clones: made when a `Partial`
    /// tensor or one held narrow is first cloned, filled by the first clone to be summed or
    /// widened (see [`Shared`]).
    shared: OnceLock<Shared<K::P>>,
    /// What few tensors carry: parameters, their views and casts, and views of tensors held
    /// narrow (see [`Rare`]); `None` on every other tensor, which stays small.
    rare: Option<Box<Rare<B, K>>>,
    /// Float only, set when the parts hold a narrower float dtype (bf16, f16) whose values the
    /// tensor presents as f32, exactly (results computed in that dtype, see `crate::autocast`):
    /// the op that widens them, which every read of the parts runs first
    /// ([`ShardedTensor::into_issued`]).
    widen: Option<fn(Self) -> Self>,
    /// A name this value shares with its clones, given when it is first cloned (0: never
    /// cloned): autocast finds by it a cast one clone made that another reads again
    /// (`crate::autocast`). Values are never changed in place, so clones hold equal values.
    clone_name: AtomicU64,
}

/// What few tensors carry, kept apart from the rest of [`ShardedTensor`] so that the tensors
/// most ops make and read stay small. Kept by clones.
struct Rare<B: Backend, K: Kind<B>> {
    /// Set on a parameter by the loop that trains it ([`ShardedTensor::mark_parameter`]):
    /// where autocast finds the parameter's narrow copy (see [`CastSlot`]).
    cast: Option<CastSlot<K::P>>,
    /// Float only, on a parameter marked with its place in its model
    /// ([`ShardedTensor::mark_parameter_at`]) and on the views and casts of it that keep it
    /// sharded: which parameter it comes from and how, so that ZeRO-3 can gather it ahead of
    /// use (`crate::gathers`).
    origin: Option<Arc<Origin>>,
    /// Float only, on a layout op's view of a tensor held narrow that has clones (BatchNorm
    /// reads its input's transpose for the mean, then the input): where this view's widening
    /// leaves the tensor it views widened, for those clones (see [`ViewOf`]).
    view_of: Option<Arc<ViewOf<B, K>>>,
}

impl<B: Backend, K: Kind<B>> Default for Rare<B, K> {
    fn default() -> Self {
        Self {
            cast: None,
            origin: None,
            view_of: None,
        }
    }
}

impl<B: Backend, K: Kind<B>> Clone for Rare<B, K> {
    fn clone(&self) -> Self {
        Self {
            cast: self.cast.clone(),
            origin: self.origin.clone(),
            view_of: self.view_of.clone(),
        }
    }
}

/// A tensor taken apart: its parts (possibly still being computed on rank threads), its
/// placement and its mesh.
pub(crate) type Issued<P, D> = (Vec<Part<P>>, Placement, Mesh<D>);

enum State<B: Backend, K: Kind<B>> {
    Ready {
        parts: Vec<Part<K::P>>,
        placement: Placement,
    },
    /// Not drawn yet, or drawn through a clone. Clones share the draw, so every use sees the
    /// same values.
    Pending(Arc<Pending<B, K>>),
}

impl<B: Backend, K: Kind<B>> ShardedTensor<B, K> {
    /// Parts must be one per rank, in rank order, consistent with `placement` (the caller's duty;
    /// the public constructors in `api.rs` check it).
    pub(crate) fn new(parts: Vec<K::P>, placement: Placement, mesh: Mesh<B::Device>) -> Self {
        Self::issued(
            parts.into_iter().map(Part::Ready).collect(),
            placement,
            mesh,
        )
    }

    /// As [`ShardedTensor::new`], with parts that rank threads may still be computing.
    pub(crate) fn issued(
        parts: Vec<Part<K::P>>,
        placement: Placement,
        mesh: Mesh<B::Device>,
    ) -> Self {
        debug_assert_eq!(parts.len(), mesh.len(), "one part per rank");
        Self {
            state: State::Ready { parts, placement },
            mesh,
            shared: OnceLock::new(),
            rare: None,
            widen: None,
            clone_name: AtomicU64::new(0),
        }
    }

    /// A tensor drawn when an op first uses it.
    pub(crate) fn pending(pending: Pending<B, K>, mesh: Mesh<B::Device>) -> Self {
        Self {
            state: State::Pending(Arc::new(pending)),
            mesh,
            shared: OnceLock::new(),
            rare: None,
            widen: None,
            clone_name: AtomicU64::new(0),
        }
    }

    /// The tensor with its parts drawn: as the blocks of `Shard(dim)` with the given sizes when
    /// `blocks` says so (and the shape fits), whole (`Replicated`) otherwise. Tensors already
    /// drawn are returned as they are. The only place where a pending draw is taken.
    pub(crate) fn drawn(self, blocks: Option<(usize, &[usize])>) -> Self {
        let State::Pending(pending) = self.state else {
            return self;
        };
        let (parts, placement) = pending.take(&self.mesh, blocks);
        Self::new(parts.to_vec(), *placement, self.mesh)
    }

    /// Whether this is a random draw that no op has taken yet.
    pub(crate) fn is_undrawn(&self) -> bool {
        matches!(&self.state, State::Pending(p) if p.taken().is_none())
    }

    /// The placement. A draw no op has taken yet is `Replicated`: it is drawn whole unless an op
    /// asks for its blocks first.
    pub fn placement(&self) -> Placement {
        match &self.state {
            State::Ready { placement, .. } => *placement,
            State::Pending(p) => p
                .taken()
                .map_or(Placement::Replicated, |(_, placement)| *placement),
        }
    }

    pub fn mesh(&self) -> &Mesh<B::Device> {
        &self.mesh
    }

    /// The shape of every rank's part. Only for drawn tensors: callers take pending draws first
    /// ([`ShardedTensor::drawn`]).
    fn part_shapes(&self) -> Vec<Shape> {
        match &self.state {
            State::Ready { parts, .. } => parts.iter().map(Part::shape).collect(),
            State::Pending(p) => p
                .taken()
                .map(|(parts, _)| parts.iter().map(TensorMetadata::shape).collect())
                .expect("firemesh: internal error: a random draw was read before it was drawn"),
        }
    }

    /// The parts, the placement and the mesh, taken apart (the tensor is drawn first, and parts
    /// that rank threads are computing are waited for).
    pub(crate) fn into_split(self) -> (Vec<K::P>, Placement, Mesh<B::Device>) {
        let (parts, placement, mesh) = self.into_issued();
        (
            parts.into_iter().map(Part::into_value).collect(),
            placement,
            mesh,
        )
    }

    /// As [`ShardedTensor::into_split`], without waiting for rank threads. A tensor held narrow
    /// is widened to the f32 it presents first.
    pub(crate) fn into_issued(mut self) -> Issued<K::P, B::Device> {
        if let Some(widen) = self.widen.take() {
            return self.widened_once(widen);
        }
        let Self { state, mesh, .. } = self.drawn(None);
        match state {
            State::Ready { parts, placement } => (parts, placement, mesh),
            State::Pending(_) => unreachable!("drawn tensors are ready"),
        }
    }

    pub(crate) fn into_parts(self) -> Vec<K::P> {
        self.into_split().0
    }

    /// The dtype its parts are held in, where that is narrower than the f32 it presents.
    pub(crate) fn held_narrow(&self) -> Option<DType> {
        self.widen.is_some().then(|| self.first_ready().dtype())
    }

    /// Presents parts computed in a narrower float dtype (bf16, f16) as f32, without widening
    /// them until they are read, by `widen` (see `held_narrow`); other tensors stay as they are.
    pub(crate) fn presented_as_f32(mut self, widen: fn(Self) -> Self) -> Self {
        let dtype = self.first_part().map(TensorMetadata::dtype);
        self.widen = matches!(dtype, Some(DType::BF16 | DType::F16)).then_some(widen);
        self
    }

    /// The tensor as its parts are held: a tensor held narrow in its narrow dtype, unwidened.
    pub(crate) fn into_held(mut self) -> Self {
        self.widen = None;
        self
    }

    /// The bytes each rank holds of this tensor (a draw no op has taken yet: the whole tensor
    /// on every rank).
    pub fn bytes_per_rank(&self) -> Vec<usize> {
        let size = self.held_narrow().unwrap_or_else(|| self.dtype()).size();
        match &self.state {
            State::Pending(p) if p.taken().is_none() => {
                vec![self.shape().num_elements() * size; self.mesh.len()]
            }
            _ => self
                .part_shapes()
                .iter()
                .map(|s| s.num_elements() * size)
                .collect(),
        }
    }

    /// The sizes of the blocks along the sharded dim, of every rank of the world (`None` unless
    /// `Shard`).
    pub fn shard_sizes(&self) -> Option<Vec<usize>> {
        match self.placement() {
            Placement::Shard(d) => {
                let local = self.part_shapes().iter().map(|s| s[d]).collect();
                Some(crate::placement::world_blocks(local, self.mesh.processes()))
            }
            _ => None,
        }
    }

    /// The first rank's part, or `None` for a draw no op has taken yet. Rank 0's part is
    /// always computed on the issuing thread, so it never waits.
    pub(crate) fn first_part(&self) -> Option<&K::P> {
        match &self.state {
            State::Ready { parts, .. } => parts.first().and_then(Part::ready),
            State::Pending(p) => p.taken().and_then(|(parts, _)| parts.first()),
        }
    }

    /// The rare fields, made now where the tensor had none.
    fn rare_mut(&mut self) -> &mut Rare<B, K> {
        self.rare.get_or_insert_with(Box::default)
    }

    fn first_ready(&self) -> &K::P {
        self.first_part()
            .expect("firemesh: internal error: rank 0's part is computed where it is issued")
    }
}

impl<B: Backend, K: Kind<B>> Clone for ShardedTensor<B, K> {
    fn clone(&self) -> Self {
        let state = match &self.state {
            State::Ready { parts, placement } => State::Ready {
                parts: parts.clone(),
                placement: *placement,
            },
            State::Pending(p) => State::Pending(p.clone()),
        };
        let shared = OnceLock::new();
        if self.placement() == Placement::Partial || self.widen.is_some() {
            let _ = shared.set(self.shared.get_or_init(Shared::default).clone());
        }
        Self {
            state,
            mesh: self.mesh.clone(),
            shared,
            rare: self.rare.clone(),
            widen: self.widen,
            clone_name: AtomicU64::new(self.clone_name()),
        }
    }
}

impl<B: Backend, K: Kind<B>> core::fmt::Debug for ShardedTensor<B, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShardedTensor")
            .field("shape", &self.shape())
            .field("placement", &self.placement())
            .field("undrawn", &self.is_undrawn())
            .field("held_narrow", &self.held_narrow())
            .field("mesh", &self.mesh)
            .finish()
    }
}

impl<B: Backend, K: Kind<B>> TensorMetadata for ShardedTensor<B, K> {
    fn dtype(&self) -> DType {
        if self.widen.is_some() {
            return DType::F32;
        }
        match &self.state {
            State::Ready { .. } => self.first_ready().dtype(),
            State::Pending(p) => p.dtype(),
        }
    }

    /// The global shape: a `Shard(d)` tensor's dim `d` is the sum of its blocks, over every
    /// process of the world (each holds blocks of the same sizes, `across.rs`).
    fn shape(&self) -> Shape {
        match &self.state {
            State::Pending(p) => p.shape().clone(),
            State::Ready { parts, placement } => {
                let mut shape = parts[0].shape();
                if let Placement::Shard(d) = *placement {
                    shape[d] =
                        parts.iter().map(|p| p.shape()[d]).sum::<usize>() * self.mesh.processes();
                }
                shape
            }
        }
    }

    fn rank(&self) -> usize {
        self.shape().num_dims()
    }
}

/// Quantized tensors are never random draws, so their first part is always there.
impl<B: Backend, K: Kind<B>> QTensorPrimitive for ShardedTensor<B, K>
where
    K::P: QTensorPrimitive,
{
    fn scheme(&self) -> &QuantScheme {
        self.first_ready().scheme()
    }

    fn acc_precision(&self) -> burn_std::quantization::QuantAcc {
        self.first_ready().acc_precision()
    }

    fn propagation(&self) -> burn_std::quantization::QuantPropagation {
        self.first_ready().propagation()
    }

    fn default_scheme() -> QuantScheme {
        K::P::default_scheme()
    }
}
