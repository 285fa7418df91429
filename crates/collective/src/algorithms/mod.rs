//! Collective algorithms, written once against [`Fabric`].
//!
//! Every entry point takes one buffer per rank (index = rank) and is called by a single
//! controller; [`crate::Communicator`] builds the one-call-per-rank API on top.

mod one_shot;
mod ring;

use crate::fabric::{Fabric, Outgoing};
use crate::{config::Algorithm, op::Combine, CollectiveConfig, ReduceOp, Result};
use std::collections::HashMap;
use std::ops::Range;

/// Ring chunk boundaries are multiples of this many elements, so kernels can vectorize.
pub(crate) const CHUNK_ALIGN: usize = 64;

/// Reduce every rank's buffer in place; all ranks end with the same values.
pub(crate) fn all_reduce<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    op: ReduceOp,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let len = f.len(&bufs[0]);
    if len == 0 {
        return Ok(());
    }
    if bufs.len() == 1 {
        return Ok(()); // sum, mean and max over one rank are the identity
    }
    match cfg.resolve(len * f.elem_size()) {
        Algorithm::OneShot => one_shot::all_reduce(f, bufs, op, cfg),
        _ => ring::all_reduce(f, bufs, op, cfg),
    }
}

/// Reduce, leaving rank r with elements `parts[r]` of the result (the parts are back to back
/// and cover the buffer). The input buffers are used as scratch space.
pub(crate) fn reduce_scatter<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    op: ReduceOp,
    parts: &[usize],
    cfg: &CollectiveConfig,
) -> Result<Vec<F::Buf>> {
    let n = bufs.len();
    let len = f.len(&bufs[0]);
    if parts.len() != n || parts.iter().sum::<usize>() != len {
        return Err(crate::CollectiveError::BadPartition {
            parts: parts.to_vec(),
            len,
        });
    }
    let parts = ranges_from_lens(parts);
    if n > 1 {
        match cfg.resolve(f.len(&bufs[0]) * f.elem_size()) {
            Algorithm::OneShot => one_shot::reduce_scatter(f, bufs, &parts, op.pairwise(), cfg)?,
            _ => ring::reduce_scatter(f, bufs, &parts, op.pairwise(), cfg)?,
        }
    }
    let mut out = Vec::with_capacity(n);
    for (r, part) in parts.iter().enumerate() {
        if op == ReduceOp::Mean && n > 1 {
            f.divide(r, &mut bufs[r], part.clone(), n)?;
        }
        out.push(f.staged_as_buf(f.send(r, &bufs[r], part.clone(), r)?)?);
    }
    Ok(out)
}

/// Every rank's shard on every rank, in one buffer of `len` elements laid out by `places`:
/// `places[r]` are the ranges of the result that rank r's shard fills, its elements in order
/// (a shard made of several blocks lands each where it belongs, so that a bucket of tensors
/// sharded by rows is gathered tensor after tensor). The places do not overlap; elements no
/// place covers (padding) are left as allocated.
pub(crate) fn all_gather_placed<F: Fabric>(
    f: &F,
    shards: Vec<F::Buf>,
    places: &[Vec<Range<usize>>],
    len: usize,
    cfg: &CollectiveConfig,
) -> Result<Vec<F::Buf>> {
    let lens: Vec<usize> = shards.iter().map(|s| f.len(s)).collect();
    check_places(places, &lens, len)?;
    let mut outs = Vec::with_capacity(shards.len());
    for (r, shard) in shards.into_iter().enumerate() {
        let mut out = f.alloc(r, len)?;
        match places[r].as_slice() {
            [whole] if whole.len() == lens[r] && !whole.is_empty() => {
                f.write(r, &mut out, whole.start, f.buf_as_staged(shard))?
            }
            blocks => {
                let mut from = 0;
                for block in blocks.iter().filter(|b| !b.is_empty()) {
                    let staged = f.send(r, &shard, from..from + block.len(), r)?;
                    f.write(r, &mut out, block.start, staged)?;
                    from += block.len();
                }
            }
        }
        outs.push(out);
    }
    if outs.len() > 1 && len > 0 {
        match cfg.resolve(len * f.elem_size()) {
            Algorithm::OneShot => one_shot::all_gather(f, &mut outs, places, cfg)?,
            _ => ring::all_gather(f, &mut outs, places, cfg)?,
        }
    }
    Ok(outs)
}

