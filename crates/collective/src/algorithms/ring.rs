//! Ring algorithms: N-1 steps in which every rank passes one chunk to its right neighbour.
//! Each chunk is cut into sub-chunks so that a transfer overlaps the reduction before it.

use super::{accumulate, deliver, split_aligned, Link, CHUNK_ALIGN};
use crate::{fabric::Fabric, op::Combine, CollectiveConfig, ReduceOp, Result};
use std::ops::Range;

/// What a receiving rank does with a chunk.
#[derive(Clone, Copy)]
enum Apply {
    Combine(Combine),
    Write,
}

/// Reduce-scatter then all-gather: 2(N-1) steps, each moving 1/N of the buffer per rank.
pub(super) fn all_reduce<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    op: ReduceOp,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let chunks = aligned_chunks(f.len(&bufs[0]), n, CHUNK_ALIGN);
    reduce_scatter(f, bufs, &chunks, op.pairwise(), cfg)?;
    if op == ReduceOp::Mean {
        for (r, chunk) in chunks.iter().enumerate() {
            if !chunk.is_empty() {
                f.divide(r, &mut bufs[r], chunk.clone(), n)?;
            }
        }
    }
    let places: Vec<Vec<Range<usize>>> = chunks.into_iter().map(|c| vec![c]).collect();
    all_gather(f, bufs, &places, cfg)
}

/// After this, rank r holds the sum (or max) over ranks of `chunks[r]`.
pub(super) fn reduce_scatter<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    chunks: &[Range<usize>],
    combine: Combine,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let chunks: Vec<&[Range<usize>]> = chunks.iter().map(std::slice::from_ref).collect();
    pass(f, bufs, &chunks, cfg, Apply::Combine(combine), |r, s| {
        (r + 2 * n - s - 1) % n
    })
}

/// Rank r holds the ranges `places[r]` in place; afterwards every rank holds every range.
pub(super) fn all_gather<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    places: &[Vec<Range<usize>>],
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let places: Vec<&[Range<usize>]> = places.iter().map(Vec::as_slice).collect();
    pass(f, bufs, &places, cfg, Apply::Write, |r, s| (r + n - s) % n)
}

/// A pipelined chain root → root+1 → … : sub-chunk j crosses link k at tick j + k.
pub(super) fn broadcast<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    root: usize,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let n = bufs.len();
    let len = f.len(&bufs[root]);
    let depth = pieces_for(len * f.elem_size(), cfg.pipeline_depth * n, cfg);
    let subs = split_aligned(0..len, depth, CHUNK_ALIGN);
    let order: Vec<usize> = (0..n).map(|k| (root + k) % n).collect();
    for tick in 0..subs.len() + n - 2 {
        let links: Vec<Link> = (0..n - 1)
            .filter(|&k| tick >= k && tick - k < subs.len())
            .map(|k| Link::new(order[k], order[k + 1], subs[tick - k].clone()))
            .collect();
        deliver(f, bufs, &links, cfg)?;
    }
    Ok(())
}

/// N-1 steps; at step s rank r sends the ranges of `chunks[chunk_of(r, s)]` to rank r+1 (a
/// chunk is one range, or an all-gather's several blocks of one rank).
fn pass<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    chunks: &[&[Range<usize>]],
    cfg: &CollectiveConfig,
    apply: Apply,
    chunk_of: impl Fn(usize, usize) -> usize,
) -> Result<()> {
    let n = bufs.len();
    for step in 0..n - 1 {
        // rounds[r][k]: what rank r sends in round k. A chunk of one range is cut into
        // sub-chunks, one per round; the several blocks of a rank share the rounds (at most
        // the pipeline depth), so that many small blocks do not take a round each.
        let rounds: Vec<Vec<Vec<Range<usize>>>> = (0..n)
            .map(|r| {
                let ranges = chunks[chunk_of(r, step)].iter().filter(|c| !c.is_empty());
                let pieces: Vec<Range<usize>> = ranges
                    .flat_map(|chunk| {
                        let bytes = chunk.len() * f.elem_size();
                        let depth = pieces_for(bytes, cfg.pipeline_depth, cfg);
                        split_aligned(chunk.clone(), depth, CHUNK_ALIGN)
                    })
                    .collect();
                in_rounds(pieces, cfg.pipeline_depth.max(1))
            })
            .collect();
        let most = rounds.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..most {
            let links: Vec<Link> = (0..n)
                .flat_map(|r| {
                    let round = rounds[r].get(k).map_or(&[][..], Vec::as_slice);
                    round
                        .iter()
                        .map(move |range| Link::new(r, (r + 1) % n, range.clone()))
                })
                .collect();
            match apply {
                Apply::Combine(c) => accumulate(f, bufs, &links, c, cfg)?,
                Apply::Write => deliver(f, bufs, &links, cfg)?,
            }
        }
    }
    Ok(())
}

/// `pieces` in at most `rounds` groups of consecutive pieces, as even in count as can be.
fn in_rounds(pieces: Vec<Range<usize>>, rounds: usize) -> Vec<Vec<Range<usize>>> {
    let per = pieces.len().div_ceil(rounds).max(1);
    pieces.chunks(per).map(<[_]>::to_vec).collect()
}

/// How many sub-chunks a transfer of `bytes` is cut into.
fn pieces_for(bytes: usize, max: usize, cfg: &CollectiveConfig) -> usize {
    (bytes / cfg.min_subchunk_bytes.max(1)).clamp(1, max.max(1))
}

/// `n` ring chunks of `len` elements, each a multiple of `align` long (but the last non-empty).
pub(crate) fn aligned_chunks(len: usize, n: usize, align: usize) -> Vec<Range<usize>> {
    let units = len.div_ceil(align);
    let lens: Vec<usize> = (0..n)
        .map(|r| (units / n + usize::from(r < units % n)) * align)
        .collect();
    let mut start = 0;
    lens.iter()
        .map(|&l| {
            let r = start.min(len)..(start + l).min(len);
            start += l;
            r
        })
        .collect()
}
