//! Element-wise ops (with broadcasting): matching placements are kept; a `Replicated` operand
//! meets a `Shard(d)` one by slicing its own block locally; `Partial` survives only through
//! linear ops.

use crate::kind::Kind;
use crate::placement::Placement;
use crate::ranks::common_mesh;
use crate::redistribute::{to_replicated, to_shard};
use crate::rules::{replicate_for, settle_pending};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, TensorMetadata};

type T<B, K> = ShardedTensor<B, K>;

/// How an op treats `Partial` (sum-over-ranks) operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Linear {
    /// Not linear: `Partial` operands are all-reduced first.
    No,
    /// add/sub: Partial ± Partial is Partial.
    Sum,
    /// mul: one Partial factor times Replicated ones is Partial.
    Product,
    /// div: a Partial numerator over a Replicated denominator is Partial.
    Numerator,
}

/// What an operand must become before the op runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Want {
    Keep,
    Replicate,
    Shard(usize, Vec<usize>),
}

/// What the rule needs to know about an operand.
pub(crate) struct Meta {
    pub placement: Placement,
    pub dims: Vec<usize>,
    pub sizes: Option<Vec<usize>>,
}

pub(crate) fn meta<B: Backend, K: Kind<B>>(t: &T<B, K>) -> Meta {
    Meta {
        placement: t.placement(),
        dims: t.shape().to_vec(),
        sizes: t.shard_sizes(),
    }
}

/// The element-wise rule: what each operand must become, and the result's placement.
pub(crate) fn plan(metas: &[Meta], linear: Linear) -> (Vec<Want>, Placement) {
    let partial = |m: &Meta| m.placement == Placement::Partial;
    let replicated = |m: &Meta| m.placement == Placement::Replicated;
    let keep_all = || metas.iter().map(|_| Want::Keep).collect();
    match linear {
        Linear::Sum if metas.iter().all(partial) => return (keep_all(), Placement::Partial),
        Linear::Product
            if metas.iter().filter(|m| partial(m)).count() == 1
                && metas.iter().all(|m| partial(m) || replicated(m)) =>
        {
            return (keep_all(), Placement::Partial)
        }
        Linear::Numerator if partial(&metas[0]) && metas[1..].iter().all(replicated) => {
            return (keep_all(), Placement::Partial)
        }
        _ => {}
    }
    let target = metas.iter().find_map(|m| match m.placement {
        Placement::Shard(d) if m.dims[d] > 1 => Some((d, m.sizes.clone().unwrap_or_default())),
        _ => None,
    });
    let Some((d, sizes)) = target else {
        let wants = metas
            .iter()
            .map(|m| {
                if replicated(m) {
                    Want::Keep
                } else {
                    Want::Replicate
                }
            })
            .collect();
        return (wants, Placement::Replicated);
    };
    let wants = metas
        .iter()
        .map(|m| {
            if m.placement == Placement::Shard(d) && m.sizes.as_deref() == Some(&sizes[..]) {
                Want::Keep
            } else if m.dims.get(d) == Some(&1) {
                // Broadcast along the sharded dim: every rank needs the whole (size-1) operand.
                if replicated(m) {
                    Want::Keep
                } else {
                    Want::Replicate
                }
            } else {
                Want::Shard(d, sizes.clone())
            }
        })
        .collect();
    (wants, Placement::Shard(d))
}

pub(crate) fn apply<B: Backend, K: Kind<B>>(t: T<B, K>, want: &Want) -> T<B, K> {
    match want {
        Want::Keep => t,
        Want::Replicate => to_replicated(t),
        Want::Shard(d, sizes) => to_shard(t, *d, Some(sizes)),
    }
}

/// A one-operand op that is not linear: `Partial` is all-reduced, other placements kept.
pub(crate) fn pointwise<B: Backend, K: Kind<B>>(t: T<B, K>) -> (T<B, K>, Placement) {
    let t = if t.placement() == Placement::Partial {
        to_replicated(t)
    } else {
        t
    };
    let p = t.placement();
    (t, p)
}

pub(crate) fn elementwise2<B: Backend, K1: Kind<B>, K2: Kind<B>>(
    a: T<B, K1>,
    b: T<B, K2>,
    linear: Linear,
) -> (T<B, K1>, T<B, K2>, Placement) {
    common_mesh(&[Some(&a.mesh), Some(&b.mesh)], "an element-wise op");
    settle_pending(&[&a, &b]);
    let (wants, p) = plan(&[meta(&a), meta(&b)], linear);
    (apply(a, &wants[0]), apply(b, &wants[1]), p)
}

pub(crate) fn elementwise3<B: Backend, K1: Kind<B>, K2: Kind<B>, K3: Kind<B>>(
    a: T<B, K1>,
    b: T<B, K2>,
    c: T<B, K3>,
) -> (T<B, K1>, T<B, K2>, T<B, K3>, Placement) {
    common_mesh(
        &[Some(&a.mesh), Some(&b.mesh), Some(&c.mesh)],
        "an element-wise op",
    );
    settle_pending(&[&a, &b, &c]);
    let (wants, p) = plan(&[meta(&a), meta(&b), meta(&c)], Linear::No);
    (
        apply(a, &wants[0]),
        apply(b, &wants[1]),
        apply(c, &wants[2]),
        p,
    )
}

/// An op that works along `dims` (sort, cumsum, softmax, flip…): kept sharded along any other
/// dim; sharded along one of `dims` it falls back.
pub(crate) fn along<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dims: &[usize],
    op: &'static str,
) -> (T<B, K>, Placement) {
    let (t, p) = pointwise(t);
    match p {
        Placement::Shard(d) if dims.contains(&d) => (replicate_for(t, op), Placement::Replicated),
        _ => (t, p),
    }
}

/// [`along`] for two aligned operands.
pub(crate) fn along2<B: Backend, K: Kind<B>>(
    a: T<B, K>,
    b: T<B, K>,
    dims: &[usize],
    op: &'static str,
) -> (T<B, K>, T<B, K>, Placement) {
    let (a, b, p) = elementwise2(a, b, Linear::No);
    match p {
        Placement::Shard(d) if dims.contains(&d) => (
            replicate_for(a, op),
            replicate_for(b, op),
            Placement::Replicated,
        ),
        _ => (a, b, p),
    }
}
