//! Placement rules: for each op family, which input placements it runs on without moving data,
//! and the placement of its result. Inputs that fit no rule are redistributed (counted).

mod data;
mod elementwise;
mod indexing;
mod layout;
mod matmul;
pub(crate) mod nn;
mod random;
mod reduce;

pub(crate) use data::*;
pub(crate) use elementwise::*;
pub(crate) use indexing::*;
pub(crate) use layout::*;
pub(crate) use matmul::*;
pub(crate) use random::*;
pub(crate) use reduce::*;

use crate::kind::Kind;
use crate::placement::Placement;
use crate::redistribute::to_replicated;
use crate::stats;
use crate::tensor::ShardedTensor;
use burn_backend::Backend;

/// `t` made `Replicated` because `op` has no rule for its placement; counted as a fallback
/// unless it was replicated already.
pub(crate) fn replicate_for<B: Backend, K: Kind<B>>(
    t: ShardedTensor<B, K>,
    op: &'static str,
) -> ShardedTensor<B, K> {
    if t.placement() != Placement::Replicated {
        stats::fallback(op);
    }
    to_replicated(t)
}
