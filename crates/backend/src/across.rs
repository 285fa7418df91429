//! Meshes that are one process's share of a world of processes ([`Mesh::in_world`]).
//!
//! Every process runs the same program on its own ranks (SPMD). A tensor means the world's
//! tensor: `Replicated` is one value on every rank of every process, `Partial` sums over every
//! rank of the world, and the blocks of a `Shard(d)` tensor follow world rank order (process
//! `p`'s local rank `r` is world rank `p * len + r`). Each process holds its own ranks' parts
//! only, and every process holds blocks of the same sizes (so the global shape is the local
//! one times the processes, and any process can say every block's size). Sums and gathers
//! cross the processes after the ranks of the process (`route/in_world.rs`): one buffer per
//! process goes through the world's [`ProcessLink`](firemesh_world::ProcessLink), and
//! every process combines all of them in process order, so every process holds the same bits. A
//! large sum in a world of more than 2 processes goes by blocks (an all-to-all, each process
//! summing its block, then an all-gather of the sums), adding each element in the same order.
//! What crosses, and how it is cut, is `firemesh_world::exchange`'s; the additions are here.
//!
//! Two threads of a process cross the processes: the one that issues the step (its sums:
//! the loss, BatchNorm's statistics, the gradient buckets left for the optimizer step) and
//! the mesh's communication thread (early gradient buckets, summed during the backward pass).
//! Each keeps its own order of exchanges, the same on every process, but the two interleave
//! differently on every process, so they take different links: the communication thread the
//! link's side channel ([`ProcessLink::side_channel`]); a world whose link has none sums its
//! buckets after the backward pass (`buckets/early.rs` arms none there).

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::placement::even_split;
use burn_backend::{Backend, TensorData, TensorMetadata};
use firemesh_world::exchange::{self, Shaped};
use firemesh_world::{LinkError, ProcessLink};
use std::cell::Cell;
use std::sync::Arc;

