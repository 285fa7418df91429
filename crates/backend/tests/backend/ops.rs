//! Every op with a placement rule gives on `Sharded<Flex>` (N = 1..4 ranks, every input
//! placement) what it gives on `Flex`, and falls back to running replicated only for the
//! layouts its rule cannot keep (asserted for each op).

use crate::common;

use burn::tensor::module::{avg_pool2d, conv2d, embedding, max_pool2d};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{activation, Int, Tensor, TensorData};
use common::{rand, Layout};

#[test]
fn elementwise_unary_and_scalar_ops() {
    let x = rand([6, 5], 1);
    check_op!("exp", [x], x.exp()).none();
    check_op!("neg", [x], -x).none();
    check_op!("mul_scalar", [x], x * 3.0).none();
    check_op!("add_scalar", [x], x + 1.5).none();
    check_op!("relu", [x], activation::relu(x)).none();
    check_op!("gelu", [x], activation::gelu(x)).none();
    check_op!("sigmoid", [x], activation::sigmoid(x)).none();
    check_op!("powf_scalar", [x], x.abs().powf_scalar(1.5)).none();
    check_op!("clamp", [x], x.clamp(-0.5, 0.5)).none();
    check_op!("greater_elem", [x], x.greater_elem(0.1)).none();
    check_op!("cast to int", [x], (x * 10.0).int()).none();
}

#[test]
fn elementwise_binary_ops_with_broadcasting() {
    let x = rand([6, 5], 2);
    let y = rand([6, 5], 3);
    let row = rand([1, 5], 4);
    let col = rand([6, 1], 5);
    check_op!("add", [x, y], x + y).none();
    check_op!("sub", [x, y], x - y).none();
    check_op!("mul", [x, y], x * y).none();
    check_op!("div", [x, y], x / (y.abs() + 1.0)).none();
    check_op!("add row", [x, row], x + row).none();
    check_op!("mul col", [x, col], x * col).none();
    check_op!("div by row", [x, row], x / (row.abs() + 1.0)).none();
    check_op!("row minus x", [row, x], row - x).none();
    check_op!("lower", [x, y], x.lower(y)).none();
    check_op!("mask_fill", [x, y], x.mask_fill(y.greater_elem(0.0), 7.0)).none();
    check_op!(
        "mask_where",
        [x, y],
        x.clone().mask_where(y.greater_elem(0.0), x * 2.0)
    )
    .none();
    check_op!("powf", [x, y], x.abs().powf(y)).none();
}

#[test]
fn matmul_batched_rows_and_contraction() {
    let a = rand([8, 6], 6);
    let w = rand([6, 4], 7);
    check_op!("matmul", [a, w], a.matmul(w)).none();
    check_op!(
        "x^T x (contracts the batch)",
        [a],
        a.clone().transpose().matmul(a)
    )
    .only_where(
        |c| c.first.splits(1),
        "columns split (the product would be split both ways)",
    );
    let q = rand([4, 5, 3], 8);
    let k = rand([4, 3, 5], 9);
    check_op!("batched matmul", [q, k], q.matmul(k)).none();
    let bias = rand([1, 3, 5], 10);
    check_op!(
        "broadcast batch",
        [q, bias],
        q.matmul(bias.swap_dims(1, 2).swap_dims(1, 2).reshape([1, 3, 5]))
    )
    .none();
}

#[test]
fn reductions_over_sharded_and_other_dims() {
    let x = rand([6, 5], 11);
    check_op!("sum", [x], x.sum()).none();
    check_op!("mean", [x], x.mean()).none();
    check_op!("sum_dim 0", [x], x.sum_dim(0)).none();
    check_op!("sum_dim 1", [x], x.sum_dim(1)).none();
    check_op!("mean_dim 0", [x], x.mean_dim(0)).none();
    check_op!("mean_dim 1", [x], x.mean_dim(1)).none();
    check_op!("max", [x], x.max()).none();
    check_op!("min_dim 0", [x], x.min_dim(0)).none();
    check_op!("max_dim 1", [x], x.max_dim(1)).none();
    check_op!("argmax 0", [x], x.argmax(0)).none();
    check_op!("argmax 1", [x], x.argmax(1)).none();
    check_op!("argmin 0", [x], x.argmin(0)).none();
    check_op!("max_dim_with_indices 0", [x], {
        let (v, i) = x.max_dim_with_indices(0);
        Tensor::cat(vec![v, i.float()], 1)
    })
    .only_where(
        |c| c.first.splits(1),
        "the first input split along the dim of the cat",
    );
    check_op!("min_dim_with_indices 1", [x], {
        let (v, i) = x.min_dim_with_indices(1);
        Tensor::cat(vec![v, i.float()], 0)
    })
    .only_where(
        |c| c.first.splits(0),
        "the first input split along the dim of the cat",
    );
    check_op!("any", [x], x.greater_elem(0.9).any()).none();
    check_op!("all_dim 0", [x], x.greater_elem(-0.9).all_dim(0)).none();
    check_op!("prod_dim 0", [x], (x + 2.0).prod_dim(0)).none();
    check_op!("var", [x], x.var(0)).none();
}

