//! Ops that work along some dims (softmax, sort, cumsum, flip, repeat, unfold, cross): kept
//! sharded along any other dim; sharded along one of theirs, they fall back.

use crate::placement::Placement;
use crate::rules::elementwise::aligned;
use crate::rules::{Meta, Plan};

pub(crate) fn along(m: &[Meta], dims: &[usize]) -> Plan {
    let plan = aligned(m);
    match plan.out {
        Placement::Shard(d) if dims.contains(&d) => Plan::fallback(m),
        _ => plan,
    }
}