/// Whether `places` fit a result of `len` elements: one list per rank, as long in all as the
/// rank's shard, no two ranges overlapping.
fn check_places(places: &[Vec<Range<usize>>], lens: &[usize], len: usize) -> Result<()> {
    let bad = || crate::CollectiveError::BadPlaces {
        places: places.to_vec(),
        lens: lens.to_vec(),
        len,
    };
    if places.len() != lens.len() {
        return Err(bad());
    }
    let mut all: Vec<Range<usize>> = Vec::new();
    for (blocks, &shard) in places.iter().zip(lens) {
        let reversed = blocks.iter().any(|b| b.start > b.end);
        if reversed || blocks.iter().map(Range::len).sum::<usize>() != shard {
            return Err(bad());
        }
        all.extend(blocks.iter().filter(|b| !b.is_empty()).cloned());
    }
    all.sort_by_key(|b| b.start);
    let overlap = all.windows(2).any(|w| w[0].end > w[1].start);
    match overlap || all.last().is_some_and(|b| b.end > len) {
        true => Err(bad()),
        false => Ok(()),
    }
}

/// Copy rank `root`'s buffer into every other rank's buffer, in place.
pub(crate) fn broadcast<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    root: usize,
    cfg: &CollectiveConfig,
) -> Result<()> {
    let len = f.len(&bufs[root]);
    if len == 0 || bufs.len() == 1 {
        return Ok(());
    }
    match cfg.resolve(len * f.elem_size()) {
        Algorithm::OneShot => one_shot::broadcast(f, bufs, root, cfg),
        _ => ring::broadcast(f, bufs, root, cfg),
    }
}

/// Split `len` elements into `n` contiguous parts whose sizes differ by at most one
/// (the first `len % n` parts are one longer). This is how reduce-scatter assigns parts.
pub fn shard_ranges(len: usize, n: usize) -> Vec<Range<usize>> {
    let (base, extra) = (len / n, len % n);
    let lens: Vec<usize> = (0..n).map(|r| base + usize::from(r < extra)).collect();
    ranges_from_lens(&lens)
}

/// Contiguous ranges with the given lengths, back to back from 0.
pub fn ranges_from_lens(lens: &[usize]) -> Vec<Range<usize>> {
    let mut start = 0;
    lens.iter()
        .map(|&l| {
            let r = start..start + l;
            start += l;
            r
        })
        .collect()
}

