//! Module ops (conv, pool, embedding, linear, attention) of `Sharded<B>`.
//! Generated from the trait's method list, then edited by hand: every method is forwarded
//! (none inherits a default), through the placement rules in `crate::rules`.

use crate::ranks::{fallback, on_ranks};
use crate::rules::{self};
use crate::Sharded;
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor};
use burn_backend::Backend;

/// A convolution: forward (batch-sharded input, replicated weight and bias) and its backward
/// ops for the input (batch-sharded) and for the weight and bias (`Partial` addends).
macro_rules! conv_family {
    ($fwd:ident, $x:ident, $w:ident, $b:ident, $options:ty) => {
        fn $fwd(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: $options,
        ) -> FloatTensor<Self> {
            rules::nn::batch(x, weight, bias, stringify!($fwd), |x, w, b| {
                B::$fwd(x, w, b, options.clone())
            })
        }

        fn $x(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            output_grad: FloatTensor<Self>,
            options: $options,
        ) -> FloatTensor<Self> {
            rules::nn::batch_backward_x(x, weight, output_grad, stringify!($x), |x, w, g| {
                B::$x(x, w, g, options.clone())
            })
        }

        conv_parameter_grads!($w, $b, $options);
    };
}

/// A transposed convolution: as [`conv_family`], but its input gradient needs no input.
macro_rules! conv_transpose_family {
    ($fwd:ident, $x:ident, $w:ident, $b:ident, $options:ty) => {
        fn $fwd(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: $options,
        ) -> FloatTensor<Self> {
            rules::nn::batch(x, weight, bias, stringify!($fwd), |x, w, b| {
                B::$fwd(x, w, b, options.clone())
            })
        }

        fn $x(
            weight: FloatTensor<Self>,
            output_grad: FloatTensor<Self>,
            options: $options,
        ) -> FloatTensor<Self> {
            rules::nn::batch_grad(weight, output_grad, stringify!($x), |w, g| {
                B::$x(w, g, options.clone())
            })
        }

        conv_parameter_grads!($w, $b, $options);
    };
}

/// The weight and bias gradients of a convolution: one addend per rank.
macro_rules! conv_parameter_grads {
    ($w:ident, $b:ident, $options:ty) => {
        fn $w(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            output_grad: FloatTensor<Self>,
            options: $options,
        ) -> FloatTensor<Self> {
            rules::nn::weight_grad(x, weight, output_grad, stringify!($w), |x, w, g| {
                B::$w(x, w, g, options.clone())
            })
        }

        fn $b(
            x: FloatTensor<Self>,
            bias: FloatTensor<Self>,
            output_grad: FloatTensor<Self>,
        ) -> FloatTensor<Self> {
            rules::nn::weight_grad(x, bias, output_grad, stringify!($b), |x, b, g| {
                B::$b(x, b, g)
            })
        }
    };
}

impl<B: Backend> ModuleOps<Self> for Sharded<B> {
    conv_family!(
        conv1d,
        conv1d_x_backward,
        conv1d_weight_backward,
        conv1d_bias_backward,
        ConvOptions<1>
    );
    conv_family!(
        conv2d,
        conv2d_x_backward,
        conv2d_weight_backward,
        conv2d_bias_backward,
        ConvOptions<2>
    );
    conv_family!(
        conv3d,
        conv3d_x_backward,
        conv3d_weight_backward,
        conv3d_bias_backward,
        ConvOptions<3>
    );
    conv_transpose_family!(
        conv_transpose1d,
        conv_transpose1d_x_backward,
        conv_transpose1d_weight_backward,
        conv_transpose1d_bias_backward,
        ConvTransposeOptions<1>
    );
    conv_transpose_family!(
        conv_transpose2d,
        conv_transpose2d_x_backward,
        conv_transpose2d_weight_backward,
        conv_transpose2d_bias_backward,
        ConvTransposeOptions<2>
    );
    conv_transpose_family!(
        conv_transpose3d,
        conv_transpose3d_x_backward,
        conv_transpose3d_weight_backward,
        conv_transpose3d_bias_backward,
        ConvTransposeOptions<3>
    );

    fn embedding(weights: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self> {
        rules::nn::embedding(weights, indices, |w, i| B::embedding(w, i))
    }

    fn embedding_backward(
        weights: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::nn::embedding_backward(weights, output_grad, indices, |w, g, i| {
            B::embedding_backward(w, g, i)
        })
    }

    fn linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        rules::nn::rows_with_params(x, weight, bias, "linear", |x, w, b| B::linear(x, w, b))
    }

