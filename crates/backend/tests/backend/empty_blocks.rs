//! A rank whose block is empty (2 rows over 3 ranks, or a loader's last batch that leaves a rank
//! nothing) skips its share of each op: the results are those of one device, forward and
//! backward. (`ops.rs` and `gradients.rs` also run every op family with an empty last block.)

use crate::common::{self, assert_close, mesh, rand, Ref, RefAd, SAd, CPU, S};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::linalg::{outer, vector_norm, Norm};
use burn::tensor::{activation, IndexingUpdateOp, Int, Tensor, TensorData};
use firemesh_backend::{from_shards, redistribute, shards, stats, Placement};

/// `x` on a mesh of `ranks`, split evenly along dim 0 (blocks of 1/1/0 rows for 2 rows on 3).
fn sharded<const D: usize>(x: &Tensor<Ref, D>, ranks: usize) -> Tensor<S, D> {
    let whole = Tensor::<S, D>::from_data(x.to_data(), &mesh(ranks));
    redistribute(whole, Placement::Shard(0))
}

fn block_rows<const D: usize>(t: &Tensor<S, D>) -> Vec<usize> {
    shards(t.clone()).iter().map(|b| b.dims()[0]).collect()
}

#[test]
fn two_rows_over_three_ranks() {
    let x = rand([2, 4], 1);
    let w = rand([4, 3], 2);
    let xs = sharded(&x, 3);
    assert_eq!(block_rows(&xs), [1, 1, 0]);
    let ws = Tensor::<S, 2>::from_data(w.to_data(), &mesh(3));
    let check = |got: TensorData, want: TensorData, what: &str| {
        assert_close(got, want, 1e-5, &format!("{what} on 1/1/0 rows"));
    };
    let (_, counts) = stats::count(|| {
        check(
            xs.clone().matmul(ws.clone()).into_data(),
            x.clone().matmul(w.clone()).into_data(),
            "matmul",
        );
        check(
            xs.clone().transpose().matmul(xs.clone()).into_data(),
            x.clone().transpose().matmul(x.clone()).into_data(),
            "x^T x (contracts the empty block)",
        );
        for (got, want, what) in [
            (xs.clone().max_dim(0), x.clone().max_dim(0), "max_dim"),
            (xs.clone().min_dim(0), x.clone().min_dim(0), "min_dim"),
            (xs.clone().sum_dim(0), x.clone().sum_dim(0), "sum_dim"),
            (xs.clone().mean_dim(0), x.clone().mean_dim(0), "mean_dim"),
            (
                vector_norm(xs.clone(), Norm::L2, 0),
                vector_norm(x.clone(), Norm::L2, 0),
                "l2 norm",
            ),
            (
                vector_norm(xs.clone(), Norm::LInf, 0),
                vector_norm(x.clone(), Norm::LInf, 0),
                "linf norm",
            ),
            (
                activation::softmax(xs.clone(), 1),
                activation::softmax(x.clone(), 1),
                "softmax",
            ),
        ] {
            check(got.into_data(), want.into_data(), what);
        }
        check(
            xs.clone().max_abs().into_data(),
            x.clone().max_abs().into_data(),
            "max_abs",
        );
        check(
            xs.clone().argmax(0).into_data(),
            x.clone().argmax(0).into_data(),
            "argmax",
        );
        check(
            xs.clone().argmin(0).into_data(),
            x.clone().argmin(0).into_data(),
            "argmin",
        );
        let xi: Tensor<S, 2, Int> = (xs.clone() * 10.0).int();
        let wi: Tensor<S, 2, Int> = (ws.clone() * 10.0).int();
        check(
            xi.matmul(wi).into_data(),
            (x.clone() * 10.0)
                .int()
                .matmul((w.clone() * 10.0).int())
                .into_data(),
            "int matmul",
        );
    });
    assert_eq!(counts.total_fallbacks(), 0, "{counts:?}");
    // The outer product of two vectors sharded 1/1/0 gathers one of them (a counted fallback).
    let v = rand([2], 3);
    check(
        outer::<_, 1, 2, _>(sharded(&v, 3), sharded(&v, 3)).into_data(),
        outer::<_, 1, 2, _>(v.clone(), v.clone()).into_data(),
        "outer",
    );
}

