//! The backend traits of `Sharded<B>`, one file per trait. Every method is forwarded to the
//! inner backend (none inherits a trait default, which could differ from the inner backend's
//! override) through the one executor, `crate::exec::run`, under the rule of its op family
//! (`crate::rules`; `tests/backend/table.rs` derives every method's family from these files).

/// One op run under `$rule` on the tensor operands `$t`: each rank runs the inner backend's
/// method `$name` on its parts of them, with the other arguments `$a`, which the body keeps
/// (it may run on a rank's thread after the op returned).
macro_rules! run_inner {
    ($inner:ident, $name:ident, $rule:expr, ($($t:ident),+), ($($a:ident),*)) => {{
        let kept = ($($crate::ops::Kept::keep(::core::clone::Clone::clone(&$a)),)*);
        $crate::exec::run(stringify!($name), ($($t,)+), $rule, move |_, ($($t,)+)| {
            #[allow(unused_variables)]
            let ($($a,)*) = &kept;
            $inner::$name($($t,)+ $($crate::ops::Lend::lend($a)),*)
        })
    }};
}

/// Methods whose tensor operands come first and whose other arguments follow (after the `;`),
/// all under one rule: each runs the inner backend's method of the same name on every rank.
/// `$rule` plans from the operands' metas; it may use the methods' other arguments by name.
/// `$rule => $then`: each result then goes through `$then` (parameter gradients through
/// `buckets::gradient_made`).
/// `autocast $rule`: the same, for ops that multiply. Where the calling thread armed a lower
/// precision on the mesh (`crate::autocast`), the f32 operands are cast to it first and the
/// result presented as f32 (before `$then`, so a parameter gradient joins its bucket in f32).
/// `convolution $rule`: as `autocast`, in f32 where the inner backend's convolutions add in the
/// element type (`crate::autocast::convs`).
/// `narrow $rule`: elementwise ops and activations whose float operands, all held in one
/// narrow dtype while a precision is armed, stay in it, and whose result is held narrow
/// (`crate::autocast::narrow`); `narrow(Bf16)`: in bf16 only.
/// `moves $rule, $layout`: a layout op of one float tensor that permutes its dims, which a tensor
/// held narrow goes through as it is held, and a sharded parameter sharded
/// (`crate::autocast::moved`); `$layout` names it (`crate::origin::Layout`) for the view's
/// origin.
macro_rules! by_rule {
    ($inner:ident, autocast $rule:expr => $then:expr; $($body:tt)*) => {
        by_rule! { $inner, autocast($crate::autocast::for_op) $rule => $then; $($body)* }
    };
    ($inner:ident, autocast($low:path) $rule:expr => $then:expr; $(fn $name:ident($lead:ident: $L:ty $(, $t:ident: $T:ty)* $(; $($a:ident: $A:ty),+)?) -> $R:ty;)*) => {$(
        fn $name($lead: $L, $($t: $T,)* $($($a: $A),+)?) -> $R {
            let low = $low(stringify!($name), &$lead);
            let $lead = $crate::autocast::Operand::lowered($lead, low);
            $(let $t = $crate::autocast::Operand::lowered($t, low);)*
            let out = run_inner!($inner, $name, $rule, ($lead $(, $t)*), ($($($a),+)?));
            $then($crate::autocast::restored(out, low))
        }
    )*};
    ($inner:ident, autocast $rule:expr; $($body:tt)*) => {
        by_rule! { $inner, autocast $rule => ::core::convert::identity; $($body)* }
    };
    ($inner:ident, convolution $rule:expr => $then:expr; $($body:tt)*) => {
        by_rule! { $inner, autocast($crate::autocast::convs::precision) $rule => $then; $($body)* }
    };
    ($inner:ident, convolution $rule:expr; $($body:tt)*) => {
        by_rule! { $inner, convolution $rule => ::core::convert::identity; $($body)* }
    };
    ($inner:ident, narrow($range:ident) $rule:expr; $(fn $name:ident($lead:ident: $L:ty $(, $t:ident: $T:ty)* $(; $($a:ident: $A:ty),+)?) -> $R:ty;)*) => {$(
        fn $name($lead: $L, $($t: $T,)* $($($a: $A),+)?) -> $R {
            use $crate::autocast::narrow::{self, Held as _};
            let low = narrow::kept(&$lead, || [$($t.held()),*], narrow::Range::$range);
            let $lead = $lead.into_held_if(low);
            $(let $t = $t.into_held_if(low);)*
            let out = run_inner!($inner, $name, $rule, ($lead $(, $t)*), ($($($a),+)?));
            narrow::presented(out, low)
        }
    )*};
    ($inner:ident, narrow $rule:expr; $($body:tt)*) => {
        by_rule! { $inner, narrow(Any) $rule; $($body)* }
    };
    ($inner:ident, moves $rule:expr, $layout:expr; $(fn $name:ident($t:ident: $T:ty $(; $($a:ident: $A:ty),+)?) -> $R:ty;)*) => {$(
        fn $name($t: $T, $($($a: $A),+)?) -> $R {
            let kept = ($($($crate::ops::Kept::keep(::core::clone::Clone::clone(&$a)),)+)?);
            let view = || $layout;
            $crate::autocast::moved($t, Some(&view), move |$t| {
                let kept = ::core::clone::Clone::clone(&kept);
                $crate::exec::run(stringify!($name), ($t,), $rule, move |_, ($t,)| {
                    #[allow(unused_variables)]
                    let ($($($a,)+)?) = &kept;
                    $inner::$name($t, $($($crate::ops::Lend::lend($a)),+)?)
                })
            })
        }
    )*};
    ($inner:ident, $rule:expr => $then:expr; $(fn $name:ident($($t:ident: $T:ty),+ $(; $($a:ident: $A:ty),+)?) -> $R:ty;)*) => {$(
        fn $name($($t: $T,)+ $($($a: $A),+)?) -> $R {
            $then(run_inner!($inner, $name, $rule, ($($t),+), ($($($a),+)?)))
        }
    )*};
    ($inner:ident, $rule:expr; $($body:tt)*) => {
        by_rule! { $inner, $rule => ::core::convert::identity; $($body)* }
    };
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
                move |_, ($t,)| $inner::$name($t $(, $($a),+)?),
                move |_, ($t,)| $inner::$name($t $(, $($a),+)?),
            )
        }
    )*};
}

