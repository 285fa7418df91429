//! Module ops (conv, pool, embedding, linear, attention) of `Sharded<B>`.

use crate::autocast::{convs, Conv2dOp};
use crate::exec::run;
use crate::rules::{conv, embedding, linear, no_rule, pool};
use crate::Sharded;
use burn_backend::ops::*;
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor};
use burn_backend::{Backend, TensorMetadata};

impl<B: Backend> ModuleOps<Self> for Sharded<B> {
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
        run(
            "max_pool1d_with_indices_backward",
            (x, output_grad, indices),
            pool::per_sample_and_channel,
            move |_, (x, g, i)| {
                B::max_pool1d_with_indices_backward(
                    x,
                    kernel_size,
                    stride,
                    padding,
                    dilation,
                    ceil_mode,
                    g,
                    i,
                )
            },
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
        run(
            "max_pool2d_with_indices_backward",
            (x, output_grad, indices),
            pool::per_sample_and_channel,
            move |_, (x, g, i)| {
                B::max_pool2d_with_indices_backward(
                    x,
                    kernel_size,
                    stride,
                    padding,
                    dilation,
                    ceil_mode,
                    g,
                    i,
                )
            },
        )
    }

    fn has_ctc_loss_backward() -> bool {
        B::has_ctc_loss_backward()
    }

