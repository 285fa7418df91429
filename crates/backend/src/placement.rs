//! Where the value of a sharded tensor lives across the ranks of its mesh.

use std::ops::Range;

/// How the per-rank parts of a tensor make up its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Every rank holds the whole tensor.
    Replicated,
    /// Rank r holds the r-th block along this dim; block sizes may differ, and a block may be
    /// empty.
    Shard(usize),
    /// Every rank holds an addend; the value is the sum over ranks.
    Partial,
}

/// Sizes of `len` rows split over `ranks` ranks as evenly as possible, larger blocks first (the
/// split reduce-scatter uses too).
pub(crate) fn even_split(len: usize, ranks: usize) -> Vec<usize> {
    firemesh_collective::shard_ranges(len, ranks)
        .into_iter()
        .map(|r| r.len())
        .collect()
}

/// The row range of every block, from the block sizes.
pub(crate) fn block_ranges(sizes: &[usize]) -> Vec<Range<usize>> {
    firemesh_collective::ranges_from_lens(sizes)
}

/// Where each block starts, from the block sizes.
pub(crate) fn offsets(sizes: &[usize]) -> Vec<usize> {
    block_ranges(sizes).into_iter().map(|r| r.start).collect()
}

/// This process's block sizes of `len` rows split over the world's ranks: every process the
/// same blocks (an even split of its `len / processes` rows), `None` when the processes
/// cannot hold equal shares.
pub(crate) fn local_split(len: usize, ranks: usize, processes: usize) -> Option<Vec<usize>> {
    len.is_multiple_of(processes)
        .then(|| even_split(len / processes, ranks))
}

/// The block sizes of every world rank, from one process's (they repeat per process).
pub(crate) fn world_blocks(local: Vec<usize>, processes: usize) -> Vec<usize> {
    if processes == 1 {
        return local;
    }
    let n = local.len();
    local.into_iter().cycle().take(n * processes).collect()
}
