//! Collectives on Burn tensors of any shape, for every group kind: a tensor is flattened
//! (row-major) into its rank's buffer, and dim 0 is the dimension shards are split along.

use crate::stream::{self, Handoff};
use crate::{CollectiveError, Collectives, DeviceStream, ReduceOp, Result};
use burn_tensor::{backend::Backend, Tensor};

/// How a group turns a rank's flat Burn tensor into its buffer and back.
pub trait TensorBridge<B: Backend>: Collectives {
    /// Rank `rank`'s buffer holding `t`. Shares `t`'s memory only where no other tensor does.
    fn buf_from_tensor(&self, rank: usize, t: Tensor<B, 1>) -> Result<Self::Buf>;
    /// Rank `rank`'s buffer as a flat tensor.
    fn tensor_from_buf(&self, rank: usize, buf: Self::Buf) -> Tensor<B, 1>;
}

/// The collectives on Burn tensors; implemented for every group that has a [`TensorBridge`].
/// Every one runs on the device stream ([`crate::stream`]), whichever thread calls it.
pub trait TensorCollectives<B: Backend>: TensorBridge<B> {
    /// All-reduce tensors of one shape, one per rank.
    fn all_reduce_tensors<const D: usize>(
        &self,
        tensors: Vec<Tensor<B, D>>,
        op: ReduceOp,
    ) -> Result<Vec<Tensor<B, D>>> {
        handed_over(tensors, |tensors| {
            in_place(self, tensors, |bufs| self.all_reduce(bufs, op))
        })
    }

    /// Concatenate the ranks' shards along dim 0 (their dim-0 sizes may differ), on every rank.
    fn all_gather_tensors<const D: usize>(
        &self,
        shards: Vec<Tensor<B, D>>,
    ) -> Result<Vec<Tensor<B, D>>> {
        handed_over(shards, |shards| {
            let mut shape = same_shape(&shards, 1)?;
            shape[0] = shards.iter().map(|t| t.dims()[0]).sum();
            let bufs = self.flatten(shards)?;
            let out = self.all_gather(&bufs)?;
            Ok(self.unflatten(out, |_| shape))
        })
    }

    /// Flat shards gathered into one flat tensor of `len` elements per rank, laid out by
    /// `places` ([`Collectives::all_gather_placed`]).
    fn all_gather_placed_tensors(
        &self,
        shards: Vec<Tensor<B, 1>>,
        places: &[Vec<std::ops::Range<usize>>],
        len: usize,
    ) -> Result<Vec<Tensor<B, 1>>> {
        handed_over(shards, |shards| {
            let bufs = self.flatten(shards)?;
            let out = self.all_gather_placed(&bufs, places, len)?;
            Ok(self.unflatten(out, |_| [len]))
        })
    }

    /// Reduce tensors of one shape and give rank r its block of rows `shard_ranges(dim0, N)[r]`.
    fn reduce_scatter_tensors<const D: usize>(
        &self,
        tensors: Vec<Tensor<B, D>>,
        op: ReduceOp,
    ) -> Result<Vec<Tensor<B, D>>> {
        handed_over(tensors, |tensors| {
            let shape = same_shape(&tensors, 0)?;
            let row: usize = shape[1..].iter().product();
            let rows: Vec<usize> = crate::shard_ranges(shape[0], self.size())
                .iter()
                .map(|r| r.len())
                .collect();
            let parts: Vec<usize> = rows.iter().map(|r| r * row).collect();
            let mut bufs = self.flatten(tensors)?;
            let out = self.reduce_scatter_parts(&mut bufs, op, &parts)?;
            Ok(self.unflatten(out, |r| {
                let mut s = shape;
                s[0] = rows[r];
                s
            }))
        })
    }

