//! Autocast: matrix products and convolutions in a lower precision, and the element-wise ops
//! on their results; everything else in f32.
//!
//! A training loop arms a precision on its mesh for its thread ([`Mesh::autocast`]); while it
//! is armed, the ops of that thread that multiply (`float_matmul`, `linear`, the convolutions,
//! and their backward ops that multiply) cast their f32 operands to it, run in it on every
//! rank, and present the result as f32 (below). Elementwise ops and activations whose operands
//! are all such narrow results stay narrow (`narrow.rs`); every other op (sums, softmax,
//! normalisation statistics, the loss, the optimizer's update) reads f32, and autodiff, which
//! sits above `Sharded`, never sees a low-precision tensor: parameters, gradients and optimizer state
//! stay f32, and the backward pass's products run in the low precision too, because they are
//! the same ops. Products are added in f32: the inner backend's own kernels do so for matrix
//! products (Flex, CubeCL's matmul); convolutions on CubeCL devices, whose direct kernels add
//! in the element type, take kernels that add in f32 or run in f32 (`convs.rs`).
//!
//! Activations: a result computed in the low precision is kept in it, and presents itself as
//! f32 (`ShardedTensor::held_narrow`). That is exact, since every value of a bf16 or f16
//! tensor is an f32 value: an op that reads it in f32 widens it first (an elementwise op or
//! an activation on narrow operands only runs narrow instead, and rounds its result,
//! `narrow.rs`), layout ops (reshape, slicing, transposes) move it as it is, and a product
//! that wants it in the low precision takes it without a cast. It is widened once for all its
//! clones: the first f32 reader leaves the f32 copy for the others, which lives as long as
//! they do (`Shared` in `tensor/clones.rs`; BatchNorm reads its input twice), and a layout view's
//! widening, moved back, serves the tensor it views (`ViewOf`; BatchNorm's mean reads its
//! input's transpose first). Autodiff saves what the forward pass hands it, so
//! the outputs of products it keeps for the backward pass (a GELU's input, attention's queries,
//! keys and values, a GELU's output) are kept at half the bytes. The operands of products that
//! other ops made in f32 (a normalisation's or a softmax's output) stay f32: rounding them would
//! change what those other ops see. A `Partial` result (a weight gradient of a sharded batch) is cast back to f32
//! at once, for its bucket; a weight gradient that is not `Partial` (one rank, a replicated
//! batch) is held narrow like any result, and widened where it is read.
//!
//! Parameters: a tensor the training loop marks as a parameter
//! (`ShardedTensor::mark_parameter`) is cast once for all its clones while the precision is
//! armed (`CastSlot` in `tensor/parameter.rs`), so a weight read by the forward product and again by the
//! backward pass's is cast once per step; the copy is freed when the step's scope ends.
//! Activations and gradients: the precision keeps its two latest casts of tensors that have
//! clones, which a product reading a clone takes (`recent.rs`): a layer's backward pass casts
//! its output's gradient once for both its products. A cast is kept no longer: keeping an
//! activation's cast until its backward product reads it again would keep a narrow copy
//! beside the f32 one autodiff saves. `Counts` gives the casts of a step (`casts_down`,
//! `casts_up`, `parameter_casts`, `casts_reused`, `activation_casts_reused`,
//! `casts_up_reused`, `cast_bytes`) and the ops kept narrow (`ops_kept_narrow`).

pub(crate) mod convs;
mod cube_convs;
pub(crate) mod narrow;
mod recent;

pub use convs::{Conv2dOp, NarrowConvs};
pub use cube_convs::ImplicitGemmConvs;

use crate::kind::FloatKind;
use crate::mesh::Mesh;
use crate::origin::Layout;
use crate::placement::Placement;
use crate::runtime::armed;
use crate::tensor::ShardedTensor;
use crate::Sharded;
use burn_backend::{Backend, DType, FloatDType, TensorMetadata};
use std::marker::PhantomData;
use std::sync::Arc;

type F<B> = ShardedTensor<B, FloatKind>;

