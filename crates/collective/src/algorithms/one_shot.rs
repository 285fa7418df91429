//! One-shot algorithms: every rank reads what it needs straight from its peers in a single
//! step. Latency-optimal for small messages; moves N-1 times more data than the ring.

use super::{accumulate, deliver, send_all, Link};
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
    let links: Vec<Link> = (0..n)
        .flat_map(|r| {
            (0..n)
                .filter(move |&j| !(r == 0 && j == 0))
                .map(move |j| (j, r))
        })
        .map(|(j, r)| Link::new(j, r, whole.clone()))
        .collect();
    // Not held: every rank then writes the whole buffer it sent.
    let mut staged = send_all(f, bufs, &links, cfg, false)?.into_iter();
    let combine = op.pairwise();
    for (r, buf) in bufs.iter_mut().enumerate() {
        if r != 0 {
            let first = staged.next().expect("one staged buffer per (rank, peer)");
            f.write(r, buf, 0, first)?;
        }
        for _ in 1..n {
            let next = staged.next().expect("one staged buffer per (rank, peer)");
            f.combine(r, buf, 0, next, combine)?;
        }
        if op == ReduceOp::Mean {
            f.divide(r, buf, whole.clone(), n)?;
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
    let links = peer_links(bufs.len(), |_, to| parts[to].clone());
    accumulate(f, bufs, &links, combine, cfg)
}

/// Rank r copies the ranges `places[j]` from every peer j.
pub(super) fn all_gather<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    places: &[Vec<Range<usize>>],
    cfg: &CollectiveConfig,
) -> Result<()> {
    let most = places.iter().map(Vec::len).max().unwrap_or(0);
    let links: Vec<Link> = (0..most)
        .flat_map(|k| {
            let range = move |from: usize, _| places[from].get(k).cloned().unwrap_or(0..0);
            peer_links(bufs.len(), range)
        })
        .collect();
    deliver(f, bufs, &links, cfg)
}

/// Every rank copies the root's buffer.
pub(super) fn broadcast<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    root: usize,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let whole = 0..f.len(&bufs[root]);
    let links: Vec<Link> = (0..bufs.len())
        .filter(|&r| r != root)
        .map(|r| Link::new(root, r, whole.clone()))
        .collect();
    deliver(f, bufs, &links, cfg)
}

/// A link from every rank to every other rank, carrying `range(from, to)` (empty ones dropped).
fn peer_links(n: usize, range: impl Fn(usize, usize) -> Range<usize>) -> Vec<Link> {
    (0..n)
        .flat_map(|to| {
            (0..n)
                .filter(move |&from| from != to)
                .map(move |from| (from, to))
        })
        .map(|(from, to)| Link::new(from, to, range(from, to)))
        .filter(|l| !l.range.is_empty())
        .collect()
}