thread_local! {
    /// Whether this thread crosses the processes through the side channel (it is a mesh's
    /// communication thread, [`on_side_channel`]).
    static ON_SIDE_CHANNEL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` crossing the processes through the links' side channels (a mesh's communication
/// thread runs its jobs so).
pub(crate) fn on_side_channel<T>(f: impl FnOnce() -> T) -> T {
    let before = ON_SIDE_CHANNEL.replace(true);
    let out = f();
    ON_SIDE_CHANNEL.set(before);
    out
}

/// The link this thread crosses `mesh`'s processes through: the side channel on a
/// communication thread ([`on_side_channel`]), else the world's link.
fn link_here<D>(mesh: &Mesh<D>) -> &Arc<dyn ProcessLink> {
    let link = mesh.link().expect("only meshes in a world exchange");
    match ON_SIDE_CHANNEL.get() {
        true => mesh
            .side_link()
            .expect("early buckets are armed only where the link has a side channel"),
        false => link,
    }
}

/// `addend(0) + addend(1) + ...` over the world's processes, in process order: the one order
/// of addition every sum across processes keeps, so that every process holds the same bits.
fn in_process_order<B: Backend, K: Kind<B>>(
    mesh: &Mesh<B::Device>,
    addend: impl Fn(usize) -> K::P,
) -> K::P {
    (1..mesh.processes()).fold(addend(0), |sum, q| K::add(sum, addend(q)))
}

/// Every process's chunk `me` of its flat `bytes` (chunk `q` of `chunks[q]` elements of `size`
/// bytes goes to process `q`), in process order, by the link's all-to-all.
fn own_chunks(
    bytes: &[u8],
    chunks: &[usize],
    size: usize,
    mesh: &Mesh<impl burn_backend::DeviceOps>,
    link: &Arc<dyn ProcessLink>,
) -> Vec<Vec<u8>> {
    crossed(mesh, exchange::own_chunks(&**link, bytes, chunks, size))
}

/// What crossed the processes, or the panic of `mesh`'s process that names why it could not.
fn crossed<T>(mesh: &Mesh<impl burn_backend::DeviceOps>, result: Result<T, LinkError>) -> T {
    result.unwrap_or_else(|e| panic!("firemesh: process {}: {e}", mesh.process()))
}

/// The sum over the processes of `whole`, this process's sum over its ranks (on rank 0's
/// device), added in process order. Without a world, `whole` itself.
pub(crate) fn sum_across<B: Backend, K: Kind<B>>(whole: K::P, mesh: &Mesh<B::Device>) -> K::P {
    let n = mesh.processes();
    if n == 1 {
        return whole;
    }
    let elements = whole.shape().num_elements();
    let link = link_here(mesh);
    if exchange::by_blocks(&**link, elements * whole.dtype().size(), elements) {
        let home = mesh.device(0);
        return K::from_data(sum_by_blocks::<B, K>(K::into_data(whole), mesh, link), home);
    }
    let all = exchange::<B, K>(whole, mesh);
    in_process_order::<B, K>(mesh, |q| all[q].clone())
}

/// [`sum_across`] of a large buffer: process `q` sums block `q` of every process's buffer (in
/// process order, so each element is added as the whole exchange adds it), then every process
/// gathers the summed blocks. Each process sends and receives 2 (P - 1) / P of the buffer
/// instead of P - 1 buffers, and every process holds the same bits. The sum comes back on the
/// host.
fn sum_by_blocks<B: Backend, K: Kind<B>>(
    data: TensorData,
    mesh: &Mesh<B::Device>,
    link: &Arc<dyn ProcessLink>,
) -> TensorData {
    let (dtype, shape) = (data.dtype, data.shape.clone());
    let blocks = even_split(data.num_elements(), mesh.processes());
    let sum = K::into_data(sum_own_block::<B, K>(data, &blocks, mesh, link));
    let summed = crossed(mesh, link.all_gather(sum.as_bytes()));
    TensorData::from_bytes_vec(summed.concat(), shape, dtype)
}

/// The sum over the processes of a flat buffer this process holds in blocks, block `r` on rank
/// `r`'s device (its ranks' sum, reduce-scattered by the mesh's group): block `r` of the
/// world's sum, on rank `r`'s device. Each block is read to the host once and the buffer
/// crosses the processes as one; rank `r` then adds every process's block `r` on its own
/// device, in process order, this process's as it is (a large buffer in a world of more than
/// 2 processes is summed by blocks and the sum's blocks uploaded to their ranks). Either way
/// each element is added as [`sum_across`] adds it, and no device holds the whole buffer.
pub(crate) fn sum_blocks_across<B: Backend, K: Kind<B>>(
    blocks: Vec<K::P>,
    mesh: &Mesh<B::Device>,
) -> Vec<K::P> {
    let (n, me) = (mesh.processes(), mesh.process());
    if n == 1 {
        return blocks;
    }
    let lens: Vec<usize> = blocks.iter().map(|b| b.shape().num_elements()).collect();
    let node = on_host::<B, K>(&blocks);
    let (dtype, total) = (node.dtype, node.num_elements());
    let size = dtype.size();
    let starts = crate::placement::offsets(&lens);
    let piece = |all: &[u8], r: usize| {
        let at = starts[r] * size..(starts[r] + lens[r]) * size;
        K::from_data(
            TensorData::from_bytes_vec(all[at].to_vec(), vec![lens[r]], dtype),
            mesh.device(r),
        )
    };
    let link = link_here(mesh);
    if exchange::by_blocks(&**link, total * size, total) {
        let sum = sum_by_blocks::<B, K>(node, mesh, link);
        return (0..lens.len()).map(|r| piece(sum.as_bytes(), r)).collect();
    }
    let all = exchange_data(&node, mesh);
    blocks
        .into_iter()
        .enumerate()
        .map(|(r, own)| {
            in_process_order::<B, K>(mesh, |q| match q == me {
                true => own.clone(),
                false => piece(&all[q], r),
            })
        })
        .collect()
}

/// This process's chunk of the sum over the processes of `whole` (this process's flat sum over
/// its ranks, on rank 0's device): process `q` receives `chunks[q]` elements, the chunks laid
/// end to end. Where the link has its own all-to-all, process `q` receives chunk `q` of every
/// process's buffer and adds them in process order ((P - 1) / P of the buffer sent and
/// received per process); elsewhere the whole sum is taken and sliced. Either way each element
/// is added as [`sum_across`] adds it. Without a world, `whole` itself.
pub(crate) fn reduce_scatter_across<B: Backend, K: Kind<B>>(
    whole: K::P,
    chunks: &[usize],
    mesh: &Mesh<B::Device>,
) -> K::P {
    let me = mesh.process();
    if mesh.processes() == 1 {
        return whole;
    }
    let link = link_here(mesh);
    if link.has_all_to_all() {
        return sum_own_block::<B, K>(K::into_data(whole), chunks, mesh, link);
    }
    let start: usize = chunks[..me].iter().sum();
    let end = Some((start + chunks[me]) as isize);
    let range = [burn_backend::Slice::new(start as isize, end, 1)];
    K::slice(sum_across::<B, K>(whole, mesh), &range)
}

/// Whether the link this thread crosses `mesh`'s processes through has its own all-to-all.
pub(crate) fn has_all_to_all<D>(mesh: &Mesh<D>) -> bool {
    link_here(mesh).has_all_to_all()
}

/// Rank `r`'s block of a reduce-scatter across the processes, on its device. `lens` are the
/// blocks of the world's ranks (world rank `q * ranks + r` is process `q`'s rank `r`), laid end
/// to end, and `segments` (on any of the ranks' devices) this process's sum of them, cut
/// anywhere. Each segment is read to the host once; one all-to-all sends process `q` its ranks'
/// blocks (the link must have one: [`has_all_to_all`]); rank `r` then uploads every process's
/// sum of its own block and adds them on its device, in process order.
pub(crate) fn scatter_blocks_across<B: Backend, K: Kind<B>>(
    segments: Vec<K::P>,
    lens: &[usize],
    mesh: &Mesh<B::Device>,
) -> Vec<K::P> {
    let (me, ranks) = (mesh.process(), mesh.len());
    let node = on_host::<B, K>(&segments);
    drop(segments);
    let size = node.dtype.size();
    let chunks: Vec<usize> = lens.chunks(ranks).map(|own| own.iter().sum()).collect();
    let got = own_chunks(node.as_bytes(), &chunks, size, mesh, link_here(mesh));
    let own = &lens[me * ranks..(me + 1) * ranks];
    let starts = crate::placement::offsets(own);
    (0..ranks)
        .map(|r| {
            let at = starts[r] * size..(starts[r] + own[r]) * size;
            in_process_order::<B, K>(mesh, |q| {
                let bytes = got[q][at.clone()].to_vec();
                let data = TensorData::from_bytes_vec(bytes, vec![own[r]], node.dtype);
                K::from_data(data, mesh.device(r))
            })
        })
        .collect()
}

/// The flat `parts` laid end to end on the host, each read from its device once.
pub(crate) fn on_host<B: Backend, K: Kind<B>>(parts: &[K::P]) -> TensorData {
    let datas: Vec<TensorData> = parts.iter().map(|p| K::into_data(p.clone())).collect();
    let dtype = datas[0].dtype;
    let total: usize = datas.iter().map(TensorData::num_elements).sum();
    let mut bytes = Vec::with_capacity(total * dtype.size());
    for d in &datas {
        bytes.extend_from_slice(d.as_bytes());
    }
    TensorData::from_bytes_vec(bytes, vec![total], dtype)
}

/// Block `me` (this process's) of the sum over the processes of `data`, flat and cut into
/// `blocks` elements laid end to end: every process's block `me` comes here by the link's
/// all-to-all and is added in process order, on rank 0's device.
fn sum_own_block<B: Backend, K: Kind<B>>(
    data: TensorData,
    blocks: &[usize],
    mesh: &Mesh<B::Device>,
    link: &Arc<dyn ProcessLink>,
) -> K::P {
    let me = mesh.process();
    let dtype = data.dtype;
    let mine = own_chunks(data.as_bytes(), blocks, dtype.size(), mesh, link);
    let home = mesh.device(0);
    let addends: Vec<K::P> = (mine.into_iter())
        .map(|b| K::from_data(TensorData::from_bytes_vec(b, vec![blocks[me]], dtype), home))
        .collect();
    in_process_order::<B, K>(mesh, |q| addends[q].clone())
}

/// Every process's `chunk` (its ranks' blocks along `dim`, concatenated), concatenated in
/// process order. Without a world, `chunk` itself.
pub(crate) fn gather_across<B: Backend, K: Kind<B>>(
    chunk: K::P,
    dim: usize,
    mesh: &Mesh<B::Device>,
) -> K::P {
    if mesh.processes() == 1 {
        return chunk;
    }
    K::cat(exchange::<B, K>(chunk, mesh), dim)
}

/// The byte `ranges` of every process's `data` (one shape on every process) laid end to end in
/// process order, each copied once from what the link received.
pub(crate) fn gather_bytes_across(
    data: &TensorData,
    ranges: &[std::ops::Range<usize>],
    mesh: &Mesh<impl burn_backend::DeviceOps>,
) -> Vec<Vec<u8>> {
    let link = &**link_here(mesh);
    crossed(
        mesh,
        exchange::gather_ranges(link, &data.shape, data.as_bytes(), ranges),
    )
}

/// Every process's `p`, in process order, on rank 0's device (this process's as it is).
fn exchange<B: Backend, K: Kind<B>>(p: K::P, mesh: &Mesh<B::Device>) -> Vec<K::P> {
    let data = K::into_data(p.clone());
    let (dtype, shape) = (data.dtype, data.shape.clone());
    let home = mesh.device(0);
    (exchange_data(&data, mesh).iter().enumerate())
        .map(|(q, bytes)| match q == mesh.process() {
            true => p.clone(),
            false => K::from_data(
                TensorData::from_bytes_vec(bytes.to_vec(), shape.clone(), dtype),
                home,
            ),
        })
        .collect()
}

/// Every process's bytes of `data` (one shape on every process), in process order.
fn exchange_data(data: &TensorData, mesh: &Mesh<impl burn_backend::DeviceOps>) -> Shaped {
    let link = &**link_here(mesh);
    crossed(
        mesh,
        exchange::gather_shaped(link, &data.shape, data.as_bytes()),
    )
}

/// This process's share of world blocks `sizes`: its ranks' sizes, and where its first block
/// starts along the dim.
pub(crate) fn own_blocks<D>(sizes: &[usize], mesh: &Mesh<D>) -> (Vec<usize>, usize)
where
    D: burn_backend::DeviceOps,
{
    if mesh.processes() == 1 {
        return (sizes.to_vec(), 0);
    }
    let first = mesh.world_rank(0);
    let start = sizes[..first].iter().sum();
    (sizes[first..first + mesh.len()].to_vec(), start)
}
