//! Every op with a placement rule gives on `Sharded<Flex>` (N = 1..4 ranks, every input
//! placement) what it gives on `Flex`.

use crate::common;

/// Runs `check_op!` and prints the op's fallback count (asserted below where a rule exists).
macro_rules! show {
    ($name:expr, $($rest:tt)*) => {{
        let n = check_op!($name, $($rest)*);
        println!("FALLBACKS {}: {n}", $name);
        n
    }};
}

use burn::tensor::module::{avg_pool2d, conv2d, embedding, max_pool2d};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{activation, Int, Tensor, TensorData};
use common::rand;

#[test]
fn elementwise_unary_and_scalar_ops() {
    let x = rand([6, 5], 1);
    show!("exp", [x], x.exp());
    show!("neg", [x], -x);
    show!("mul_scalar", [x], x * 3.0);
    show!("add_scalar", [x], x + 1.5);
    show!("relu", [x], activation::relu(x));
    show!("gelu", [x], activation::gelu(x));
    show!("sigmoid", [x], activation::sigmoid(x));
    show!("powf_scalar", [x], x.abs().powf_scalar(1.5));
    show!("clamp", [x], x.clamp(-0.5, 0.5));
    show!("greater_elem", [x], x.greater_elem(0.1));
    show!("cast to int", [x], (x * 10.0).int());
}

#[test]
fn elementwise_binary_ops_with_broadcasting() {
    let x = rand([6, 5], 2);
    let y = rand([6, 5], 3);
    let row = rand([1, 5], 4);
    let col = rand([6, 1], 5);
    show!("add", [x, y], x + y);
    show!("sub", [x, y], x - y);
    show!("mul", [x, y], x * y);
    show!("div", [x, y], x / (y.abs() + 1.0));
    show!("add row", [x, row], x + row);
    show!("mul col", [x, col], x * col);
    show!("div by row", [x, row], x / (row.abs() + 1.0));
    show!("row minus x", [row, x], row - x);
    show!("lower", [x, y], x.lower(y));
    show!("mask_fill", [x, y], x.mask_fill(y.greater_elem(0.0), 7.0));
    show!(
        "mask_where",
        [x, y],
        x.clone().mask_where(y.greater_elem(0.0), x * 2.0)
    );
    show!("powf", [x, y], x.abs().powf(y));
}

#[test]
fn matmul_batched_rows_and_contraction() {
    let a = rand([8, 6], 6);
    let w = rand([6, 4], 7);
    show!("matmul", [a, w], a.matmul(w));
    show!(
        "x^T x (contracts the batch)",
        [a],
        a.clone().transpose().matmul(a)
    );
    let q = rand([4, 5, 3], 8);
    let k = rand([4, 3, 5], 9);
    show!("batched matmul", [q, k], q.matmul(k));
    let bias = rand([1, 3, 5], 10);
    show!(
        "broadcast batch",
        [q, bias],
        q.matmul(bias.swap_dims(1, 2).swap_dims(1, 2).reshape([1, 3, 5]))
    );
}

#[test]
fn reductions_over_sharded_and_other_dims() {
    let x = rand([6, 5], 11);
    show!("sum", [x], x.sum());
    show!("mean", [x], x.mean());
    show!("sum_dim 0", [x], x.sum_dim(0));
    show!("sum_dim 1", [x], x.sum_dim(1));
    show!("mean_dim 0", [x], x.mean_dim(0));
    show!("mean_dim 1", [x], x.mean_dim(1));
    show!("max", [x], x.max());
    show!("min_dim 0", [x], x.min_dim(0));
    show!("max_dim 1", [x], x.max_dim(1));
    show!("argmax 0", [x], x.argmax(0));
    show!("argmax 1", [x], x.argmax(1));
    show!("argmin 0", [x], x.argmin(0));
    show!("max_dim_with_indices 0", [x], {
        let (v, i) = x.max_dim_with_indices(0);
        Tensor::cat(vec![v, i.float()], 1)
    });
    show!("min_dim_with_indices 1", [x], {
        let (v, i) = x.min_dim_with_indices(1);
        Tensor::cat(vec![v, i.float()], 0)
    });
    show!("any", [x], x.greater_elem(0.9).any());
    show!("all_dim 0", [x], x.greater_elem(-0.9).all_dim(0));
    show!("prod_dim 0", [x], (x + 2.0).prod_dim(0));
    show!("var", [x], x.var(0));
}

#[test]
fn softmax_and_log_softmax() {
    let x = rand([6, 5], 12);
    show!("softmax 1", [x], activation::softmax(x, 1));
    show!("softmax 0", [x], activation::softmax(x, 0));
    show!("log_softmax 1", [x], activation::log_softmax(x, 1));
    show!("cumsum 1", [x], x.cumsum(1));
    show!("sort 1", [x], x.sort(1));
}

