//! The portable fabric: ranks are devices of any Burn backend, buffers are 1-D float tensors,
//! moves and reductions are plain tensor ops. Used where the inner backend is not CubeCL.

use super::Fabric;
use crate::{error::catch_runtime, op::Combine, Result};
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

    fn send(&self, from: usize, src: &Self::Buf, range: Range<usize>, to: usize) -> Result<Self::Staged> {
        let dst = &self.devices[to];
        catch_runtime(from, || {
            let part = src.clone().slice([range]);
            if &self.devices[from] == dst {
                part
            } else {
                // Burn's `to_device` cannot move between some devices (two wgpu devices in
                // 0.21); going through host data works for every backend.
                Tensor::from_data(part.into_data(), dst)
            }
        })
    }

    fn combine(&self, rank: usize, dst: &mut Self::Buf, at: usize, staged: Self::Staged, op: Combine) -> Result<()> {
        let range = at..at + self.len(&staged);
        catch_runtime(rank, || {
            let cur = self.widen(dst.clone().slice([range.clone()]));
            let other = self.widen(staged);
            let out = match op {
                Combine::Add => cur + other,
                Combine::Max => cur.max_pair(other),
            };
            *dst = dst.clone().slice_assign([range], self.narrow(out));
        })
    }

    fn write(&self, rank: usize, dst: &mut Self::Buf, at: usize, staged: Self::Staged) -> Result<()> {
        let range = at..at + self.len(&staged);
        catch_runtime(rank, || *dst = dst.clone().slice_assign([range], staged))
    }

    fn divide(&self, rank: usize, dst: &mut Self::Buf, range: Range<usize>, divisor: usize) -> Result<()> {
        catch_runtime(rank, || {
            let part = self.widen(dst.clone().slice([range.clone()])).div_scalar(divisor as f32);
            *dst = dst.clone().slice_assign([range], self.narrow(part));
        })
    }

    fn alloc(&self, rank: usize, len: usize) -> Result<Self::Buf> {
        catch_runtime(rank, || Tensor::zeros([len], (&self.devices[rank], self.dtype)))
    }

    fn into_staged(&self, buf: Self::Buf) -> Self::Staged {
        buf
    }

    fn into_buf(&self, staged: Self::Staged) -> Self::Buf {
        staged
    }
}
