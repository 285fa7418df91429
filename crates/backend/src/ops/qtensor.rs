//! Quantized tensor ops of `Sharded<B>`. Shape ops keep their placement rules; arithmetic on
//! quantized tensors has none and runs replicated.

use crate::exec::run;
use crate::kind::QuantizedKind;
use crate::rules::{elementwise, indexing, layout, no_rule};
use crate::{data, Sharded};
use burn_backend::ops::*;
use burn_backend::quantization::{QuantScheme, QuantizationParametersPrimitive};
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    Backend, BoolDType, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice, TensorData,
    TensorMetadata, TensorPrimitive,
};

impl<B: Backend> QTensorOps<Self> for Sharded<B> {
    fn q_from_data(data: TensorData, device: &Device<Self>) -> QuantizedTensor<Self> {
        data::from_data::<B, QuantizedKind>(data, device)
    }

    async fn q_into_data(tensor: QuantizedTensor<Self>) -> Result<TensorData, ExecutionError> {
        Ok(data::into_data::<B, QuantizedKind>(tensor))
    }

    fn q_device(tensor: &QuantizedTensor<Self>) -> Device<Self> {
        tensor.mesh.clone()
    }

    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self> {
        data::to_mesh::<B, QuantizedKind>(tensor, device)
    }

    fn q_is_require_grad(tensor: &QuantizedTensor<Self>) -> bool {
        tensor.first_part().is_some_and(B::q_is_require_grad)
    }

    fn quantize(
        tensor: FloatTensor<Self>,
        scheme: &QuantScheme,
        qparams: QuantizationParametersPrimitive<Self>,
    ) -> QuantizedTensor<Self> {
        let kept_scheme = *scheme;
        run(
            "quantize",
            (tensor, qparams),
            no_rule::replicated,
            move |_, (t, q)| B::quantize(t, &kept_scheme, q),
        )
    }

