//! Placement rules, one file per op family. Every rule is a pure planning function: it reads
//! what its operands are ([`Meta`]: placement, global shape, block sizes) and the op's
//! arguments, and returns a [`Plan`]: what each operand must become, the placement of the
//! result, and whether the op fell back to running replicated. It moves no data; the executor
//! (the executor, `exec/`) applies the plan. `tests/backend/table.rs` derives the family of every method from `ops/`.

pub(crate) mod along;
pub(crate) mod conv;
pub(crate) mod creation;
pub(crate) mod elementwise;
pub(crate) mod embedding;
pub(crate) mod indexing;
pub(crate) mod layout;
pub(crate) mod linear;
pub(crate) mod matmul;
pub(crate) mod no_rule;
pub(crate) mod pool;
pub(crate) mod reduce;

use crate::kind::Kind;
use crate::placement::{block_ranges, Placement};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, Shape, TensorMetadata};

/// What an op's body knows on one rank (the executor hands it over with the rank's share).
pub(crate) struct Rank<'a> {
    /// The rank in the world (this process's ranks' numbers follow those of the processes
    /// before it, `across.rs`).
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

/// What a rule knows about one operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub placement: Placement,
    /// The global shape (dims held inline up to 5: no allocation per operand and op).
    pub shape: Shape,
    /// The block sizes along the sharded dim (`Shard` only).
    pub blocks: Option<Vec<usize>>,
    /// A `Partial` tensor with live clones, which share its sum once one of them is summed.
    pub sum_shared: bool,
    /// The processes of the mesh's world (1: this process alone): new blocks must give each
    /// the same sizes (`across.rs`).
    pub processes: usize,
}

impl Meta {
    pub(crate) fn of<B: Backend, K: Kind<B>>(t: &ShardedTensor<B, K>) -> Self {
        Self {
            placement: t.placement(),
            shape: t.shape(),
            blocks: t.shard_sizes(),
            sum_shared: t.has_live_clones(),
            processes: t.mesh.processes(),
        }
    }

    pub(crate) fn is(&self, p: Placement) -> bool {
        self.placement == p
    }

    /// The sharded dim, when it is longer than 1 (a 1-long dim broadcasts; its blocks are not
    /// worth keeping).
    pub(crate) fn sharded_dim(&self) -> Option<usize> {
        match self.placement {
            Placement::Shard(d) if self.shape[d] > 1 => Some(d),
            _ => None,
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.shape.len()
    }
}

/// What an operand must become before the op runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Want {
    Keep,
    Replicated,
    /// Blocks along the dim with these sizes (an even split when `None`).
    Shard(usize, Option<Vec<usize>>),
    Partial,
}

impl Want {
    /// Sharded along `dim` like the operand `like`.
    pub(crate) fn shard_like(dim: usize, like: &Meta) -> Self {
        Want::Shard(dim, like.blocks.clone())
    }
}

/// What happens after the op ran on every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    Done,
    /// The result holds one partial result per rank, as blocks along its sharded dim: gather
    /// them and reduce them again (max, min, arg max… over a sharded dim).
    GatherAndMerge,
}

/// The outcome of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// One per operand, in order (absent optional operands have none).
    pub wants: Vec<Want>,
    pub out: Placement,
    /// The op had no rule for these placements: its operands are made `Replicated` and it runs
    /// on every rank (counted and traced as a fallback).
    pub fallback: bool,
    pub then: Then,
}

impl Plan {
    pub(crate) fn new(wants: Vec<Want>, out: Placement) -> Self {
        Self {
            wants,
            out,
            fallback: false,
            then: Then::Done,
        }
    }

    /// Every operand as it is.
    pub(crate) fn keep(metas: &[Meta], out: Placement) -> Self {
        Self::new(vec![Want::Keep; metas.len()], out)
    }

    /// Every operand `Replicated` and a `Replicated` result. A fallback when an operand was not
    /// `Replicated` already.
    pub(crate) fn fallback(metas: &[Meta]) -> Self {
        Self {
            fallback: metas.iter().any(|m| !m.is(Placement::Replicated)),
            ..Self::replicated(metas)
        }
    }

    /// Every operand `Replicated` and a `Replicated` result, as the op needs (not a fallback:
    /// a non-linear op on `Partial` addends must see their sum).
    pub(crate) fn replicated(metas: &[Meta]) -> Self {
        Self::new(vec![Want::Replicated; metas.len()], Placement::Replicated)
    }

    pub(crate) fn then(mut self, then: Then) -> Self {
        self.then = then;
        self
    }
}

/// The operands as they will be once `first` (which only keeps or replicates) is applied: for
/// rules that prepare each operand, then align them.
pub(crate) fn staged(metas: &[Meta], first: &[Want]) -> Vec<Meta> {
    metas
        .iter()
        .zip(first)
        .map(|(m, w)| match w {
            Want::Keep => m.clone(),
            _ => Meta {
                placement: Placement::Replicated,
                shape: m.shape.clone(),
                blocks: None,
                sum_shared: false,
                processes: m.processes,
            },
        })
        .collect()
}

/// `then` planned on the [`staged`] operands, as wants on the original ones: where `then`
/// keeps an operand, what `first` asked for stands.
pub(crate) fn compose(first: &[Want], then: Plan) -> Plan {
    let wants = first
        .iter()
        .zip(then.wants)
        .map(|(a, b)| if b == Want::Keep { a.clone() } else { b })
        .collect();
    Plan { wants, ..then }
}

/// The rule shape of the module ops (conv, pool, linear, embedding): the operands at `act` are
/// activations (inputs, output gradients, indices). Each is kept when `fits` says so, summed
/// when `Partial`, and otherwise replicated (a fallback); then they are aligned with one another
/// like element-wise operands. Every other operand (weights, biases) is made `Replicated`. The
/// result is placed like the aligned activations.
pub(crate) fn activations(m: &[Meta], act: &[usize], fits: impl Fn(&Meta) -> bool) -> Plan {
    let mut fallback = false;
    let first: Vec<Want> = act
        .iter()
        .map(|&i| match m[i].placement {
            _ if fits(&m[i]) => Want::Keep,
            Placement::Partial => Want::Replicated,
            _ => {
                fallback = true;
                Want::Replicated
            }
        })
        .collect();
    let acts: Vec<Meta> = act.iter().map(|&i| m[i].clone()).collect();
    let acts = staged(&acts, &first);
    let aligned = match &acts[..] {
        [one] => Plan::keep(&acts, one.placement),
        _ => elementwise::broadcast(&acts, elementwise::Linear::No),
    };
    let aligned = compose(&first, aligned);
    let mut wants = vec![Want::Replicated; m.len()];
    for (&i, want) in act.iter().zip(aligned.wants) {
        wants[i] = want;
    }
    Plan {
        fallback,
        ..Plan::new(wants, aligned.out)
    }
}
