//! A gather of several tensors' blocks at once (a bucket of parameters), each block written
//! once, where its tensor needs it, with no buffer concatenated first and cut up after:
//! - every rank on one device: each tensor's blocks concatenated once, the result shared by the
//!   ranks;
//! - through the mesh's collective group: one placed all-gather
//!   ([`super::MeshCollectives::gather_placed`]) into one flat buffer per rank in which the
//!   tensors lie whole, one after another, at offsets of [`ALIGN_BYTES`], each tensor then a
//!   view of the buffer (the CubeCL ring lands every block in place);
//! - a mesh that is one process's share of a world: gathered rank after rank across the
//!   processes (`in_world.rs`), then each tensor's blocks joined with one copy.

use super::{comm_span, deliver, flat, group_call, route, unflat, To, Way};
use crate::kind::FloatKind;
use crate::mesh::Mesh;
use crate::placement::offsets;
use crate::stats::{self, Route};
use burn_backend::{Backend, TensorMetadata};
use std::ops::Range;

type P<B> = burn_backend::tensor::FloatTensor<B>;

/// Where a tensor starts and ends in a gathered buffer: a multiple of this many bytes, so that
/// a slice of the buffer is a view on every CubeCL runtime (CUDA's memory alignment is 512
/// bytes, wgpu's at most 256).
pub(crate) const ALIGN_BYTES: usize = 512;

/// Flat `blocks[r][i]` of every rank `r` of `mesh` and tensor `i` gathered: for each tensor,
/// each rank's flat whole (`[i][r]`). `lens[i][w]` is world rank `w`'s block length of tensor
/// `i` (every process holds blocks of the same sizes).
pub(crate) fn gather_placed<B: Backend>(
    blocks: Vec<Vec<P<B>>>,
    lens: &[Vec<usize>],
    mesh: &Mesh<B::Device>,
) -> Vec<Vec<P<B>>> {
    let elements: usize = lens.iter().flatten().sum();
    let _span = comm_span("gather", mesh.len(), elements);
    if mesh.processes() > 1 {
        return across_processes::<B>(blocks, lens, mesh);
    }
    let _clock = stats::comm_clock::<B>(mesh);
    match route::<B, FloatKind>(mesh) {
        (Route::OneDevice, _) => {
            let mut of_rank: Vec<_> = blocks.into_iter().map(Vec::into_iter).collect();
            (lens.iter())
                .map(|of_item| {
                    let item: Vec<P<B>> = of_rank.iter_mut().map(next::<B>).collect();
                    let whole = joined::<B>(item, of_item);
                    deliver::<B, FloatKind>(whole, mesh, To::EveryRank)
                })
                .collect()
        }
        (_, Way::Group(group)) => {
            let size = blocks[0][0].dtype().size();
            let layout = Layout::of(lens, size);
            let flats = (blocks.into_iter().enumerate()).map(|(r, of_rank)| {
                let lens: Vec<usize> = lens.iter().map(|of_item| of_item[r]).collect();
                let buffer = joined::<B>(of_rank, &lens);
                let len = buffer.shape().num_elements();
                flat::<B>(buffer, len)
            });
            let wholes = group.gather_placed(flats.collect(), &layout.places(lens), layout.len);
            let wholes: Vec<P<B>> = group_call("all-gather", wholes)
                .into_iter()
                .map(unflat)
                .collect();
            (layout.items.iter())
                .map(|item| wholes.iter().map(|w| slice::<B>(w, item.clone())).collect())
                .collect()
        }
        (_, Way::Moves) => unreachable!("float parts on several devices go through a group"),
    }
}

/// Rank after rank across the processes, then each tensor's blocks joined.
fn across_processes<B: Backend>(
    blocks: Vec<Vec<P<B>>>,
    lens: &[Vec<usize>],
    mesh: &Mesh<B::Device>,
) -> Vec<Vec<P<B>>> {
    let flats = (blocks.into_iter().enumerate())
        .map(|(r, of_rank)| {
            let w = mesh.world_rank(r);
            let own: Vec<usize> = lens.iter().map(|of_item| of_item[w]).collect();
            joined::<B>(of_rank, &own)
        })
        .collect();
    let wholes = super::gather::<B, FloatKind>(flats, 0, mesh, To::EveryRank);
    // Where world rank w's block of tensor i is in the gathered buffer.
    let world = mesh.world_len();
    let rank_lens: Vec<usize> = (0..world)
        .map(|w| lens.iter().map(|l| l[w]).sum())
        .collect();
    let rank_starts = offsets(&rank_lens);
    let mut at = rank_starts.clone();
    let places: Vec<Vec<Range<usize>>> = (lens.iter())
        .map(|of_item| {
            (0..world)
                .map(|w| {
                    let start = at[w];
                    at[w] += of_item[w];
                    start..start + of_item[w]
                })
                .collect()
        })
        .collect();
    (places.iter().zip(lens))
        .map(|(of_item, item_lens)| {
            (wholes.iter())
                .map(|whole| {
                    let pieces = of_item.iter().map(|r| slice::<B>(whole, r.clone()));
                    joined::<B>(pieces.collect(), item_lens)
                })
                .collect()
        })
        .collect()
}

/// Where each tensor lies in a gathered buffer: tensor after tensor, each starting and ending
/// on [`ALIGN_BYTES`], the buffer `len` elements long.
struct Layout {
    items: Vec<Range<usize>>,
    len: usize,
}

impl Layout {
    fn of(lens: &[Vec<usize>], size: usize) -> Self {
        let align = ALIGN_BYTES.div_ceil(size).max(1);
        let mut at = 0;
        let items = (lens.iter())
            .map(|of_item| {
                let total: usize = of_item.iter().sum();
                let item = at..at + total;
                at += total.div_ceil(align) * align;
                item
            })
            .collect();
        Self { items, len: at }
    }

    /// The places of every rank's blocks: rank r's block of tensor i after the blocks of the
    /// ranks before it.
    fn places(&self, lens: &[Vec<usize>]) -> Vec<Vec<Range<usize>>> {
        let ranks = lens.first().map_or(0, Vec::len);
        (0..ranks)
            .map(|r| {
                (self.items.iter().zip(lens))
                    .map(|(item, of_item)| {
                        let start = item.start + of_item[..r].iter().sum::<usize>();
                        start..start + of_item[r]
                    })
                    .collect()
            })
            .collect()
    }
}

/// The flat blocks joined, the empty ones left out (one kept where all are).
fn joined<B: Backend>(blocks: Vec<P<B>>, lens: &[usize]) -> P<B> {
    let kept = (blocks.into_iter().zip(lens))
        .enumerate()
        .filter(|(i, (_, &len))| len > 0 || (*i == 0 && lens.iter().all(|&l| l == 0)))
        .map(|(_, (block, _))| block)
        .collect();
    super::joined::<B>(kept)
}

fn next<B: Backend>(blocks: &mut std::vec::IntoIter<P<B>>) -> P<B> {
    blocks
        .next()
        .expect("every rank has a block of every tensor, empty or not")
}

fn slice<B: Backend>(flat: &P<B>, range: Range<usize>) -> P<B> {
    let whole = flat.shape().num_elements();
    super::piece::<B>(flat, whole, range.start, range.len())
}