#[test]
fn softmax_and_log_softmax() {
    let x = rand([6, 5], 12);
    check_op!("softmax 1", [x], activation::softmax(x, 1)).only_where(
        |c| c.first.splits(1),
        "the first input split along the softmax dim",
    );
    check_op!("softmax 0", [x], activation::softmax(x, 0)).only_where(
        |c| c.first.splits(0),
        "the first input split along the softmax dim",
    );
    check_op!("log_softmax 1", [x], activation::log_softmax(x, 1)).only_where(
        |c| c.first.splits(1),
        "the first input split along the softmax dim",
    );
    check_op!("cumsum 1", [x], x.cumsum(1)).only_where(
        |c| c.first.splits(1),
        "the first input split along the summed dim",
    );
    check_op!("sort 1", [x], x.sort(1)).only_where(
        |c| c.first.splits(1),
        "the first input split along the sorted dim",
    );
}

#[test]
fn layout_ops() {
    let x = rand([6, 4, 3], 13);
    check_op!("reshape merge", [x], x.reshape([24, 3])).only_where(
        |c| c.first.splits(1),
        "the first input split along the inner dim merged",
    );
    check_op!("reshape flatten", [x], x.reshape([6, 12])).none();
    check_op!("reshape split", [x], x.reshape([6, 2, 2, 3])).none();
    check_op!("reshape all", [x], x.reshape([72])).only_where(
        |c| c.first.splits(1),
        "the first input split along an inner dim merged",
    );
    check_op!("permute", [x], x.permute([2, 0, 1])).none();
    check_op!("swap_dims", [x], x.swap_dims(0, 2)).none();
    check_op!("transpose", [x], x.transpose()).none();
    check_op!("slice last", [x], x.slice([0..6, 0..4, 1..3])).none();
    check_op!("slice first", [x], x.slice([1..5, 0..4])).only_where(
        |c| c.first.splits(0),
        "the first input split along the sliced dim",
    );
    check_op!("flip", [x], x.flip([0])).only_where(
        |c| c.first.splits(0),
        "the first input split along the flipped dim",
    );
    // The unsqueeze moves a sharded dim 1 to dim 2 (a reshape that only adds a dim of size 1
    // keeps every block), so the new dim is never the sharded one.
    check_op!("expand", [x], x.unsqueeze_dim::<4>(1).expand([6, 2, 4, 3])).none();
    check_op!(
        "unsqueeze",
        [x],
        x.unsqueeze_dim::<4>(0).unsqueeze_dim::<5>(3)
    )
    .none();
    check_op!("repeat", [x], x.repeat_dim(2, 2)).none();
    let y = rand([6, 4, 3], 14);
    check_op!("cat 2", [x, y], Tensor::cat(vec![x, y], 2)).only_where(
        |c| c.first == Layout::Partial && c.rest == Layout::Replicated,
        "a partial input beside a replicated one",
    );
    check_op!("cat 0", [x, y], Tensor::cat(vec![x, y], 0)).only_where(
        |c| c.first.splits(0) || (c.first == Layout::Partial && c.rest == Layout::Replicated),
        "inputs split along the joined dim, or a partial input beside a replicated one",
    );
    check_op!(
        "slice_assign",
        [x, y],
        x.slice_assign([0..6, 1..3, 0..3], y.slice([0..6, 0..2, 0..3]))
    )
    .only_where(
        |c| c.first.splits(1),
        "the first input split along the assigned dim",
    );
}

