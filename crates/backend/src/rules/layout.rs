//! Shape ops: reshape, permute, swap/transpose, expand, slice, slice-assign, cat. They keep a
//! tensor sharded as long as the sharded dim survives with its blocks intact; `Partial` passes
//! through them all (they are linear). Each rank then runs the op with its local arguments
//! (the `local_*` functions).

use crate::placement::Placement;
use crate::placement::{local_split, world_blocks};
use crate::rules::{Meta, Plan, Rank, Want};
use burn_backend::{Shape, Slice};

/// Reshape. A `Shard(d)` tensor stays sharded when the dims before `d` are unchanged and every
/// rank's block of the trailing dims fills whole rows of the new dim `d`. Blocks that do not fill whole rows are first re-cut into blocks that do (an even split of
/// the new dim's rows), when there are such blocks: the operand stays sharded at the cost of
/// moving the rows that change rank.
pub(crate) fn reshape(m: &[Meta], new: &Shape) -> Plan {
    let p = m[0].placement;
    if let Some(to) = unit_dims_moved(&m[0], new) {
        return Plan::keep(m, Placement::Shard(to));
    }
    if let Placement::Shard(d) = p {
        if local_reshapes(&m[0], new).is_none() {
            return match fitting_blocks(&m[0], new) {
                Some(blocks) => Plan::new(vec![Want::Shard(d, Some(blocks))], p),
                None => Plan::fallback(m),
            };
        }
    }
    Plan::keep(m, p)
}

/// Blocks of the `Shard` operand `m` along its sharded dim that become an even split of whole
/// rows of dim `d` of `new`, if row boundaries fall on element boundaries.
fn fitting_blocks(m: &Meta, new: &Shape) -> Option<Vec<usize>> {
    let (d, inner_old, inner_new) = sharded_rows(m, new)?;
    if inner_old == 0 || m.shape[d] * inner_old != new[d] * inner_new {
        return None;
    }
    let ranks = m.blocks.as_ref()?.len() / m.processes;
    let rows = world_blocks(local_split(new[d], ranks, m.processes)?, m.processes);
    rows.into_iter()
        .map(|r| exact_div(r * inner_new, inner_old))
        .collect()
}

/// For a reshape of the `Shard(d)` operand `m` to `new` that keeps the dims before `d`: `d` and
/// the elements of one row of dim `d` before and after.
fn sharded_rows(m: &Meta, new: &Shape) -> Option<(usize, usize, usize)> {
    let Placement::Shard(d) = m.placement else {
        return None;
    };
    let old = &m.shape;
    if new.num_dims() <= d || old[..d] != new[..d] {
        return None;
    }
    let inner_old: usize = old[d + 1..].iter().product();
    let inner_new: usize = new[d + 1..].iter().product();
    Some((d, inner_old, inner_new))
}

/// For a reshape of the `Shard(d)` operand `m` to `new` that only adds or drops dims of size
/// 1 (a `[C]` scale reshaped to `[1, C, 1, 1]`): the index of the sharded dim in `new`, which
/// keeps every rank's block as it is.
fn unit_dims_moved(m: &Meta, new: &Shape) -> Option<usize> {
    let Placement::Shard(d) = m.placement else {
        return None;
    };
    let old = &m.shape;
    let sized = |s: &Shape| -> Vec<(usize, usize)> {
        let dims = (0..s.num_dims()).filter(|&i| s[i] != 1);
        dims.map(|i| (i, s[i])).collect()
    };
    let (from, to) = (sized(old), sized(new));
    let same = from.len() == to.len() && from.iter().zip(&to).all(|(a, b)| a.1 == b.1);
    let at = from.iter().position(|(i, _)| *i == d)?;
    same.then(|| to[at].0)
}

fn exact_div(a: usize, b: usize) -> Option<usize> {
    a.is_multiple_of(b).then_some(a / b)
}

/// Every rank's new shape for a reshape of the `Shard` operand `m` to `new`, if the blocks fit.
pub(crate) fn local_reshapes(m: &Meta, new: &Shape) -> Option<Vec<Shape>> {
    let (d, inner_old, inner_new) = sharded_rows(m, new)?;
    if inner_new == 0 {
        return None;
    }
    let blocks = m.blocks.as_deref()?;
    let rows: Vec<usize> = blocks
        .iter()
        .map(|s| exact_div(s * inner_old, inner_new))
        .collect::<Option<_>>()?;
    if rows.iter().sum::<usize>() != new[d] {
        return None;
    }
    let local = |r: usize| {
        let mut s = new.clone();
        s[d] = r;
        s
    };
    Some(rows.into_iter().map(local).collect())
}

/// Permute: the sharded dim moves with its axis.
pub(crate) fn permute(m: &[Meta], axes: &[usize]) -> Plan {
    let out = match m[0].placement {
        Placement::Shard(d) => Placement::Shard(axes.iter().position(|a| *a == d).unwrap_or(d)),
        p => p,
    };
    Plan::keep(m, out)
}

pub(crate) fn swap_dims(m: &[Meta], dim1: usize, dim2: usize) -> Plan {
    let out = match m[0].placement {
        Placement::Shard(d) if d == dim1 => Placement::Shard(dim2),
        Placement::Shard(d) if d == dim2 => Placement::Shard(dim1),
        p => p,
    };
    Plan::keep(m, out)
}

