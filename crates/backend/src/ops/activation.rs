//! Activation ops of `Sharded<B>`.
//! Generated from the trait's method list, then edited by hand: every method is forwarded
//! (none inherits a default), through the placement rules in `crate::rules`.

use crate::ranks::{fallback, on_ranks};
use crate::rules::{self, Linear};
use crate::Sharded;
use burn_backend::ops::*;
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, Scalar};

impl<B: Backend> ActivationOps<Self> for Sharded<B> {
    fn prelu(tensor: FloatTensor<Self>, alpha: FloatTensor<Self>) -> FloatTensor<Self> {
        fallback!("prelu", [tensor, alpha], B::prelu(tensor, alpha))
    }

    along_ops! { &[dim];
        fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
        fn log_softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
        fn softmin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    }

    elementwise_ops! { Linear::No;
        fn relu_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn sigmoid_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn log_sigmoid_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    pointwise_ops! {
        fn leaky_relu(tensor: FloatTensor<Self>, negative_slope: Scalar) -> FloatTensor<Self>;
        fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn hard_sigmoid(tensor: FloatTensor<Self>, alpha: Scalar, beta: Scalar) -> FloatTensor<Self>;
        fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }
}
