//! Indexing ops: select/gather and their accumulating inverses (the backward of select and
//! gather). Indices sharded like the data keep the result sharded; selecting rows of a
//! `Replicated` table with sharded indices gives sharded rows, and accumulating sharded values
//! into a `Replicated` base gives `Partial` addends.

use crate::kind::{Int, Kind};
use crate::placement::Placement;
use crate::ranks::{common_mesh, on_ranks};
use crate::redistribute::{to_partial, to_replicated, to_shard};
use crate::rules::{apply, meta, plan, replicate_for, Linear};
use crate::tensor::ShardedTensor;
use burn_backend::Backend;

type T<B, K> = ShardedTensor<B, K>;
type I<B> = ShardedTensor<B, Int>;

/// `select(tensor, dim, indices)` with 1-D indices.
pub(crate) fn select<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim: usize,
    indices: I<B>,
    op_name: &'static str,
    op: impl Fn(K::P, usize, B::IntTensorPrimitive) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(&[Some(&t.mesh), Some(&indices.mesh)], op_name);
    let (t, indices, p) = match (t.placement(), indices.placement()) {
        (Placement::Shard(d), _) if d != dim => (t, to_replicated(indices), Placement::Shard(d)),
        (Placement::Replicated, Placement::Shard(0)) => (t, indices, Placement::Shard(dim)),
        (Placement::Partial, _) => (t, to_replicated(indices), Placement::Partial),
        _ => {
            let indices = replicate_for(indices, op_name);
            (replicate_for(t, op_name), indices, Placement::Replicated)
        }
    };
    on_ranks!(mesh, p, [t, indices], op(t, dim, indices))
}

/// `select_add(tensor, dim, indices, value)`: `tensor` plus `value`'s rows added at `indices`.
pub(crate) fn select_add<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim: usize,
    indices: I<B>,
    value: T<B, K>,
    op_name: &'static str,
    op: impl Fn(K::P, usize, B::IntTensorPrimitive, K::P) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(
        &[Some(&t.mesh), Some(&indices.mesh), Some(&value.mesh)],
        op_name,
    );
    let summable = K::NAME != "bool";
    let (t, indices, value, p) = match (t.placement(), indices.placement(), value.placement()) {
        (Placement::Shard(d), _, _) if d != dim => {
            let value = to_shard(value, d, t.shard_sizes().as_deref());
            (t, to_replicated(indices), value, Placement::Shard(d))
        }
        (Placement::Replicated | Placement::Partial, Placement::Shard(0), Placement::Shard(vd))
            if summable && vd == dim && value.shard_sizes() == indices.shard_sizes() =>
        {
            (to_partial(t), indices, value, Placement::Partial)
        }
        (Placement::Partial, _, Placement::Partial) => {
            (t, to_replicated(indices), value, Placement::Partial)
        }
        _ => {
            let (i, v) = (
                replicate_for(indices, op_name),
                replicate_for(value, op_name),
            );
            (replicate_for(t, op_name), i, v, Placement::Replicated)
        }
    };
    on_ranks!(mesh, p, [t, indices, value], op(t, dim, indices, value))
}

/// Aligns data, indices (and values) sharded along a dim other than `dim`; `None` when no
/// operand is sharded so.
fn align_off_dim<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    indices: I<B>,
    value: Option<T<B, K>>,
    dim: usize,
) -> Result<(T<B, K>, I<B>, Option<T<B, K>>, Placement), (T<B, K>, I<B>, Option<T<B, K>>)> {
    let mut metas = vec![meta(&t), meta(&indices)];
    if let Some(v) = &value {
        metas.push(meta(v));
    }
    let (wants, p) = plan(&metas, Linear::No);
    match p {
        Placement::Shard(d) if d != dim => {
            let value = value.map(|v| apply(v, &wants[2]));
            Ok((apply(t, &wants[0]), apply(indices, &wants[1]), value, p))
        }
        _ => Err((t, indices, value)),
    }
}

/// `gather(dim, tensor, indices)`: indices have the data's shape except along `dim`.
pub(crate) fn gather<B: Backend, K: Kind<B>>(
    dim: usize,
    t: T<B, K>,
    indices: I<B>,
    op_name: &'static str,
    op: impl Fn(usize, K::P, B::IntTensorPrimitive) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(&[Some(&t.mesh), Some(&indices.mesh)], op_name);
    if t.placement() == Placement::Partial && indices.placement() == Placement::Replicated {
        return on_ranks!(mesh, Placement::Partial, [t, indices], op(dim, t, indices));
    }
    let (t, indices, p) = match align_off_dim(t, indices, None, dim) {
        Ok((t, indices, _, p)) => (t, indices, p),
        Err((t, indices, _)) => {
            let indices = replicate_for(indices, op_name);
            (replicate_for(t, op_name), indices, Placement::Replicated)
        }
    };
    on_ranks!(mesh, p, [t, indices], op(dim, t, indices))
}

/// `scatter_add(dim, tensor, indices, value)`.
pub(crate) fn scatter_add<B: Backend, K: Kind<B>>(
    dim: usize,
    t: T<B, K>,
    indices: I<B>,
    value: T<B, K>,
    op_name: &'static str,
    op: impl Fn(usize, K::P, B::IntTensorPrimitive, K::P) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(
        &[Some(&t.mesh), Some(&indices.mesh), Some(&value.mesh)],
        op_name,
    );
    if t.placement() == Placement::Partial
        && value.placement() == Placement::Partial
        && indices.placement() == Placement::Replicated
    {
        return on_ranks!(
            mesh,
            Placement::Partial,
            [t, indices, value],
            op(dim, t, indices, value)
        );
    }
    let (t, indices, value, p) = match align_off_dim(t, indices, Some(value), dim) {
        Ok((t, i, v, p)) => (t, i, v.expect("value was given"), p),
        Err((t, i, v)) => {
            let v = replicate_for(v.expect("value was given"), op_name);
            let i = replicate_for(i, op_name);
            (replicate_for(t, op_name), i, v, Placement::Replicated)
        }
    };
    on_ranks!(mesh, p, [t, indices, value], op(dim, t, indices, value))
}