/// Split `range` into at most `pieces` parts whose boundaries (but the last) are multiples
/// of `align` elements past `range.start`.
pub(crate) fn split_aligned(range: Range<usize>, pieces: usize, align: usize) -> Vec<Range<usize>> {
    let len = range.len();
    let units = len.div_ceil(align).max(1);
    let pieces = pieces.clamp(1, units);
    let per = units.div_ceil(pieces) * align;
    (0..pieces)
        .map(|k| {
            let s = (range.start + k * per).min(range.end);
            let e = (range.start + (k + 1) * per).min(range.end);
            s..e
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// One transfer of a step: `range` of rank `from`'s buffer, to rank `to`.
#[derive(Clone, Debug)]
pub(crate) struct Link {
    pub from: usize,
    pub to: usize,
    pub range: Range<usize>,
}

impl Link {
    pub fn new(from: usize, to: usize, range: Range<usize>) -> Self {
        Self { from, to, range }
    }
}

/// Run the transfers of one step; the staged results come back in `links` order. Links that
/// carry the same range from the same rank are one multicast, so a transport that stages
/// through the host reads that source once.
pub(crate) fn send_all<F: Fabric>(
    f: &F,
    bufs: &[F::Buf],
    links: &[Link],
    cfg: &CollectiveConfig,
    held: bool,
) -> Result<Vec<F::Staged>> {
    let casts = multicasts(links);
    let sent = if f.sends_wait_on_host() {
        run_casts(f, &casts, links, cfg, |c| {
            f.send_many(c.from, &bufs[c.from], c.range.clone(), &c.tos, held)
        })?
    } else {
        // Nothing waits: the step's sends go as one round.
        f.send_round(&outgoing(&casts, bufs), held)?
    };
    let mut out: Vec<Option<F::Staged>> = links.iter().map(|_| None).collect();
    for (cast, staged) in casts.iter().zip(sent) {
        for (&i, st) in cast.links.iter().zip(staged) {
            out[i] = Some(st);
        }
    }
    Ok(out
        .into_iter()
        .map(|st| st.expect("every link belongs to one multicast"))
        .collect())
}

/// Combine every link's range of its source into the same range of its destination. Sources
/// are held ([`Fabric::send_many`]): no algorithm combines into a range a rank has sent in the
/// same collective (the ring's reduce-scatter combines a chunk, then sends it on).
pub(crate) fn accumulate<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    links: &[Link],
    combine: Combine,
    cfg: &CollectiveConfig,
) -> Result<()> {
    for (link, st) in links.iter().zip(send_all(f, bufs, links, cfg, true)?) {
        f.combine(link.to, &mut bufs[link.to], link.range.start, st, combine)?;
    }
    Ok(())
}

/// Copy every link's range of its source into the same range of its destination: in place
/// where the fabric can, else sent to a temporary and written. Sources are held
/// ([`Fabric::send_many`]): a rank is only written the ranges others send it, which it sends on
/// afterwards, if at all.
pub(crate) fn deliver<F: Fabric>(
    f: &F,
    bufs: &mut [F::Buf],
    links: &[Link],
    cfg: &CollectiveConfig,
) -> Result<()> {
    let casts = multicasts(links);
    let shared: &[F::Buf] = bufs;
    if !f.sends_wait_on_host() {
        // Nothing waits: the step's sends may land in place as one round.
        let dsts: Vec<Vec<&F::Buf>> = (casts.iter())
            .map(|c| c.tos.iter().map(|&to| &shared[to]).collect())
            .collect();
        if f.send_round_in_place(&outgoing(&casts, shared), &dsts)? {
            return Ok(());
        }
    }
    let placed = run_casts(f, &casts, links, cfg, |c| {
        let dsts: Vec<&F::Buf> = c.tos.iter().map(|&to| &shared[to]).collect();
        f.send_in_place(c.from, &shared[c.from], c.range.clone(), &c.tos, &dsts)
    })?;
    let rest: Vec<Link> = casts
        .iter()
        .zip(placed)
        .filter(|(_, placed)| !placed)
        .flat_map(|(c, _)| c.links.iter().map(|&i| links[i].clone()))
        .collect();
    for (link, st) in rest.iter().zip(send_all(f, bufs, &rest, cfg, true)?) {
        f.write(link.to, &mut bufs[link.to], link.range.start, st)?;
    }
    Ok(())
}

/// `job` for every multicast, concurrently (a host thread each, issuing to the caller's CubeCL
/// stream, the device stream) when the step's transfers are big enough to be worth a thread and the fabric's sends
/// wait on the host; results in `casts` order.
fn run_casts<F: Fabric, T: Send>(
    f: &F,
    casts: &[Multicast],
    links: &[Link],
    cfg: &CollectiveConfig,
    job: impl Fn(&Multicast) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let biggest = links.iter().map(|l| l.range.len()).max().unwrap_or(0) * f.elem_size();
    if casts.len() < 2 || biggest < cfg.parallel_transfer_bytes || !f.sends_wait_on_host() {
        return casts.iter().map(&job).collect();
    }
    // One thread per sender and set of receivers, running their multicasts in order: as many
    // as there are pairs of ranks that move bytes at once, and no more for a rank that sends
    // many blocks (an all-gather of a bucket's parameters) to the same peers.
    let mut senders: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut index: HashMap<(usize, &[usize]), usize> = HashMap::new();
    for (i, c) in casts.iter().enumerate() {
        match index.get(&(c.from, c.tos.as_slice())) {
            Some(&s) => senders[s].1.push(i),
            None => {
                index.insert((c.from, c.tos.as_slice()), senders.len());
                senders.push((c.from, vec![i]));
            }
        }
    }
    let job = &job;
    // The transfers issue to the caller's CubeCL stream, as if the caller had issued them: the
    // device stream (`crate::stream`), where the groups run.
    let stream = cubecl::stream_id::StreamId::current();
    let mut out: Vec<Option<Result<T>>> = casts.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (senders.iter())
            .map(|(_, of_rank)| {
                // Collected inside `executes`: every job issues on the caller's stream.
                let run = move || of_rank.iter().map(|&i| job(&casts[i])).collect::<Vec<_>>();
                scope.spawn(move || stream.executes(run))
            })
            .collect();
        for (h, (from, of_rank)) in handles.into_iter().zip(&senders) {
            let results = h.join().unwrap_or_else(|p| {
                let reason = crate::error::panic_message(p.as_ref());
                let failed = || {
                    Err(crate::CollectiveError::Runtime {
                        rank: *from,
                        reason: reason.clone(),
                    })
                };
                of_rank.iter().map(|_| failed()).collect()
            });
            for (&i, result) in of_rank.iter().zip(results) {
                out[i] = Some(result);
            }
        }
    });
    out.into_iter()
        .map(|r| r.expect("every multicast ran on its sender's thread"))
        .collect()
}