/// An argument of an op that its body keeps: the body may run on a rank's thread after the op
/// returned, so borrowed arguments are copied.
pub(crate) trait Kept {
    type Owned: Clone + Send + Sync + 'static;
    fn keep(self) -> Self::Owned;
}

/// The argument a kept one gives the inner backend's method.
pub(crate) trait Lend<'a, A> {
    fn lend(&'a self) -> A;
}

impl<T: Clone> Lend<'_, T> for T {
    fn lend(&self) -> T {
        self.clone()
    }
}

impl<'a> Lend<'a, &'a [usize]> for Vec<usize> {
    fn lend(&'a self) -> &'a [usize] {
        self
    }
}

impl<'a> Lend<'a, &'a QuantScheme> for QuantScheme {
    fn lend(&'a self) -> &'a QuantScheme {
        self
    }
}

impl Kept for &[usize] {
    type Owned = Vec<usize>;
    fn keep(self) -> Vec<usize> {
        self.to_vec()
    }
}

impl Kept for &QuantScheme {
    type Owned = QuantScheme;
    fn keep(self) -> QuantScheme {
        *self
    }
}

macro_rules! kept_as_is {
    ($($T:ty),*) => {$(
        impl Kept for $T {
            type Owned = $T;
            fn keep(self) -> $T {
                self
            }
        }
    )*};
}

kept_as_is!(
    usize,
    bool,
    f64,
    Scalar,
    Option<usize>,
    [usize; 2],
    BoolDType,
    IntDType,
    FloatDType
);
kept_as_is!(
    ConvOptions<1>,
    ConvOptions<2>,
    ConvOptions<3>,
    ConvTransposeOptions<1>,
    ConvTransposeOptions<2>,
    ConvTransposeOptions<3>,
    DeformConvOptions<2>,
    AttentionModuleOptions,
    GridSampleOptions,
    InterpolateOptions,
    UnfoldOptions,
    IndexingUpdateOp
);

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
use burn_backend::ops::{
    AttentionModuleOptions, ConvOptions, ConvTransposeOptions, DeformConvOptions,
    GridSampleOptions, InterpolateOptions, UnfoldOptions,
};
use burn_backend::quantization::QuantScheme;
use burn_backend::tensor::IndexingUpdateOp;
use burn_backend::{Backend, BoolDType, FloatDType, IntDType, Scalar};
use std::sync::Arc;

/// max/min along `dim` with the indices of the extremes (`rules::reduce::twice`). Over the
/// sharded dim, each rank's extremes and their global indices are gathered and the best ones
/// picked (the first on ties, as on one device): `with_indices` reduces a block, `arg` finds the
/// best of the gathered extremes, `take` picks values at indices.
pub(crate) fn extreme_with_indices<B: Backend, K: Kind<B>>(
    op: &'static str,
    t: ShardedTensor<B, K>,
    dim: usize,
    with_indices: impl Fn(K::P, usize) -> (K::P, B::IntTensorPrimitive) + Send + Sync + 'static,
    arg: impl Fn(K::P, usize) -> B::IntTensorPrimitive + Send + Sync + 'static,
    take: impl Fn(usize, K::P, B::IntTensorPrimitive) -> K::P + Send + Sync + 'static,
) -> (ShardedTensor<B, K>, ShardedTensor<B, IntKind>) {
    let direct = Arc::new(with_indices);
    let block = direct.clone();
    run_reduction::<B, _, (ShardedTensor<B, K>, ShardedTensor<B, IntKind>), _>(
        op,
        (t,),
        |m| reduce::twice(m, Some(dim)),
        move |_, (t,)| direct(t, dim),
        move |r, (t,)| {
            let (values, indices) = block(t, dim);
            let start = Scalar::from(r.block_start(0) as i64);
            (values, B::int_add_scalar(indices, start))
        },
        move |_, ((values, indices),)| {
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
    arg: impl Fn(K::P, usize) -> B::IntTensorPrimitive + Send + Sync + 'static,
    extreme: impl Fn(K::P, usize) -> K::P + Send + Sync + 'static,
    take: impl Fn(usize, K::P, B::IntTensorPrimitive) -> K::P + Send + Sync + 'static,
) -> ShardedTensor<B, IntKind> {
    let arg = Arc::new(arg);
    let of_block = arg.clone();
    let with_indices = move |t: K::P, d| (extreme(t.clone(), d), of_block(t, d));
    extreme_with_indices::<B, K>(op, t, dim, with_indices, move |t, d| arg(t, d), take).1
}