    fn conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kept = options.clone();
        convs::conv2d(
            "conv2d",
            Conv2dOp::Forward,
            &options.clone(),
            (x, weight, bias),
            conv::forward,
            move |k, (x, w, b)| k.conv2d(x, w, b, &kept),
            move |(x, w, b)| B::conv2d(x, w, b, options.clone()),
        )
    }

    fn conv2d_x_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kept = options.clone();
        convs::conv2d(
            "conv2d_x_backward",
            Conv2dOp::InputGradient,
            &options.clone(),
            (x, weight, output_grad),
            conv::x_backward,
            move |k, (x, w, g)| k.conv2d_x_backward(x.shape(), w, g, &kept),
            move |(x, w, g)| B::conv2d_x_backward(x, w, g, options.clone()),
        )
    }

    fn conv2d_weight_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kept = options.clone();
        crate::buckets::gradient_made(convs::conv2d(
            "conv2d_weight_backward",
            Conv2dOp::WeightGradient,
            &options.clone(),
            (x, weight, output_grad),
            conv::parameter_backward,
            move |k, (x, w, g)| k.conv2d_weight_backward(x, w.shape(), g, &kept),
            move |(x, w, g)| B::conv2d_weight_backward(x, w, g, options.clone()),
        ))
    }

    by_rule! { B, convolution conv::forward;
        fn conv1d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>; options: ConvOptions<1>) -> FloatTensor<Self>;
        fn conv3d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>; options: ConvOptions<3>) -> FloatTensor<Self>;
        fn conv_transpose1d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>; options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
        fn conv_transpose2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>; options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
        fn conv_transpose3d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>; options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
    }

    by_rule! { B, convolution conv::x_backward;
        fn conv1d_x_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvOptions<1>) -> FloatTensor<Self>;
        fn conv3d_x_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvOptions<3>) -> FloatTensor<Self>;
    }

    by_rule! { B, convolution conv::transposed_x_backward;
        fn conv_transpose1d_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
        fn conv_transpose2d_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
        fn conv_transpose3d_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
    }

    by_rule! { B, convolution conv::parameter_backward => crate::buckets::gradient_made;
        fn conv1d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvOptions<1>) -> FloatTensor<Self>;
        fn conv3d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvOptions<3>) -> FloatTensor<Self>;
        fn conv_transpose1d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
        fn conv_transpose2d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
        fn conv_transpose3d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>; options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
    }

    by_rule! { B, conv::parameter_backward => crate::buckets::gradient_made;
        fn conv1d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn conv2d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn conv3d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn conv_transpose1d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn conv_transpose2d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn conv_transpose3d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, pool::per_sample_and_channel;
        fn unfold4d(x: FloatTensor<Self>; kernel_size: [usize; 2], options: UnfoldOptions) -> FloatTensor<Self>;
        fn avg_pool1d(x: FloatTensor<Self>; kernel_size: usize, stride: usize, padding: usize, count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
        fn avg_pool1d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>; kernel_size: usize, stride: usize, padding: usize, count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
        fn avg_pool2d(x: FloatTensor<Self>; kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
        fn avg_pool2d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>; kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
        fn adaptive_avg_pool2d(x: FloatTensor<Self>; output_size: [usize; 2]) -> FloatTensor<Self>;
        fn adaptive_avg_pool2d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn adaptive_avg_pool1d(x: FloatTensor<Self>; output_size: usize) -> FloatTensor<Self>;
        fn adaptive_avg_pool1d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn max_pool1d(x: FloatTensor<Self>; kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool) -> FloatTensor<Self>;
        fn max_pool1d_with_indices(x: FloatTensor<Self>; kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool) -> MaxPool1dWithIndices<Self>;
        fn max_pool2d(x: FloatTensor<Self>; kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool) -> FloatTensor<Self>;
        fn max_pool2d_with_indices(x: FloatTensor<Self>; kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool) -> MaxPool2dWithIndices<Self>;
        fn interpolate(x: FloatTensor<Self>; output_size: [usize; 2], options: InterpolateOptions) -> FloatTensor<Self>;
        fn interpolate_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>; output_size: [usize; 2], options: InterpolateOptions) -> FloatTensor<Self>;
    }

    by_rule! { B, embedding::forward;
        fn embedding(weights: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, embedding::backward;
        fn embedding_backward(weights: FloatTensor<Self>, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, autocast linear::forward;
        fn linear(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>) -> FloatTensor<Self>;
    }

    by_rule! { B, linear::forward;
        fn layer_norm(tensor: FloatTensor<Self>, gamma: FloatTensor<Self>, beta: Option<FloatTensor<Self>>; epsilon: f64) -> FloatTensor<Self>;
    }

    by_rule! { B, autocast linear::x_backward;
        fn linear_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, autocast linear::weight_backward => crate::buckets::gradient_made;
        fn linear_weight_backward(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, linear::bias_backward => crate::buckets::gradient_made;
        fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    by_rule! { B, no_rule::replicated;
        fn deform_conv2d(x: FloatTensor<Self>, offset: FloatTensor<Self>, weight: FloatTensor<Self>, mask: Option<FloatTensor<Self>>, bias: Option<FloatTensor<Self>>; options: DeformConvOptions<2>) -> FloatTensor<Self>;
        fn deform_conv2d_backward(x: FloatTensor<Self>, offset: FloatTensor<Self>, weight: FloatTensor<Self>, mask: Option<FloatTensor<Self>>, bias: Option<FloatTensor<Self>>, output_grad: FloatTensor<Self>; options: DeformConvOptions<2>) -> DeformConv2dBackward<Self>;
        fn attention(query: FloatTensor<Self>, key: FloatTensor<Self>, value: FloatTensor<Self>, mask: Option<BoolTensor<Self>>, attn_bias: Option<FloatTensor<Self>>; options: AttentionModuleOptions) -> FloatTensor<Self>;
        fn ctc_loss(log_probs: FloatTensor<Self>, targets: IntTensor<Self>, input_lengths: IntTensor<Self>, target_lengths: IntTensor<Self>; blank: usize) -> FloatTensor<Self>;
        fn ctc_loss_backward(log_probs: FloatTensor<Self>, targets: IntTensor<Self>, input_lengths: IntTensor<Self>, target_lengths: IntTensor<Self>, grad_loss: FloatTensor<Self>; blank: usize) -> FloatTensor<Self>;
        fn rfft(signal: FloatTensor<Self>; dim: usize, n: Option<usize>) -> (FloatTensor<Self>, FloatTensor<Self>);
        fn irfft(spectrum_re: FloatTensor<Self>, spectrum_im: FloatTensor<Self>; dim: usize, n: Option<usize>) -> FloatTensor<Self>;
    }
}
