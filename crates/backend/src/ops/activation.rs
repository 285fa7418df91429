//! Activation ops of `Sharded<B>`.

use crate::rules::elementwise::Linear;
use crate::rules::{along, elementwise, no_rule};
use crate::Sharded;
use burn_backend::ops::*;
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, Scalar};

impl<B: Backend> ActivationOps<Self> for Sharded<B> {
    by_rule! { B, no_rule::replicated;
        fn prelu(tensor: FloatTensor<Self>, alpha: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, |m| along::along(m, &[dim]);
        fn softmax(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn log_softmax(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
        fn softmin(tensor: FloatTensor<Self>; dim: usize) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow |m| elementwise::broadcast(m, Linear::No);
        fn relu_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn sigmoid_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn log_sigmoid_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, narrow elementwise::unary;
        fn leaky_relu(tensor: FloatTensor<Self>; negative_slope: Scalar) -> FloatTensor<Self>;
        fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn hard_sigmoid(tensor: FloatTensor<Self>; alpha: Scalar, beta: Scalar) -> FloatTensor<Self>;
        fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }
}