/// Links of one step that share a source rank and range.
struct Multicast {
    from: usize,
    range: Range<usize>,
    tos: Vec<usize>,
    /// Indices into the step's links, in `tos` order.
    links: Vec<usize>,
}

/// Each multicast as a send of `bufs`.
fn outgoing<'a, B>(casts: &'a [Multicast], bufs: &'a [B]) -> Vec<Outgoing<'a, B>> {
    (casts.iter())
        .map(|c| Outgoing {
            from: c.from,
            src: &bufs[c.from],
            range: c.range.clone(),
            tos: &c.tos,
        })
        .collect()
}

fn multicasts(links: &[Link]) -> Vec<Multicast> {
    let mut casts: Vec<Multicast> = Vec::new();
    let mut index: HashMap<(usize, usize, usize), usize> = HashMap::new();
    for (i, l) in links.iter().enumerate() {
        let key = (l.from, l.range.start, l.range.end);
        match index.get(&key) {
            Some(&c) => {
                casts[c].tos.push(l.to);
                casts[c].links.push(i);
            }
            None => {
                index.insert(key, casts.len());
                casts.push(Multicast {
                    from: l.from,
                    range: l.range.clone(),
                    tos: vec![l.to],
                    links: vec![i],
                });
            }
        }
    }
    casts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_ranges_cover_and_balance() {
        for len in [0, 1, 5, 7, 64, 1001] {
            for n in 1..=8 {
                let parts = shard_ranges(len, n);
                assert_eq!(parts.len(), n);
                assert_eq!(parts[0].start, 0);
                assert_eq!(parts[n - 1].end, len);
                for w in parts.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let sizes: Vec<_> = parts.iter().map(|p| p.len()).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn links_with_one_source_and_range_form_one_multicast() {
        let links = [
            Link::new(0, 1, 0..8),
            Link::new(1, 0, 0..8),
            Link::new(0, 2, 0..8),
            Link::new(0, 2, 8..16),
            Link::new(0, 3, 0..8),
        ];
        let casts = multicasts(&links);
        let seen: Vec<_> = casts
            .iter()
            .map(|c| (c.from, c.range.clone(), c.tos.clone(), c.links.clone()))
            .collect();
        assert_eq!(
            seen,
            vec![
                (0, 0..8, vec![1, 2, 3], vec![0, 2, 4]),
                (1, 0..8, vec![0], vec![1]),
                (0, 8..16, vec![2], vec![3]),
            ]
        );
    }

    #[test]
    fn split_aligned_covers_with_aligned_cuts() {
        for (start, len, pieces) in [
            (0, 1000, 4),
            (128, 64, 8),
            (64, 1, 3),
            (0, 4096, 1),
            (7, 700, 5),
        ] {
            let parts = split_aligned(start..start + len, pieces, 64);
            assert!(parts.len() <= pieces);
            assert_eq!(parts.first().unwrap().start, start);
            assert_eq!(parts.last().unwrap().end, start + len);
            for w in parts.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert_eq!((w[0].end - start) % 64, 0);
            }
        }
    }
}
