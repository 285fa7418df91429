//! Quantized tensor ops of `Sharded<B>`: they run per rank, replicated.
//! Generated from the trait's method list, then edited by hand: every method is forwarded
//! (none inherits a default), through the placement rules in `crate::rules`.

use crate::ranks::{fallback, on_ranks};
use crate::rules::{self};
use crate::{Quantized, Sharded};
use burn_backend::ops::*;
use burn_backend::quantization::{QuantScheme, QuantizationParametersPrimitive};
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    Backend, BoolDType, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice, TensorData,
    TensorPrimitive,
};
use std::future::Future;

impl<B: Backend> QTensorOps<Self> for Sharded<B> {
    fn q_from_data(data: TensorData, device: &Device<Self>) -> QuantizedTensor<Self> {
        rules::from_data::<B, Quantized>(data, device)
    }

    fn quantize(
        tensor: FloatTensor<Self>,
        scheme: &QuantScheme,
        qparams: QuantizationParametersPrimitive<Self>,
    ) -> QuantizedTensor<Self> {
        fallback!(
            "quantize",
            [tensor, qparams],
            B::quantize(tensor, scheme, qparams)
        )
    }

    fn quantize_dynamic(tensor: FloatTensor<Self>, scheme: &QuantScheme) -> QuantizedTensor<Self> {
        fallback!(
            "quantize_dynamic",
            [tensor],
            B::quantize_dynamic(tensor, scheme)
        )
    }

    fn dequantize(tensor: QuantizedTensor<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        fallback!("dequantize", [tensor], B::dequantize(tensor, dtype))
    }

