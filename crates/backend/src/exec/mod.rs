//! The executor: every op of `Sharded<B>` runs the same way.
//!
//! 1. The operands' [`Meta`]s go to the op's rule, which returns a [`Plan`] (`crate::rules`).
//! 2. A fallback is counted; each operand is redistributed as the plan wants (pending random
//!    draws are drawn here, as blocks when the plan shards them).
//! 3. The op runs once per rank on that rank's parts. A rank whose block of a sharded operand is
//!    empty skips it (unless an operand is `Partial`): its result is an empty block, or zeros
//!    for a `Partial` result.
//! 4. The per-rank results are assembled with the plan's output placement; for
//!    [`Then::GatherAndMerge`] they are gathered and reduced once more.

mod operands;
mod outputs;

pub(crate) use operands::{Operand, Operands};
pub(crate) use outputs::Outputs;

use crate::mesh::Mesh;
use crate::placement::{block_ranges, Placement};
use crate::rules::{reduce, Meta, Plan, Then, Want};
use crate::stats;
use burn_backend::Backend;

/// What the op's body knows on one rank.
pub(crate) struct Rank<'a> {
    pub index: usize,
    /// The placement of the result.
    pub out: Placement,
    /// The operands as the op sees them (after redistribution).
    pub inputs: &'a [Meta],
}

impl Rank<'_> {
    /// Where this rank's block of operand `i` starts along its sharded dim (0 unless `Shard`).
    pub(crate) fn block_start(&self, i: usize) -> usize {
        self.inputs[i]
            .blocks
            .as_deref()
            .map_or(0, |b| block_ranges(b)[self.index].start)
    }
}

/// Runs `op` under `rule` with `body` on every rank.
pub(crate) fn run<B, I, O>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    body: impl Fn(&Rank, I::Local) -> O::Local + Sync,
) -> O
where
    B: Backend,
    I: Operands<B>,
    O: Outputs<B>,
{
    let ready = prepare(op, inputs, rule);
    debug_assert_eq!(ready.plan.then, Then::Done, "{op}: use run_reduction");
    execute(ready, body)
}

/// Runs a reduction whose rule may say [`Then::GatherAndMerge`]: then `local` runs on every
/// rank, its results (`M`) are gathered, and `merge` reduces them on every rank; otherwise
/// `direct` runs as in [`run`].
pub(crate) fn run_reduction<B, I, M, O>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    direct: impl Fn(&Rank, I::Local) -> <O as Outputs<B>>::Local + Sync,
    local: impl Fn(&Rank, I::Local) -> <M as Outputs<B>>::Local + Sync,
    merge: impl Fn(&Rank, (<M as Operand<B>>::Local,)) -> <O as Outputs<B>>::Local + Sync,
) -> O
where
    B: Backend,
    I: Operands<B>,
    M: Outputs<B> + Operand<B>,
    O: Outputs<B>,
{
    let ready = prepare(op, inputs, rule);
    match ready.plan.then {
        Then::Done => execute(ready, direct),
        Then::GatherAndMerge => {
            let blocks: M = execute(ready, local);
            execute(prepare(op, (blocks,), reduce::merge), merge)
        }
    }
}

/// [`run_reduction`] where the per-rank step is the op itself (max of the maxima of the
/// blocks): `merge` reduces the gathered results of `local`.
pub(crate) fn run_twice<B, I, O>(
    op: &'static str,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    local: impl Fn(&Rank, I::Local) -> <O as Outputs<B>>::Local + Sync,
    merge: impl Fn(&Rank, (<O as Operand<B>>::Local,)) -> <O as Outputs<B>>::Local + Sync,
) -> O
where
    B: Backend,
    I: Operands<B>,
    O: Outputs<B> + Operand<B>,
{
    run_reduction::<B, I, O, O>(op, inputs, rule, &local, &local, merge)
}

/// Operands redistributed as their plan wants, with what the op's body needs to know.
struct Ready<B: Backend, I> {
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
    let metas = inputs.metas();
    let plan = rule(&metas);
    debug_assert_eq!(plan.wants.len(), metas.len(), "{op}: one want per operand");
    if plan.fallback {
        stats::fallback(op);
    }
    let moves = plan.wants.iter().any(|w| *w != Want::Keep);
    let inputs = inputs.apply(&mut plan.wants.iter());
    let metas = if moves { inputs.metas() } else { metas };
    Ready {
        mesh,
        inputs,
        metas,
        plan,
    }
}

fn execute<B: Backend, I: Operands<B>, O: Outputs<B>>(
    ready: Ready<B, I>,
    body: impl Fn(&Rank, I::Local) -> O::Local + Sync,
) -> O {
    let Ready {
        mesh,
        inputs,
        metas,
        plan,
    } = ready;
    let ranks = mesh.len();
    let empty = empty_ranks(&metas, ranks);
    let args: Vec<_> = inputs.split(ranks).into_iter().enumerate().collect();
    let outs = each_rank(&mesh, args, |(index, local)| {
        if empty[index] {
            return None;
        }
        let rank = Rank {
            index,
            out: plan.out,
            inputs: &metas,
        };
        Some(body(&rank, local))
    });
    let outs = if empty.contains(&true) {
        fill_empty::<B, O>(outs, &mesh, plan.out)
    } else {
        outs.into_iter().flatten().collect()
    };
    O::assemble(outs, &mesh, plan.out)
}

/// The ranks whose block of some sharded operand is empty: they skip the op. Not when an
/// operand is `Partial` (a rank's addend may hold the whole value, as rank 0's does after
/// `Want::Partial`), nor when every rank's block is empty (the whole tensor is; every rank runs
/// the op, as one device would).
fn empty_ranks(metas: &[Meta], ranks: usize) -> Vec<bool> {
    let mut empty = vec![false; ranks];
    if metas.iter().any(|m| m.placement == Placement::Partial) {
        return empty;
    }
    for m in metas {
        if let (Placement::Shard(_), Some(blocks)) = (m.placement, &m.blocks) {
            for (e, b) in empty.iter_mut().zip(blocks) {
                *e |= *b == 0;
            }
        }
    }
    if empty.iter().all(|e| *e) {
        empty.fill(false);
    }
    empty
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

/// Calls `f` on every rank's arguments: in turn on the calling thread (the default, right for
/// backends that queue work asynchronously), or on a thread pool when the mesh asks for it
/// (backends that compute on the calling thread, like Flex).
pub(crate) fn each_rank<D, A: Send, O: Send>(
    mesh: &Mesh<D>,
    args: Vec<A>,
    f: impl Fn(A) -> O + Sync,
) -> Vec<O> {
    if mesh.parallel() && args.len() > 1 {
        use rayon::prelude::*;
        args.into_par_iter().map(&f).collect()
    } else {
        args.into_iter().map(f).collect()
    }
}