/// Swaps the last two dims.
pub(crate) fn transpose(m: &[Meta]) -> Plan {
    match m[0].rank() {
        n if n >= 2 => swap_dims(m, n - 2, n - 1),
        _ => Plan::keep(m, m[0].placement),
    }
}

/// Expand (broadcast to a larger shape, new dims in front): a sharded dim that is not
/// broadcast stays sharded.
pub(crate) fn expand(m: &[Meta], shape: &Shape) -> Plan {
    let Placement::Shard(d) = m[0].placement else {
        return Plan::keep(m, m[0].placement);
    };
    let offset = shape.num_dims().saturating_sub(m[0].rank());
    if shape.num_dims() < m[0].rank() || m[0].shape[d] != shape[d + offset] {
        return Plan::fallback(m);
    }
    Plan::keep(m, Placement::Shard(d + offset))
}

/// A rank's target shape for expand: its own block length along the sharded dim.
pub(crate) fn local_expand(shape: &Shape, out: Placement, part: &Shape) -> Shape {
    let mut local = shape.clone();
    if let Placement::Shard(d) = out {
        let offset = shape.num_dims() - part.num_dims();
        local[d] = part[d - offset];
    }
    local
}

/// Whether `slices` keeps all of dim `d` (of global length `len`).
fn keeps_whole_dim(slices: &[Slice], d: usize, len: usize) -> bool {
    slices
        .get(d)
        .is_none_or(|s| s.step == 1 && s.to_range(len) == (0..len))
}

/// Slice: a sharded tensor stays sharded when the sharded dim is kept whole.
pub(crate) fn slice(m: &[Meta], slices: &[Slice]) -> Plan {
    match m[0].placement {
        Placement::Shard(d) if !keeps_whole_dim(slices, d, m[0].shape[d]) => Plan::fallback(m),
        p => Plan::keep(m, p),
    }
}

/// The slices a rank applies to its block: the sharded dim is left whole.
pub(crate) fn local_slices(slices: &[Slice], out: Placement) -> Vec<Slice> {
    let mut s = slices.to_vec();
    if let Placement::Shard(d) = out {
        if let Some(x) = s.get_mut(d) {
            *x = Slice::full();
        }
    }
    s
}

/// Slice-assign `[tensor, value]`: both sharded alike along a dim the slice keeps whole (a
/// `Replicated` tensor is cut into the value's blocks, as autodiff's slice backward assigns a
/// sharded gradient into zeros), both `Partial` (either made so), or both `Replicated`.
pub(crate) fn slice_assign(m: &[Meta], slices: &[Slice]) -> Plan {
    let (t, value) = (&m[0], &m[1]);
    match (t.placement, value.placement) {
        (Placement::Shard(d), _) if keeps_whole_dim(slices, d, t.shape[d]) => {
            Plan::new(vec![Want::Keep, Want::shard_like(d, t)], t.placement)
        }
        (Placement::Replicated, Placement::Shard(d)) if keeps_whole_dim(slices, d, t.shape[d]) => {
            Plan::new(
                vec![Want::shard_like(d, value), Want::Keep],
                value.placement,
            )
        }
        (Placement::Partial, Placement::Partial | Placement::Replicated) => {
            Plan::new(vec![Want::Keep, Want::Partial], Placement::Partial)
        }
        // A `Partial` gradient assigned into zeros (the slice backward of a replicated weight).
        (Placement::Replicated, Placement::Partial) => {
            Plan::new(vec![Want::Partial, Want::Keep], Placement::Partial)
        }
        (Placement::Replicated, Placement::Replicated) => Plan::keep(m, Placement::Replicated),
        _ => Plan::fallback(m),
    }
}

/// Concatenation along `dim`: sharded along another dim (operands sliced to match the first
/// sharded one), all `Partial`, or all `Replicated`.
pub(crate) fn cat(m: &[Meta], dim: usize) -> Plan {
    let sharded = m.iter().find_map(|x| match x.placement {
        Placement::Shard(d) if d != dim => Some((d, x)),
        _ => None,
    });
    if let Some((d, like)) = sharded {
        let wants = m
            .iter()
            .map(|x| {
                if x.placement == like.placement && x.blocks == like.blocks {
                    Want::Keep
                } else {
                    Want::shard_like(d, like)
                }
            })
            .collect();
        return Plan::new(wants, Placement::Shard(d));
    }
    if m.iter().all(|x| x.is(Placement::Partial)) {
        return Plan::keep(m, Placement::Partial);
    }
    Plan::fallback(m)
}

/// A rank's new shape for a reshape: its own rows of the sharded dim.
pub(crate) fn local_shape(r: &Rank, new: &Shape) -> Shape {
    let input = &r.inputs[0];
    let moved = unit_dims_moved(input, new).filter(|to| r.out == Placement::Shard(*to));
    if let (Some(to), Some(blocks)) = (moved, input.blocks.as_deref()) {
        let mut local = new.clone();
        local[to] = blocks[r.index];
        return local;
    }
    match r.out {
        Placement::Shard(_) => local_reshapes(input, new)
            .map(|mut shapes| shapes.swap_remove(r.index))
            .unwrap_or_else(|| new.clone()),
        _ => new.clone(),
    }
}
