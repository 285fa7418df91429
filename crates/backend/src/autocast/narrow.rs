//! Ops that keep a narrow tensor narrow. While a precision is armed, an elementwise op or an
//! activation whose float operands are all held in one narrow dtype (results of products, and
//! of ops like these) runs in that dtype on the inner backend, and its result is held narrow
//! too: AMP runs the ops it does not list in their inputs' dtype. No cast is made, and autodiff
//! saves such results at half the bytes. The inner backend's kernel does the arithmetic (Flex
//! computes each element in f32 and rounds it once).
//!
//! An op that mixes a narrow operand with an f32 one widens the narrow one, as type promotion
//! does. Reductions, softmax, logarithms, reciprocals, comparisons and the statistics of
//! normalisations read f32 (they take no `narrow` group in `ops/`). Ops whose result can leave
//! f16's range from inputs inside it (exponentials, powers) keep a bf16 operand narrow only:
//! bf16 has f32's range, f16 does not (`Range::Bf16`).

use super::widened;
use crate::kind::{BoolKind, FloatKind};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, DType};

type F<B> = ShardedTensor<B, FloatKind>;

/// The narrow dtypes an op may run in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    /// bf16 and f16.
    Any,
    /// bf16 only.
    Bf16,
}

/// An operand of an op that may keep it narrow.
pub(crate) trait Held: Sized {
    /// `None`: not a float tensor (a mask); else the narrow dtype it is held in, if any.
    fn held(&self) -> Option<Option<DType>>;
    /// The operand as held (unwidened) where the op runs narrow.
    fn into_held_if(self, narrow: Option<DType>) -> Self;
}

impl<B: Backend> Held for F<B> {
    fn held(&self) -> Option<Option<DType>> {
        Some(self.held_narrow())
    }

    fn into_held_if(self, narrow: Option<DType>) -> Self {
        match narrow {
            Some(_) => self.into_held(),
            None => self,
        }
    }
}

impl<B: Backend> Held for ShardedTensor<B, BoolKind> {
    fn held(&self) -> Option<Option<DType>> {
        None
    }

    fn into_held_if(self, _: Option<DType>) -> Self {
        self
    }
}

/// The narrow dtype the op on `lead` and `others` runs in: the one every float operand is held
/// in, within `range`, while a precision is armed on `lead`'s mesh for this thread. `others`
/// ([`Held::held`] of the other operands) is read only where `lead` is held narrow.
pub(crate) fn kept<B: Backend, const N: usize>(
    lead: &F<B>,
    others: impl FnOnce() -> [Option<Option<DType>>; N],
    range: Range,
) -> Option<DType> {
    let dtype = lead.held_narrow()?;
    lead.mesh().autocast_precision()?;
    if range == Range::Bf16 && dtype != DType::BF16 {
        return None;
    }
    let same = others().iter().flatten().all(|o| *o == Some(dtype));
    same.then(|| {
        crate::stats::kept_narrow();
        dtype
    })
}

/// The op's result, held narrow where it ran so.
pub(crate) fn presented<B: Backend>(out: F<B>, narrow: Option<DType>) -> F<B> {
    match narrow {
        Some(_) => out.presented_as_f32(widened::<B>),
        None => out,
    }
}
