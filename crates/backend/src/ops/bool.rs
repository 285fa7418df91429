//! Bool tensor ops of `Sharded<B>`.
//! Generated from the trait's method list, then edited by hand: every method is forwarded
//! (none inherits a default), through the placement rules in `crate::rules`.

use crate::ranks::{fallback, on_ranks};
use crate::rules::{self, Linear};
use crate::{Bool, Sharded};
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor};
use burn_backend::{
    Backend, BoolDType, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice, TensorData,
};
use std::future::Future;

impl<B: Backend> BoolTensorOps<Self> for Sharded<B> {
    fn bool_empty(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self> {
        fallback!(
            "bool_empty",
            [device],
            B::bool_empty(shape.clone(), &device, dtype)
        )
    }

    fn bool_zeros(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self> {
        fallback!(
            "bool_zeros",
            [device],
            B::bool_zeros(shape.clone(), &device, dtype)
        )
    }

    fn bool_ones(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self> {
        fallback!(
            "bool_ones",
            [device],
            B::bool_ones(shape.clone(), &device, dtype)
        )
    }

    fn bool_into_data(
        tensor: BoolTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        async move { Ok(rules::into_data::<B, Bool>(tensor)) }
    }

    fn bool_from_data(data: TensorData, device: &Device<Self>) -> BoolTensor<Self> {
        rules::from_data::<B, Bool>(data, device)
    }

    fn bool_device(tensor: &BoolTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self> {
        rules::to_mesh::<B, Bool>(tensor, device)
    }

    fn bool_reshape(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self> {
        rules::reshape::<B, Bool>(tensor, shape, |t, s| B::bool_reshape(t, s))
    }

    fn bool_slice(tensor: BoolTensor<Self>, slices: &[Slice]) -> BoolTensor<Self> {
        rules::slice::<B, Bool>(tensor, slices, "bool_slice", |t, s| B::bool_slice(t, s))
    }

    fn bool_slice_assign(
        tensor: BoolTensor<Self>,
        slices: &[Slice],
        value: BoolTensor<Self>,
    ) -> BoolTensor<Self> {
        rules::slice_assign::<B, Bool>(tensor, slices, value, "bool_slice_assign", |t, s, v| {
            B::bool_slice_assign(t, s, v)
        })
    }

    fn bool_gather(
        dim: usize,
        tensor: BoolTensor<Self>,
        indices: IntTensor<Self>,
    ) -> BoolTensor<Self> {
        rules::gather::<B, Bool>(dim, tensor, indices, "bool_gather", |d, t, i| {
            B::bool_gather(d, t, i)
        })
    }

    fn bool_scatter_or(
        dim: usize,
        tensor: BoolTensor<Self>,
        indices: IntTensor<Self>,
        value: BoolTensor<Self>,
    ) -> BoolTensor<Self> {
        rules::scatter_add::<B, Bool>(
            dim,
            tensor,
            indices,
            value,
            "bool_scatter_or",
            |d, t, i, v| B::bool_scatter_or(d, t, i, v),
        )
    }

    fn bool_select(
        tensor: BoolTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> BoolTensor<Self> {
        rules::select::<B, Bool>(tensor, dim, indices, "bool_select", |t, d, i| {
            B::bool_select(t, d, i)
        })
    }

    fn bool_select_or(
        tensor: BoolTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
        value: BoolTensor<Self>,
    ) -> BoolTensor<Self> {
        rules::select_add::<B, Bool>(
            tensor,
            dim,
            indices,
            value,
            "bool_select_or",
            |t, d, i, v| B::bool_select_or(t, d, i, v),
        )
    }

    fn bool_cat(tensors: Vec<BoolTensor<Self>>, dim: usize) -> BoolTensor<Self> {
        rules::cat::<B, Bool>(tensors, dim, "bool_cat", |ts, d| B::bool_cat(ts, d))
    }

    fn bool_transpose(tensor: BoolTensor<Self>) -> BoolTensor<Self> {
        rules::transpose::<B, Bool>(tensor, |t| B::bool_transpose(t))
    }

    fn bool_swap_dims(tensor: BoolTensor<Self>, dim1: usize, dim2: usize) -> BoolTensor<Self> {
        rules::swap_dims::<B, Bool>(tensor, dim1, dim2, |t, a, b| B::bool_swap_dims(t, a, b))
    }

    fn bool_permute(tensor: BoolTensor<Self>, axes: &[usize]) -> BoolTensor<Self> {
        rules::permute::<B, Bool>(tensor, axes, |t, a| B::bool_permute(t, a))
    }

    fn bool_any(tensor: BoolTensor<Self>) -> BoolTensor<Self> {
        rules::combine::<B, Bool, Bool>(
            tensor,
            None,
            "bool_any",
            |t| B::bool_any(t),
            |t| B::bool_any(t),
        )
    }

    fn bool_any_dim(tensor: BoolTensor<Self>, dim: usize) -> BoolTensor<Self> {
        rules::combine::<B, Bool, Bool>(
            tensor,
            Some(dim),
            "bool_any_dim",
            |t| B::bool_any_dim(t, dim),
            |t| B::bool_any_dim(t, dim),
        )
    }

    fn bool_all(tensor: BoolTensor<Self>) -> BoolTensor<Self> {
        rules::combine::<B, Bool, Bool>(
            tensor,
            None,
            "bool_all",
            |t| B::bool_all(t),
            |t| B::bool_all(t),
        )
    }

    fn bool_all_dim(tensor: BoolTensor<Self>, dim: usize) -> BoolTensor<Self> {
        rules::combine::<B, Bool, Bool>(
            tensor,
            Some(dim),
            "bool_all_dim",
            |t| B::bool_all_dim(t, dim),
            |t| B::bool_all_dim(t, dim),
        )
    }

    fn bool_argwhere(
        tensor: BoolTensor<Self>,
        out_dtype: IntDType,
    ) -> impl Future<Output = IntTensor<Self>> + 'static + Send {
        rules::argwhere::<B>(tensor, out_dtype)
    }

    fn bool_expand(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self> {
        rules::expand::<B, Bool>(tensor, shape, |t, s| B::bool_expand(t, s))
    }

    along_ops! { axes;
        fn bool_flip(tensor: BoolTensor<Self>, axes: &[usize]) -> BoolTensor<Self>;
    }

    along_ops! { &[dim];
        fn bool_repeat_dim(tensor: BoolTensor<Self>, dim: usize, times: usize) -> BoolTensor<Self>;
        fn bool_unfold(tensor: BoolTensor<Self>, dim: usize, size: usize, step: usize) -> BoolTensor<Self>;
    }

    elementwise3_ops! {
        fn bool_mask_where(tensor: BoolTensor<Self>, mask: BoolTensor<Self>, value: BoolTensor<Self>) -> BoolTensor<Self>;
    }

    elementwise_ops! { Linear::No;
        fn bool_mask_fill(tensor: BoolTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> BoolTensor<Self>;
        fn bool_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_not_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_and(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_or(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_xor(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
    }

    pointwise_ops! {
        fn bool_into_int(tensor: BoolTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
        fn bool_into_float(tensor: BoolTensor<Self>, out_dtype: FloatDType) -> FloatTensor<Self>;
        fn bool_equal_elem(lhs: BoolTensor<Self>, rhs: Scalar) -> BoolTensor<Self>;
        fn bool_not_equal_elem(lhs: BoolTensor<Self>, rhs: Scalar) -> BoolTensor<Self>;
        fn bool_not(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
    }
}