/// The precision armed on a mesh for one thread by [`Mesh::autocast`]; dropping it (on any
/// thread) gives the thread back the precision it had before.
#[must_use = "the precision is disarmed when this is dropped"]
pub struct Autocasting<D: 'static> {
    _armed: armed::Token,
    mesh: PhantomData<fn() -> D>,
}

impl<D> Mesh<D> {
    /// Runs the calling thread's matrix products and convolutions on this mesh in `dtype` (their
    /// f32 operands cast to it, their results presented as f32) until the returned value drops.
    /// `F32` (or any dtype that is not narrower than f32) casts nothing. Other threads, and
    /// other meshes, keep their own setting (`scope.rs`).
    pub fn autocast(&self, dtype: FloatDType) -> Autocasting<D> {
        Autocasting {
            _armed: armed::arm(self.key(), armed::Setting::Autocast(dtype)),
            mesh: PhantomData,
        }
    }
}

/// The precision an autocast op runs in: the one its thread armed on the mesh of its first
/// operand, when that operand is f32 and the precision narrower.
pub(crate) fn wanted<B: Backend>(lead: &F<B>) -> Option<FloatDType> {
    let low = lead.mesh().autocast_precision()?;
    let narrower = matches!(low, FloatDType::F16 | FloatDType::BF16);
    (narrower && lead.dtype() == DType::F32).then_some(low)
}

impl<D> Autocasting<D> {
    /// The narrow copies of parameters this precision holds for their readers: one per
    /// parameter (or view of one) cast since it was armed and still alive; a copy goes once no
    /// tensor of its parameter is left, or when this drops.
    pub fn copies_kept(&self) -> usize {
        self._armed.kept()
    }
}

/// [`wanted`], for op `op` (the ops that multiply, `ops/mod.rs`).
pub(crate) fn for_op<B: Backend>(_op: &'static str, lead: &F<B>) -> Option<FloatDType> {
    wanted(lead)
}

/// An operand of an autocast op: a float tensor, or an optional one (a bias).
pub(crate) trait Operand<B: Backend>: Sized {
    /// The operand cast to `low` where it is f32 (and `low` is set).
    fn lowered(self, low: Option<FloatDType>) -> Self;
}

impl<B: Backend> Operand<B> for F<B> {
    fn lowered(self, low: Option<FloatDType>) -> Self {
        match low {
            Some(low) if self.held_narrow() == Some(low.into()) => self.into_held(),
            Some(low) if self.dtype() == DType::F32 => cast(self, low),
            _ => self,
        }
    }
}

/// `t` in `dtype` on every rank, its placement kept: a `Partial` operand (a gradient flowing
/// back) or result (a weight gradient) stays `Partial`, its addends cast one by one, as the
/// low-precision op itself computes on them. (`float_cast` sums a `Partial` tensor first: a
/// cast is not linear in general, but here the op's own rounding is the point.)
/// A marked parameter is cast once for all its clones while the precision is armed (`CastSlot`).
fn cast<B: Backend>(t: F<B>, dtype: FloatDType) -> F<B> {
    let to = DType::from(dtype);
    let is_parameter = t.is_parameter();
    let origin = t.origin().cloned();
    let mut out = match t.shared_cast(to) {
        Some(done) => {
            crate::stats::cast_reused();
            done
        }
        None if is_parameter || dtype == FloatDType::F32 => cast_now(t, dtype),
        None => recent::cast(t, dtype),
    };
    if is_parameter {
        // A sharded parameter's blocks cast: still the parameter, gathered by the product
        // where the step gathers parameters (ZeRO-3), in the narrow dtype, of the same origin.
        out.mark_parameter();
        out.set_origin(origin);
    }
    out
}

/// [`cast`], made now, and left for the clones of a marked parameter.
pub(super) fn cast_now<B: Backend>(t: F<B>, dtype: FloatDType) -> F<B> {
    let to = DType::from(dtype);
    let read: usize = t.bytes_per_rank().iter().sum();
    let from = t.held_narrow().unwrap_or_else(|| t.dtype()).size();
    let shared = t.cast_for_clones().is_some().then(|| t.clone());
    let up = dtype == FloatDType::F32;
    crate::stats::cast(up, read + read / from * to.size(), t.is_parameter());
    let out: F<B> = armed::keeping_parameters_sharded(|| {
        crate::exec::run(
            "autocast",
            (t,),
            crate::rules::elementwise::linear_unary,
            move |_, (t,)| B::float_cast(t, dtype),
        )
    });
    if let Some(parameter) = shared {
        keep_for_clones(&parameter, out.clone(), to);
    }
    out
}

