//! Int tensor ops of `Sharded<B>`.
//! Generated from the trait's method list, then edited by hand: every method is forwarded
//! (none inherits a default), through the placement rules in `crate::rules`.

use crate::ranks::{fallback, on_ranks};
use crate::rules::{self, Linear};
use crate::{Bool, Int, Sharded};
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor};
use burn_backend::{
    Backend, BoolDType, Distribution, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice,
    TensorData,
};
use std::future::Future;
use std::ops::Range;

impl<B: Backend> IntTensorOps<Self> for Sharded<B> {
    fn int_empty(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        fallback!(
            "int_empty",
            [device],
            B::int_empty(shape.clone(), &device, dtype)
        )
    }

    fn int_into_data(
        tensor: IntTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        async move { Ok(rules::into_data::<B, Int>(tensor)) }
    }

    fn int_from_data(data: TensorData, device: &Device<Self>) -> IntTensor<Self> {
        rules::from_data::<B, Int>(data, device)
    }

    fn int_device(tensor: &IntTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn int_to_device(tensor: IntTensor<Self>, device: &Device<Self>) -> IntTensor<Self> {
        rules::to_mesh::<B, Int>(tensor, device)
    }

    fn int_reshape(tensor: IntTensor<Self>, shape: Shape) -> IntTensor<Self> {
        rules::reshape::<B, Int>(tensor, shape, |t, s| B::int_reshape(t, s))
    }

    fn int_slice(tensor: IntTensor<Self>, slices: &[Slice]) -> IntTensor<Self> {
        rules::slice::<B, Int>(tensor, slices, "int_slice", |t, s| B::int_slice(t, s))
    }

    fn int_slice_assign(
        tensor: IntTensor<Self>,
        slices: &[Slice],
        value: IntTensor<Self>,
    ) -> IntTensor<Self> {
        rules::slice_assign::<B, Int>(tensor, slices, value, "int_slice_assign", |t, s, v| {
            B::int_slice_assign(t, s, v)
        })
    }

    fn int_gather(
        dim: usize,
        tensor: IntTensor<Self>,
        indices: IntTensor<Self>,
    ) -> IntTensor<Self> {
        rules::gather::<B, Int>(dim, tensor, indices, "int_gather", |d, t, i| {
            B::int_gather(d, t, i)
        })
    }

    fn int_scatter_add(
        dim: usize,
        tensor: IntTensor<Self>,
        indices: IntTensor<Self>,
        value: IntTensor<Self>,
    ) -> IntTensor<Self> {
        rules::scatter_add::<B, Int>(
            dim,
            tensor,
            indices,
            value,
            "int_scatter_add",
            |d, t, i, v| B::int_scatter_add(d, t, i, v),
        )
    }

    fn int_scatter_nd(
        data: IntTensor<Self>,
        indices: IntTensor<Self>,
        values: IntTensor<Self>,
        reduction: burn_backend::tensor::IndexingUpdateOp,
    ) -> IntTensor<Self> {
        fallback!(
            "int_scatter_nd",
            [data, indices, values],
            B::int_scatter_nd(data, indices, values, reduction)
        )
    }

    fn int_gather_nd(data: IntTensor<Self>, indices: IntTensor<Self>) -> IntTensor<Self> {
        fallback!(
            "int_gather_nd",
            [data, indices],
            B::int_gather_nd(data, indices)
        )
    }

    fn int_select(
        tensor: IntTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> IntTensor<Self> {
        rules::select::<B, Int>(tensor, dim, indices, "int_select", |t, d, i| {
            B::int_select(t, d, i)
        })
    }

    fn int_select_add(
        tensor: IntTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
        value: IntTensor<Self>,
    ) -> IntTensor<Self> {
        rules::select_add::<B, Int>(
            tensor,
            dim,
            indices,
            value,
            "int_select_add",
            |t, d, i, v| B::int_select_add(t, d, i, v),
        )
    }

    fn int_cat(tensors: Vec<IntTensor<Self>>, dim: usize) -> IntTensor<Self> {
        rules::cat::<B, Int>(tensors, dim, "int_cat", |ts, d| B::int_cat(ts, d))
    }

    fn int_matmul(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self> {
        rules::matmul::<B, Int>(lhs, rhs, "int_matmul", |a, b| B::int_matmul(a, b))
    }

    fn int_zeros(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        fallback!(
            "int_zeros",
            [device],
            B::int_zeros(shape.clone(), &device, dtype)
        )
    }

    fn int_ones(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        fallback!(
            "int_ones",
            [device],
            B::int_ones(shape.clone(), &device, dtype)
        )
    }

    fn int_full(
        shape: Shape,
        fill_value: Scalar,
        device: &Device<Self>,
        dtype: IntDType,
    ) -> IntTensor<Self> {
        fallback!(
            "int_full",
            [device],
            B::int_full(shape.clone(), fill_value, &device, dtype)
        )
    }

    fn int_sum(tensor: IntTensor<Self>) -> IntTensor<Self> {
        rules::sum::<B, Int>(tensor, |t| B::int_sum(t))
    }

    fn int_sum_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::sum_dim::<B, Int>(tensor, dim, |t, d| B::int_sum_dim(t, d))
    }

    fn int_prod(tensor: IntTensor<Self>) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            None,
            "int_prod",
            |t| B::int_prod(t),
            |t| B::int_prod(t),
        )
    }