    /// Reduce flat tensors of one length and give rank r the `parts[r]` elements after those of
    /// the ranks before it (parts may differ, and be empty; they add up to the length).
    fn reduce_scatter_flat_parts(
        &self,
        tensors: Vec<Tensor<B, 1>>,
        op: ReduceOp,
        parts: &[usize],
    ) -> Result<Vec<Tensor<B, 1>>> {
        handed_over(tensors, |tensors| {
            let mut bufs = self.flatten(tensors)?;
            let out = self.reduce_scatter_parts(&mut bufs, op, parts)?;
            Ok(self.unflatten(out, |r| [parts[r]]))
        })
    }

    /// Every rank receives the root's tensor.
    fn broadcast_tensors<const D: usize>(
        &self,
        tensors: Vec<Tensor<B, D>>,
        root: usize,
    ) -> Result<Vec<Tensor<B, D>>> {
        handed_over(tensors, |tensors| {
            in_place(self, tensors, |bufs| self.broadcast(bufs, root))
        })
    }

    #[doc(hidden)]
    fn flatten<const D: usize>(&self, tensors: Vec<Tensor<B, D>>) -> Result<Vec<Self::Buf>> {
        if tensors.len() != self.size() {
            return Err(CollectiveError::WrongRankCount {
                expected: self.size(),
                got: tensors.len(),
            });
        }
        tensors
            .into_iter()
            .enumerate()
            .map(|(r, t)| self.buf_from_tensor(r, t.flatten(0, D - 1)))
            .collect()
    }

    #[doc(hidden)]
    fn unflatten<const D: usize>(
        &self,
        bufs: Vec<Self::Buf>,
        shape: impl Fn(usize) -> [usize; D],
    ) -> Vec<Tensor<B, D>> {
        bufs.into_iter()
            .enumerate()
            .map(|(r, b)| self.tensor_from_buf(r, b).reshape(shape(r)))
            .collect()
    }
}

impl<B: Backend, G: TensorBridge<B>> TensorCollectives<B> for G {}

/// Runs `collective` on `tensors` on the device stream. Tensors made on another CubeCL stream
/// are handed over ([`crate::stream`]): a handle to each is kept (so that the groups copy them
/// rather than reduce them in place) until their devices have finished the collective's work.
fn handed_over<B: Backend, const D: usize, T>(
    tensors: Vec<Tensor<B, D>>,
    collective: impl FnOnce(Vec<Tensor<B, D>>) -> Result<T>,
) -> Result<T> {
    DeviceStream::run(|| {
        let devices: Vec<B::Device> = tensors.iter().map(|t| t.device()).collect();
        let handoff = Handoff::of(
            tensors.len(),
            |r| stream::is_foreign(&tensors[r]),
            |r| tensors[r].clone(),
            "collective on Burn tensors",
        );
        let out = collective(tensors);
        handoff.finish(out, |r| stream::wait_for::<B>(r, &devices[r]))
    })
}

/// Run an in-place `collective` on the buffers of `tensors` (all of one shape), which come
/// back in that shape.
fn in_place<B, G, const D: usize>(
    group: &G,
    tensors: Vec<Tensor<B, D>>,
    collective: impl FnOnce(&mut [G::Buf]) -> Result<()>,
) -> Result<Vec<Tensor<B, D>>>
where
    B: Backend,
    G: TensorCollectives<B> + ?Sized,
{
    let shape = same_shape(&tensors, 0)?;
    let mut bufs = group.flatten(tensors)?;
    collective(&mut bufs)?;
    Ok(group.unflatten(bufs, |_| shape))
}

/// The common shape of `tensors`, comparing dims from `from_dim` on.
fn same_shape<B: Backend, const D: usize>(
    tensors: &[Tensor<B, D>],
    from_dim: usize,
) -> Result<[usize; D]> {
    let Some(first) = tensors.first() else {
        return Err(CollectiveError::EmptyGroup);
    };
    let want = first.dims();
    for (r, t) in tensors.iter().enumerate() {
        let got = t.dims();
        if got[from_dim..] != want[from_dim..] {
            return Err(CollectiveError::ShapeMismatch {
                rank: r,
                expected: want.to_vec(),
                got: got.to_vec(),
            });
        }
    }
    Ok(want)
}
