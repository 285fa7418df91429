//! Collectives on Burn tensors of a CubeCL backend (`burn-wgpu`, `burn-cuda`): the tensors'
//! device memory is reduced by the kernels directly, with no trip through the host.

use crate::fabric::{device::DeviceFabric, Fabric};
use crate::{CollectiveError, CollectiveRuntime, Collectives, DType, DeviceBuffer, Group, ReduceOp, Result};
use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, BoolElement, CubeBackend, FloatElement, IntElement};
use burn_tensor::{Tensor, TensorPrimitive};
use cubecl::stream_id::StreamId;

/// A Burn tensor of the CubeCL backend over runtime `R`.
pub type CubeTensorOf<R, F, I, BT, const D: usize> = Tensor<CubeBackend<R, F, I, BT>, D>;

fn collective_dtype(rank: usize, d: burn_tensor::DType) -> Result<DType> {
    match d {
        burn_tensor::DType::F32 | burn_tensor::DType::Flex32 => Ok(DType::F32),
        burn_tensor::DType::F16 => Ok(DType::F16),
        burn_tensor::DType::BF16 => Ok(DType::BF16),
        other => Err(CollectiveError::RankFailed { rank, reason: format!("collectives reduce f32/f16/bf16 tensors; got {other:?}") }),
    }
}

impl<R: CollectiveRuntime> Group<R>
where
    R::Device: burn_tensor::backend::DeviceOps,
{
    /// All-reduce one tensor per rank (same shape, each on its rank's device) with the CubeCL
    /// kernels; returns the reduced tensors. A tensor whose memory is shared with another tensor
    /// is copied first, so no other tensor changes.
    pub fn all_reduce_tensors<F: FloatElement, I: IntElement, BT: BoolElement, const D: usize>(
        &self,
        tensors: Vec<CubeTensorOf<R, F, I, BT, D>>,
        op: ReduceOp,
    ) -> Result<Vec<CubeTensorOf<R, F, I, BT, D>>> {
        if tensors.len() != self.size() {
            return Err(CollectiveError::WrongRankCount { expected: self.size(), got: tensors.len() });
        }
        let prims: Vec<CubeTensor<R>> = tensors.into_iter().map(|t| into_contiguous(t.into_primitive().tensor())).collect();
        let shape = prims[0].meta.shape().clone();
        let mut bufs = Vec::with_capacity(prims.len());
        for (r, p) in prims.iter().enumerate() {
            if p.meta.shape() != &shape {
                return Err(CollectiveError::LengthMismatch { rank: r, expected: shape.num_elements(), got: p.meta.shape().num_elements() });
            }
            let dtype = collective_dtype(r, p.dtype)?;
            let exclusive = p.can_mut() && p.is_contiguous_buffer();
            let buf = DeviceBuffer::from_handle(p.handle.clone(), shape.num_elements(), dtype, p.device.clone());
            bufs.push(if exclusive { buf } else { self.private_copy(r, &buf)? });
        }
        self.all_reduce(&mut bufs, op)?;
        Ok(prims
            .into_iter()
            .zip(bufs)
            .map(|(p, b)| {
                let out = CubeTensor::new_contiguous(p.client.clone(), p.device.clone(), shape.clone(), b.handle, p.dtype);
                Tensor::from_primitive(TensorPrimitive::Float(out))
            })
            .collect())
    }

    /// A copy of `buf` in a new allocation on rank `rank`.
    fn private_copy(&self, rank: usize, buf: &DeviceBuffer<R>) -> Result<DeviceBuffer<R>> {
        let fabric = DeviceFabric { ranks: self.ranks(), transport: self.transport(), dtype: buf.dtype(), stream: StreamId::current() };
        fabric.send(rank, buf, 0..buf.len(), rank)
    }
}