    fn linear_x_backward(
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::nn::linear_x_backward(weight, output_grad, |w, g| B::linear_x_backward(w, g))
    }

    fn linear_weight_backward(
        x: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rules::nn::linear_weight_backward(x, output_grad, |x, g| B::linear_weight_backward(x, g))
    }

    fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        rules::nn::linear_bias_backward(output_grad, |g| B::linear_bias_backward(g))
    }

    fn deform_conv2d(
        x: FloatTensor<Self>,
        offset: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        mask: Option<FloatTensor<Self>>,
        bias: Option<FloatTensor<Self>>,
        options: DeformConvOptions<2>,
    ) -> FloatTensor<Self> {
        fallback!(
            "deform_conv2d",
            [x, offset, weight, mask, bias],
            B::deform_conv2d(x, offset, weight, mask, bias, options.clone())
        )
    }

    fn deform_conv2d_backward(
        x: FloatTensor<Self>,
        offset: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        mask: Option<FloatTensor<Self>>,
        bias: Option<FloatTensor<Self>>,
        output_grad: FloatTensor<Self>,
        options: DeformConvOptions<2>,
    ) -> DeformConv2dBackward<Self> {
        fallback!(
            "deform_conv2d_backward",
            [x, offset, weight, mask, bias, output_grad],
            B::deform_conv2d_backward(x, offset, weight, mask, bias, output_grad, options.clone())
        )
    }

    fn unfold4d(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        options: UnfoldOptions,
    ) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "unfold4d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::unfold4d(x, kernel_size, options.clone())
        )
    }

    fn avg_pool1d(
        x: FloatTensor<Self>,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        count_include_pad: bool,
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "avg_pool1d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::avg_pool1d(
                x,
                kernel_size,
                stride,
                padding,
                count_include_pad,
                ceil_mode
            )
        )
    }

    fn avg_pool1d_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        count_include_pad: bool,
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (x, grad, p) = rules::nn::batch_inputs2(x, grad, "avg_pool1d_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, grad],
            B::avg_pool1d_backward(
                x,
                grad,
                kernel_size,
                stride,
                padding,
                count_include_pad,
                ceil_mode
            )
        )
    }

    fn avg_pool2d(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        count_include_pad: bool,
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "avg_pool2d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::avg_pool2d(
                x,
                kernel_size,
                stride,
                padding,
                count_include_pad,
                ceil_mode
            )
        )
    }

    fn avg_pool2d_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        count_include_pad: bool,
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (x, grad, p) = rules::nn::batch_inputs2(x, grad, "avg_pool2d_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, grad],
            B::avg_pool2d_backward(
                x,
                grad,
                kernel_size,
                stride,
                padding,
                count_include_pad,
                ceil_mode
            )
        )
    }

    fn adaptive_avg_pool2d(x: FloatTensor<Self>, output_size: [usize; 2]) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "adaptive_avg_pool2d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::adaptive_avg_pool2d(x, output_size)
        )
    }

    fn adaptive_avg_pool2d_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let (x, grad, p) = rules::nn::batch_inputs2(x, grad, "adaptive_avg_pool2d_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, grad],
            B::adaptive_avg_pool2d_backward(x, grad)
        )
    }

    fn adaptive_avg_pool1d(x: FloatTensor<Self>, output_size: usize) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "adaptive_avg_pool1d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::adaptive_avg_pool1d(x, output_size)
        )
    }

    fn adaptive_avg_pool1d_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let (x, grad, p) = rules::nn::batch_inputs2(x, grad, "adaptive_avg_pool1d_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, grad],
            B::adaptive_avg_pool1d_backward(x, grad)
        )
    }

    fn max_pool1d(
        x: FloatTensor<Self>,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "max_pool1d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::max_pool1d(x, kernel_size, stride, padding, dilation, ceil_mode)
        )
    }

    fn max_pool1d_with_indices(
        x: FloatTensor<Self>,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        ceil_mode: bool,
    ) -> MaxPool1dWithIndices<Self> {
        let (x, p) = rules::nn::batch_input(x, "max_pool1d_with_indices");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::max_pool1d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
        )
    }

    fn max_pool1d_with_indices_backward(
        x: FloatTensor<Self>,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        ceil_mode: bool,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> MaxPool1dBackward<Self> {
        let (x, output_grad, indices, p) =
            rules::nn::batch_inputs3(x, output_grad, indices, "max_pool1d_with_indices_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, output_grad, indices],
            B::max_pool1d_with_indices_backward(
                x,
                kernel_size,
                stride,
                padding,
                dilation,
                ceil_mode,
                output_grad,
                indices
            )
        )
    }

    fn max_pool2d(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "max_pool2d");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)
        )
    }

    fn max_pool2d_with_indices(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> MaxPool2dWithIndices<Self> {
        let (x, p) = rules::nn::batch_input(x, "max_pool2d_with_indices");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
        )
    }

    fn max_pool2d_with_indices_backward(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> MaxPool2dBackward<Self> {
        let (x, output_grad, indices, p) =
            rules::nn::batch_inputs3(x, output_grad, indices, "max_pool2d_with_indices_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, output_grad, indices],
            B::max_pool2d_with_indices_backward(
                x,
                kernel_size,
                stride,
                padding,
                dilation,
                ceil_mode,
                output_grad,
                indices
            )
        )
    }

    fn interpolate(
        x: FloatTensor<Self>,
        output_size: [usize; 2],
        options: InterpolateOptions,
    ) -> FloatTensor<Self> {
        let (x, p) = rules::nn::batch_input(x, "interpolate");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x],
            B::interpolate(x, output_size, options.clone())
        )
    }

    fn interpolate_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        output_size: [usize; 2],
        options: InterpolateOptions,
    ) -> FloatTensor<Self> {
        let (x, grad, p) = rules::nn::batch_inputs2(x, grad, "interpolate_backward");
        on_ranks!(
            x.mesh.clone(),
            p,
            [x, grad],
            B::interpolate_backward(x, grad, output_size, options.clone())
        )
    }

    fn attention(
        query: FloatTensor<Self>,
        key: FloatTensor<Self>,
        value: FloatTensor<Self>,
        mask: Option<BoolTensor<Self>>,
        attn_bias: Option<FloatTensor<Self>>,
        options: AttentionModuleOptions,
    ) -> FloatTensor<Self> {
        fallback!(
            "attention",
            [query, key, value, mask, attn_bias],
            B::attention(query, key, value, mask, attn_bias, options.clone())
        )
    }

    fn layer_norm(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        rules::nn::rows_with_params(tensor, gamma, beta, "layer_norm", |t, g, b| {
            B::layer_norm(t, g, b, epsilon)
        })
    }

    fn ctc_loss(
        log_probs: FloatTensor<Self>,
        targets: IntTensor<Self>,
        input_lengths: IntTensor<Self>,
        target_lengths: IntTensor<Self>,
        blank: usize,
    ) -> FloatTensor<Self> {
        fallback!(
            "ctc_loss",
            [log_probs, targets, input_lengths, target_lengths],
            B::ctc_loss(log_probs, targets, input_lengths, target_lengths, blank)
        )
    }

    fn has_ctc_loss_backward() -> bool {
        B::has_ctc_loss_backward()
    }

    fn ctc_loss_backward(
        log_probs: FloatTensor<Self>,
        targets: IntTensor<Self>,
        input_lengths: IntTensor<Self>,
        target_lengths: IntTensor<Self>,
        grad_loss: FloatTensor<Self>,
        blank: usize,
    ) -> FloatTensor<Self> {
        fallback!(
            "ctc_loss_backward",
            [log_probs, targets, input_lengths, target_lengths, grad_loss],
            B::ctc_loss_backward(
                log_probs,
                targets,
                input_lengths,
                target_lengths,
                grad_loss,
                blank
            )
        )
    }

    fn rfft(
        signal: FloatTensor<Self>,
        dim: usize,
        n: Option<usize>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        fallback!("rfft", [signal], B::rfft(signal, dim, n))
    }

    fn irfft(
        spectrum_re: FloatTensor<Self>,
        spectrum_im: FloatTensor<Self>,
        dim: usize,
        n: Option<usize>,
    ) -> FloatTensor<Self> {
        fallback!(
            "irfft",
            [spectrum_re, spectrum_im],
            B::irfft(spectrum_re, spectrum_im, dim, n)
        )
    }
}
