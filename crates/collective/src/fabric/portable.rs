//! The portable fabric: ranks are devices of any Burn backend, buffers are 1-D float tensors,
//! moves and reductions are plain tensor ops. Used where the inner backend is not CubeCL.

use super::Fabric;
use crate::{error::catch_runtime, op::Combine, ReduceOp, Result};
use burn_tensor::{backend::Backend, DType as BurnDType, Tensor};
use std::ops::Range;

/// The ranks' devices of a [`crate::PortableGroup`], seen as a [`Fabric`].
pub(crate) struct PortableFabric<'a, B: Backend> {
    pub devices: &'a [B::Device],
    pub dtype: BurnDType,
    pub elem_size: usize,
}

impl<B: Backend> PortableFabric<'_, B> {
    /// Half types are reduced in f32, then rounded back once.
    fn widen(&self, t: Tensor<B, 1>) -> Tensor<B, 1> {
        match self.dtype {
            BurnDType::F16 | BurnDType::BF16 => t.cast(BurnDType::F32),
            _ => t,
        }
    }

    fn narrow(&self, t: Tensor<B, 1>) -> Tensor<B, 1> {
        match self.dtype {
            BurnDType::F16 | BurnDType::BF16 => t.cast(self.dtype),
            _ => t,
        }
    }

    /// `dst[range] = f(dst[range])` (widened), keeping `dst` uniquely owned so the backend can
    /// assign in place instead of copying the whole buffer.
    fn update(
        &self,
        rank: usize,
        dst: &mut Tensor<B, 1>,
        range: Range<usize>,
        f: impl FnOnce(Tensor<B, 1>) -> Tensor<B, 1>,
    ) -> Result<()> {
        catch_runtime(rank, || {
            let whole = std::mem::replace(dst, Tensor::empty([0], &self.devices[rank]));
            let out = self.narrow(f(self.widen(whole.clone().slice([range.clone()]))));
            *dst = whole.slice_assign([range], out);
        })
    }
}

impl<B: Backend> PortableFabric<'_, B> {
    /// All-reduce for ranks that share one device (N ranks on one CPU), as a shared-memory
    /// transport would do it: the N buffers are added into rank 0's in place, and every rank
    /// gets a handle to the one result instead of a copy.
    pub(crate) fn all_reduce_on_one_device(
        &self,
        bufs: &mut [Tensor<B, 1>],
        op: ReduceOp,
    ) -> Result<()> {
        let n = bufs.len();
        // Rank 0's buffer is moved, not cloned, into the sum: a uniquely owned accumulator lets
        // the backend add in place instead of allocating (and faulting in) a fresh result.
        let first = std::mem::replace(&mut bufs[0], Tensor::empty([0], &self.devices[0]));
        let result = catch_runtime(0, || {
            let mut acc = self.widen(first);
            for b in &bufs[1..] {
                let b = self.widen(b.clone());
                acc = match op {
                    ReduceOp::Max => acc.max_pair(b),
                    ReduceOp::Sum | ReduceOp::Mean => acc + b,
                };
            }
            if op == ReduceOp::Mean {
                acc = acc.div_scalar(n as f32);
            }
            self.narrow(acc)
        })?;
        bufs.iter_mut().for_each(|b| *b = result.clone());
        Ok(())
    }
}

impl<B: Backend> Fabric for PortableFabric<'_, B> {
    type Buf = Tensor<B, 1>;
    type Staged = Tensor<B, 1>;

    fn len(&self, buf: &Self::Buf) -> usize {
        buf.dims()[0]
    }

    fn elem_size(&self) -> usize {
        self.elem_size
    }

    fn send(
        &self,
        from: usize,
        src: &Self::Buf,
        range: Range<usize>,
        to: usize,
    ) -> Result<Self::Staged> {
        let dst = &self.devices[to];
        // A real copy, not a view: a view would keep the source buffer shared, and every later
        // in-place update of it would copy the whole buffer. On one device a scaling by one
        // writes that copy in one pass. Between devices, host data also works where Burn's
        // `to_device` cannot move (two wgpu devices in 0.21).
        catch_runtime(from, || {
            let chunk = src.clone().slice([range]);
            if self.devices[from] == *dst {
                chunk.mul_scalar(1.0)
            } else {
                // The chunk keeps its dtype: without one, the new tensor would take the
                // device's default float type (f32) and half-type buffers would mix dtypes.
                Tensor::from_data(chunk.into_data(), (dst, self.dtype))
            }
        })
    }

    fn combine(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        at: usize,
        staged: Self::Staged,
        op: Combine,
    ) -> Result<()> {
        let range = at..at + self.len(&staged);
        self.update(rank, dst, range, |cur| {
            let other = self.widen(staged);
            match op {
                Combine::Add => cur + other,
                Combine::Max => cur.max_pair(other),
            }
        })
    }

    fn write(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        at: usize,
        staged: Self::Staged,
    ) -> Result<()> {
        let range = at..at + self.len(&staged);
        catch_runtime(rank, || {
            let whole = std::mem::replace(dst, Tensor::empty([0], &self.devices[rank]));
            *dst = whole.slice_assign([range], staged);
        })
    }

    fn divide(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        range: Range<usize>,
        divisor: usize,
    ) -> Result<()> {
        self.update(rank, dst, range, |cur| cur.div_scalar(divisor as f32))
    }

    fn alloc(&self, rank: usize, len: usize) -> Result<Self::Buf> {
        catch_runtime(rank, || {
            Tensor::zeros([len], (&self.devices[rank], self.dtype))
        })
    }

    fn buf_as_staged(&self, buf: Self::Buf) -> Self::Staged {
        buf
    }

    fn staged_as_buf(&self, staged: Self::Staged) -> Result<Self::Buf> {
        Ok(staged)
    }
}
