//! Shape ops: reshape, permute, swap/transpose, expand, slice, slice-assign, cat. They keep a
//! tensor sharded as long as the sharded dim survives with its blocks intact; `Partial` passes
//! through them all (they are linear).

use crate::kind::Kind;
use crate::placement::Placement;
use crate::ranks::{common_mesh, on_ranks, PerRank};
use crate::redistribute::{to_partial, to_shard};
use crate::rules::replicate_for;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Shape, Slice, TensorMetadata};

type T<B, K> = ShardedTensor<B, K>;

/// Reshape. A `Shard(d)` tensor stays sharded when the dims before `d` are unchanged and every
/// rank's block of the trailing dims fills whole rows of the new dim `d`.
pub(crate) fn reshape<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    shape: Shape,
    op: impl Fn(K::P, Shape) -> K::P + Sync,
) -> T<B, K> {
    let Placement::Shard(d) = t.placement() else {
        return on_ranks!(t.mesh.clone(), t.placement(), [t], op(t, shape.clone()));
    };
    match local_reshape(&t.shape(), d, &t.shard_sizes().unwrap_or_default(), &shape) {
        Some(shapes) => {
            let local = PerRank(shapes);
            on_ranks!(t.mesh.clone(), t.placement(), [t, local], op(t, local))
        }
        None => {
            let t = replicate_for(t, "reshape");
            on_ranks!(
                t.mesh.clone(),
                Placement::Replicated,
                [t],
                op(t, shape.clone())
            )
        }
    }
}

fn local_reshape(old: &Shape, d: usize, sizes: &[usize], new: &Shape) -> Option<Vec<Shape>> {
    if new.num_dims() <= d || old[..d] != new[..d] {
        return None;
    }
    let inner_old: usize = old[d + 1..].iter().product();
    let inner_new: usize = new[d + 1..].iter().product();
    if inner_new == 0 {
        return None;
    }
    let rows: Option<Vec<usize>> = sizes
        .iter()
        .map(|s| (s * inner_old % inner_new == 0).then_some(s * inner_old / inner_new))
        .collect();
    let rows = rows?;
    if rows.iter().sum::<usize>() != new[d] {
        return None;
    }
    Some(
        rows.into_iter()
            .map(|r| {
                let mut s = new.clone();
                s[d] = r;
                s
            })
            .collect(),
    )
}

/// Permute: the sharded dim moves with its axis.
pub(crate) fn permute<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    axes: &[usize],
    op: impl Fn(K::P, &[usize]) -> K::P + Sync,
) -> T<B, K> {
    let p = match t.placement() {
        Placement::Shard(d) => Placement::Shard(axes.iter().position(|a| *a == d).unwrap_or(d)),
        p => p,
    };
    on_ranks!(t.mesh.clone(), p, [t], op(t, axes))
}

pub(crate) fn swap_dims<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    dim1: usize,
    dim2: usize,
    op: impl Fn(K::P, usize, usize) -> K::P + Sync,
) -> T<B, K> {
    let p = match t.placement() {
        Placement::Shard(d) if d == dim1 => Placement::Shard(dim2),
        Placement::Shard(d) if d == dim2 => Placement::Shard(dim1),
        p => p,
    };
    on_ranks!(t.mesh.clone(), p, [t], op(t, dim1, dim2))
}

/// Swaps the last two dims.
pub(crate) fn transpose<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    op: impl Fn(K::P) -> K::P + Sync,
) -> T<B, K> {
    let n = t.rank();
    let p = match t.placement() {
        Placement::Shard(d) if n >= 2 && d == n - 1 => Placement::Shard(n - 2),
        Placement::Shard(d) if n >= 2 && d == n - 2 => Placement::Shard(n - 1),
        p => p,
    };
    on_ranks!(t.mesh.clone(), p, [t], op(t))
}

/// Expand (broadcast to a larger shape, new dims in front): a sharded dim that is not
/// broadcast stays sharded.
pub(crate) fn expand<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    shape: Shape,
    op: impl Fn(K::P, Shape) -> K::P + Sync,
) -> T<B, K> {
    let Placement::Shard(d) = t.placement() else {
        return on_ranks!(t.mesh.clone(), t.placement(), [t], op(t, shape.clone()));
    };
    let offset = shape.num_dims().saturating_sub(t.rank());
    let global = t.shape();
    if shape.num_dims() < t.rank() || global[d] != shape[d + offset] {
        let t = replicate_for(t, "expand");
        return on_ranks!(
            t.mesh.clone(),
            Placement::Replicated,
            [t],
            op(t, shape.clone())
        );
    }
    on_ranks!(t.mesh.clone(), Placement::Shard(d + offset), [t], {
        let mut local = shape.clone();
        local[d + offset] = t.shape()[d];
        op(t, local)
    })
}

