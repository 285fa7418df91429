//! Bool tensor ops of `Sharded<B>`.

use crate::exec::run;
use crate::kind::BoolKind;
use crate::rules::elementwise::Linear;
use crate::rules::{along, creation, elementwise, indexing, layout};
use crate::{data, Sharded};
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor};
use burn_backend::{
    Backend, BoolDType, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice, TensorData,
    TensorMetadata,
};
use std::future::Future;

impl<B: Backend> BoolTensorOps<Self> for Sharded<B> {
    fn bool_from_data(data: TensorData, device: &Device<Self>) -> BoolTensor<Self> {
        data::from_data::<B, BoolKind>(data, device)
    }

    fn bool_empty(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self> {
        run(
            "bool_empty",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::bool_empty(shape.clone(), &d, dtype),
        )
    }

    fn bool_zeros(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self> {
        run(
            "bool_zeros",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::bool_zeros(shape.clone(), &d, dtype),
        )
    }

    fn bool_ones(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self> {
        run(
            "bool_ones",
            (device,),
            creation::on_every_rank,
            move |_, (d,)| B::bool_ones(shape.clone(), &d, dtype),
        )
    }

    async fn bool_into_data(tensor: BoolTensor<Self>) -> Result<TensorData, ExecutionError> {
        Ok(data::into_data::<B, BoolKind>(tensor))
    }

    fn bool_device(tensor: &BoolTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self> {
        data::to_mesh::<B, BoolKind>(tensor, device)
    }

    fn bool_argwhere(
        tensor: BoolTensor<Self>,
        out_dtype: IntDType,
    ) -> impl Future<Output = IntTensor<Self>> + 'static + Send {
        data::argwhere::<B>(tensor, out_dtype)
    }

    fn bool_reshape(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "bool_reshape",
            (tensor,),
            |m| layout::reshape(m, &shape),
            move |r, (t,)| B::bool_reshape(t, layout::local_shape(r, &kept_shape)),
        )
    }

    fn bool_slice(tensor: BoolTensor<Self>, slices: &[Slice]) -> BoolTensor<Self> {
        let kept_slices = slices.to_vec();
        run(
            "bool_slice",
            (tensor,),
            |m| layout::slice(m, slices),
            move |r, (t,)| B::bool_slice(t, &layout::local_slices(&kept_slices, r.out)),
        )
    }

    fn bool_slice_assign(
        tensor: BoolTensor<Self>,
        slices: &[Slice],
        value: BoolTensor<Self>,
    ) -> BoolTensor<Self> {
        let kept_slices = slices.to_vec();
        run(
            "bool_slice_assign",
            (tensor, value),
            |m| layout::slice_assign(m, slices),
            move |r, (t, v)| B::bool_slice_assign(t, &layout::local_slices(&kept_slices, r.out), v),
        )
    }

    fn bool_expand(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "bool_expand",
            (tensor,),
            |m| layout::expand(m, &shape),
            move |r, (t,)| {
                let local = layout::local_expand(&kept_shape, r.out, &t.shape());
                B::bool_expand(t, local)
            },
        )
    }

    fn bool_gather(
        dim: usize,
        tensor: BoolTensor<Self>,
        indices: IntTensor<Self>,
    ) -> BoolTensor<Self> {
        run(
            "bool_gather",
            (tensor, indices),
            |m| indexing::gather_or_scatter(m, dim),
            move |_, (t, i)| B::bool_gather(dim, t, i),
        )
    }

    fn bool_scatter_or(
        dim: usize,
        tensor: BoolTensor<Self>,
        indices: IntTensor<Self>,
        value: BoolTensor<Self>,
    ) -> BoolTensor<Self> {
        run(
            "bool_scatter_or",
            (tensor, indices, value),
            |m| indexing::gather_or_scatter(m, dim),
            move |_, (t, i, v)| B::bool_scatter_or(dim, t, i, v),
        )
    }

    fn bool_select(
        tensor: BoolTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> BoolTensor<Self> {
        run(
            "bool_select",
            (tensor, indices),
            |m| indexing::select(m, dim),
            move |_, (t, i)| B::bool_select(t, dim, i),
        )
    }

    fn bool_select_or(
        tensor: BoolTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
        value: BoolTensor<Self>,
    ) -> BoolTensor<Self> {
        run(
            "bool_select_or",
            (tensor, indices, value),
            |m| indexing::select_add(m, dim, false),
            move |_, (t, i, v)| B::bool_select_or(t, dim, i, v),
        )
    }

    reduce_twice! { B, None;
        fn bool_any(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_all(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
    }

    reduce_twice! { B, Some(dim);
        fn bool_any_dim(tensor: BoolTensor<Self>; dim: usize) -> BoolTensor<Self>;
        fn bool_all_dim(tensor: BoolTensor<Self>; dim: usize) -> BoolTensor<Self>;
    }

    by_rule! { B, |m| layout::cat(m, dim);
        fn bool_cat(tensors: Vec<BoolTensor<Self>>; dim: usize) -> BoolTensor<Self>;
    }

    by_rule! { B, layout::transpose;
        fn bool_transpose(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
    }

    by_rule! { B, |m| layout::swap_dims(m, dim1, dim2);
        fn bool_swap_dims(tensor: BoolTensor<Self>; dim1: usize, dim2: usize) -> BoolTensor<Self>;
    }

    by_rule! { B, |m| layout::permute(m, axes);
        fn bool_permute(tensor: BoolTensor<Self>; axes: &[usize]) -> BoolTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, axes);
        fn bool_flip(tensor: BoolTensor<Self>; axes: &[usize]) -> BoolTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, &[dim]);
        fn bool_repeat_dim(tensor: BoolTensor<Self>; dim: usize, times: usize) -> BoolTensor<Self>;
        fn bool_unfold(tensor: BoolTensor<Self>; dim: usize, size: usize, step: usize) -> BoolTensor<Self>;
    }

    by_rule! { B, |m| elementwise::broadcast(m, Linear::No);
        fn bool_mask_where(tensor: BoolTensor<Self>, mask: BoolTensor<Self>, value: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_mask_fill(tensor: BoolTensor<Self>, mask: BoolTensor<Self>; value: Scalar) -> BoolTensor<Self>;
        fn bool_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_not_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_and(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_or(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_xor(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
    }

    by_rule! { B, elementwise::unary;
        fn bool_into_int(tensor: BoolTensor<Self>; out_dtype: IntDType) -> IntTensor<Self>;
        fn bool_into_float(tensor: BoolTensor<Self>; out_dtype: FloatDType) -> FloatTensor<Self>;
        fn bool_equal_elem(lhs: BoolTensor<Self>; rhs: Scalar) -> BoolTensor<Self>;
        fn bool_not_equal_elem(lhs: BoolTensor<Self>; rhs: Scalar) -> BoolTensor<Self>;
        fn bool_not(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
    }
}
