//! The executor: every op of `Sharded<B>` runs the same way.
//!
//! 1. The operands' [`Meta`]s go to the op's rule, which returns a [`Plan`] (`crate::rules`).
//! 2. A fallback is counted; each operand is redistributed as the plan wants (pending random
//!    draws are drawn here, as blocks when the plan shards them).
//! 3. The op runs once per rank on that rank's parts: in turn on the calling thread, or, on a
//!    mesh whose ranks have their own threads (`Mesh::set_parallel`), rank 0 on the calling
//!    thread and the others queued to their threads (`lanes`), without waiting for them. A rank
//!    whose block of a sharded operand is empty skips it (unless an operand is `Partial`): its
//!    result is an empty block, or zeros for a `Partial` result.
//! 4. The per-rank results are assembled with the plan's output placement; for
//!    [`Then::GatherAndMerge`] they are gathered and reduced once more.

mod operands;
mod outputs;

pub(crate) use crate::runtime::lanes::{on_device_stream, Lanes, Later};

pub(crate) use operands::{Operand, Operands};
pub(crate) use outputs::Outputs;

use crate::mesh::Mesh;
use crate::placement::Placement;
pub(crate) use crate::rules::Rank;
use crate::rules::{reduce, Meta, Plan, Then, Want};
use crate::stats;
use burn_backend::Backend;
use std::sync::Arc;

/// The body of an op: what one rank runs on its share. It may run on the rank's thread.
pub(crate) trait Body<L, O>: Fn(&Rank, L) -> O + Send + Sync + 'static {}
impl<L, O, F: Fn(&Rank, L) -> O + Send + Sync + 'static> Body<L, O> for F {}

/// Runs `op` under `rule` with `body` on every rank.
pub(crate) fn run<B, I, O>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    body: impl Body<I::Local, O::Local>,
) -> O
where
    B: Backend,
    I: Operands<B>,
    O: Outputs<B>,
{
    on_device_stream::<B, _>(|| {
        let ready = prepare(op, inputs, rule);
        debug_assert_eq!(ready.plan.then, Then::Done, "{op}: use run_reduction");
        execute(ready, body)
    })
}

/// Runs a reduction whose rule may say [`Then::GatherAndMerge`]: then `local` runs on every
/// rank, its results (`M`) are gathered, and `merge` reduces them on every rank; otherwise
/// `direct` runs as in [`run`].
pub(crate) fn run_reduction<B, I, M, O>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    direct: impl Body<I::Local, <O as Outputs<B>>::Local>,
    local: impl Body<I::Local, <M as Outputs<B>>::Local>,
    merge: impl Body<(<M as Operand<B>>::Local,), <O as Outputs<B>>::Local>,
) -> O
where
    B: Backend,
    I: Operands<B>,
    M: Outputs<B> + Operand<B>,
    O: Outputs<B>,
{
    on_device_stream::<B, _>(|| {
        let ready = prepare(op, inputs, rule);
        match ready.plan.then {
            Then::Done => execute(ready, direct),
            Then::GatherAndMerge => {
                let blocks: M = execute(ready, local);
                execute(prepare(op, (blocks,), reduce::merge), merge)
            }
        }
    })
}

/// [`run_reduction`] where the per-rank step is the op itself (max of the maxima of the
/// blocks): `merge` reduces the gathered results of `local`.
pub(crate) fn run_twice<B, I, O>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    local: impl Body<I::Local, <O as Outputs<B>>::Local>,
    merge: impl Body<(<O as Operand<B>>::Local,), <O as Outputs<B>>::Local>,
) -> O
where
    B: Backend,
    I: Operands<B>,
    O: Outputs<B> + Operand<B>,
{
    let local = Arc::new(local);
    let direct = local.clone();
    run_reduction::<B, I, O, O>(
        op,
        inputs,
        rule,
        move |r: &Rank, x| direct(r, x),
        move |r: &Rank, x| local(r, x),
        merge,
    )
}

/// Operands redistributed as their plan wants, with what the op's body needs to know.
struct Ready<B: Backend, I> {
    op: &'static str,
    mesh: Mesh<B::Device>,
    inputs: I,
    metas: Vec<Meta>,
    plan: Plan,
}

fn prepare<B: Backend, I: Operands<B>>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
) -> Ready<B, I> {
    stats::op();
    let mesh = inputs.mesh(op);
    // Casts and layout moves of a sharded parameter keep it sharded; other ops gather it.
    let inputs = inputs.settled(!crate::runtime::armed::keeps_parameters_sharded());
    let metas = inputs.metas();
    let plan = rule(&metas);
    debug_assert_eq!(plan.wants.len(), metas.len(), "{op}: one want per operand");
    if plan.fallback {
        stats::fallback(op);
    }
    let moves = plan.wants.iter().any(|w| *w != Want::Keep);
    let inputs = if moves {
        stats::preparing(op, || inputs.apply(&mut plan.wants.iter()))
    } else {
        inputs.apply(&mut plan.wants.iter())
    };
    let metas = if moves { inputs.metas() } else { metas };
    Ready {
        op,
        mesh,
        inputs,
        metas,
        plan,
    }
}

