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
    fn leaky_relu(tensor: FloatTensor<Self>, negative_slope: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::leaky_relu(tensor, negative_slope)
        )
    }

    fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::relu(tensor))
    }

    fn relu_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let (output, grad, p) = rules::elementwise2(output, grad, Linear::No);
        on_ranks!(
            output.mesh.clone(),
            p,
            [output, grad],
            B::relu_backward(output, grad)
        )
    }

    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::gelu(tensor))
    }

    fn prelu(tensor: FloatTensor<Self>, alpha: FloatTensor<Self>) -> FloatTensor<Self> {
        fallback!("prelu", [tensor, alpha], B::prelu(tensor, alpha))
    }

    fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let (x, grad, p) = rules::elementwise2(x, grad, Linear::No);
        on_ranks!(x.mesh.clone(), p, [x, grad], B::gelu_backward(x, grad))
    }

    fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::sigmoid(tensor))
    }

    fn sigmoid_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let (output, grad, p) = rules::elementwise2(output, grad, Linear::No);
        on_ranks!(
            output.mesh.clone(),
            p,
            [output, grad],
            B::sigmoid_backward(output, grad)
        )
    }

    fn hard_sigmoid(tensor: FloatTensor<Self>, alpha: Scalar, beta: Scalar) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::hard_sigmoid(tensor, alpha, beta)
        )
    }

    fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        let (tensor, p) = rules::pointwise(tensor);
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::log_sigmoid(tensor))
    }

    fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "softmax");
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::softmax(tensor, dim))
    }

    fn log_softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "log_softmax");
        on_ranks!(
            tensor.mesh.clone(),
            p,
            [tensor],
            B::log_softmax(tensor, dim)
        )
    }

    fn softmin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        let (tensor, p) = rules::along(tensor, &[dim], "softmin");
        on_ranks!(tensor.mesh.clone(), p, [tensor], B::softmin(tensor, dim))
    }

    fn log_sigmoid_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let (x, grad, p) = rules::elementwise2(x, grad, Linear::No);
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, grad],
            B::log_sigmoid_backward(x, grad)
        )
    }
}
