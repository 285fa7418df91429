//! The backend traits of `Sharded<B>`, one file per trait. Every method is forwarded to the
//! inner backend (none inherits a trait default, which could differ from the inner backend's
//! override) through the one executor, `crate::exec::run`, under the rule of its op family
//! (`crate::rules`; `crate::table` lists every method's family).

/// Methods whose tensor operands come first and whose other arguments follow (after the `;`),
/// all under one rule: each runs the inner backend's method of the same name on every rank.
/// `$rule` plans from the operands' metas; it may use the methods' other arguments by name.
macro_rules! by_rule {
    ($inner:ident, $rule:expr; $(fn $name:ident($($t:ident: $T:ty),+ $(; $($a:ident: $A:ty),+)?) -> $R:ty;)*) => {$(
        fn $name($($t: $T,)+ $($($a: $A),+)?) -> $R {
            $crate::exec::run(stringify!($name), ($($t,)+), $rule, |_, ($($t,)+)| {
                $inner::$name($($t,)+ $($(::core::clone::Clone::clone(&$a)),+)?)
            })
        }
    )*};
}

/// Reductions that can be applied twice (max, min, prod…), under `rules::reduce::twice` over
/// `$dims`: over a sharded dim, each rank reduces its block and the gathered results are
/// reduced again by the same method.
macro_rules! reduce_twice {
    ($inner:ident, $dims:expr; $(fn $name:ident($t:ident: $T:ty $(; $($a:ident: $A:ty),+)?) -> $R:ty;)*) => {$(
        fn $name($t: $T $(, $($a: $A),+)?) -> $R {
            $crate::exec::run_twice(
                stringify!($name),
                ($t,),
                |m| $crate::rules::reduce::twice(m, $dims),
                |_, ($t,)| $inner::$name($t $(, $($a),+)?),
                |_, ($t,)| $inner::$name($t $(, $($a),+)?),
            )
        }
    )*};
}

mod activation;
mod bool;
mod float;
mod int;
mod module;
mod qtensor;
mod transaction;

use crate::exec::run_reduction;
use crate::kind::{IntKind, Kind};
use crate::rules::reduce;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Scalar};

/// max/min along `dim` with the indices of the extremes (`rules::reduce::twice`). Over the
/// sharded dim, each rank's extremes and their global indices are gathered and the best ones
/// picked (the first on ties, as on one device): `with_indices` reduces a block, `arg` finds the
/// best of the gathered extremes, `take` picks values at indices.
pub(crate) fn extreme_with_indices<B: Backend, K: Kind<B>>(
    op: &'static str,
    t: ShardedTensor<B, K>,
    dim: usize,
    with_indices: impl Fn(K::P, usize) -> (K::P, B::IntTensorPrimitive) + Sync,
    arg: impl Fn(K::P, usize) -> B::IntTensorPrimitive + Sync,
    take: impl Fn(usize, K::P, B::IntTensorPrimitive) -> K::P + Sync,
) -> (ShardedTensor<B, K>, ShardedTensor<B, IntKind>) {
    run_reduction::<B, _, (ShardedTensor<B, K>, ShardedTensor<B, IntKind>), _>(
        op,
        (t,),
        |m| reduce::twice(m, Some(dim)),
        |_, (t,)| with_indices(t, dim),
        |r, (t,)| {
            let (values, indices) = with_indices(t, dim);
            let start = Scalar::from(r.block_start(0) as i64);
            (values, B::int_add_scalar(indices, start))
        },
        |_, ((values, indices),)| {
            let best = arg(values.clone(), dim);
            (
                take(dim, values, best.clone()),
                B::int_gather(dim, indices, best),
            )
        },
    )
}

/// argmax/argmin along `dim`: the indices of [`extreme_with_indices`].
pub(crate) fn arg_extreme<B: Backend, K: Kind<B>>(
    op: &'static str,
    t: ShardedTensor<B, K>,
    dim: usize,
    arg: impl Fn(K::P, usize) -> B::IntTensorPrimitive + Sync,
    extreme: impl Fn(K::P, usize) -> K::P + Sync,
    take: impl Fn(usize, K::P, B::IntTensorPrimitive) -> K::P + Sync,
) -> ShardedTensor<B, IntKind> {
    let with_indices = |t: K::P, d| (extreme(t.clone(), d), arg(t, d));
    extreme_with_indices::<B, K>(op, t, dim, with_indices, &arg, take).1
}
