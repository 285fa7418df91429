//! What the clones of a tensor share: the value in the form its readers take (a `Partial`
//! tensor's sum, a narrow tensor's widening), made once for all of them; the widening a view
//! of a narrow tensor leaves for the tensor it views; and a name, by which autocast finds a
//! cast one clone made for another (`crate::autocast`).

use super::{Issued, ShardedTensor};
use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::origin::Layout;
use crate::part::Part;
use crate::placement::Placement;
use burn_backend::{Backend, Shape, TensorMetadata};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// The next name [`ShardedTensor::clone_name`] gives.
static CLONE_NAMES: AtomicU64 = AtomicU64::new(1);

/// A value as its readers take it, one part per rank and its placement, worked out once for
/// every clone of it: the sum of a `Partial` value (`Replicated`, or `Shard(0)` where it was
/// reduce-scattered: ZeRO-1's early buckets), or a tensor held narrow widened to f32. Burn's
/// BatchNorm reads its input twice (to centre it for the variance, and in the output) and its
/// batch mean twice: without it, a mean was summed across the ranks, and a convolution's
/// output held narrow widened, once per read. The widened copy lives as long as a clone of the
/// narrow tensor does (where autodiff saves the narrow tensor, until its backward op ran).
pub(super) type Shared<P> = Arc<SharedValue<P>>;

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

impl<B: Backend, K: Kind<B>> ShardedTensor<B, K> {
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

    /// This tensor held narrow widened by `widen`, once for all its clones: the first to be
    /// read widens it and leaves the f32 parts for the others.
    pub(super) fn widened_once(mut self, widen: fn(Self) -> Self) -> Issued<K::P, B::Device> {
        if let Some((parts, placement)) = self.shared.get().and_then(|s| s.get()) {
            crate::stats::widening_reused();
            return (parts.clone(), *placement, self.mesh);
        }
        let shared = self.shared_with_clones();
        let view_of = self.rare.as_mut().and_then(|r| r.view_of.take());
        let (parts, placement, mesh) = widen(self).into_issued();
        if let Some(shared) = shared {
            let _ = shared.set((parts.clone(), placement));
        }
        if let Some(view_of) = view_of {
            view_of.leave_widened(&parts, placement, &mesh);
        }
        (parts, placement, mesh)
    }

    /// What a layout op on this tensor held narrow leaves its view (which it is then given by
    /// [`ShardedTensor::set_view_of`]) so that the view's widening serves this tensor's clones
    /// too: `None` where this tensor was never cloned. `back` gives the layout op that takes
    /// the view back to this tensor; `run_back` runs such ops.
    pub(crate) fn view_link(
        &self,
        back: impl FnOnce() -> Layout,
        run_back: RunBack<B, K>,
    ) -> Option<Arc<ViewOf<B, K>>> {
        if let Some(view_of) = self.rare.as_ref().and_then(|r| r.view_of.as_ref()) {
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
    pub(super) fn clone_name(&self) -> u64 {
        let name = self.clone_name.load(Ordering::Relaxed);
        if name != 0 {
            return name;
        }
        self.named_now()
    }

    /// Gives this value a new name. Two threads cloning it at once may each give it one: a
    /// clone then has another name than the value, and misses a cast the other made (names
    /// only ever join equal values).
    #[cold]
    fn named_now(&self) -> u64 {
        let new = CLONE_NAMES.fetch_add(1, Ordering::Relaxed);
        self.clone_name.store(new, Ordering::Relaxed);
        new
    }

    /// The name this value shares with its clones; `None` where it was never cloned (then no
    /// other tensor holds it).
    pub(crate) fn cloned_as(&self) -> Option<u64> {
        Some(self.clone_name.load(Ordering::Relaxed)).filter(|&name| name != 0)
    }

    /// Marks this tensor held narrow as the view [`ShardedTensor::view_link`] described.
    pub(crate) fn set_view_of(&mut self, view_of: Option<Arc<ViewOf<B, K>>>) {
        if view_of.is_some() || self.rare.is_some() {
            self.rare_mut().view_of = view_of;
        }
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