#[test]
fn indexing_ops() {
    let x = rand([6, 5], 15);
    let idx =
        Tensor::<common::Ref, 1, Int>::from_data(TensorData::from([4i64, 0, 2]), &common::CPU);
    check_op!(
        "select 1",
        [x],
        dev,
        x.select(1, Tensor::from_data(idx.to_data(), &dev))
    )
    .only_where(
        |c| c.first.splits(1),
        "the first input split along the selected dim",
    );
    check_op!(
        "select 0",
        [x],
        dev,
        x.select(0, Tensor::from_data(idx.to_data(), &dev))
    )
    .only_where(
        |c| c.first.splits(0),
        "the first input split along the selected dim",
    );
    let g = (rand([6, 1], 16).abs() * 4.9).int();
    check_op!(
        "gather 1",
        [x],
        dev,
        x.gather(1, Tensor::from_data(g.to_data(), &dev))
    )
    .only_where(
        |c| c.first.splits(1),
        "the first input split along the gathered dim",
    );
    check_op!("scatter add", [x], dev, {
        let idx = Tensor::from_data(g.to_data(), &dev);
        x.zeros_like().scatter(
            1,
            idx,
            x.slice([0..6, 0..1]),
            burn::tensor::IndexingUpdateOp::Add,
        )
    })
    .only_where(
        |c| c.first.splits(1) || c.first == Layout::Partial,
        "the first input split along the scattered dim, or partial",
    );
}

#[test]
fn module_ops_over_a_batch() {
    let x = rand([4, 3, 6, 6], 17);
    let w = rand([5, 3, 3, 3], 18);
    let b = rand([5], 19);
    let opts = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    check_op!("conv2d", [x], dev, {
        let (w, b) = (
            Tensor::from_data(w.to_data(), &dev),
            Tensor::from_data(b.to_data(), &dev),
        );
        conv2d(x, w, Some(b), opts.clone())
    })
    .only_where(
        |c| c.first.splits(1),
        "input channels split (the weight is replicated)",
    );
    check_op!(
        "max_pool2d",
        [x],
        max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], false)
    )
    .none();
    check_op!(
        "avg_pool2d",
        [x],
        avg_pool2d(x, [3, 3], [1, 1], [1, 1], true, false)
    )
    .none();
    check_op!(
        "adaptive_avg_pool2d",
        [x],
        burn::tensor::module::adaptive_avg_pool2d(x, [1, 1])
    )
    .none();
    let table = rand([10, 4], 20);
    let ids = Tensor::<common::Ref, 2, Int>::from_data(
        TensorData::from([[1i64, 9, 3], [0, 0, 5], [7, 2, 2], [4, 8, 6]]),
        &common::CPU,
    );
    check_op!(
        "embedding",
        [table],
        dev,
        embedding(table, Tensor::from_data(ids.to_data(), &dev))
    )
    .none();
}

#[test]
fn linear_algebra_and_int_ops() {
    use burn::tensor::linalg::{lu, matvec, outer, vector_norm, Norm};
    let x = rand([6, 5], 21);
    check_op!("max_abs", [x], x.max_abs()).none();
    check_op!("max_abs_dim 0", [x], x.max_abs_dim(0)).none();
    check_op!("l2 norm 0", [x], vector_norm(x, Norm::L2, 0)).none();
    check_op!("l1 norm 1", [x], vector_norm(x, Norm::L1, 1)).none();
    check_op!("linf norm 0", [x], vector_norm(x, Norm::LInf, 0)).none();
    let v = rand([6], 22);
    let u = rand([5], 23);
    check_op!(
        "outer",
        [v],
        dev,
        outer::<_, 1, 2, _>(v, Tensor::from_data(u.to_data(), &dev))
    )
    .none();
    check_op!(
        "matvec",
        [x],
        dev,
        matvec::<_, 2, 1, _>(x, Tensor::from_data(u.to_data(), &dev))
    )
    .none();
    let square = rand([4, 4], 24) + Tensor::<common::Ref, 2>::eye(4, &common::CPU) * 3.0;
    check_op!("lu", [square], {
        let (p, l, u) = lu::<_, 2, 1>(square);
        Tensor::cat(vec![p, l, u], 1)
    })
    .only_where(
        |c| c.first.splits(0) || c.first.splits(1),
        "a split matrix (no rule for lu's steps on blocks)",
    );
    // Int inputs: floats cast inside (the harness places float tensors).
    let a = rand([6, 4], 25) * 5.0;
    let b = rand([4, 3], 26) * 5.0;
    check_op!("int matmul", [a, b], a.int().matmul(b.int())).none();
    check_op!("int argmax 0", [a], a.int().argmax(0)).none();
    check_op!("int max_dim 0", [a], a.int().max_dim(0)).none();
    check_op!("int sum_dim 0", [a], a.int().sum_dim(0)).none();
}
