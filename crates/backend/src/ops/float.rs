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

    fn float_empty(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        fallback!(
            "float_empty",
            [device],
            B::float_empty(shape.clone(), &device, dtype)
        )
    }

    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::matmul::<B, Float>(lhs, rhs, "float_matmul", |a, b| B::float_matmul(a, b))
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
            B::float_scatter_nd(data, indices, values, reduction)
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

    fn float_is_require_grad(tensor: &FloatTensor<Self>) -> bool {
        B::float_is_require_grad(&tensor.parts()[0])
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

    fn float_expand(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self> {
        rules::expand::<B, Float>(tensor, shape, |t, s| B::float_expand(t, s))
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

    along2_ops! { &[dim];
        fn float_cross(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    }

    along_ops! { axes;
        fn float_flip(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
    }

    along_ops! { &[dim];
        fn float_repeat_dim(tensor: FloatTensor<Self>, dim: usize, times: usize) -> FloatTensor<Self>;
        fn float_cumsum(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
        fn float_cumprod(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
        fn float_cummin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
        fn float_cummax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
        fn float_argtopk(tensor: FloatTensor<Self>, dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
        fn float_topk(tensor: FloatTensor<Self>, dim: usize, k: usize) -> FloatTensor<Self>;
        fn float_sort(tensor: FloatTensor<Self>, dim: usize, descending: bool) -> FloatTensor<Self>;
        fn float_sort_with_indices(tensor: FloatTensor<Self>, dim: usize, descending: bool, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
        fn float_argsort(tensor: FloatTensor<Self>, dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
        fn float_unfold(tensor: FloatTensor<Self>, dim: usize, size: usize, step: usize) -> FloatTensor<Self>;
    }

    elementwise3_ops! {
        fn float_mask_where(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    elementwise_ops! { Linear::No;
        fn float_remainder(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_mask_fill(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> FloatTensor<Self>;
        fn float_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_not_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_powf(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_powi(lhs: FloatTensor<Self>, rhs: IntTensor<Self>) -> FloatTensor<Self>;
        fn float_atan2(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    elementwise_ops! { Linear::Numerator;
        fn float_div(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    elementwise_ops! { Linear::Product;
        fn float_mul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    elementwise_ops! { Linear::Sum;
        fn float_add(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sub(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    placement_kept_ops! {
        fn float_mul_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_div_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_neg(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_detach(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_set_require_grad(tensor: FloatTensor<Self>, require_grad: bool) -> FloatTensor<Self>;
    }

    pointwise_ops! {
        fn float_into_int(tensor: FloatTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
        fn float_add_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_clamp_min(tensor: FloatTensor<Self>, min: Scalar) -> FloatTensor<Self>;
        fn float_clamp_max(tensor: FloatTensor<Self>, max: Scalar) -> FloatTensor<Self>;
        fn float_clamp(tensor: FloatTensor<Self>, min: Scalar, max: Scalar) -> FloatTensor<Self>;
        fn float_sub_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_remainder_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_recip(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_not_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_cast(tensor: FloatTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
        fn float_exp(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_log(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_log1p(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_powi_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_powi_scalar_impl(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
        fn float_powf_scalar(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self>;
        fn float_powf_scalar_impl(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self>;
        fn float_sqrt(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_cos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_tan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_cosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_tanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_acos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_acosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_asin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_asinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_atan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_atanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_round(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_floor(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_ceil(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_trunc(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_erf(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sign(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_is_nan(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_is_inf(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    }
}