    fn q_reshape(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "q_reshape",
            (tensor,),
            |m| layout::reshape(m, &shape),
            move |r, (t,)| B::q_reshape(t, layout::local_shape(r, &kept_shape)),
        )
    }

    fn q_slice(tensor: QuantizedTensor<Self>, slices: &[Slice]) -> QuantizedTensor<Self> {
        let kept_slices = slices.to_vec();
        run(
            "q_slice",
            (tensor,),
            |m| layout::slice(m, slices),
            move |r, (t,)| B::q_slice(t, &layout::local_slices(&kept_slices, r.out)),
        )
    }

    fn q_expand(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self> {
        let kept_shape = shape.clone();
        run(
            "q_expand",
            (tensor,),
            |m| layout::expand(m, &shape),
            move |r, (t,)| {
                let local = layout::local_expand(&kept_shape, r.out, &t.shape());
                B::q_expand(t, local)
            },
        )
    }

    fn q_select(
        tensor: QuantizedTensor<Self>,
        dim: usize,
        indices: IntTensor<Self>,
    ) -> QuantizedTensor<Self> {
        run(
            "q_select",
            (tensor, indices),
            |m| indexing::select(m, dim),
            move |_, (t, i)| B::q_select(t, dim, i),
        )
    }

    fn q_gather(
        dim: usize,
        tensor: QuantizedTensor<Self>,
        indices: IntTensor<Self>,
    ) -> QuantizedTensor<Self> {
        run(
            "q_gather",
            (tensor, indices),
            no_rule::replicated,
            move |_, (t, i)| B::q_gather(dim, t, i),
        )
    }

    by_rule! { B, layout::transpose;
        fn q_transpose(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
    }

    by_rule! { B, |m| layout::swap_dims(m, dim1, dim2);
        fn q_swap_dims(tensor: QuantizedTensor<Self>; dim1: usize, dim2: usize) -> QuantizedTensor<Self>;
    }

    by_rule! { B, |m| layout::permute(m, axes);
        fn q_permute(tensor: QuantizedTensor<Self>; axes: &[usize]) -> QuantizedTensor<Self>;
    }

    by_rule! { B, |m| layout::cat(m, dim);
        fn q_cat(tensors: Vec<QuantizedTensor<Self>>; dim: usize) -> QuantizedTensor<Self>;
    }

    by_rule! { B, elementwise::linear_unary;
        fn q_detach(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
        fn q_set_require_grad(tensor: QuantizedTensor<Self>; require_grad: bool) -> QuantizedTensor<Self>;
    }

    by_rule! { B, no_rule::replicated;
        fn quantize_dynamic(tensor: FloatTensor<Self>; scheme: &QuantScheme) -> QuantizedTensor<Self>;
        fn dequantize(tensor: QuantizedTensor<Self>; dtype: FloatDType) -> FloatTensor<Self>;
        fn q_flip(tensor: QuantizedTensor<Self>; axes: &[usize]) -> QuantizedTensor<Self>;
        fn q_repeat_dim(tensor: QuantizedTensor<Self>; dim: usize, times: usize) -> QuantizedTensor<Self>;
        fn q_add(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_add_scalar(lhs: QuantizedTensor<Self>; rhs: Scalar) -> TensorPrimitive<Self>;
        fn q_clamp_min(tensor: QuantizedTensor<Self>; min: Scalar) -> TensorPrimitive<Self>;
        fn q_clamp_max(tensor: QuantizedTensor<Self>; max: Scalar) -> TensorPrimitive<Self>;
        fn q_clamp(tensor: QuantizedTensor<Self>; min: Scalar, max: Scalar) -> TensorPrimitive<Self>;
        fn q_sub(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_sub_scalar(lhs: QuantizedTensor<Self>; rhs: Scalar) -> TensorPrimitive<Self>;
        fn q_mul(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_mul_scalar(lhs: QuantizedTensor<Self>; rhs: Scalar) -> TensorPrimitive<Self>;
        fn q_div(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_div_scalar(lhs: QuantizedTensor<Self>; rhs: Scalar) -> TensorPrimitive<Self>;
        fn q_matmul(lhs: TensorPrimitive<Self>, rhs: TensorPrimitive<Self>) -> TensorPrimitive<Self>;
        fn q_neg(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_recip(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_sum(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_sum_dim(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_prod(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_prod_dim(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_mean(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_mean_dim(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_cumsum(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_cumprod(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_cummin(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_cummax(tensor: QuantizedTensor<Self>; dim: usize) -> TensorPrimitive<Self>;
        fn q_exp(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_log(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_log1p(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_powf(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_powi(lhs: QuantizedTensor<Self>, rhs: IntTensor<Self>) -> TensorPrimitive<Self>;
        fn q_powi_scalar(lhs: QuantizedTensor<Self>; rhs: Scalar) -> TensorPrimitive<Self>;
        fn q_powf_scalar(tensor: QuantizedTensor<Self>; value: Scalar) -> TensorPrimitive<Self>;
        fn q_sqrt(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_abs(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
        fn q_cos(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_sin(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_tan(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_cosh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_sinh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_tanh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_erf(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self>;
        fn q_argmax(tensor: QuantizedTensor<Self>; dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
        fn q_argtopk(tensor: QuantizedTensor<Self>; dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
        fn q_topk(tensor: QuantizedTensor<Self>; dim: usize, k: usize) -> QuantizedTensor<Self>;
        fn q_argmin(tensor: QuantizedTensor<Self>; dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
        fn q_max(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
        fn q_max_dim(tensor: QuantizedTensor<Self>; dim: usize) -> QuantizedTensor<Self>;
        fn q_max_dim_with_indices(tensor: QuantizedTensor<Self>; dim: usize, out_dtype: IntDType) -> (QuantizedTensor<Self>, IntTensor<Self>);
        fn q_min(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
        fn q_min_dim(tensor: QuantizedTensor<Self>; dim: usize) -> QuantizedTensor<Self>;
        fn q_min_dim_with_indices(tensor: QuantizedTensor<Self>; dim: usize, out_dtype: IntDType) -> (QuantizedTensor<Self>, IntTensor<Self>);
        fn q_max_abs(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
        fn q_max_abs_dim(tensor: QuantizedTensor<Self>; dim: usize) -> QuantizedTensor<Self>;
        fn q_any(tensor: QuantizedTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn q_any_dim(tensor: QuantizedTensor<Self>; dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn q_all(tensor: QuantizedTensor<Self>; out_dtype: BoolDType) -> BoolTensor<Self>;
        fn q_all_dim(tensor: QuantizedTensor<Self>; dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
        fn q_sort(tensor: QuantizedTensor<Self>; dim: usize, descending: bool) -> QuantizedTensor<Self>;
        fn q_sort_with_indices(tensor: QuantizedTensor<Self>; dim: usize, descending: bool, out_dtype: IntDType) -> (QuantizedTensor<Self>, IntTensor<Self>);
        fn q_argsort(tensor: QuantizedTensor<Self>; dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
    }
}