#[test]
fn layout_ops() {
    let x = rand([6, 4, 3], 13);
    show!("reshape merge", [x], x.reshape([24, 3]));
    show!("reshape flatten", [x], x.reshape([6, 12]));
    show!("reshape split", [x], x.reshape([6, 2, 2, 3]));
    show!("reshape all", [x], x.reshape([72]));
    show!("permute", [x], x.permute([2, 0, 1]));
    show!("swap_dims", [x], x.swap_dims(0, 2));
    show!("transpose", [x], x.transpose());
    show!("slice last", [x], x.slice([0..6, 0..4, 1..3]));
    show!("slice first", [x], x.slice([1..5, 0..4]));
    show!("flip", [x], x.flip([0]));
    show!("expand", [x], x.unsqueeze_dim::<4>(1).expand([6, 2, 4, 3]));
    show!("repeat", [x], x.repeat_dim(2, 2));
    let y = rand([6, 4, 3], 14);
    show!("cat 2", [x, y], Tensor::cat(vec![x, y], 2));
    show!("cat 0", [x, y], Tensor::cat(vec![x, y], 0));
    show!(
        "slice_assign",
        [x, y],
        x.slice_assign([0..6, 1..3, 0..3], y.slice([0..6, 0..2, 0..3]))
    );
}

#[test]
fn indexing_ops() {
    let x = rand([6, 5], 15);
    let idx =
        Tensor::<common::Ref, 1, Int>::from_data(TensorData::from([4i64, 0, 2]), &common::CPU);
    show!(
        "select 1",
        [x],
        dev,
        x.select(1, Tensor::from_data(idx.to_data(), &dev))
    );
    show!(
        "select 0",
        [x],
        dev,
        x.select(0, Tensor::from_data(idx.to_data(), &dev))
    );
    let g = (rand([6, 1], 16).abs() * 4.9).int();
    show!(
        "gather 1",
        [x],
        dev,
        x.gather(1, Tensor::from_data(g.to_data(), &dev))
    );
    show!("scatter add", [x], dev, {
        let idx = Tensor::from_data(g.to_data(), &dev);
        x.zeros_like().scatter(
            1,
            idx,
            x.slice([0..6, 0..1]),
            burn::tensor::IndexingUpdateOp::Add,
        )
    });
}

#[test]
fn module_ops_over_a_batch() {
    let x = rand([4, 3, 6, 6], 17);
    let w = rand([5, 3, 3, 3], 18);
    let b = rand([5], 19);
    let opts = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    show!("conv2d", [x], dev, {
        let (w, b) = (
            Tensor::from_data(w.to_data(), &dev),
            Tensor::from_data(b.to_data(), &dev),
        );
        conv2d(x, w, Some(b), opts.clone())
    });
    show!(
        "max_pool2d",
        [x],
        max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], false)
    );
    show!(
        "avg_pool2d",
        [x],
        avg_pool2d(x, [3, 3], [1, 1], [1, 1], true, false)
    );
    show!(
        "adaptive_avg_pool2d",
        [x],
        burn::tensor::module::adaptive_avg_pool2d(x, [1, 1])
    );
    let table = rand([10, 4], 20);
    let ids = Tensor::<common::Ref, 2, Int>::from_data(
        TensorData::from([[1i64, 9, 3], [0, 0, 5], [7, 2, 2], [4, 8, 6]]),
        &common::CPU,
    );
    show!(
        "embedding",
        [table],
        dev,
        embedding(table, Tensor::from_data(ids.to_data(), &dev))
    );
}

#[test]
fn linear_algebra_and_int_ops() {
    use burn::tensor::linalg::{lu, matvec, outer, vector_norm, Norm};
    let x = rand([6, 5], 21);
    show!("max_abs", [x], x.max_abs());
    show!("max_abs_dim 0", [x], x.max_abs_dim(0));
    show!("l2 norm 0", [x], vector_norm(x, Norm::L2, 0));
    show!("l1 norm 1", [x], vector_norm(x, Norm::L1, 1));
    show!("linf norm 0", [x], vector_norm(x, Norm::LInf, 0));
    let v = rand([6], 22);
    let u = rand([5], 23);
    show!(
        "outer",
        [v],
        dev,
        outer::<_, 1, 2, _>(v, Tensor::from_data(u.to_data(), &dev))
    );
    show!(
        "matvec",
        [x],
        dev,
        matvec::<_, 2, 1, _>(x, Tensor::from_data(u.to_data(), &dev))
    );
    let square = rand([4, 4], 24) + Tensor::<common::Ref, 2>::eye(4, &common::CPU) * 3.0;
    show!("lu", [square], {
        let (p, l, u) = lu::<_, 2, 1>(square);
        Tensor::cat(vec![p, l, u], 1)
    });
    // Int inputs: floats cast inside (the harness places float tensors).
    let a = rand([6, 4], 25) * 5.0;
    let b = rand([4, 3], 26) * 5.0;
    show!("int matmul", [a, b], a.int().matmul(b.int()));
    show!("int argmax 0", [a], a.int().argmax(0));
    show!("int max_dim 0", [a], a.int().max_dim(0));
    show!("int sum_dim 0", [a], a.int().sum_dim(0));
}
