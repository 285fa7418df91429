//! The levels of a sum or gather on a mesh that is one process's share of a world of
//! processes: inside the process (through its collective group where it has one), across the
//! processes (`across.rs`, one buffer per process through the world's link), and inside the
//! process again.

use super::{
    deliver, flat, float_parts, group_call, kind_parts, route, sum_on_rank_0, to_ranks, unflat, To,
    Way,
};
use crate::across;
use crate::kind::{FloatKind, Kind};
use crate::mesh::Mesh;
use crate::placement::even_split;
use burn_backend::{Backend, TensorData, TensorMetadata};

/// [`sum`] on a mesh that is one process's share of a world: inside the process first, then
/// across the processes on one buffer per process, then shared inside the process again. Where
/// the ranks sum through a collective group (float parts on several devices), the group does
/// the inside levels: a reduce-scatter (rank r receives block r of the process's sum), the
/// blocks read to the host and across the processes as one buffer, each rank adding every
/// process's block r on its own device (`across::sum_blocks_across`), and the group's
/// all-gather. Otherwise (one device, other kinds, fewer elements than ranks) the parts are
/// added on rank 0, summed across the processes (`across::sum_across`) and moved to each rank.
pub(super) fn sum_in_world<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    mesh: &Mesh<B::Device>,
    to: To,
) -> Vec<K::P> {
    let shape = parts[0].shape();
    let elements = shape.num_elements();
    let group = match route::<B, K>(mesh).1 {
        Way::Group(group) if elements >= mesh.len() => group,
        _ => {
            let whole = across::sum_across::<B, K>(sum_on_rank_0::<B, K>(parts, mesh), mesh);
            return deliver::<B, K>(whole, mesh, to);
        }
    };
    let lens = even_split(elements, mesh.len());
    let flats = float_parts::<B, K>(parts).map(|p| flat::<B>(p, elements));
    let blocks = group_call(
        "reduce-scatter",
        group.reduce_scatter(flats.collect(), &lens),
    );
    let blocks = blocks.into_iter().map(unflat).collect();
    let sums = across::sum_blocks_across::<B, FloatKind>(blocks, mesh);
    if to == To::FirstRank {
        let home = mesh.device(0);
        let sums = sums
            .into_iter()
            .map(|b| <FloatKind as Kind<B>>::move_to(b, home));
        let whole = B::float_cat(sums.collect(), 0);
        return kind_parts::<B, K>(vec![B::float_reshape(whole, shape)]);
    }
    let pieces = sums
        .into_iter()
        .zip(&lens)
        .map(|(b, &len)| flat::<B>(b, len));
    let wholes = group_call("all-gather", group.gather(pieces.collect()));
    let wholes = wholes
        .into_iter()
        .map(|t| B::float_reshape(unflat(t), shape.clone()));
    kind_parts::<B, K>(wholes.collect())
}

/// [`gather`] on a mesh that is one process's share of a world. Where the ranks sum through a
/// collective group and every rank needs the result, each rank's part (its sharded dim first)
/// is read to the host, the process's parts cross the processes as one buffer, rank r uploads
/// its even block of the world's buffer and the group all-gathers the blocks (no device holds
/// the process's parts or the world's whole before the group's gather). Otherwise the parts
/// are joined on rank 0, gathered across the processes (`across::gather_across`) and moved to
/// each rank that needs them.
pub(super) fn gather_in_world<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    dim: usize,
    mesh: &Mesh<B::Device>,
    to: To,
) -> Vec<K::P> {
    let elements: usize = parts.iter().map(|p| p.shape().num_elements()).sum();
    let world_elements = elements * mesh.processes();
    let group = match route::<B, K>(mesh).1 {
        Way::Group(group) if to == To::EveryRank && world_elements >= mesh.len() => group,
        _ => {
            let home = mesh.device(0);
            let chunk = K::cat(
                parts.into_iter().map(|p| K::move_to(p, home)).collect(),
                dim,
            );
            return deliver::<B, K>(across::gather_across::<B, K>(chunk, dim, mesh), mesh, to);
        }
    };
    // The sharded dim goes first, so that the flat blocks concatenate in world rank order.
    let parts: Vec<_> = float_parts::<B, K>(parts)
        .map(|p| B::float_swap_dims(p, 0, dim))
        .collect();
    let mut shape = parts[0].shape();
    shape[0] = parts.iter().map(|p| p.shape()[0]).sum::<usize>();
    let mut node = across::on_host::<B, FloatKind>(&parts);
    drop(parts);
    // The process's shape, checked against every other process's in the exchange.
    node.shape = shape.clone();
    shape[0] *= mesh.processes();
    let (dtype, size) = (node.dtype, node.dtype.size());
    let lens = even_split(world_elements, mesh.len());
    let ranges: Vec<_> = (crate::placement::offsets(&lens).into_iter().zip(&lens))
        .map(|(start, len)| start * size..(start + len) * size)
        .collect();
    let bytes = across::gather_bytes_across(&node, &ranges, mesh);
    drop(node);
    let pieces = (bytes.into_iter().zip(&lens).zip(mesh.devices()))
        .map(|((bytes, &len), device)| {
            let piece = TensorData::from_bytes_vec(bytes, [len], dtype);
            flat::<B>(<FloatKind as Kind<B>>::from_data(piece, device), len)
        })
        .collect();
    let wholes = group_call("all-gather", group.gather(pieces));
    let wholes = wholes
        .into_iter()
        .map(|t| B::float_swap_dims(B::float_reshape(unflat(t), shape.clone()), 0, dim));
    kind_parts::<B, K>(wholes.collect())
}

/// [`reduce_scatter`](super::reduce_scatter) on a mesh that is one process's share of a
/// world: `lens` are the world ranks' blocks, and rank r receives the world's sum of world rank
/// `mesh.world_rank(r)`'s block. Where the ranks sum through a collective group and the link
/// has its own all-to-all, the group reduce-scatters the process's sum (rank r an even
/// segment of it), the segments are read to the host, every process's chunk goes to it in one
/// all-to-all, and rank r adds every process's sum of its block on its own device, in process
/// order (`across::scatter_blocks_across`). Otherwise the parts are added on rank 0, the
/// process's rows reduce-scattered across the processes (`across::reduce_scatter_across`) and
/// each rank's block moved to it.
pub(super) fn reduce_scatter_in_world<B: Backend>(
    parts: Vec<B::FloatTensorPrimitive>,
    lens: &[usize],
    mesh: &Mesh<B::Device>,
) -> Vec<B::FloatTensorPrimitive> {
    let (ranks, elements) = (mesh.len(), parts[0].shape().num_elements());
    let group = match route::<B, FloatKind>(mesh).1 {
        Way::Group(group) if elements >= ranks && across::has_all_to_all(mesh) => group,
        _ => {
            let whole = sum_on_rank_0::<B, FloatKind>(parts, mesh);
            let chunks: Vec<usize> = lens.chunks(ranks).map(|own| own.iter().sum()).collect();
            let mine = across::reduce_scatter_across::<B, FloatKind>(whole, &chunks, mesh);
            let (lens, _) = across::own_blocks(lens, mesh);
            return to_ranks::<B>(mine, &lens, mesh);
        }
    };
    let flats = parts.into_iter().map(|p| flat::<B>(p, elements));
    let segments = group_call(
        "reduce-scatter",
        group.reduce_scatter(flats.collect(), &even_split(elements, ranks)),
    );
    let segments = segments.into_iter().map(unflat).collect();
    across::scatter_blocks_across::<B, FloatKind>(segments, lens, mesh)
}