fn loss<B: Backend>(x: Tensor<B, 2>, w: Tensor<B, 2>) -> Tensor<B, 1> {
    let h = activation::relu(x.matmul(w));
    h.clone().max_dim(0).sum() + activation::log_softmax(h, 1).mean()
}

#[test]
fn gradients_through_an_empty_block() {
    let x = rand([2, 4], 4);
    let w = rand([4, 3], 5);
    let (xr, wr) = (
        Tensor::<RefAd, 2>::from_data(x.to_data(), &CPU).require_grad(),
        Tensor::<RefAd, 2>::from_data(w.to_data(), &CPU).require_grad(),
    );
    let want = loss(xr.clone(), wr.clone()).backward();
    let m = mesh(3);
    let xs = redistribute(
        Tensor::<SAd, 2>::from_data(x.to_data(), &m),
        Placement::Shard(0),
    )
    .require_grad();
    let ws = Tensor::<SAd, 2>::from_data(w.to_data(), &m).require_grad();
    let (got, counts) = stats::count(|| loss(xs.clone(), ws.clone()).backward());
    assert_eq!(counts.total_fallbacks(), 0, "{counts:?}");
    let pairs = [
        (xs.grad(&got), xr.grad(&want), "x"),
        (ws.grad(&got), wr.grad(&want), "w"),
    ];
    for (g, w, what) in pairs {
        let (g, w) = (g.expect("tracked"), w.expect("tracked"));
        assert_close(
            g.into_data(),
            w.into_data(),
            1e-5,
            &format!("gradient of {what}"),
        );
    }
}

/// One SGD step of a linear classifier: the new weights.
fn step<B: AutodiffBackend>(
    x: Tensor<B, 2>,
    y: Tensor<B, 1, Int>,
    w: Tensor<B, 2>,
) -> Tensor<B::InnerBackend, 2> {
    let logits = x.matmul(w.clone());
    let loss = burn::nn::loss::CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, y);
    let grads = loss.backward();
    w.clone().inner() - w.grad(&grads).expect("tracked") * 0.5
}

/// A loader's last batch of 3 samples over 3 ranks, split 2/1/0: one SGD step of a linear
/// classifier gives the weights of one device.
#[test]
fn a_batch_that_leaves_a_rank_nothing() {
    let x = rand([3, 4], 6);
    let w = rand([4, 2], 7);
    let targets = [1i64, 0, 1];
    let want = step(
        Tensor::<RefAd, 2>::from_data(x.to_data(), &CPU),
        Tensor::from_data(TensorData::from(targets), &CPU),
        Tensor::<RefAd, 2>::from_data(w.to_data(), &CPU).require_grad(),
    );
    let m = mesh(3);
    let rows = [0..2, 2..3, 3..3];
    let blocks: Vec<Tensor<Ref, 2>> = rows.iter().map(|r| x.clone().slice([r.clone()])).collect();
    let labels: Vec<Tensor<Ref, 1, Int>> = rows
        .iter()
        .map(|r| Tensor::from_data(TensorData::from(&targets[r.clone()]), &CPU))
        .collect();
    let xs = from_shards::<SAd, 2>(&m, blocks, 0).expect("an empty block is a valid shard");
    let ys = firemesh_backend::from_shards_int::<SAd, 1>(&m, labels, 0).expect("valid shards");
    let (got, counts) = stats::count(|| {
        step(
            xs,
            ys,
            Tensor::<SAd, 2>::from_data(w.to_data(), &m).require_grad(),
        )
    });
    assert_eq!(counts.total_fallbacks(), 0, "{counts:?}");
    assert_close(
        got.into_data(),
        want.into_data(),
        1e-5,
        "weights after one step",
    );
}

