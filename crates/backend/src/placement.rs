//! Where the value of a sharded tensor lives across the ranks of its mesh.

use std::ops::Range;

/// How the per-rank parts of a tensor make up its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Every rank holds the whole tensor.
    Replicated,
    /// Rank r holds the r-th block along this dim; block sizes may differ.
    Shard(usize),
    /// Every rank holds an addend; the value is the sum over ranks.
    Partial,
}

/// Sizes of `len` rows split over `ranks` ranks as evenly as possible, larger blocks first.
pub fn even_split(len: usize, ranks: usize) -> Vec<usize> {
    (0..ranks)
        .map(|r| len / ranks + usize::from(r < len % ranks))
        .collect()
}

/// The row range of every block, from the block sizes.
pub fn ranges(sizes: &[usize]) -> Vec<Range<usize>> {
    let mut start = 0;
    sizes
        .iter()
        .map(|s| {
            start += s;
            start - s..start
        })
        .collect()
}
