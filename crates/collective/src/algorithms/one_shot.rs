//! One-shot algorithms: every rank reads what it needs straight from its peers in a single
//! step. Latency-optimal for small messages; moves N-1 times more data than the ring.

use super::{send_all, Transfer};
use crate::{fabric::Fabric, op::Combine, CollectiveConfig, ReduceOp, Result};
use std::ops::Range;

/// Every rank sums all buffers in rank order 0, 1, …, N-1, so every rank gets the same bits.
pub(super) fn all_reduce<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    op: ReduceOp,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let whole = 0..f.len(&bufs[0]);
    // Rank 0 starts from its own buffer; every other rank needs all N buffers, its own included
    // (it is overwritten by rank 0's before being added back in order).
    let wanted: Vec<(usize, usize)> = (0..n)
        .flat_map(|r| (0..n).filter(move |&j| !(r == 0 && j == 0)).map(move |j| (j, r)))
        .collect();
    let transfers = wanted
        .iter()
        .map(|&(j, r)| Transfer { from: j, src: &bufs[j], range: whole.clone(), to: r })
        .collect();
    let mut staged = send_all(f, transfers, cfg)?.into_iter();
    let combine = op.pairwise();
    for r in 0..n {
        if r != 0 {
            let first = staged.next().expect("one staged buffer per (rank, peer)");
            f.write(r, &mut bufs[r], 0, first)?;
        }
        for _ in 1..n {
            let next = staged.next().expect("one staged buffer per (rank, peer)");
            f.combine(r, &mut bufs[r], 0, next, combine)?;
        }
        if op == ReduceOp::Mean {
            f.divide(r, &mut bufs[r], whole.clone(), n)?;
        }
    }
    Ok(())
}

/// Rank r adds `parts[r]` of every peer into its own buffer.
pub(super) fn reduce_scatter<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    parts: &[Range<usize>],
    combine: Combine,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let wanted: Vec<(usize, usize)> = (0..n)
        .flat_map(|r| (0..n).filter(move |&j| j != r && !parts[r].is_empty()).map(move |j| (j, r)))
        .collect();
    let transfers = wanted
        .iter()
        .map(|&(j, r)| Transfer { from: j, src: &bufs[j], range: parts[r].clone(), to: r })
        .collect();
    let staged = send_all(f, transfers, cfg)?;
    for (&(_, r), st) in wanted.iter().zip(staged) {
        f.combine(r, &mut bufs[r], parts[r].start, st, combine)?;
    }
    Ok(())
}

/// Rank r copies `parts[j]` from every peer j.
pub(super) fn all_gather<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    parts: &[Range<usize>],
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let wanted: Vec<(usize, usize)> = (0..n)
        .flat_map(|r| (0..n).filter(move |&j| j != r && !parts[j].is_empty()).map(move |j| (j, r)))
        .collect();
    let transfers = wanted
        .iter()
        .map(|&(j, r)| Transfer { from: j, src: &bufs[j], range: parts[j].clone(), to: r })
        .collect();
    let staged = send_all(f, transfers, cfg)?;
    for (&(j, r), st) in wanted.iter().zip(staged) {
        f.write(r, &mut bufs[r], parts[j].start, st)?;
    }
    Ok(())
}

/// Every rank copies the root's buffer.
pub(super) fn broadcast<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    root: usize,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let whole = 0..f.len(&bufs[root]);
    let targets: Vec<usize> = (0..n).filter(|&r| r != root).collect();
    let transfers = targets
        .iter()
        .map(|&r| Transfer { from: root, src: &bufs[root], range: whole.clone(), to: r })
        .collect();
    let staged = send_all(f, transfers, cfg)?;
    for (&r, st) in targets.iter().zip(staged) {
        f.write(r, &mut bufs[r], 0, st)?;
    }
    Ok(())
}
