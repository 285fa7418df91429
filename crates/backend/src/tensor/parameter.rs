//! What a parameter's clones share: the narrow copy autocast makes of it once per step, and
//! which parameter it is (`crate::gathers`).

use super::{ShardedTensor, State};
use crate::kind::Kind;
use crate::origin::Origin;
use crate::part::Part;
use crate::placement::Placement;
use burn_backend::{Backend, DType, TensorMetadata};
use std::sync::{Arc, Mutex, PoisonError, Weak};

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

impl<B: Backend, K: Kind<B>> ShardedTensor<B, K> {
    /// Marks this tensor as a parameter, for this value of it and its clones: autocast casts it
    /// once per step for all its readers (see [`CastSlot`]). The loop that trains it marks it
    /// (firemesh's `Trainer` does, before each step); nothing changes for a tensor that is not
    /// a `Replicated` f32 one.
    pub fn mark_parameter(&mut self) {
        self.rare_mut().cast.get_or_insert_with(CastSlot::default);
    }

    /// Which parameter this tensor is, or is a view or cast of (see `crate::gathers`).
    pub(crate) fn origin(&self) -> Option<&Arc<Origin>> {
        self.rare.as_ref()?.origin.as_ref()
    }

    /// Gives this tensor the origin `origin` (a view's or cast's, made from its parameter's).
    pub(crate) fn set_origin(&mut self, origin: Option<Arc<Origin>>) {
        if origin.is_some() || self.rare.is_some() {
            self.rare_mut().origin = origin;
        }
    }

    /// Whether this is a marked parameter whose cast its clones can share: f32, not `Partial`.
    fn cast_slot(&self) -> Option<&CastSlot<K::P>> {
        let shareable = self.widen.is_none()
            && self.dtype() == DType::F32
            && self.placement() != Placement::Partial;
        self.rare.as_ref()?.cast.as_ref().filter(|_| shareable)
    }

    /// Whether this tensor was marked as a parameter (or is a layout op's view of one).
    pub(crate) fn is_parameter(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.cast.is_some())
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
}
