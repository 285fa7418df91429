//! Gradients through `Autodiff<Sharded<Flex>>` equal those through `Autodiff<Flex>`, for
//! every input placement, on N = 1..4 ranks.

use crate::common;

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::{conv2d, max_pool2d};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{activation, Tensor};
use common::{assert_close, lift, mesh, placements, rand, Layout, RefAd, SAd, CPU};
use firemesh_backend::Placement;

/// Runs `$loss` (a scalar of the inputs) on both backends and compares every input's gradient.
macro_rules! check_grads {
    ($name:expr, [$first:ident $(, $rest:ident)*], $loss:expr) => {{
        let want: Vec<_> = {
            let $first = reference(&$first);
            $(let $rest = reference(&$rest);)*
            let grads = { let $first = $first.clone(); $(let $rest = $rest.clone();)* $loss }.backward();
            vec![$first.grad(&grads).expect("grad").into_data() $(, $rest.grad(&grads).expect("grad").into_data())*]
        };
        let mut fallbacks = 0;
        for ranks in 1..=4 {
            let mesh = mesh(ranks);
            for p in placements(&$first.dims(), ranks) {
                for q in [Layout::Replicated, p] {
                    let (got, counts) = firemesh_backend::stats::count(|| {
                        let $first = lift::<SAd, _>(&$first, &mesh, p).require_grad();
                        $(let $rest = lift::<SAd, _>(&$rest, &mesh, q).require_grad();)*
                        let grads = { let $first = $first.clone(); $(let $rest = $rest.clone();)* $loss }.backward();
                        vec![$first.grad(&grads).expect("grad").into_data() $(, $rest.grad(&grads).expect("grad").into_data())*]
                    });
                    fallbacks += counts.total_fallbacks();
                    if counts.total_fallbacks() > 0 {
                        println!("{} N={ranks} {p:?}/{q:?}: {:?}", $name, counts.fallbacks);
                    }
                    for (i, (g, w)) in got.into_iter().zip(want.iter()).enumerate() {
                        let ctx = format!("{} input {i}, N={ranks}, {p:?}/{q:?}", $name);
                        assert_close(g, w.clone(), 1e-5, &ctx);
                    }
                }
            }
        }
        fallbacks
    }};
}

fn reference<const D: usize>(t: &Tensor<common::Ref, D>) -> Tensor<RefAd, D> {
    Tensor::from_data(t.to_data(), &CPU).require_grad()
}

#[test]
fn linear_layer_with_mse_loss() {
    let x = rand([8, 5], 1);
    let w = rand([5, 3], 2);
    let b = rand([1, 3], 3);
    let y = rand([8, 3], 4);
    let n = check_grads!(
        "linear",
        [x, w, b, y],
        (x.matmul(w) + b - y).powf_scalar(2.0).mean()
    );
    println!("linear fallbacks: {n}");
}

#[test]
fn softmax_cross_entropy_like_loss() {
    let x = rand([6, 4], 5);
    let w = rand([4, 4], 6);
    let n = check_grads!("log_softmax", [x, w], {
        let logits = x.matmul(w);
        let lp = activation::log_softmax(logits, 1);
        -lp.slice([0..6, 1..2]).mean()
    });
    println!("softmax fallbacks: {n}");
}

#[test]
fn conv_relu_pool_network() {
    let x = rand([4, 2, 6, 6], 7);
    let w = rand([3, 2, 3, 3], 8);
    let n = check_grads!("conv", [x, w], {
        let h = conv2d(x, w, None, ConvOptions::new([1, 1], [1, 1], [1, 1], 1));
        let h = max_pool2d(activation::relu(h), [2, 2], [2, 2], [0, 0], [1, 1], false);
        (h.clone() * h).sum()
    });
    println!("conv fallbacks: {n}");
}

#[test]
fn normalization_statistics_over_the_batch() {
    let x = rand([8, 3], 9);
    let g = rand([1, 3], 10);
    let n = check_grads!("batch-norm-like", [x, g], {
        let mean = x.clone().mean_dim(0);
        let centered = x - mean;
        let var = (centered.clone() * centered.clone()).mean_dim(0);
        let y = centered / (var + 1e-5).sqrt() * g;
        (y.clone() * y.exp()).sum()
    });
    println!("norm fallbacks: {n}");
}

#[test]
fn autodiff_backend_is_sharded_inner() {
    // The inner backend of Autodiff<Sharded<Flex>> is Sharded<Flex>: gradients live on
    // the mesh with a placement.
    let mesh = mesh(3);
    let x = lift::<SAd, 2>(&rand([6, 2], 11), &mesh, Layout::Shard(0)).require_grad();
    let w = lift::<SAd, 2>(&rand([2, 2], 12), &mesh, Layout::Replicated).require_grad();
    let grads = x
        .clone()
        .matmul(w.clone())
        .powf_scalar(2.0)
        .sum()
        .backward();
    let gw = w.grad(&grads).expect("grad");
    let gx = x.grad(&grads).expect("grad");
    assert_eq!(firemesh_backend::placement(&gw), Placement::Partial);
    assert_eq!(firemesh_backend::placement(&gx), Placement::Shard(0));
    let _: Tensor<<SAd as AutodiffBackend>::InnerBackend, 2> = gw;
}