    fn q_device(tensor: &QuantizedTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self> {
        rules::to_mesh::<B, Quantized>(tensor, device)
    }

    fn q_reshape(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self> {
        rules::reshape::<B, Quantized>(tensor, shape, |t, s| B::q_reshape(t, s))
    }

    fn q_into_data(
        tensor: QuantizedTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        async move { Ok(rules::into_data::<B, Quantized>(tensor)) }
    }

    fn q_is_require_grad(tensor: &QuantizedTensor<Self>) -> bool {
        B::q_is_require_grad(&tensor.parts()[0])
    }

    fn q_expand(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self> {
        rules::expand::<B, Quantized>(tensor, shape, |t, s| B::q_expand(t, s))
    }

    fn q_transpose(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self> {
        rules::transpose::<B, Quantized>(tensor, |t| B::q_transpose(t))
    }

    fn q_swap_dims(
        tensor: QuantizedTensor<Self>,
        dim1: usize,
        dim2: usize,
    ) -> QuantizedTensor<Self> {
        rules::swap_dims::<B, Quantized>(tensor, dim1, dim2, |t, a, b| B::q_swap_dims(t, a, b))
    }

    fn q_permute(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self> {
        rules::permute::<B, Quantized>(tensor, axes, |t, a| B::q_permute(t, a))
    }

    fn q_flip(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self> {
        fallback!("q_flip", [tensor], B::q_flip(tensor, axes))
    }

    fn q_select(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> QuantizedTensor<Self> {
        rules::select::<B, Quantized>(tensor, dim, indices, "q_select", |t, d, i| {
            B::q_select(t, d, i)
        })
    }

    fn q_slice(tensor: QuantizedTensor<Self>, slices: &[Slice]) -> QuantizedTensor<Self> {
        rules::slice::<B, Quantized>(tensor, slices, "q_slice", |t, s| B::q_slice(t, s))
    }

    fn q_gather(
        dim: usize,
        tensor: QuantizedTensor<Self>,
        indices: IntTensor<Self>,
    ) -> QuantizedTensor<Self> {
        fallback!(
            "q_gather",
            [tensor, indices],
            B::q_gather(dim, tensor, indices)
        )
    }

    fn q_repeat_dim(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        times: usize,
    ) -> QuantizedTensor<Self> {
        fallback!(
            "q_repeat_dim",
            [tensor],
            B::q_repeat_dim(tensor, dim, times)
        )
    }

    fn q_add(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_add", [lhs, rhs], B::q_add(lhs, rhs))
    }

    fn q_add_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_add_scalar", [lhs], B::q_add_scalar(lhs, rhs))
    }

    fn q_clamp_min(tensor: QuantizedTensor<Self>, min: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_clamp_min", [tensor], B::q_clamp_min(tensor, min))
    }

    fn q_clamp_max(tensor: QuantizedTensor<Self>, max: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_clamp_max", [tensor], B::q_clamp_max(tensor, max))
    }

    fn q_clamp(tensor: QuantizedTensor<Self>, min: Scalar, max: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_clamp", [tensor], B::q_clamp(tensor, min, max))
    }

    fn q_sub(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_sub", [lhs, rhs], B::q_sub(lhs, rhs))
    }

    fn q_sub_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_sub_scalar", [lhs], B::q_sub_scalar(lhs, rhs))
    }

    fn q_mul(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_mul", [lhs, rhs], B::q_mul(lhs, rhs))
    }

    fn q_mul_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_mul_scalar", [lhs], B::q_mul_scalar(lhs, rhs))
    }

    fn q_div(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_div", [lhs, rhs], B::q_div(lhs, rhs))
    }

    fn q_div_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_div_scalar", [lhs], B::q_div_scalar(lhs, rhs))
    }

    fn q_matmul(lhs: TensorPrimitive<Self>, rhs: TensorPrimitive<Self>) -> TensorPrimitive<Self> {
        fallback!("q_matmul", [lhs, rhs], B::q_matmul(lhs, rhs))
    }

    fn q_neg(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_neg", [tensor], B::q_neg(tensor))
    }

    fn q_recip(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_recip", [tensor], B::q_recip(tensor))
    }

    fn q_sum(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_sum", [tensor], B::q_sum(tensor))
    }

    fn q_sum_dim(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_sum_dim", [tensor], B::q_sum_dim(tensor, dim))
    }

    fn q_prod(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_prod", [tensor], B::q_prod(tensor))
    }

    fn q_prod_dim(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_prod_dim", [tensor], B::q_prod_dim(tensor, dim))
    }

    fn q_mean(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_mean", [tensor], B::q_mean(tensor))
    }

    fn q_mean_dim(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_mean_dim", [tensor], B::q_mean_dim(tensor, dim))
    }

    fn q_cumsum(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_cumsum", [tensor], B::q_cumsum(tensor, dim))
    }

    fn q_cumprod(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_cumprod", [tensor], B::q_cumprod(tensor, dim))
    }

    fn q_cummin(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_cummin", [tensor], B::q_cummin(tensor, dim))
    }

    fn q_cummax(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> {
        fallback!("q_cummax", [tensor], B::q_cummax(tensor, dim))
    }

    fn q_exp(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_exp", [tensor], B::q_exp(tensor))
    }

    fn q_log(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_log", [tensor], B::q_log(tensor))
    }

    fn q_log1p(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_log1p", [tensor], B::q_log1p(tensor))
    }

    fn q_powf(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_powf", [lhs, rhs], B::q_powf(lhs, rhs))
    }

    fn q_powi(lhs: QuantizedTensor<Self>, rhs: IntTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_powi", [lhs, rhs], B::q_powi(lhs, rhs))
    }

    fn q_powi_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_powi_scalar", [lhs], B::q_powi_scalar(lhs, rhs))
    }

    fn q_powf_scalar(tensor: QuantizedTensor<Self>, value: Scalar) -> TensorPrimitive<Self> {
        fallback!("q_powf_scalar", [tensor], B::q_powf_scalar(tensor, value))
    }

    fn q_sqrt(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_sqrt", [tensor], B::q_sqrt(tensor))
    }

    fn q_abs(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self> {
        fallback!("q_abs", [tensor], B::q_abs(tensor))
    }

    fn q_cos(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_cos", [tensor], B::q_cos(tensor))
    }

    fn q_sin(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_sin", [tensor], B::q_sin(tensor))
    }

    fn q_tan(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_tan", [tensor], B::q_tan(tensor))
    }

    fn q_cosh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_cosh", [tensor], B::q_cosh(tensor))
    }

    fn q_sinh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_sinh", [tensor], B::q_sinh(tensor))
    }

    fn q_tanh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_tanh", [tensor], B::q_tanh(tensor))
    }

    fn q_erf(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> {
        fallback!("q_erf", [tensor], B::q_erf(tensor))
    }

    fn q_cat(tensors: Vec<QuantizedTensor<Self>>, dim: usize) -> QuantizedTensor<Self> {
        rules::cat::<B, Quantized>(tensors, dim, "q_cat", |ts, d| B::q_cat(ts, d))
    }

    fn q_argmax(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self> {
        fallback!("q_argmax", [tensor], B::q_argmax(tensor, dim, out_dtype))
    }

    fn q_argtopk(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        k: usize,
        out_dtype: IntDType,
    ) -> IntTensor<Self> {
        fallback!(
            "q_argtopk",
            [tensor],
            B::q_argtopk(tensor, dim, k, out_dtype)
        )
    }

    fn q_topk(tensor: QuantizedTensor<Self>, dim: usize, k: usize) -> QuantizedTensor<Self> {
        fallback!("q_topk", [tensor], B::q_topk(tensor, dim, k))
    }

    fn q_argmin(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self> {
        fallback!("q_argmin", [tensor], B::q_argmin(tensor, dim, out_dtype))
    }

    fn q_max(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self> {
        fallback!("q_max", [tensor], B::q_max(tensor))
    }

    fn q_max_dim(tensor: QuantizedTensor<Self>, dim: usize) -> QuantizedTensor<Self> {
        fallback!("q_max_dim", [tensor], B::q_max_dim(tensor, dim))
    }

    fn q_max_dim_with_indices(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        out_dtype: IntDType,
    ) -> (QuantizedTensor<Self>, IntTensor<Self>) {
        fallback!(
            "q_max_dim_with_indices",
            [tensor],
            B::q_max_dim_with_indices(tensor, dim, out_dtype)
        )
    }

    fn q_min(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self> {
        fallback!("q_min", [tensor], B::q_min(tensor))
    }

    fn q_min_dim(tensor: QuantizedTensor<Self>, dim: usize) -> QuantizedTensor<Self> {
        fallback!("q_min_dim", [tensor], B::q_min_dim(tensor, dim))
    }

    fn q_min_dim_with_indices(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        out_dtype: IntDType,
    ) -> (QuantizedTensor<Self>, IntTensor<Self>) {
        fallback!(
            "q_min_dim_with_indices",
            [tensor],
            B::q_min_dim_with_indices(tensor, dim, out_dtype)
        )
    }

    fn q_max_abs(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self> {
        fallback!("q_max_abs", [tensor], B::q_max_abs(tensor))
    }

    fn q_max_abs_dim(tensor: QuantizedTensor<Self>, dim: usize) -> QuantizedTensor<Self> {
        fallback!("q_max_abs_dim", [tensor], B::q_max_abs_dim(tensor, dim))
    }

    fn q_any(tensor: QuantizedTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        fallback!("q_any", [tensor], B::q_any(tensor, out_dtype))
    }

    fn q_any_dim(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        fallback!("q_any_dim", [tensor], B::q_any_dim(tensor, dim, out_dtype))
    }

    fn q_all(tensor: QuantizedTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        fallback!("q_all", [tensor], B::q_all(tensor, out_dtype))
    }

    fn q_all_dim(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        fallback!("q_all_dim", [tensor], B::q_all_dim(tensor, dim, out_dtype))
    }

    fn q_sort(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        descending: bool,
    ) -> QuantizedTensor<Self> {
        fallback!("q_sort", [tensor], B::q_sort(tensor, dim, descending))
    }

    fn q_sort_with_indices(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        descending: bool,
        out_dtype: IntDType,
    ) -> (QuantizedTensor<Self>, IntTensor<Self>) {
        fallback!(
            "q_sort_with_indices",
            [tensor],
            B::q_sort_with_indices(tensor, dim, descending, out_dtype)
        )
    }

    fn q_argsort(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        descending: bool,
        out_dtype: IntDType,
    ) -> IntTensor<Self> {
        fallback!(
            "q_argsort",
            [tensor],
            B::q_argsort(tensor, dim, descending, out_dtype)
        )
    }

    placement_kept_ops! {
        fn q_detach(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
        fn q_set_require_grad(tensor: QuantizedTensor<Self>, require_grad: bool) -> QuantizedTensor<Self>;
    }
}
