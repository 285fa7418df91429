//! Element-wise ops (with broadcasting): matching placements are kept; a `Replicated` operand
//! meets a `Shard(d)` one by slicing its own block locally; `Partial` survives only through
//! linear ops.

use crate::placement::Placement;
use crate::rules::{Meta, Plan, Want};

/// How an op treats `Partial` (sum-over-ranks) operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Linear {
    /// Not linear: `Partial` operands are summed first.
    No,
    /// add/sub: Partial ± Partial is Partial.
    Sum,
    /// mul: one Partial factor times Replicated ones is Partial.
    Product,
    /// div: a Partial numerator over a Replicated denominator is Partial.
    Numerator,
}

/// One input, not linear (exp, relu, comparisons with a scalar, casts): a `Partial` operand is
/// summed first; other placements are kept.
pub(crate) fn unary(m: &[Meta]) -> Plan {
    match m[0].placement {
        Placement::Partial => Plan::replicated(m),
        p => Plan::keep(m, p),
    }
}

/// One input, linear (detach, an integer or quantized scaling): every placement is kept,
/// `Partial` included.
pub(crate) fn linear_unary(m: &[Meta]) -> Plan {
    Plan::keep(m, m[0].placement)
}

/// Scaling (by a scalar, negation): linear, so a `Partial` operand may stay `Partial`, unless
/// a clone of it is alive. Then it is summed here, and the clones read the sum: a clone that
/// needs the sum later (BatchNorm scales its batch variance for the running average, then takes
/// the variance's square root) would otherwise sum the same value again.
pub(crate) fn scaling(m: &[Meta]) -> Plan {
    match m[0].placement {
        Placement::Partial if m[0].sum_shared => Plan::replicated(m),
        p => Plan::keep(m, p),
    }
}

/// Any number of inputs, not linear, aligned like [`broadcast`] (one input: [`unary`]).
pub(crate) fn aligned(m: &[Meta]) -> Plan {
    if m.len() == 1 {
        unary(m)
    } else {
        broadcast(m, Linear::No)
    }
}

/// Two or more inputs with broadcasting. `Partial` operands pass as `linear` allows; otherwise
/// the result is sharded like the first operand sharded along a dim longer than 1: operands
/// sharded alike are kept, operands of length 1 along that dim are `Replicated` (they
/// broadcast), the others are sliced into the same blocks. With no such operand, everything is
/// `Replicated`.
pub(crate) fn broadcast(m: &[Meta], linear: Linear) -> Plan {
    let partial = |x: &Meta| x.is(Placement::Partial);
    let replicated = |x: &Meta| x.is(Placement::Replicated);
    let stays_partial = match linear {
        Linear::No => false,
        Linear::Sum => m.iter().all(partial),
        Linear::Product => {
            m.iter().filter(|x| partial(x)).count() == 1
                && m.iter().all(|x| partial(x) || replicated(x))
        }
        Linear::Numerator => partial(&m[0]) && m[1..].iter().all(replicated),
    };
    if stays_partial {
        return match linear {
            Linear::Product | Linear::Numerator => sum_before_broadcast(m),
            _ => None,
        }
        .unwrap_or_else(|| Plan::keep(m, Placement::Partial));
    }
    let Some((d, target)) = m.iter().find_map(|x| x.sharded_dim().map(|d| (d, x))) else {
        let wants = m
            .iter()
            .map(|x| {
                if replicated(x) {
                    Want::Keep
                } else {
                    Want::Replicated
                }
            })
            .collect();
        return Plan::new(wants, Placement::Replicated);
    };
    let wants = m
        .iter()
        .map(|x| {
            if x.placement == Placement::Shard(d) && x.blocks == target.blocks {
                Want::Keep
            } else if x.shape.get(d) == Some(&1) {
                // Broadcast along the sharded dim: every rank needs the whole (1-long) operand.
                if replicated(x) {
                    Want::Keep
                } else {
                    Want::Replicated
                }
            } else {
                Want::shard_like(d, target)
            }
        })
        .collect();
    Plan::new(wants, Placement::Shard(d))
}

/// A product or quotient whose `Partial` operand is broadcast to a larger result: that operand
/// is summed first, and the result sharded along the longest dim it broadcasts over (even
/// blocks, the other operands sliced; across processes, a dim they can share equally). Kept `Partial`, the result would cost a sum of its own
/// size wherever it is used next: BatchNorm's backward pass multiplies a channel-sized
/// `Partial` gradient into an activation-sized tensor, and the activation-sized sum took most
/// of a ResNet step's communication.
fn sum_before_broadcast(m: &[Meta]) -> Option<Plan> {
    let rank = m[0].rank();
    if m.iter().any(|x| x.rank() != rank) {
        return None;
    }
    let out: Vec<usize> = (0..rank)
        .map(|d| m.iter().map(|x| x.shape[d]).max().unwrap_or(1))
        .collect();
    let partial = m.iter().find(|x| x.is(Placement::Partial))?;
    // In a world of processes, only a dim every process can hold an equal share of.
    let d = (0..rank)
        .filter(|&d| partial.shape[d] == 1 && out[d] > 1)
        .filter(|&d| out[d].is_multiple_of(partial.processes))
        .max_by_key(|&d| out[d])?;
    let wants = m
        .iter()
        .map(|x| match x.placement {
            Placement::Partial => Want::Replicated,
            _ if x.shape[d] == 1 => Want::Keep,
            _ => Want::Shard(d, None),
        })
        .collect();
    Some(Plan::new(wants, Placement::Shard(d)))
}
