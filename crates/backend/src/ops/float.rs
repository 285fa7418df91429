//! Float tensor ops of `Sharded<B>`.

use crate::autocast::moved;
use crate::exec::{run, run_twice};
use crate::kind::FloatKind;
use crate::ops::{arg_extreme, extreme_with_indices};
use crate::origin::Layout;
use crate::placement::Placement;
use crate::rules::elementwise::Linear;
use crate::rules::Rank;
use crate::rules::{along, creation, elementwise, indexing, layout, matmul, no_rule, reduce};
use crate::{data, draw, Sharded};
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor};
use burn_backend::{
    Backend, BoolDType, Distribution, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice,
    TensorData, TensorMetadata,
};

impl<B: Backend> FloatTensorOps<Self> for Sharded<B> {
    fn float_from_data(data: TensorData, device: &Device<Self>) -> FloatTensor<Self> {
        data::from_data::<B, FloatKind>(data, device)
    }

    fn float_random(
        shape: Shape,
        distribution: Distribution,
        device: &Device<Self>,
        dtype: FloatDType,
    ) -> FloatTensor<Self> {
        draw::random_float::<B>(shape, distribution, device, dtype)
    }

    fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        run(
            "float_zeros",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::float_zeros(shape.clone(), &d, dtype),
        )
    }

    fn float_ones(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        run(
            "float_ones",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::float_ones(shape.clone(), &d, dtype),
        )
    }

    fn float_full(
        shape: Shape,
        fill_value: Scalar,
        device: &Device<Self>,
        dtype: FloatDType,
    ) -> FloatTensor<Self> {
        run(
            "float_full",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::float_full(shape.clone(), fill_value, &d, dtype),
        )
    }

    fn float_empty(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self> {
        run(
            "float_empty",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::float_empty(shape.clone(), &d, dtype),
        )
    }

    async fn float_into_data(tensor: FloatTensor<Self>) -> Result<TensorData, ExecutionError> {
        Ok(data::into_data::<B, FloatKind>(tensor))
    }

    fn float_device(tensor: &FloatTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self> {
        data::to_mesh::<B, FloatKind>(tensor, device)
    }

    fn float_is_require_grad(tensor: &FloatTensor<Self>) -> bool {
        tensor.first_part().is_some_and(B::float_is_require_grad)
    }

    fn float_reshape(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self> {
        let kept_shape = shape.clone();
        let view = || Layout::Reshape(shape.clone());
        moved(tensor, Some(&view), |tensor| {
            let kept_shape = kept_shape.clone();
            run(
                "float_reshape",
                (tensor,),
                |m| layout::reshape(m, &shape),
                move |r, (t,)| B::float_reshape(t, layout::local_shape(r, &kept_shape)),
            )
        })
    }

    fn float_slice(tensor: FloatTensor<Self>, slices: &[Slice]) -> FloatTensor<Self> {
        let kept_slices = slices.to_vec();
        moved(tensor, None, |tensor| {
            let kept_slices = kept_slices.clone();
            run(
                "float_slice",
                (tensor,),
                |m| layout::slice(m, slices),
                move |r, (t,)| B::float_slice(t, &layout::local_slices(&kept_slices, r.out)),
            )
        })
    }

    fn float_slice_assign(
        tensor: FloatTensor<Self>,
        slices: &[Slice],
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let kept_slices = slices.to_vec();
        run(
            "float_slice_assign",
            (tensor, value),
            |m| layout::slice_assign(m, slices),
            move |r, (t, v)| {
                B::float_slice_assign(t, &layout::local_slices(&kept_slices, r.out), v)
            },
        )
    }

    fn float_expand(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "float_expand",
            (tensor,),
            |m| layout::expand(m, &shape),
            move |r, (t,)| {
                let local = layout::local_expand(&kept_shape, r.out, &t.shape());
                B::float_expand(t, local)
            },
        )
    }

    fn float_gather(
        dim: usize,
        tensor: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        run(
            "float_gather",
            (tensor, indices),
            |m| indexing::gather_or_scatter(m, dim),
            move |_, (t, i)| B::float_gather(dim, t, i),
        )
    }

    fn float_scatter_add(
        dim: usize,
        tensor: FloatTensor<Self>,
        indices: IntTensor<Self>,
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        run(
            "float_scatter_add",
            (tensor, indices, value),
            |m| indexing::gather_or_scatter(m, dim),
            move |_, (t, i, v)| B::float_scatter_add(dim, t, i, v),
        )
    }

    fn float_select(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        run(
            "float_select",
            (tensor, indices),
            |m| indexing::select(m, dim),
            move |_, (t, i)| B::float_select(t, dim, i),
        )
    }

    fn float_select_add(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        run(
            "float_select_add",
            (tensor, indices, value),
            |m| indexing::select_add(m, dim, true),
            move |_, (t, i, v)| B::float_select_add(t, dim, i, v),
        )
    }

    fn float_mean(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let count = tensor.shape().num_elements();
        run("float_mean", (tensor,), reduce::sum, move |r, (t,)| {
            sharded_mean::<B>(r, t, count, |t| B::float_sum(t), |t| B::float_mean(t))
        })
    }

    fn float_mean_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let len = tensor.shape()[dim];
        run(
            "float_mean_dim",
            (tensor,),
            |m| reduce::sum_dim(m, dim),
            move |r, (t,)| {
                sharded_mean::<B>(
                    r,
                    t,
                    len,
                    |t| B::float_sum_dim(t, dim),
                    |t| B::float_mean_dim(t, dim),
                )
            },
        )
    }

    fn float_argmax(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self> {
        arg_extreme::<B, FloatKind>(
            "float_argmax",
            tensor,
            dim,
            move |t, d| B::float_argmax(t, d, out_dtype),
            move |t, d| B::float_max_dim(t, d),
            |d, t, i| B::float_gather(d, t, i),
        )
    }

    fn float_argmin(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self> {
        arg_extreme::<B, FloatKind>(
            "float_argmin",
            tensor,
            dim,
            move |t, d| B::float_argmin(t, d, out_dtype),
            move |t, d| B::float_min_dim(t, d),
            |d, t, i| B::float_gather(d, t, i),
        )
    }

    fn float_max_dim_with_indices(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices_dtype: IntDType,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        extreme_with_indices::<B, FloatKind>(
            "float_max_dim_with_indices",
            tensor,
            dim,
            move |t, d| B::float_max_dim_with_indices(t, d, indices_dtype),
            move |t, d| B::float_argmax(t, d, indices_dtype),
            |d, t, i| B::float_gather(d, t, i),
        )
    }

    fn float_min_dim_with_indices(
        tensor: FloatTensor<Self>,
        dim: usize,
        indices_dtype: IntDType,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        extreme_with_indices::<B, FloatKind>(
            "float_min_dim_with_indices",
            tensor,
            dim,
            move |t, d| B::float_min_dim_with_indices(t, d, indices_dtype),
            move |t, d| B::float_argmin(t, d, indices_dtype),
            |d, t, i| B::float_gather(d, t, i),
        )
    }

    fn float_any(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        run_twice(
            "float_any",
            (tensor,),
            |m| reduce::twice(m, None),
            move |_, (t,)| B::float_any(t, out_dtype),
            move |_, (t,)| B::bool_any(t),
        )
    }

    fn float_any_dim(
        tensor: FloatTensor<Self>,
        dim: usize,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        run_twice(
            "float_any_dim",
            (tensor,),
            |m| reduce::twice(m, Some(dim)),
            move |_, (t,)| B::float_any_dim(t, dim, out_dtype),
            move |_, (t,)| B::bool_any_dim(t, dim),
        )
    }

    fn float_all(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self> {
        run_twice(
            "float_all",
            (tensor,),
            |m| reduce::twice(m, None),
            move |_, (t,)| B::float_all(t, out_dtype),
            move |_, (t,)| B::bool_all(t),
        )
    }

    fn float_all_dim(
        tensor: FloatTensor<Self>,
        dim: usize,
        out_dtype: BoolDType,
    ) -> BoolTensor<Self> {
        run_twice(
            "float_all_dim",
            (tensor,),
            |m| reduce::twice(m, Some(dim)),
            move |_, (t,)| B::float_all_dim(t, dim, out_dtype),
            move |_, (t,)| B::bool_all_dim(t, dim),
        )
    }

    reduce_twice! { B, None;
        fn float_prod(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_max(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_min(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_max_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    reduce_twice! { B, Some(dim);
        fn float_prod_dim(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_max_dim(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_min_dim(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_max_abs_dim(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
    }

    by_rule! { B, autocast matmul::matmul;
        fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, moves layout::transpose, Layout::Transpose;
        fn float_transpose(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, moves |m| layout::swap_dims(m, dim1, dim2), Layout::SwapDims(dim1, dim2);
        fn float_swap_dims(tensor: FloatTensor<Self>; dim1: usize, dim2: usize) -> FloatTensor<Self>;
    }

    by_rule! { B, moves |m| layout::permute(m, axes), Layout::Permute(axes.to_vec());
        fn float_permute(tensor: FloatTensor<Self>; axes: &[usize]) -> FloatTensor<Self>;
    }

    by_rule! { B, |m| layout::cat(m, dim);
        fn float_cat(tensors: Vec<FloatTensor<Self>>; dim: usize) -> FloatTensor<Self>;
    }

    by_rule! { B, reduce::sum;
        fn float_sum(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, |m| reduce::sum_dim(m, dim);
        fn float_sum_dim(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
    }

    by_rule! { B, no_rule::replicated;
        fn float_scatter_nd(data: FloatTensor<Self>, indices: IntTensor<Self>, values: FloatTensor<Self>; reduction: burn_backend::tensor::IndexingUpdateOp) -> FloatTensor<Self>;
        fn float_gather_nd(data: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
        fn float_grid_sample_2d(tensor: FloatTensor<Self>, grid: FloatTensor<Self>; options: GridSampleOptions) -> FloatTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, &[dim]);
        fn float_cross(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_repeat_dim(tensor: FloatTensor<Self>; dim: usize, times: usize) -> FloatTensor<Self>;
        fn float_cumsum(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_cumprod(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_cummin(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_cummax(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn float_argtopk(tensor: FloatTensor<Self>; dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
        fn float_topk(tensor: FloatTensor<Self>; dim: usize, k: usize) -> FloatTensor<Self>;
        fn float_sort(tensor: FloatTensor<Self>; dim: usize, descending: bool) -> FloatTensor<Self>;
        fn float_sort_with_indices(tensor: FloatTensor<Self>; dim: usize, descending: bool, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
        fn float_argsort(tensor: FloatTensor<Self>; dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
        fn float_unfold(tensor: FloatTensor<Self>; dim: usize, size: usize, step: usize) -> FloatTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, axes);
        fn float_flip(tensor: FloatTensor<Self>; axes: &[usize]) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow |m| elementwise::broadcast(m, Linear::Sum);
        fn float_add(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sub(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow |m| elementwise::broadcast(m, Linear::Product);
        fn float_mul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow |m| elementwise::broadcast(m, Linear::Numerator);
        fn float_div(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow |m| elementwise::broadcast(m, Linear::No);
        fn float_mask_where(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_mask_fill(tensor: FloatTensor<Self>, mask: BoolTensor<Self>; value: Scalar) -> FloatTensor<Self>;
    }

    by_rule! { B, |m| elementwise::broadcast(m, Linear::No);
        fn float_remainder(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_not_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_powf(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_powi(lhs: FloatTensor<Self>, rhs: IntTensor<Self>) -> FloatTensor<Self>;
        fn float_atan2(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow elementwise::scaling;
        fn float_mul_scalar(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_div_scalar(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_neg(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, elementwise::linear_unary;
        fn float_detach(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_set_require_grad(tensor: FloatTensor<Self>; require_grad: bool) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow elementwise::unary;
        fn float_add_scalar(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_clamp_min(tensor: FloatTensor<Self>; min: Scalar) -> FloatTensor<Self>;
        fn float_clamp_max(tensor: FloatTensor<Self>; max: Scalar) -> FloatTensor<Self>;
        fn float_clamp(tensor: FloatTensor<Self>; min: Scalar, max: Scalar) -> FloatTensor<Self>;
        fn float_sub_scalar(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_tanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_erf(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow(Bf16) elementwise::unary;
        fn float_exp(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_powi_scalar(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_powi_scalar_impl(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_powf_scalar(tensor: FloatTensor<Self>; value: Scalar) -> FloatTensor<Self>;
        fn float_powf_scalar_impl(tensor: FloatTensor<Self>; value: Scalar) -> FloatTensor<Self>;
    }

    by_rule! { B, elementwise::unary;
        fn float_into_int(tensor: FloatTensor<Self>; out_dtype: IntDType) -> IntTensor<Self>;
        fn float_remainder_scalar(lhs: FloatTensor<Self>; rhs: Scalar) -> FloatTensor<Self>;
        fn float_recip(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_equal_elem(lhs: FloatTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_not_equal_elem(lhs: FloatTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater_elem(lhs: FloatTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_greater_equal_elem(lhs: FloatTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower_elem(lhs: FloatTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_lower_equal_elem(lhs: FloatTensor<Self>; rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_cast(tensor: FloatTensor<Self>; dtype: FloatDType) -> FloatTensor<Self>;
        fn float_log(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_log1p(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sqrt(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_cos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_tan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_cosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_sinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
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
        fn float_sign(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn float_is_nan(tensor: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn float_is_inf(tensor: FloatTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
    }
}

/// A mean on one rank: over a sharded dim (`count` rows in all), the rank's sum over `count`,
/// an addend of the mean; otherwise the inner backend's own mean.
fn sharded_mean<B: Backend>(
    r: &Rank,
    t: B::FloatTensorPrimitive,
    count: usize,
    sum: impl Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
    mean: impl Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
) -> B::FloatTensorPrimitive {
    match r.inputs[0].placement {
        Placement::Shard(_) => B::float_div_scalar(sum(t), Scalar::from(count as f64)),
        _ => mean(t),
    }
}