impl<B: Backend> Operand<B> for Option<F<B>> {
    fn lowered(self, low: Option<FloatDType>) -> Self {
        self.map(|t| t.lowered(low))
    }
}

/// An autocast op's result, presented as f32 when the op ran in `low`: kept in `low`, or cast
/// back to f32 when it is `Partial` (a weight gradient, which goes to its bucket in f32).
pub(crate) fn restored<B: Backend>(out: F<B>, low: Option<FloatDType>) -> F<B> {
    match low {
        Some(_) if out.placement() == Placement::Partial => cast(out, FloatDType::F32),
        Some(_) => out.presented_as_f32(widened::<B>),
        None => out,
    }
}

/// A layout op (`op`: reshape, slice, transpose…) on `t`, which moves values without computing
/// on them: a tensor held narrow goes through it as it is held and comes out held narrow. A
/// parameter's view is a parameter too (a tied embedding's transpose, the output head), as
/// sharded as the parameter (ZeRO-3 gathers it where an op computes on it); where
/// the parameter was cast in this step, `op` also moves its narrow copy, which becomes the
/// view's: the backward pass's transpose of a transposed weight needs no cast of its own.
///
/// `layout`: the op, where a sharded parameter goes through it sharded (a transpose, a reshape
/// that adds or permutes dims: the sharded dim moves), instead of being gathered first, and
/// autodiff keeps the view at 1/N the bytes (ZeRO-3); the view's origin records it, so that a
/// gather of the parameter made ahead of use can be moved as the view is (`crate::gathers`).
/// `None`: a slice, which may cut the sharded dim, gathers it first.
pub(crate) fn moved<B: Backend>(
    t: F<B>,
    layout: Option<&dyn Fn() -> Layout>,
    op: impl Fn(F<B>) -> F<B>,
) -> F<B> {
    if t.held_narrow().is_some() {
        let view_of = layout.and_then(|l| t.view_link(|| l().undone(t.shape()), moved_back::<B>));
        let mut out = op(t.into_held()).presented_as_f32(widened::<B>);
        out.set_view_of(view_of);
        return out;
    }
    if !t.is_parameter() {
        return op(t);
    }
    let copy = t.narrow_copy();
    let origin = match layout {
        Some(l) => t.origin().map(|o| Arc::new(o.then(l()))),
        None => None,
    };
    let mut out = match layout {
        Some(_) => armed::keeping_parameters_sharded(|| op(t)),
        None => op(t),
    };
    out.mark_parameter();
    out.set_origin(origin);
    if let Some((narrow, dtype)) = copy {
        keep_for_clones(&out, op(narrow), dtype);
    }
    out
}

/// `t` moved by the layout ops `ops`, in order, as `Sharded` moves any f32 tensor.
fn moved_back<B: Backend>(t: F<B>, ops: &[Layout]) -> F<B> {
    ops.iter().fold(t, |t, op| op.applied::<Sharded<B>>(t))
}

/// Leaves `narrow` as parameter `of`'s cast to `dtype` for its clones, owned by the precision
/// armed (until the step's scope ends).
fn keep_for_clones<B: Backend>(of: &F<B>, narrow: F<B>, dtype: DType) {
    let Some(slot) = of.cast_for_clones() else {
        return;
    };
    if let Some(copy) = narrow.leave_as_cast(&slot, dtype, of.placement()) {
        let owner = Arc::downgrade(&slot);
        armed::keep_while_autocast(of.mesh().key(), owner, Box::new(copy));
    }
}

/// A tensor held narrow, widened to the f32 it presents on every rank.
fn widened<B: Backend>(t: F<B>) -> F<B> {
    cast(t, FloatDType::F32)
}
