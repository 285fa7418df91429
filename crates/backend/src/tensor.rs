//! The tensor of `Sharded<B>`: one inner tensor per rank and a placement, or a random draw that
//! no op has used yet (see `draw.rs`). Reading a tensor never changes it: pending draws
//! are taken in one place, [`ShardedTensor::drawn`], which the executor calls.

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::origin::{Layout, Origin};
use crate::part::Part;
use crate::pending::Pending;
use crate::placement::Placement;
use burn_backend::quantization::QuantScheme;
use burn_backend::{Backend, DType, QTensorPrimitive, Shape, TensorMetadata};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// One inner tensor per rank of `mesh`, laid out as its placement says. `K` is the tensor kind
/// (float, int, bool, quantized).
pub struct ShardedTensor<B: Backend, K: Kind<B>> {
    state: State<B, K>,
    pub(crate) mesh: Mesh<B::Device>,
    /// This value in the form its readers take, shared with its clones: made when a `Partial`
    /// tensor or one held narrow is first cloned, filled by the first clone to be summed or
    /// widened (see [`Shared`]).
    shared: OnceLock<Shared<K::P>>,
    /// Set on a parameter by the loop that trains it ([`ShardedTensor::mark_parameter`]) and
    /// kept by its clones: where autocast finds the parameter's narrow copy (see [`CastSlot`]).
    cast: Option<CastSlot<K::P>>,
    /// Float only, on a parameter marked with its place in its model
    /// ([`ShardedTensor::mark_parameter_at`]) and on the views and casts of it that keep it
    /// sharded: which parameter it comes from and how, so that ZeRO-3 can gather it ahead of
    /// use (`crate::gathers`). Kept by clones.
    origin: Option<Arc<Origin>>,
    /// Float only, set when the parts hold a narrower float dtype (bf16, f16) whose values the
    /// tensor presents as f32, exactly (results computed in that dtype, see `crate::autocast`):
    /// the op that widens them, which every read of the parts runs first
    /// ([`ShardedTensor::into_issued`]).
    widen: Option<fn(Self) -> Self>,
    /// Float only, on a layout op's view of a tensor held narrow that has clones (BatchNorm
    /// reads its input's transpose for the mean, then the input): where this view's widening
    /// leaves the tensor it views widened, for those clones (see [`ViewOf`]).
    view_of: Option<Arc<ViewOf<B, K>>>,
    /// A name this value shares with its clones, given when it is first cloned (0: never
    /// cloned): autocast finds by it a cast one clone made that another reads again
    /// (`crate::autocast`). Values are never changed in place, so clones hold equal values.
    clone_name: AtomicU64,
}

/// The next name [`ShardedTensor::clone_name`] gives.
static CLONE_NAMES: AtomicU64 = AtomicU64::new(1);

/// A value as its readers take it, one part per rank and its placement, worked out once for
/// every clone of it: the sum of a `Partial` value (`Replicated`, or `Shard(0)` where it was
/// reduce-scattered: ZeRO-1's early buckets), or a tensor held narrow widened to f32. Burn's
/// BatchNorm reads its input twice (to centre it for the variance, and in the output) and its
/// batch mean twice: without it, a mean was summed across the ranks, and a convolution's
/// output held narrow widened, once per read. The widened copy lives as long as a clone of the
/// narrow tensor does (where autodiff saves the narrow tensor, until its backward op ran).
type Shared<P> = Arc<SharedValue<P>>;

/// What a [`Shared`] slot holds once filled: the parts and their placement.
type SharedValue<P> = OnceLock<(Vec<Part<P>>, Placement)>;

/// The tensor a view held narrow was made from, as far as its widening concerns it: the
/// viewed tensor's [`Shared`] slot, held weakly (a widening is left there only while a clone
/// of the viewed tensor lives to read it), and the layout ops that take the view back to it.
/// The view's widened parts go back through them (reshapes and transposes of f32 parts: no
/// cast, and no copy where the inner backend keeps strides) and fill the slot, so that the
/// viewed tensor is not widened a second time.
pub(crate) struct ViewOf<B: Backend, K: Kind<B>> {
    slot: Weak<SharedValue<K::P>>,
    placement: Placement,
    shape: Shape,
    back: Vec<Layout>,
    run_back: RunBack<B, K>,
}

/// Runs layout ops on a tensor, in order (`crate::autocast` gives it).
type RunBack<B, K> = fn(ShardedTensor<B, K>, &[Layout]) -> ShardedTensor<B, K>;