    fn int_prod_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            Some(dim),
            "int_prod_dim",
            |t| B::int_prod_dim(t, dim),
            |t| B::int_prod_dim(t, dim),
        )
    }

    fn int_mean(tensor: IntTensor<Self>) -> IntTensor<Self> {
        fallback!("int_mean", [tensor], B::int_mean(tensor))
    }

    fn int_mean_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        fallback!("int_mean_dim", [tensor], B::int_mean_dim(tensor, dim))
    }

    fn int_argmax(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::arg_extreme::<B, Int>(
            tensor,
            dim,
            "int_argmax",
            |t, d| B::int_argmax(t, d),
            |t, d| B::int_max_dim(t, d),
        )
    }

    fn int_argmin(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::arg_extreme::<B, Int>(
            tensor,
            dim,
            "int_argmin",
            |t, d| B::int_argmin(t, d),
            |t, d| B::int_min_dim(t, d),
        )
    }

    fn int_max(tensor: IntTensor<Self>) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            None,
            "int_max",
            |t| B::int_max(t),
            |t| B::int_max(t),
        )
    }

    fn int_max_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            Some(dim),
            "int_max_dim",
            |t| B::int_max_dim(t, dim),
            |t| B::int_max_dim(t, dim),
        )
    }

    fn int_max_dim_with_indices(
        tensor: IntTensor<Self>,
        dim: usize,
    ) -> (IntTensor<Self>, IntTensor<Self>) {
        fallback!(
            "int_max_dim_with_indices",
            [tensor],
            B::int_max_dim_with_indices(tensor, dim)
        )
    }

    fn int_max_abs(tensor: IntTensor<Self>) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            None,
            "int_max_abs",
            |t| B::int_max_abs(t),
            |t| B::int_max_abs(t),
        )
    }

    fn int_max_abs_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            Some(dim),
            "int_max_abs_dim",
            |t| B::int_max_abs_dim(t, dim),
            |t| B::int_max_abs_dim(t, dim),
        )
    }

    fn int_min(tensor: IntTensor<Self>) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            None,
            "int_min",
            |t| B::int_min(t),
            |t| B::int_min(t),
        )
    }

    fn int_min_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        rules::combine::<B, Int, Int>(
            tensor,
            Some(dim),
            "int_min_dim",
            |t| B::int_min_dim(t, dim),
            |t| B::int_min_dim(t, dim),
        )
    }

    fn int_min_dim_with_indices(
        tensor: IntTensor<Self>,
        dim: usize,
    ) -> (IntTensor<Self>, IntTensor<Self>) {
        fallback!(
            "int_min_dim_with_indices",
            [tensor],
            B::int_min_dim_with_indices(tensor, dim)
        )
    }

    fn int_transpose(tensor: IntTensor<Self>) -> IntTensor<Self> {
        rules::transpose::<B, Int>(tensor, |t| B::int_transpose(t))
    }

    fn int_swap_dims(tensor: IntTensor<Self>, dim1: usize, dim2: usize) -> IntTensor<Self> {
        rules::swap_dims::<B, Int>(tensor, dim1, dim2, |t, a, b| B::int_swap_dims(t, a, b))
    }

    fn int_permute(tensor: IntTensor<Self>, axes: &[usize]) -> IntTensor<Self> {
        rules::permute::<B, Int>(tensor, axes, |t, a| B::int_permute(t, a))
    }

    fn int_random(
        shape: Shape,
        distribution: Distribution,
        device: &Device<Self>,
        dtype: IntDType,
    ) -> IntTensor<Self> {
        rules::random_int::<B>(shape, distribution, device, dtype)
    }

    fn int_arange_step(
        range: Range<i64>,
        step: usize,
        device: &Device<Self>,
        dtype: IntDType,
    ) -> IntTensor<Self> {
        fallback!(
            "int_arange_step",
            [device],
            B::int_arange_step(range.clone(), step, &device, dtype)
        )
    }

    fn int_arange(range: Range<i64>, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        fallback!(
            "int_arange",
            [device],
            B::int_arange(range.clone(), &device, dtype)
        )
    }

    fn int_any(tensor: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        rules::combine::<B, Int, Bool>(
            tensor,
            None,
            "int_any",
            |t| B::int_any(t, out_dtype),
            |t| B::bool_any(t),
        )
    }

    fn int_any_dim(tensor: IntTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self> {
        rules::combine::<B, Int, Bool>(
            tensor,
            Some(dim),
            "int_any_dim",
            |t| B::int_any_dim(t, dim, out_dtype),
            |t| B::bool_any_dim(t, dim),
        )
    }

    fn int_all(tensor: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        rules::combine::<B, Int, Bool>(
            tensor,
            None,
            "int_all",
            |t| B::int_all(t, out_dtype),
            |t| B::bool_all(t),
        )
    }

    fn int_all_dim(tensor: IntTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self> {
        rules::combine::<B, Int, Bool>(
            tensor,
            Some(dim),
            "int_all_dim",
            |t| B::int_all_dim(t, dim, out_dtype),
            |t| B::bool_all_dim(t, dim),
        )
    }

    fn int_expand(tensor: IntTensor<Self>, shape: Shape) -> IntTensor<Self> {
        rules::expand::<B, Int>(tensor, shape, |t, s| B::int_expand(t, s))
    }

    along_ops! { axes;
        fn int_flip(tensor: IntTensor<Self>, axes: &[usize]) -> IntTensor<Self>;
    }

    along_ops! { &[dim];
        fn int_repeat_dim(tensor: IntTensor<Self>, dim: usize, times: usize) -> IntTensor<Self>;
        fn int_cumsum(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
        fn int_cumprod(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
        fn int_cummin(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
        fn int_cummax(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
        fn int_argtopk(tensor: IntTensor<Self>, dim: usize, k: usize) -> IntTensor<Self>;
        fn int_topk(tensor: IntTensor<Self>, dim: usize, k: usize) -> IntTensor<Self>;
        fn int_sort(tensor: IntTensor<Self>, dim: usize, descending: bool) -> IntTensor<Self>;
        fn int_sort_with_indices(tensor: IntTensor<Self>, dim: usize, descending: bool) -> (IntTensor<Self>, IntTensor<Self>);
        fn int_argsort(tensor: IntTensor<Self>, dim: usize, descending: bool) -> IntTensor<Self>;
        fn int_unfold(tensor: IntTensor<Self>, dim: usize, size: usize, step: usize) -> IntTensor<Self>;
    }

    elementwise3_ops! {
        fn int_mask_where(tensor: IntTensor<Self>, mask: BoolTensor<Self>, value: IntTensor<Self>) -> IntTensor<Self>;
    }

    elementwise_ops! { Linear::No;
        fn int_mask_fill(tensor: IntTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> IntTensor<Self>;
        fn int_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_not_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_powi(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn int_div(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn int_remainder(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_and(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_or(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_xor(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_left_shift(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_right_shift(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    elementwise_ops! { Linear::Product;
        fn int_mul(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    elementwise_ops! { Linear::Sum;
        fn int_add(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn int_sub(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    placement_kept_ops! {
        fn int_mul_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_neg(tensor: IntTensor<Self>) -> IntTensor<Self>;
    }

    pointwise_ops! {
        fn int_into_float(tensor: IntTensor<Self>, out_dtype: FloatDType) -> FloatTensor<Self>;
        fn int_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_not_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_add_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_powi_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_powi_scalar_impl(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_clamp_min(tensor: IntTensor<Self>, min: Scalar) -> IntTensor<Self>;
        fn int_clamp_max(tensor: IntTensor<Self>, max: Scalar) -> IntTensor<Self>;
        fn int_clamp(tensor: IntTensor<Self>, min: Scalar, max: Scalar) -> IntTensor<Self>;
        fn int_sub_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_div_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_remainder_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_abs(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn int_sign(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_and_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_or_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_xor_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_not(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_left_shift_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_right_shift_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
        fn int_cast(tensor: IntTensor<Self>, dtype: IntDType) -> IntTensor<Self>;
    }
}
