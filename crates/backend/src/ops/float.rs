//! Float tensor ops of `Sharded<B>`.
//! Generated from the trait's method list, then edited by hand: every method is forwarded
//! (none inherits a default), through the placement rules in `crate::rules`.

use crate::ranks::{fallback, on_ranks};
use crate::rules::{self, Linear};
use crate::{Bool, Float, Sharded};
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor};
use burn_backend::{
    Backend, BoolDType, Distribution, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice,
    TensorData,
};
use std::future::Future;

impl<B: Backend> FloatTensorOps<Self> for Sharded<B> {
    fn float_from_data(data: TensorData, device: &Device<Self>) -> FloatTensor<Self> {
        rules::from_data::<B, Float>(data, device)
    }

    fn float_random(
        shape: Shape,
        distribution: Distribution,
        device: &Device<Self>,
        dtype: FloatDType,
    ) -> FloatTensor<Self> {
        rules::random_float::<B>(shape, distribution, device, dtype)
    }

    fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        fallback!(
            "float_zeros",
            [device],
            B::float_zeros(shape.clone(), &device, dtype)
        )
    }

    fn float_ones(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        fallback!(
            "float_ones",
            [device],
            B::float_ones(shape.clone(), &device, dtype)
        )
    }

    fn float_full(
        shape: Shape,
        fill_value: Scalar,
        device: &Device<Self>,
        dtype: FloatDType,
    ) -> FloatTensor<Self> {
        fallback!(
            "float_full",
            [device],
            B::float_full(shape.clone(), fill_value, &device, dtype)
        )
    }

    fn float_into_data(
        tensor: FloatTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        async move { Ok(rules::into_data::<B, Float>(tensor)) }
    }

    fn float_device(tensor: &FloatTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self> {
        rules::to_mesh::<B, Float>(tensor, device)
    }

    fn float_into_int(tensor: FloatTensor<Self>, out_dtype: IntDType) -> IntTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_into_int(tensor, out_dtype)
        )
    }

    fn float_empty(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        fallback!(
            "float_empty",
            [device],
            B::float_empty(shape.clone(), &device, dtype)
        )
    }

    fn float_repeat_dim(tensor: FloatTensor<Self>, dim: usize, times: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_repeat_dim");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_repeat_dim(tensor, dim, times)
        )
    }

    fn float_add(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::Sum);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_add(lhs, rhs))
    }

    fn float_add_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(lhs.mesh.clone(), p, [lhs], B::float_add_scalar(lhs, rhs))
    }

    fn float_clamp_min(tensor: FloatTensor<Self>, min: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_clamp_min(tensor, min)
        )
    }

    fn float_clamp_max(tensor: FloatTensor<Self>, max: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_clamp_max(tensor, max)
        )
    }

    fn float_clamp(tensor: FloatTensor<Self>, min: Scalar, max: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_clamp(tensor, min, max)
        )
    }

    fn float_sub(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::Sum);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_sub(lhs, rhs))
    }

    fn float_sub_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(lhs.mesh.clone(), p, [lhs], B::float_sub_scalar(lhs, rhs))
    }

    fn float_mul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::Product);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_mul(lhs, rhs))
    }

    fn float_mul_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        on_ranks!(
            lhs.mesh.clone(),
            lhs.placement,
            [lhs],
            B::float_mul_scalar(lhs, rhs)
        )
    }

    fn float_div(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::Numerator);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_div(lhs, rhs))
    }

    fn float_div_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        on_ranks!(
            lhs.mesh.clone(),
            lhs.placement,
            [lhs],
            B::float_div_scalar(lhs, rhs)
        )
    }

    fn float_remainder(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_remainder(lhs, rhs)
        )
    }

    fn float_remainder_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_remainder_scalar(lhs, rhs)
        )
    }

    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::matmul::<B, Float>(lhs, rhs, "float_matmul", |a, b| B::float_matmul(a, b))
    }

    fn float_cross(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        dim: usize,
    ) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::along2(lhs, rhs, &[dim], "float_cross");
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_cross(lhs, rhs, dim)
        )
    }

    fn float_neg(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        on_ranks!(
            tensor.mesh.clone(),
            tensor.placement,
            [tensor],
            B::float_neg(tensor)
        )
    }

    fn float_recip(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_recip(tensor))
    }

    fn float_transpose(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::transpose::<B, Float>(tensor, |t| B::float_transpose(t))
    }

    fn float_swap_dims(tensor: FloatTensor<Self>, dim1: usize, dim2: usize) -> FloatTensor<Self> {
        rules::swap_dims::<B, Float>(tensor, dim1, dim2, |t, a, b| B::float_swap_dims(t, a, b))
    }

    fn float_permute(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self> {
        rules::permute::<B, Float>(tensor, axes, |t, a| B::float_permute(t, a))
    }

    fn float_flip(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, axes, "float_flip");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_flip(tensor, axes)
        )
    }

    fn float_reshape(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self> {
        rules::reshape::<B, Float>(tensor, shape, |t, s| B::float_reshape(t, s))
    }

    fn float_gather(
        dim: usize,
        tensor: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::gather::<B, Float>(dim, tensor, indices, "float_gather", |d, t, i| {
            B::float_gather(d, t, i)
        })
    }

    fn float_scatter_add(
        dim: usize,
        tensor: FloatTensor<Self>,
        indices: IntTensor<Self>,
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::scatter_add::<B, Float>(
            dim,
            tensor,
            indices,
            value,
            "float_scatter_add",
            |d, t, i, v| B::float_scatter_add(d, t, i, v),
        )
    }

    fn float_scatter_nd(
        data: FloatTensor<Self>,
        indices: IntTensor<Self>,
        values: FloatTensor<Self>,
        reduction: burn_backend::tensor::IndexingUpdateOp,
    ) -> FloatTensor<Self> {
        fallback!(
            "float_scatter_nd",
            [data, indices, values],
            B::float_scatter_nd(data, indices, values, reduction.clone())
        )
    }

    fn float_gather_nd(data: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self> {
        fallback!(
            "float_gather_nd",
            [data, indices],
            B::float_gather_nd(data, indices)
        )
    }

    fn float_select(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::select::<B, Float>(tensor, dim, indices, "float_select", |t, d, i| {
            B::float_select(t, d, i)
        })
    }

    fn float_select_add(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::select_add::<B, Float>(
            tensor,
            dim,
            indices,
            value,
            "float_select_add",
            |t, d, i, v| B::float_select_add(t, d, i, v),
        )
    }

    fn float_slice(tensor: FloatTensor<Self>, slices: &[Slice]) -> FloatTensor<Self> {
        rules::slice::<B, Float>(tensor, slices, "float_slice", |t, s| B::float_slice(t, s))
    }

    fn float_slice_assign(
        tensor: FloatTensor<Self>,
        slices: &[Slice],
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::slice_assign::<B, Float>(tensor, slices, value, "float_slice_assign", |t, s, v| {
            B::float_slice_assign(t, s, v)
        })
    }

    fn float_mask_where(
        tensor: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let (tensor, mask, value, p) = rules::elementwise3(tensor, mask, value);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor, mask, value],
            B::float_mask_where(tensor, mask, value)
        )
    }

    fn float_mask_fill(
        tensor: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        value: Scalar,
    ) -> FloatTensor<Self> {
        let (tensor, mask, p) = rules::elementwise2(tensor, mask, Linear::No);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor, mask],
            B::float_mask_fill(tensor, mask, value)
        )
    }

    fn float_equal(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_equal(lhs, rhs, out_dtype)
        )
    }

    fn float_not_equal(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_not_equal(lhs, rhs, out_dtype)
        )
    }

    fn float_equal_elem(
        lhs: FloatTensor<Self>,
        rhs: Scalar,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_equal_elem(lhs, rhs, out_dtype)
        )
    }

    fn float_not_equal_elem(
        lhs: FloatTensor<Self>,
        rhs: Scalar,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_not_equal_elem(lhs, rhs, out_dtype)
        )
    }

    fn float_greater(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_greater(lhs, rhs, out_dtype)
        )
    }

    fn float_greater_elem(
        lhs: FloatTensor<Self>,
        rhs: Scalar,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_greater_elem(lhs, rhs, out_dtype)
        )
    }

    fn float_greater_equal(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_greater_equal(lhs, rhs, out_dtype)
        )
    }

    fn float_greater_equal_elem(
        lhs: FloatTensor<Self>,
        rhs: Scalar,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_greater_equal_elem(lhs, rhs, out_dtype)
        )
    }

    fn float_lower(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_lower(lhs, rhs, out_dtype)
        )
    }

    fn float_lower_elem(
        lhs: FloatTensor<Self>,
        rhs: Scalar,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_lower_elem(lhs, rhs, out_dtype)
        )
    }

    fn float_lower_equal(
        lhs: FloatTensor<Self>,
        rhs: FloatTensor<Self>,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs, rhs],
            B::float_lower_equal(lhs, rhs, out_dtype)
        )
    }

    fn float_lower_equal_elem(
        lhs: FloatTensor<Self>,
        rhs: Scalar,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_lower_equal_elem(lhs, rhs, out_dtype)
        )
    }

    fn float_detach(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        on_ranks!(
            tensor.mesh.clone(),
            tensor.placement,
            [tensor],
            B::float_detach(tensor)
        )
    }

    fn float_set_require_grad(tensor: FloatTensor<Self>, require_grad: bool) -> FloatTensor<Self> {
        on_ranks!(
            tensor.mesh.clone(),
            tensor.placement,
            [tensor],
            B::float_set_require_grad(tensor, require_grad)
        )
    }

    fn float_is_require_grad(tensor: &FloatTensor<Self>) -> bool {
        B::float_is_require_grad(&tensor.parts[0])
    }

    fn float_sum(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::sum::<B, Float>(tensor, |t| B::float_sum(t))
    }

    fn float_sum_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        rules::sum_dim::<B, Float>(tensor, dim, |t, d| B::float_sum_dim(t, d))
    }

    fn float_prod(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            None,
            "float_prod",
            |t| B::float_prod(t),
            |t| B::float_prod(t),
        )
    }

    fn float_prod_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            Some(dim),
            "float_prod_dim",
            |t| B::float_prod_dim(t, dim),
            |t| B::float_prod_dim(t, dim),
        )
    }

    fn float_mean(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::mean::<B>(tensor)
    }

    fn float_mean_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        rules::mean_dim::<B>(tensor, dim)
    }

    fn float_cumsum(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_cumsum");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_cumsum(tensor, dim)
        )
    }

    fn float_cumprod(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_cumprod");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_cumprod(tensor, dim)
        )
    }

    fn float_cummin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_cummin");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_cummin(tensor, dim)
        )
    }

    fn float_cummax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_cummax");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_cummax(tensor, dim)
        )
    }

    fn float_cast(tensor: FloatTensor<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_cast(tensor, dtype)
        )
    }

    fn float_exp(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_exp(tensor))
    }

    fn float_log(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_log(tensor))
    }

    fn float_log1p(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_log1p(tensor))
    }

    fn float_powf(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_powf(lhs, rhs))
    }

    fn float_powi(lhs: FloatTensor<Self>, rhs: IntTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_powi(lhs, rhs))
    }

    fn float_powi_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(lhs.mesh.clone(), p, [lhs], B::float_powi_scalar(lhs, rhs))
    }

    fn float_powi_scalar_impl(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self> {
        let (lhs, p) = rules::pointwise(lhs);
        on_ranks!(
            lhs.mesh.clone(),
            p,
            [lhs],
            B::float_powi_scalar_impl(lhs, rhs)
        )
    }

    fn float_powf_scalar(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_powf_scalar(tensor, value)
        )
    }

    fn float_powf_scalar_impl(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_powf_scalar_impl(tensor, value)
        )
    }

    fn float_sqrt(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_sqrt(tensor))
    }

    fn float_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_abs(tensor))
    }

    fn float_cos(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_cos(tensor))
    }

    fn float_sin(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_sin(tensor))
    }

    fn float_tan(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_tan(tensor))
    }

    fn float_cosh(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_cosh(tensor))
    }

    fn float_sinh(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_sinh(tensor))
    }

    fn float_tanh(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_tanh(tensor))
    }

    fn float_acos(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_acos(tensor))
    }

    fn float_acosh(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_acosh(tensor))
    }

    fn float_asin(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_asin(tensor))
    }

    fn float_asinh(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_asinh(tensor))
    }

    fn float_atan(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_atan(tensor))
    }

    fn float_atanh(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_atanh(tensor))
    }

    fn float_atan2(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs, rhs, p) = rules::elementwise2(lhs, rhs, Linear::No);
        on_ranks!(lhs.mesh.clone(), p, [lhs, rhs], B::float_atan2(lhs, rhs))
    }

    fn float_round(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_round(tensor))
    }

    fn float_floor(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_floor(tensor))
    }

    fn float_ceil(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_ceil(tensor))
    }

    fn float_trunc(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_trunc(tensor))
    }

    fn float_erf(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_erf(tensor))
    }

    fn float_cat(tensors: Vec<FloatTensor<Self>>, dim: usize) -> FloatTensor<Self> {
        rules::cat::<B, Float>(tensors, dim, "float_cat", |ts, d| B::float_cat(ts, d))
    }

    fn float_argmax(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self> {
        rules::arg_extreme::<B, Float>(
            tensor,
            dim,
            "float_argmax",
            |t, d| B::float_argmax(t, d, out_dtype),
            |t, d| B::float_max_dim(t, d),
        )
    }

    fn float_argtopk(
        tensor: FloatTensor<Self>,
        dim: usize,
        k: usize,
        out_dtype: IntDType,
    ) -> IntTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_argtopk");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_argtopk(tensor, dim, k, out_dtype)
        )
    }

    fn float_topk(tensor: FloatTensor<Self>, dim: usize, k: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_topk");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_topk(tensor, dim, k)
        )
    }

    fn float_argmin(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self> {
        rules::arg_extreme::<B, Float>(
            tensor,
            dim,
            "float_argmin",
            |t, d| B::float_argmin(t, d, out_dtype),
            |t, d| B::float_min_dim(t, d),
        )
    }

    fn float_max(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            None,
            "float_max",
            |t| B::float_max(t),
            |t| B::float_max(t),
        )
    }

    fn float_max_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            Some(dim),
            "float_max_dim",
            |t| B::float_max_dim(t, dim),
            |t| B::float_max_dim(t, dim),
        )
    }

    fn float_max_dim_with_indices(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices_dtype: IntDType,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        fallback!(
            "float_max_dim_with_indices",
            [tensor],
            B::float_max_dim_with_indices(tensor, dim, indices_dtype)
        )
    }

    fn float_min(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            None,
            "float_min",
            |t| B::float_min(t),
            |t| B::float_min(t),
        )
    }

    fn float_min_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            Some(dim),
            "float_min_dim",
            |t| B::float_min_dim(t, dim),
            |t| B::float_min_dim(t, dim),
        )
    }

    fn float_min_dim_with_indices(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices_dtype: IntDType,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        fallback!(
            "float_min_dim_with_indices",
            [tensor],
            B::float_min_dim_with_indices(tensor, dim, indices_dtype)
        )
    }

    fn float_max_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            None,
            "float_max_abs",
            |t| B::float_max_abs(t),
            |t| B::float_max_abs(t),
        )
    }

    fn float_max_abs_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        rules::combine::<B, Float, Float>(
            tensor,
            Some(dim),
            "float_max_abs_dim",
            |t| B::float_max_abs_dim(t, dim),
            |t| B::float_max_abs_dim(t, dim),
        )
    }

    fn float_any(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        rules::combine::<B, Float, Bool>(
            tensor,
            None,
            "float_any",
            |t| B::float_any(t, out_dtype),
            |t| B::bool_any(t),
        )
    }

    fn float_any_dim(
        tensor: FloatTensor<Self>,
        dim: usize,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        rules::combine::<B, Float, Bool>(
            tensor,
            Some(dim),
            "float_any_dim",
            |t| B::float_any_dim(t, dim, out_dtype),
            |t| B::bool_any_dim(t, dim),
        )
    }

    fn float_all(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        rules::combine::<B, Float, Bool>(
            tensor,
            None,
            "float_all",
            |t| B::float_all(t, out_dtype),
            |t| B::bool_all(t),
        )
    }

    fn float_all_dim(
        tensor: FloatTensor<Self>,
        dim: usize,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        rules::combine::<B, Float, Bool>(
            tensor,
            Some(dim),
            "float_all_dim",
            |t| B::float_all_dim(t, dim, out_dtype),
            |t| B::bool_all_dim(t, dim),
        )
    }

    fn float_sign(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::float_sign(tensor))
    }

    fn float_expand(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self> {
        rules::expand::<B, Float>(tensor, shape, |t, s| B::float_expand(t, s))
    }

    fn float_sort(tensor: FloatTensor<Self>, dim: usize, descending: bool) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_sort");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_sort(tensor, dim, descending)
        )
    }

    fn float_sort_with_indices(
        tensor: FloatTensor<Self>,
        dim: usize,
        descending: bool,
        indices_dtype: IntDType,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        let (tensor, p) = rules::along(tensor, &[dim], "float_sort_with_indices");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_sort_with_indices(tensor, dim, descending, indices_dtype)
        )
    }

    fn float_argsort(
        tensor: FloatTensor<Self>,
        dim: usize,
        descending: bool,
        out_dtype: IntDType,
    ) -> IntTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_argsort");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_argsort(tensor, dim, descending, out_dtype)
        )
    }

    fn float_grid_sample_2d(
        tensor: FloatTensor<Self>,
        grid: FloatTensor<Self>,
        options: GridSampleOptions,
    ) -> FloatTensor<Self> {
        fallback!(
            "float_grid_sample_2d",
            [tensor, grid],
            B::float_grid_sample_2d(tensor, grid, options.clone())
        )
    }

    fn float_unfold(
        tensor: FloatTensor<Self>,
        dim: usize,
        size: usize,
        step: usize,
    ) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "float_unfold");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_unfold(tensor, dim, size, step)
        )
    }

    fn float_is_nan(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_is_nan(tensor, out_dtype)
        )
    }

    fn float_is_inf(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::float_is_inf(tensor, out_dtype)
        )
    }
}
