//! An activation's cast read again by the next products. Burn's autodiff hands a gradient to
//! both products of a layer's backward pass (the input's gradient and the weight's), and each
//! casts it; the second takes the first's cast here. An armed precision keeps its latest
//! casts of tensors that have clones (`runtime::armed::RecentCasts`), named by the name the
//! clones share: a few at a time, newest last, so that a cast lives a few products longer than
//! it would, never a whole forward pass (autodiff saves f32 activations; keeping each one's
//! cast until its backward product would add half their bytes).

use super::{cast_now, F};
use crate::runtime::armed;
use burn_backend::{Backend, DType, FloatDType, TensorMetadata};

/// How many casts an armed precision keeps: a layer's backward pass casts the gradient, then
/// its saved input, then reads the gradient again.
const KEPT: usize = 2;

/// `t` cast down to `dtype` ([`super::cast`]), taken from the precision's latest casts where a
/// clone of `t` was cast so, and kept among them where `t` has clones.
pub(super) fn cast<B: Backend>(t: F<B>, dtype: FloatDType) -> F<B> {
    let Some(name) = t.cloned_as() else {
        return cast_now(t, dtype);
    };
    let key = (name, DType::from(dtype));
    let mesh = t.mesh().key();
    let found = armed::with_recent_casts(mesh, |recent| {
        let kept = recent.0.iter().find(|(k, _)| *k == key)?;
        kept.1.downcast_ref::<F<B>>().cloned()
    })
    .flatten()
    .filter(|done| done.placement() == t.placement() && done.shape() == t.shape());
    if let Some(done) = found {
        crate::stats::activation_cast_reused();
        return done;
    }
    let out = cast_now(t, dtype);
    let kept = out.clone();
    armed::with_recent_casts(mesh, move |recent| {
        if recent.0.len() == KEPT {
            recent.0.pop_front();
        }
        recent.0.push_back((key, Box::new(kept)));
    });
    out
}
