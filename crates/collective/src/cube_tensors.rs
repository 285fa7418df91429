//! Burn tensors of a CubeCL backend (`burn-wgpu`, `burn-cuda`) in collectives: the tensors'
//! device memory is reduced by the kernels directly, with no trip through the host.

use crate::fabric::Fabric;
use crate::stream::DeviceStream;
use crate::{CollectiveError, CollectiveRuntime, DType, DeviceBuffer, Group, Result, TensorBridge};
use burn_cubecl::{
    kernel::into_contiguous, tensor::CubeTensor, BoolElement, CubeBackend, FloatElement, IntElement,
};
use burn_tensor::{backend::DeviceOps, Shape, Tensor, TensorPrimitive};

/// The collective dtype of rank `rank`'s tensor, or why the kernels cannot reduce it.
fn collective_dtype(rank: usize, dtype: burn_tensor::DType) -> Result<DType> {
    DType::from_burn(dtype).ok_or_else(|| CollectiveError::RankFailed {
        rank,
        reason: format!("collectives reduce f32/f16/bf16 tensors; got {dtype:?}"),
    })
}

impl<R, F, I, BT> TensorBridge<CubeBackend<R, F, I, BT>> for Group<R>
where
    R: CollectiveRuntime,
    R::Device: DeviceOps,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    /// The tensor's own memory when no other tensor shares it, else a private copy, so the
    /// in-place collectives never change another tensor. A tensor made on another stream than
    /// the device stream is copied onto it, and its device waited for before it is let go
    /// ([`crate::stream`]; `TensorCollectives` counts it).
    fn buf_from_tensor(
        &self,
        rank: usize,
        t: Tensor<CubeBackend<R, F, I, BT>, 1>,
    ) -> Result<DeviceBuffer<R>> {
        let original: CubeTensor<R> = t.into_primitive().tensor();
        if DeviceStream::holds(&original.handle) {
            return self.device_buf(rank, original);
        }
        // Held, so that the copy below is never the last reader of memory its stream reuses.
        let kept = original.clone();
        let buf = self.device_buf(rank, original);
        let waited = self.wait(self.rank_on(&kept.device).unwrap_or(rank));
        drop(kept);
        buf.and_then(|b| waited.map(|()| b))
    }

    fn tensor_from_buf(
        &self,
        rank: usize,
        buf: DeviceBuffer<R>,
    ) -> Tensor<CubeBackend<R, F, I, BT>, 1> {
        let client = self.ranks()[rank].client.clone();
        let out = CubeTensor::new_contiguous(
            client,
            buf.device().clone(),
            Shape::new([buf.len()]),
            buf.handle().clone(),
            buf.dtype().to_burn(),
        );
        Tensor::from_primitive(TensorPrimitive::Float(out))
    }
}

impl<R> Group<R>
where
    R: CollectiveRuntime,
    R::Device: DeviceOps,
{
    /// `t`'s memory when no other tensor shares it, else a private copy on the device stream.
    fn device_buf(&self, rank: usize, t: CubeTensor<R>) -> Result<DeviceBuffer<R>> {
        let p: CubeTensor<R> = DeviceStream::run(|| into_contiguous(t));
        let dtype = collective_dtype(rank, p.dtype)?;
        let exclusive = p.can_mut() && p.is_contiguous_buffer();
        let buf = DeviceBuffer::from_handle(
            p.handle.clone(),
            p.meta.shape().num_elements(),
            dtype,
            p.device.clone(),
        );
        if exclusive {
            return Ok(buf);
        }
        let rank_of_buf = self.rank_on(buf.device()).unwrap_or(rank);
        let fabric = self.fabric(dtype);
        fabric.staged_as_buf(fabric.send(rank_of_buf, &buf, 0..buf.len(), rank_of_buf)?)
    }
}
