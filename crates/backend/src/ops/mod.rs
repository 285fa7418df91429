//! The backend traits of `Sharded<B>`, one file per trait. Every method is forwarded (none
//! inherits a trait default, which could differ from the inner backend's override). Methods
//! that follow one rule for one op family are declared in groups through the macros below;
//! the rest call their rule in `crate::rules` directly.

/// One-input ops that are not linear (exp, relu, comparisons with a scalar, casts): `Partial`
/// is all-reduced first, other placements are kept.
macro_rules! pointwise_ops {
    ($(fn $name:ident($t:ident: $T:ty $(, $arg:ident: $A:ty)*) -> $R:ty;)*) => {$(
        fn $name($t: $T $(, $arg: $A)*) -> $R {
            let ($t, p) = rules::pointwise($t);
            on_ranks!($t.mesh.clone(), p, [$t], B::$name($t $(, $arg)*))
        }
    )*};
}

/// One-input linear ops (negation, scaling, detach): every placement, `Partial` included, is kept.
macro_rules! placement_kept_ops {
    ($(fn $name:ident($t:ident: $T:ty $(, $arg:ident: $A:ty)*) -> $R:ty;)*) => {$(
        fn $name($t: $T $(, $arg: $A)*) -> $R {
            on_ranks!($t.mesh.clone(), $t.placement(), [$t], B::$name($t $(, $arg)*))
        }
    )*};
}

/// Two-input element-wise ops with broadcasting; `$linear` says how `Partial` passes.
macro_rules! elementwise_ops {
    ($linear:expr; $(fn $name:ident($a:ident: $TA:ty, $b:ident: $TB:ty $(, $arg:ident: $A:ty)*) -> $R:ty;)*) => {$(
        fn $name($a: $TA, $b: $TB $(, $arg: $A)*) -> $R {
            let ($a, $b, p) = rules::elementwise2($a, $b, $linear);
            on_ranks!($a.mesh.clone(), p, [$a, $b], B::$name($a, $b $(, $arg)*))
        }
    )*};
}

/// Three-input element-wise ops (mask_where).
macro_rules! elementwise3_ops {
    ($(fn $name:ident($a:ident: $TA:ty, $b:ident: $TB:ty, $c:ident: $TC:ty) -> $R:ty;)*) => {$(
        fn $name($a: $TA, $b: $TB, $c: $TC) -> $R {
            let ($a, $b, $c, p) = rules::elementwise3($a, $b, $c);
            on_ranks!($a.mesh.clone(), p, [$a, $b, $c], B::$name($a, $b, $c))
        }
    )*};
}

/// Ops that work along the dims `$dims` (sort, cumsum, softmax, flip): kept sharded along any
/// other dim.
macro_rules! along_ops {
    ($dims:expr; $(fn $name:ident($t:ident: $T:ty $(, $arg:ident: $A:ty)*) -> $R:ty;)*) => {$(
        fn $name($t: $T $(, $arg: $A)*) -> $R {
            let ($t, p) = rules::along($t, $dims, stringify!($name));
            on_ranks!($t.mesh.clone(), p, [$t], B::$name($t $(, $arg)*))
        }
    )*};
}

/// [`along_ops`] for two aligned inputs (cross product).
macro_rules! along2_ops {
    ($dims:expr; $(fn $name:ident($a:ident: $TA:ty, $b:ident: $TB:ty $(, $arg:ident: $A:ty)*) -> $R:ty;)*) => {$(
        fn $name($a: $TA, $b: $TB $(, $arg: $A)*) -> $R {
            let ($a, $b, p) = rules::along2($a, $b, $dims, stringify!($name));
            on_ranks!($a.mesh.clone(), p, [$a, $b], B::$name($a, $b $(, $arg)*))
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