/// A parameter's narrow copy, made by autocast (`crate::autocast`) for every clone of it. A
/// parameter is read by its layer's product in the forward pass and again in the backward pass
/// (through the clone autodiff saved): cast once per step, as AMP's cast cache casts leaf
/// tensors once per autocast region. The slot holds the copy weakly: the autocast setting in
/// force when it was made owns it (`runtime::armed::keep_while_autocast`), so it is freed when
/// the step's scope ends, however long the parameter lives (a frozen one, all run).
/// Activations are not marked: their copies would live beside the f32 tensors autodiff saves.
/// A sharded parameter (ZeRO-3) shares the cast of its blocks, which the op reading it gathers.
pub(crate) type CastSlot<P> = Arc<Mutex<Weak<NarrowCopy<P>>>>;

/// An f32 tensor's parts cast to `dtype`, in its placement (`Replicated`, or a sharded
/// parameter's blocks).
pub(crate) struct NarrowCopy<P: 'static> {
    dtype: DType,
    placement: Placement,
    parts: Vec<Part<P>>,
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
            cast: None,
            origin: None,
            widen: None,
            view_of: None,
            clone_name: AtomicU64::new(0),
        }
    }

    /// A tensor drawn when an op first uses it.
    pub(crate) fn pending(pending: Pending<B, K>, mesh: Mesh<B::Device>) -> Self {
        Self {
            state: State::Pending(Arc::new(pending)),
            mesh,
            shared: OnceLock::new(),
            cast: None,
            origin: None,
            widen: None,
            view_of: None,
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

    /// A `Partial` tensor whose sum a clone of it has already computed, as that sum
    /// (`Replicated`, or `Shard(0)` where it was reduce-scattered); every other tensor as it is.
    pub(crate) fn with_known_sum(mut self) -> Self {
        self.use_known_sum();
        self
    }

    /// As [`ShardedTensor::with_known_sum`], in place: nothing moves unless a sum is known.
    pub(crate) fn use_known_sum(&mut self) {
        if self.placement() != Placement::Partial {
            return;
        }
        if let Some((parts, placement)) = self.shared.get().and_then(|s| s.get()) {
            crate::stats::sum_reused();
            *self = Self::issued(parts.clone(), *placement, self.mesh.clone());
        }
    }

    /// Where to leave this tensor's sum (a `Partial` one) or widening (one held narrow) for
    /// its clones: `None` when no clone of it is alive (nothing would read it).
    pub(crate) fn shared_with_clones(&self) -> Option<Shared<K::P>> {
        self.shared
            .get()
            .filter(|s| Arc::strong_count(s) > 1)
            .cloned()
    }

    /// Whether this is a `Partial` tensor with a clone alive: summing either fills both.
    pub(crate) fn has_live_clones(&self) -> bool {
        self.placement() == Placement::Partial && self.shared_with_clones().is_some()
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

    /// This tensor held narrow widened by `widen`, once for all its clones: the first to be
    /// read widens it and leaves the f32 parts for the others.
    fn widened_once(mut self, widen: fn(Self) -> Self) -> Issued<K::P, B::Device> {
        if let Some((parts, placement)) = self.shared.get().and_then(|s| s.get()) {
            crate::stats::widening_reused();
            return (parts.clone(), *placement, self.mesh);
        }
        let shared = self.shared_with_clones();
        let view_of = self.view_of.take();
        let (parts, placement, mesh) = widen(self).into_issued();
        if let Some(shared) = shared {
            let _ = shared.set((parts.clone(), placement));
        }
        if let Some(view_of) = view_of {
            view_of.leave_widened(&parts, placement, &mesh);
        }
        (parts, placement, mesh)
    }

    /// What a layout op `op` on this tensor held narrow leaves its view (which it is then given
    /// by [`ShardedTensor::set_view_of`]) so that the view's widening serves this tensor's
    /// clones too: `None` where no clone of this tensor lives. `back` is the layout op that
    /// takes the view back to this tensor; `run_back` runs such ops.
    pub(crate) fn view_link(
        &self,
        back: impl FnOnce() -> Layout,
        run_back: RunBack<B, K>,
    ) -> Option<Arc<ViewOf<B, K>>> {
        if let Some(view_of) = &self.view_of {
            // A view of a view: back to this view, then back to the tensor it views.
            let mut chained = vec![back()];
            chained.extend(view_of.back.iter().cloned());
            return Some(Arc::new(ViewOf {
                slot: view_of.slot.clone(),
                placement: view_of.placement,
                shape: view_of.shape.clone(),
                back: chained,
                run_back,
            }));
        }
        let slot = self.shared.get()?;
        Some(Arc::new(ViewOf {
            slot: Arc::downgrade(slot),
            placement: self.placement(),
            shape: self.shape(),
            back: vec![back()],
            run_back,
        }))
    }

    /// The name this value shares with its clones, given now if it has none.
    fn clone_name(&self) -> u64 {
        let name = self.clone_name.load(Ordering::Relaxed);
        if name != 0 {
            return name;
        }
        let new = CLONE_NAMES.fetch_add(1, Ordering::Relaxed);
        match self
            .clone_name
            .compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => new,
            Err(given) => given,
        }
    }

    /// The name this value shares with its clones; `None` where it was never cloned (then no
    /// other tensor holds it).
    pub(crate) fn cloned_as(&self) -> Option<u64> {
        Some(self.clone_name.load(Ordering::Relaxed)).filter(|&name| name != 0)
    }

    /// Marks this tensor held narrow as the view [`ShardedTensor::view_link`] described.
    pub(crate) fn set_view_of(&mut self, view_of: Option<Arc<ViewOf<B, K>>>) {
        self.view_of = view_of;
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

    /// Marks this tensor as a parameter, for this value of it and its clones: autocast casts it
    /// once per step for all its readers (see [`CastSlot`]). The loop that trains it marks it
    /// (firemesh's `Trainer` does, before each step); nothing changes for a tensor that is not
    /// a `Replicated` f32 one.
    pub fn mark_parameter(&mut self) {
        self.cast.get_or_insert_with(CastSlot::default);
    }

    /// Which parameter this tensor is, or is a view or cast of (see `crate::gathers`).
    pub(crate) fn origin(&self) -> Option<&Arc<Origin>> {
        self.origin.as_ref()
    }

    /// Gives this tensor the origin `origin` (a view's or cast's, made from its parameter's).
    pub(crate) fn set_origin(&mut self, origin: Option<Arc<Origin>>) {
        self.origin = origin;
    }

    /// Whether this is a marked parameter whose cast its clones can share: f32, not `Partial`.
    fn cast_slot(&self) -> Option<&CastSlot<K::P>> {
        let shareable = self.widen.is_none()
            && self.dtype() == DType::F32
            && self.placement() != Placement::Partial;
        self.cast.as_ref().filter(|_| shareable)
    }

    /// Whether this tensor was marked as a parameter (or is a layout op's view of one).
    pub(crate) fn is_parameter(&self) -> bool {
        self.cast.is_some()
    }

    /// This parameter's narrow copy and its dtype, where a clone of it was cast in this step.
    pub(crate) fn narrow_copy(&self) -> Option<(Self, DType)> {
        let slot = self.cast_slot()?.lock();
        let copy = slot.unwrap_or_else(PoisonError::into_inner).upgrade()?;
        let mesh = self.mesh.clone();
        let parts = copy.parts.clone();
        Some((Self::issued(parts, copy.placement, mesh), copy.dtype))
    }

    /// This parameter cast to `dtype`, where a clone of it was cast so in this step.
    pub(crate) fn shared_cast(&self, dtype: DType) -> Option<Self> {
        self.narrow_copy()
            .and_then(|(copy, cast_to)| (cast_to == dtype).then_some(copy))
    }

    /// Where to leave this parameter's cast for its clones (`None`: not a marked parameter).
    pub(crate) fn cast_for_clones(&self) -> Option<CastSlot<K::P>> {
        self.cast_slot().cloned()
    }

    /// Leaves this tensor in `slot` as the cast to `dtype` of the parameter `slot` came from,
    /// where it has that parameter's placement `of`; returns the copy, which the caller must
    /// keep alive for as long as clones may use it.
    pub(crate) fn leave_as_cast(
        &self,
        slot: &CastSlot<K::P>,
        dtype: DType,
        of: Placement,
    ) -> Option<Arc<NarrowCopy<K::P>>> {
        let State::Ready { parts, placement } = &self.state else {
            return None;
        };
        if *placement != of {
            return None;
        }
        let copy = Arc::new(NarrowCopy {
            dtype,
            placement: of,
            parts: parts.clone(),
        });
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Arc::downgrade(&copy);
        Some(copy)
    }

    fn first_ready(&self) -> &K::P {
        self.first_part()
            .expect("firemesh: internal error: rank 0's part is computed where it is issued")
    }
}

impl<B: Backend, K: Kind<B>> ViewOf<B, K> {
    /// Leaves the viewed tensor widened, from this view's widened parts, where a clone of it
    /// lives and none was widened yet. Nothing is left where the layout ops taking the view
    /// back give another placement or shape than the viewed tensor's.
    fn leave_widened(&self, parts: &[Part<K::P>], placement: Placement, mesh: &Mesh<B::Device>) {
        let Some(slot) = self.slot.upgrade() else {
            return;
        };
        if slot.get().is_some() {
            return;
        }
        let view = ShardedTensor::issued(parts.to_vec(), placement, mesh.clone());
        let viewed = (self.run_back)(view, &self.back);
        if viewed.placement() != self.placement || viewed.shape() != self.shape {
            return;
        }
        let (parts, placement, _) = viewed.into_issued();
        let _ = slot.set((parts, placement));
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
            cast: self.cast.clone(),
            origin: self.origin.clone(),
            widen: self.widen,
            view_of: self.view_of.clone(),
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
