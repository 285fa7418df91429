//! Autocast convolution kernels for CubeCL backends ([`NarrowConvs`]): CubeCL's implicit GEMM,
//! whose tensor-core (CMMA) products of bf16 or f16 operands add in f32. firemesh's CUDA meshes
//! register them (`Mesh::use_narrow_convs`); CubeCL's direct kernels, which add in the element
//! type, never take a narrow convolution.
//!
//! They decline (and the op runs in f32) where CubeCL's implicit GEMM would itself fall back to
//! a direct kernel (grouped convolutions; input gradients of strided ones) and where it cannot
//! launch: a device without tensor cores for the dtype (every wgpu device through WGSL), a shape
//! its tiles do not fit. Not yet run on a GPU: a CUDA run's summary counts what declined.

use super::{Conv2dOp, NarrowConvs};
use burn_backend::ops::ConvOptions;
use burn_backend::Shape;
use burn_cubecl::kernel::conv::{
    conv_data_backward, conv_forward, conv_weight_backward, ConvStrategy,
};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

/// CubeCL's implicit-GEMM convolutions for narrow operands (module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct ImplicitGemmConvs;

impl<R, F, I, BT> NarrowConvs<CubeBackend<R, F, I, BT>> for ImplicitGemmConvs
where
    R: CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    /// Not where CubeCL's implicit GEMM would itself fall back to a direct kernel: grouped
    /// convolutions, and input gradients of strided ones.
    fn takes(&self, op: Conv2dOp, options: &ConvOptions<2>) -> bool {
        let strided = options.stride.iter().any(|&s| s != 1);
        options.groups == 1 && !(op == Conv2dOp::InputGradient && strided)
    }

    fn conv2d(
        &self,
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<R>> {
        conv_forward::<R, 2>(x, weight, bias, options.clone(), ConvStrategy::ImplicitGemm).ok()
    }

    fn conv2d_x_backward(
        &self,
        x_shape: Shape,
        weight: CubeTensor<R>,
        output_grad: CubeTensor<R>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<R>> {
        let strategy = ConvStrategy::ImplicitGemm;
        conv_data_backward::<R, 2>(output_grad, weight, x_shape, options.clone(), strategy).ok()
    }

    fn conv2d_weight_backward(
        &self,
        x: CubeTensor<R>,
        weight_shape: Shape,
        output_grad: CubeTensor<R>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<R>> {
        let strategy = ConvStrategy::ImplicitGemm;
        conv_weight_backward::<R, 2>(x, output_grad, weight_shape, options.clone(), strategy).ok()
    }
}