/// Whether `slices` keeps all of dim `d` (of global length `len`).
fn keeps_whole_dim(slices: &[Slice], d: usize, len: usize) -> bool {
    slices
        .get(d)
        .is_none_or(|s| s.step == 1 && s.to_range(len) == (0..len))
}

/// `slices` with dim `d` left whole, for use on a block.
fn without_dim(slices: &[Slice], d: usize) -> Vec<Slice> {
    let mut s = slices.to_vec();
    if let Some(x) = s.get_mut(d) {
        *x = Slice::full();
    }
    s
}

/// Slice: a sharded tensor stays sharded when the sharded dim is kept whole.
pub(crate) fn slice<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    slices: &[Slice],
    op_name: &'static str,
    op: impl Fn(K::P, &[Slice]) -> K::P + Sync,
) -> T<B, K> {
    match t.placement() {
        Placement::Shard(d) if keeps_whole_dim(slices, d, t.shape()[d]) => {
            let local = without_dim(slices, d);
            on_ranks!(t.mesh.clone(), t.placement(), [t], op(t, &local))
        }
        Placement::Shard(_) => {
            let t = replicate_for(t, op_name);
            on_ranks!(t.mesh.clone(), Placement::Replicated, [t], op(t, slices))
        }
        p => on_ranks!(t.mesh.clone(), p, [t], op(t, slices)),
    }
}

/// Slice-assign: both sharded alike along a dim the slice keeps whole, both `Partial`, or
/// both `Replicated`.
pub(crate) fn slice_assign<B: Backend, K: Kind<B>>(
    t: T<B, K>,
    slices: &[Slice],
    value: T<B, K>,
    op_name: &'static str,
    op: impl Fn(K::P, &[Slice], K::P) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(&[Some(&t.mesh), Some(&value.mesh)], op_name);
    match (t.placement(), value.placement()) {
        (Placement::Shard(d), _) if keeps_whole_dim(slices, d, t.shape()[d]) => {
            let value = to_shard(value, d, t.shard_sizes().as_deref());
            let local = without_dim(slices, d);
            on_ranks!(mesh, t.placement(), [t, value], op(t, &local, value))
        }
        (Placement::Partial, Placement::Partial | Placement::Replicated) => {
            let value = to_partial(value);
            on_ranks!(mesh, Placement::Partial, [t, value], op(t, slices, value))
        }
        (Placement::Replicated, Placement::Replicated) => {
            on_ranks!(
                mesh,
                Placement::Replicated,
                [t, value],
                op(t, slices, value)
            )
        }
        _ => {
            let (t, value) = (replicate_for(t, op_name), replicate_for(value, op_name));
            on_ranks!(
                mesh,
                Placement::Replicated,
                [t, value],
                op(t, slices, value)
            )
        }
    }
}

/// Concatenation along `dim`: sharded along another dim (operands sliced to match the first
/// sharded one), all `Partial`, or all `Replicated`.
pub(crate) fn cat<B: Backend, K: Kind<B>>(
    ts: Vec<T<B, K>>,
    dim: usize,
    op_name: &'static str,
    op: impl Fn(Vec<K::P>, usize) -> K::P + Sync,
) -> T<B, K> {
    let mesh = common_mesh(
        &ts.iter().map(|t| Some(&t.mesh)).collect::<Vec<_>>(),
        op_name,
    );
    let shard = ts.iter().find_map(|t| match t.placement() {
        Placement::Shard(d) if d != dim => Some((d, t.shard_sizes())),
        _ => None,
    });
    let (ts, p) = if let Some((d, sizes)) = shard {
        let ts = ts
            .into_iter()
            .map(|t| to_shard(t, d, sizes.as_deref()))
            .collect();
        (ts, Placement::Shard(d))
    } else if ts.iter().all(|t| t.placement() == Placement::Partial) {
        (ts, Placement::Partial)
    } else {
        let ts = ts.into_iter().map(|t| replicate_for(t, op_name)).collect();
        (ts, Placement::Replicated)
    };
    on_ranks!(mesh, p, [ts], op(ts, dim))
}