/// Rows added into a `Replicated` table at sharded indices give `Partial` addends, rank 0's
/// holding the table: with rank 0's block of indices empty, its addend is still the table.
#[test]
fn accumulating_into_a_table_when_rank_0_has_no_rows() {
    let table = rand([4, 3], 9);
    let values = rand([3, 3], 10);
    let ids = [2i64, 0, 2];
    let want = table.clone().select_assign(
        0,
        Tensor::from_data(TensorData::from(ids), &CPU),
        values.clone(),
        IndexingUpdateOp::Add,
    );
    let m = mesh(3);
    let rows = [0..0, 0..2, 2..3];
    let id_blocks: Vec<Tensor<Ref, 1, Int>> = rows
        .iter()
        .map(|r| Tensor::from_data(TensorData::from(&ids[r.clone()]), &CPU))
        .collect();
    let value_blocks: Vec<Tensor<Ref, 2>> = rows
        .iter()
        .map(|r| match r.len() {
            0 => Tensor::zeros([0, 3], &CPU),
            _ => values.clone().slice([r.clone()]),
        })
        .collect();
    let ids = firemesh_backend::from_shards_int::<S, 1>(&m, id_blocks, 0).expect("valid shards");
    let vs = from_shards::<S, 2>(&m, value_blocks, 0).expect("valid shards");
    let (got, counts) = stats::count(|| {
        let t = Tensor::<S, 2>::from_data(table.to_data(), &m);
        t.select_assign(0, ids, vs, IndexingUpdateOp::Add)
    });
    assert_eq!(counts.total_fallbacks(), 0, "{counts:?}");
    assert_close(got.into_data(), want.into_data(), 1e-6, "table plus rows");
}

#[test]
fn an_empty_block_reads_back_and_redistributes() {
    let x = rand([2, 3], 8);
    let xs = sharded(&x, 3);
    for p in [
        Placement::Replicated,
        Placement::Partial,
        Placement::Shard(1),
    ] {
        let moved = redistribute(xs.clone(), p);
        assert_close(moved.into_data(), x.to_data(), 0.0, &format!("{p:?}"));
    }
    let inner = firemesh_backend::to_inner(xs, &common::CPU);
    assert_close(inner.into_data(), x.to_data(), 0.0, "to_inner");
}

/// Flex flips and permutes without copying (negative or swapped strides): an empty block cut
/// from such a tensor must not make the inner backend compute an offset outside its storage
/// (Flex's `slice` asserts on a negative one in a dev build).
#[test]
fn empty_blocks_cut_from_flipped_and_permuted_tensors() {
    let x = rand([2, 3], 9);
    type Variant = (&'static str, fn(Tensor<Ref, 2>) -> Tensor<Ref, 2>);
    fn flip_rows<B: Backend>(t: Tensor<B, 2>) -> Tensor<B, 2> {
        t.flip([0])
    }
    fn flip_both<B: Backend>(t: Tensor<B, 2>) -> Tensor<B, 2> {
        t.flip([0, 1])
    }
    fn flip_then_permute<B: Backend>(t: Tensor<B, 2>) -> Tensor<B, 2> {
        t.flip([1]).permute([1, 0]).flip([1])
    }
    type OnMesh = fn(Tensor<S, 2>) -> Tensor<S, 2>;
    let variants: [(Variant, OnMesh); 3] = [
        (("flipped rows", flip_rows::<Ref>), flip_rows::<S>),
        (("flipped both ways", flip_both::<Ref>), flip_both::<S>),
        (
            ("flipped, permuted", flip_then_permute::<Ref>),
            flip_then_permute::<S>,
        ),
    ];
    for ((what, on_ref), on_mesh) in variants {
        let want = on_ref(x.clone());
        // One rank more than the longer dim: the last block is empty along either dim.
        let whole = on_mesh(Tensor::<S, 2>::from_data(x.to_data(), &mesh(4)));
        for dim in 0..2 {
            let split = redistribute(whole.clone(), Placement::Shard(dim));
            let blocks: Vec<usize> = shards(split.clone())
                .iter()
                .map(|b| b.dims()[dim])
                .collect();
            assert_eq!(
                blocks.last(),
                Some(&0),
                "{what}: the last block is empty along {dim}"
            );
            assert_close(
                split.clone().into_data(),
                want.to_data(),
                0.0,
                &format!("{what}, split along {dim}"),
            );
            assert_close(
                (split * 2.0)
                    .lower_equal_elem(0.5)
                    .int()
                    .into_data()
                    .convert::<f32>(),
                (want.clone() * 2.0)
                    .lower_equal_elem(0.5)
                    .int()
                    .into_data()
                    .convert::<f32>(),
                0.0,
                &format!("{what}, split along {dim}, compared"),
            );
        }
    }
}
