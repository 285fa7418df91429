//! Int tensor ops of `Sharded<B>`.

use crate::exec::{run, run_twice};
use crate::kind::IntKind;
use crate::ops::{arg_extreme, extreme_with_indices};
use crate::rules::elementwise::Linear;
use crate::rules::{along, creation, elementwise, indexing, layout, matmul, no_rule, reduce};
use crate::{data, draw, Sharded};
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor};
use burn_backend::{
    Backend, BoolDType, Distribution, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice,
    TensorData, TensorMetadata,
};
use std::ops::Range;

impl<B: Backend> IntTensorOps<Self> for Sharded<B> {
    fn int_from_data(data: TensorData, device: &Device<Self>) -> IntTensor<Self> {
        data::from_data::<B, IntKind>(data, device)
    }

    fn int_random(
        shape: Shape,
        distribution: Distribution,
        device: &Device<Self>,
        dtype: IntDType,
    ) -> IntTensor<Self> {
        draw::random_int::<B>(shape, distribution, device, dtype)
    }

    fn int_empty(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        run(
            "int_empty",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::int_empty(shape.clone(), &d, dtype),
        )
    }

    fn int_zeros(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        run(
            "int_zeros",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::int_zeros(shape.clone(), &d, dtype),
        )
    }

    fn int_ones(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        run(
            "int_ones",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::int_ones(shape.clone(), &d, dtype),
        )
    }

    fn int_full(
        shape: Shape,
        fill_value: Scalar,
        device: &Device<Self>,
        dtype: IntDType,
    ) -> IntTensor<Self> {
        run(
            "int_full",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::int_full(shape.clone(), fill_value, &d, dtype),
        )
    }

    fn int_arange_step(
        range: Range<i64>,
        step: usize,
        device: &Device<Self>,
        dtype: IntDType,
    ) -> IntTensor<Self> {
        run(
            "int_arange_step",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::int_arange_step(range.clone(), step, &d, dtype),
        )
    }

    fn int_arange(range: Range<i64>, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self> {
        run(
            "int_arange",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::int_arange(range.clone(), &d, dtype),
        )
    }

    async fn int_into_data(tensor: IntTensor<Self>) -> Result<TensorData, ExecutionError> {
        Ok(data::into_data::<B, IntKind>(tensor))
    }

    fn int_device(tensor: &IntTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn int_to_device(tensor: IntTensor<Self>, device: &Device<Self>) -> IntTensor<Self> {
        data::to_mesh::<B, IntKind>(tensor, device)
    }

    fn int_reshape(tensor: IntTensor<Self>, shape: Shape) -> IntTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "int_reshape",
            (tensor,),
            |m| layout::reshape(m, &shape),
            move |r, (t,)| B::int_reshape(t, layout::local_shape(r, &kept_shape)),
        )
    }

    fn int_slice(tensor: IntTensor<Self>, slices: &[Slice]) -> IntTensor<Self> {
        let kept_slices = slices.to_vec();
        run(
            "int_slice",
            (tensor,),
            |m| layout::slice(m, slices),
            move |r, (t,)| B::int_slice(t, &layout::local_slices(&kept_slices, r.out)),
        )
    }

    fn int_slice_assign(
        tensor: IntTensor<Self>,
        slices: &[Slice],
        value: IntTensor<Self>,
    ) -> IntTensor<Self> {
        let kept_slices = slices.to_vec();
        run(
            "int_slice_assign",
            (tensor, value),
            |m| layout::slice_assign(m, slices),
            move |r, (t, v)| B::int_slice_assign(t, &layout::local_slices(&kept_slices, r.out), v),
        )
    }