fn execute<B: Backend, I: Operands<B>, O: Outputs<B>>(
    ready: Ready<B, I>,
    body: impl Body<I::Local, O::Local>,
) -> O {
    let Ready {
        op,
        mesh,
        inputs,
        metas,
        plan,
    } = ready;
    if let Some(lanes) = mesh.lanes() {
        if alike(&metas, plan.out) {
            return on_lanes::<B, I, O>(op, lanes, &mesh, inputs, metas, plan.out, body);
        }
    }
    let ranks = mesh.len();
    // Rules see the world: its shapes, its blocks, its rank numbers.
    let first = mesh.world_rank(0);
    let empty = empty_ranks(&metas, mesh.world_len()).map(|e| e[first..first + ranks].to_vec());
    let run = |index: usize, local: I::Local| {
        let rank = Rank {
            index: first + index,
            out: plan.out,
            inputs: &metas,
        };
        let _span = rank_span(op, index);
        body(&rank, local)
    };
    let split = inputs.split(ranks).enumerate();
    match empty {
        // Every rank runs the op: its results as they come.
        None => {
            let outs = split.map(|(index, issued)| run(index, I::resolve(issued)));
            O::assemble_from(outs, mesh, plan.out)
        }
        Some(empty) => {
            let outs = split
                .map(|(index, issued)| {
                    let local = I::resolve(issued);
                    (!empty[index]).then(|| run(index, local))
                })
                .collect();
            let outs = fill_empty::<B, O>(outs, &mesh, plan.out);
            O::assemble(outs, mesh, plan.out)
        }
    }
}

/// Whether every rank's share has the shapes of rank 0's, so that their results will too and
/// the other ranks can be left to their threads: the blocks of every sharded operand are equal,
/// and a sharded result comes from a sharded operand.
fn alike(metas: &[Meta], out: Placement) -> bool {
    let even = |m: &Meta| {
        m.blocks
            .as_ref()
            .is_none_or(|b| b.iter().all(|x| *x == b[0]))
    };
    metas.iter().all(even)
        && (!matches!(out, Placement::Shard(_))
            || metas
                .iter()
                .any(|m| matches!(m.placement, Placement::Shard(_))))
}

/// Queues ranks 1.. to their threads, then runs rank 0 here.
fn on_lanes<B: Backend, I: Operands<B>, O: Outputs<B>>(
    op: &'static str,
    lanes: &Lanes,
    mesh: &Mesh<B::Device>,
    inputs: I,
    metas: Vec<Meta>,
    out: Placement,
    body: impl Body<I::Local, O::Local>,
) -> O {
    stats::on_rank_threads();
    let metas: Arc<[Meta]> = metas.into();
    let body = Arc::new(body);
    let mut shares = inputs.split(mesh.len());
    let first = shares.next().expect("a mesh has a rank 0");
    let world_first = mesh.world_rank(0);
    let rest = (1..)
        .zip(shares)
        .map(|(index, issued)| {
            let (body, metas) = (body.clone(), metas.clone());
            lanes.submit(index, move || {
                let local = I::resolve(issued);
                let rank = Rank {
                    index: world_first + index,
                    out,
                    inputs: &metas,
                };
                let _span = rank_span(op, index);
                body(&rank, local)
            })
        })
        .collect();
    let rank = Rank {
        index: world_first,
        out,
        inputs: &metas,
    };
    let first = {
        let local = I::resolve(first);
        let _span = rank_span(op, 0);
        body(&rank, local)
    };
    O::assemble_issued(first, rest, mesh, out)
}

/// One rank's share of an op, as a `tracing` span (target `firemesh::rank`, level trace): the
/// compute lanes of a per-rank timeline (`firemesh train --trace`).
fn rank_span(op: &'static str, rank: usize) -> tracing::span::EnteredSpan {
    tracing::trace_span!(target: "firemesh::rank", "op", op, rank).entered()
}

/// The ranks whose block of some sharded operand is empty, `None` when there are none: they skip
/// the op. Not when an
/// operand is `Partial` (a rank's addend may hold the whole value, as rank 0's does after
/// `Want::Partial`), nor when every rank's block is empty (the whole tensor is; every rank runs
/// the op, as one device would).
fn empty_ranks(metas: &[Meta], ranks: usize) -> Option<Vec<bool>> {
    if metas.iter().any(|m| m.placement == Placement::Partial) {
        return None;
    }
    let mut empty: Option<Vec<bool>> = None;
    for m in metas {
        if let (Placement::Shard(_), Some(blocks)) = (m.placement, &m.blocks) {
            if blocks.contains(&0) {
                let e = empty.get_or_insert_with(|| vec![false; ranks]);
                for (e, b) in e.iter_mut().zip(blocks) {
                    *e |= *b == 0;
                }
            }
        }
    }
    empty.filter(|e| !e.iter().all(|x| *x))
}

/// The results of the ranks that skipped the op, made from a rank that ran it.
fn fill_empty<B: Backend, O: Outputs<B>>(
    outs: Vec<Option<O::Local>>,
    mesh: &Mesh<B::Device>,
    out: Placement,
) -> Vec<O::Local> {
    let Some(template) = outs.iter().flatten().next() else {
        unreachable!("at least one rank runs every op")
    };
    let blanks: Vec<Option<O::Local>> = (0..outs.len())
        .map(|r| {
            outs[r]
                .is_none()
                .then(|| O::blank(template, out, mesh.device(r)))
        })
        .collect();
    outs.into_iter()
        .zip(blanks)
        .map(|(o, blank)| o.or(blank).expect("a blank for every rank that skipped"))
        .collect()
}