    fn int_expand(tensor: IntTensor<Self>, shape: Shape) -> IntTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "int_expand",
            (tensor,),
            |m| layout::expand(m, &shape),
            move |r, (t,)| {
                let local = layout::local_expand(&kept_shape, r.out, &t.shape());
                B::int_expand(t, local)
            },
        )
    }

    fn int_gather(
        dim: usize,
        tensor: IntTensor<Self>,
        indices: IntTensor<Self>,
    ) -> IntTensor<Self> {
        run(
            "int_gather",
            (tensor, indices),
            |m| indexing::gather_or_scatter(m, dim),
            move |_, (t, i)| B::int_gather(dim, t, i),
        )
    }

    fn int_scatter_add(
        dim: usize,
        tensor: IntTensor<Self>,
        indices: IntTensor<Self>,
        value: IntTensor<Self>,
    ) -> IntTensor<Self> {
        run(
            "int_scatter_add",
            (tensor, indices, value),
            |m| indexing::gather_or_scatter(m, dim),
            move |_, (t, i, v)| B::int_scatter_add(dim, t, i, v),
        )
    }

    fn int_select(
        tensor: IntTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> IntTensor<Self> {
        run(
            "int_select",
            (tensor, indices),
            |m| indexing::select(m, dim),
            move |_, (t, i)| B::int_select(t, dim, i),
        )
    }

    fn int_select_add(
        tensor: IntTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
        value: IntTensor<Self>,
    ) -> IntTensor<Self> {
        run(
            "int_select_add",
            (tensor, indices, value),
            |m| indexing::select_add(m, dim, true),
            move |_, (t, i, v)| B::int_select_add(t, dim, i, v),
        )
    }

    fn int_argmax(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        arg_extreme::<B, IntKind>(
            "int_argmax",
            tensor,
            dim,
            move |t, d| B::int_argmax(t, d),
            move |t, d| B::int_max_dim(t, d),
            |d, t, i| B::int_gather(d, t, i),
        )
    }

    fn int_argmin(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self> {
        arg_extreme::<B, IntKind>(
            "int_argmin",
            tensor,
            dim,
            move |t, d| B::int_argmin(t, d),
            move |t, d| B::int_min_dim(t, d),
            |d, t, i| B::int_gather(d, t, i),
        )
    }

    fn int_max_dim_with_indices(
        tensor: IntTensor<Self>,
        dim: usize,
    ) -> (IntTensor<Self>, IntTensor<Self>) {
        extreme_with_indices::<B, IntKind>(
            "int_max_dim_with_indices",
            tensor,
            dim,
            move |t, d| B::int_max_dim_with_indices(t, d),
            move |t, d| B::int_argmax(t, d),
            |d, t, i| B::int_gather(d, t, i),
        )
    }

    fn int_min_dim_with_indices(
        tensor: IntTensor<Self>,
        dim: usize,
    ) -> (IntTensor<Self>, IntTensor<Self>) {
        extreme_with_indices::<B, IntKind>(
            "int_min_dim_with_indices",
            tensor,
            dim,
            move |t, d| B::int_min_dim_with_indices(t, d),
            move |t, d| B::int_argmin(t, d),
            |d, t, i| B::int_gather(d, t, i),
        )
    }

    fn int_any(tensor: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        run_twice(
            "int_any",
            (tensor,),
            |m| reduce::twice(m, None),
            move |_, (t,)| B::int_any(t, out_dtype),
            move |_, (t,)| B::bool_any(t),
        )
    }

    fn int_any_dim(tensor: IntTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self> {
        run_twice(
            "int_any_dim",
            (tensor,),
            |m| reduce::twice(m, Some(dim)),
            move |_, (t,)| B::int_any_dim(t, dim, out_dtype),
            move |_, (t,)| B::bool_any_dim(t, dim),
        )
    }

    fn int_all(tensor: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        run_twice(
            "int_all",
            (tensor,),
            |m| reduce::twice(m, None),
            move |_, (t,)| B::int_all(t, out_dtype),
            move |_, (t,)| B::bool_all(t),
        )
    }

    fn int_all_dim(tensor: IntTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self> {
        run_twice(
            "int_all_dim",
            (tensor,),
            |m| reduce::twice(m, Some(dim)),
            move |_, (t,)| B::int_all_dim(t, dim, out_dtype),
            move |_, (t,)| B::bool_all_dim(t, dim),
        )
    }

    reduce_twice! { B, None;
        fn int_prod(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn int_max(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn int_min(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn int_max_abs(tensor: IntTensor<Self>) -> IntTensor<Self>;
    }

    reduce_twice! { B, Some(dim);
        fn int_prod_dim(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_max_dim(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_min_dim(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_max_abs_dim(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
    }

    by_rule! { B, reduce::sum;
        fn int_sum(tensor: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, |m| reduce::sum_dim(m, dim);
        fn int_sum_dim(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
    }

    by_rule! { B, matmul::matmul;
        fn int_matmul(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, layout::transpose;
        fn int_transpose(tensor: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, |m| layout::swap_dims(m, dim1, dim2);
        fn int_swap_dims(tensor: IntTensor<Self>; dim1: usize, dim2: usize) -> IntTensor<Self>;
    }

    by_rule! { B, |m| layout::permute(m, axes);
        fn int_permute(tensor: IntTensor<Self>; axes: &[usize]) -> IntTensor<Self>;
    }

    by_rule! { B, |m| layout::cat(m, dim);
        fn int_cat(tensors: Vec<IntTensor<Self>>; dim: usize) -> IntTensor<Self>;
    }

    by_rule! { B, no_rule::replicated;
        fn int_scatter_nd(data: IntTensor<Self>, indices: IntTensor<Self>, values: IntTensor<Self>; reduction: burn_backend::tensor::IndexingUpdateOp) -> IntTensor<Self>;
        fn int_gather_nd(data: IntTensor<Self>, indices: IntTensor<Self>) -> IntTensor<Self>;
        fn int_mean(tensor: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, &[dim]);
        fn int_mean_dim(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_repeat_dim(tensor: IntTensor<Self>; dim: usize, times: usize) -> IntTensor<Self>;
        fn int_cumsum(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_cumprod(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_cummin(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_cummax(tensor: IntTensor<Self>; dim: usize) -> IntTensor<Self>;
        fn int_argtopk(tensor: IntTensor<Self>; dim: usize, k: usize) -> IntTensor<Self>;
        fn int_topk(tensor: IntTensor<Self>; dim: usize, k: usize) -> IntTensor<Self>;
        fn int_sort(tensor: IntTensor<Self>; dim: usize, descending: bool) -> IntTensor<Self>;
        fn int_sort_with_indices(tensor: IntTensor<Self>; dim: usize, descending: bool) -> (IntTensor<Self>, IntTensor<Self>);
        fn int_argsort(tensor: IntTensor<Self>; dim: usize, descending: bool) -> IntTensor<Self>;
        fn int_unfold(tensor: IntTensor<Self>; dim: usize, size: usize, step: usize) -> IntTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, axes);
        fn int_flip(tensor: IntTensor<Self>; axes: &[usize]) -> IntTensor<Self>;
    }

    by_rule! { B, |m| elementwise::broadcast(m, Linear::Sum);
        fn int_add(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn int_sub(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, |m| elementwise::broadcast(m, Linear::Product);
        fn int_mul(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, |m| elementwise::broadcast(m, Linear::No);
        fn int_mask_where(tensor: IntTensor<Self>, mask: BoolTensor<Self>, value: IntTensor<Self>) -> IntTensor<Self>;
        fn int_mask_fill(tensor: IntTensor<Self>, mask: BoolTensor<Self>; value: Scalar) -> IntTensor<Self>;
        fn int_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_not_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater(lhs: IntTensor<Self>, rhs: IntTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower(lhs: IntTensor<Self>, rhs: IntTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_powi(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn int_div(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn int_remainder(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_and(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_or(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_xor(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_left_shift(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_right_shift(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, elementwise::linear_unary;
        fn int_mul_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_neg(tensor: IntTensor<Self>) -> IntTensor<Self>;
    }

    by_rule! { B, elementwise::unary;
        fn int_into_float(tensor: IntTensor<Self>; out_dtype: FloatDType) -> FloatTensor<Self>;
        fn int_equal_elem(lhs: IntTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_not_equal_elem(lhs: IntTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater_elem(lhs: IntTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_greater_equal_elem(lhs: IntTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower_elem(lhs: IntTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_lower_equal_elem(lhs: IntTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn int_add_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_powi_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_powi_scalar_impl(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_clamp_min(tensor: IntTensor<Self>; min: Scalar) -> IntTensor<Self>;
        fn int_clamp_max(tensor: IntTensor<Self>; max: Scalar) -> IntTensor<Self>;
        fn int_clamp(tensor: IntTensor<Self>; min: Scalar, max: Scalar) -> IntTensor<Self>;
        fn int_sub_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_div_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_remainder_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_abs(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn int_sign(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_and_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_or_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_xor_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_not(tensor: IntTensor<Self>) -> IntTensor<Self>;
        fn bitwise_left_shift_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn bitwise_right_shift_scalar(lhs: IntTensor<Self>; rhs: Scalar) -> IntTensor<Self>;
        fn int_cast(tensor: IntTensor<Self>; dtype: IntDType) -> IntTensor<Self>;
    }
}
