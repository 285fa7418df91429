//! Random draws on a mesh: a dropout mask on a sharded batch is drawn block by block, each rank
//! from its own stream of the mesh seed (reproducible, distinct per rank, never whole); other
//! draws are one draw, identical on every rank and to a one-device draw from the same seed.

use crate::common;

use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor, TensorData};
use common::{mesh, serial, Ref, RefAd, SAd, CPU, S};
use firemesh_backend::stats::{self, Redistribution};
use firemesh_backend::{placement, shard, shards, Placement};

const P: f64 = 0.5;

fn dropout() -> Dropout {
    DropoutConfig::new(P).init()
}

/// A 12×8 batch of ones sharded over `ranks` ranks, tracked for gradients.
fn ones_batch(ranks: usize) -> Tensor<SAd, 2> {
    let x = Tensor::<SAd, 2>::ones([12, 8], &mesh(ranks));
    shard(x, 0).expect("12 rows").require_grad()
}

fn values(t: Tensor<SAd, 2>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec().expect("f32")
}

/// Seeds the mesh, applies dropout to a sharded batch of ones; returns the output and the
/// gradient of its sum with respect to the batch.
fn dropout_run(ranks: usize, seed: u64, parallel: bool) -> (Tensor<SAd, 2>, Vec<f32>) {
    let m = mesh(ranks);
    let default = m.parallel();
    m.set_parallel(parallel);
    SAd::seed(&m, seed);
    let x = ones_batch(ranks);
    let y = dropout().forward(x.clone());
    let grads = y.clone().sum().backward();
    let grad = x.grad(&grads).expect("x is tracked");
    m.set_parallel(default);
    (y, grad.into_data().convert::<f32>().to_vec().expect("f32"))
}

#[test]
fn dropout_on_a_sharded_batch_draws_each_block_on_its_rank() {
    let _serial = serial();
    let ((y, grad), counts) = stats::count(|| dropout_run(3, 42, false));
    assert_eq!(
        placement(&y),
        Placement::Shard(0),
        "the output stays sharded"
    );
    assert_eq!(counts.total_fallbacks(), 0, "{counts:?}");
    // Only local slices (the batch, and the gradient of `sum`): nothing is gathered or summed,
    // so no rank draws or receives the whole mask.
    assert!(
        counts
            .redistributions
            .keys()
            .all(|k| *k == Redistribution::ReplicatedToShard),
        "{counts:?}"
    );

    let blocks: Vec<Vec<f32>> = shards(y.clone())
        .into_iter()
        .map(|b| b.into_data().to_vec().expect("f32"))
        .collect();
    assert!(blocks.iter().all(|b| b.len() == 4 * 8), "4 rows per rank");
    assert!(
        blocks[0] != blocks[1] && blocks[1] != blocks[2],
        "each rank draws from its own stream"
    );
    let kept = values(y.clone());
    assert!(
        kept.iter().all(|v| *v == 0.0 || *v == 2.0),
        "dropped, or kept and scaled by 1/(1-p)"
    );
    let share = kept.iter().filter(|v| **v != 0.0).count() as f64 / kept.len() as f64;
    assert!((0.3..0.7).contains(&share), "about half kept: {share}");
    // d(sum(dropout(x)))/dx is the scaled mask: the backward pass reuses the forward's draw.
    assert_eq!(grad, kept, "backward uses the same mask as forward");
}

/// A rank's block comes from that rank's stream alone: rank 1 draws the same 4 rows whether
/// rank 0 holds 4 rows or 5 (a draw of the whole mask, sliced, would shift them).
#[test]
fn a_ranks_block_depends_only_on_its_own_stream() {
    let _serial = serial();
    let blocks = |rows: usize| {
        let m = mesh(3);
        SAd::seed(&m, 11);
        let x = shard(Tensor::<SAd, 2>::ones([rows, 8], &m), 0).expect("rows");
        let y = dropout().forward(x);
        shards(y)
            .into_iter()
            .map(|b| b.into_data().to_vec::<f32>().expect("f32"))
            .collect::<Vec<_>>()
    };
    let (even, uneven) = (blocks(12), blocks(13));
    assert_eq!(
        (even[0].len(), uneven[0].len()),
        (32, 40),
        "blocks of 4/4/4 and 5/4/4 rows"
    );
    assert_eq!(even[1], uneven[1], "rank 1's stream gives the same rows");
    assert_eq!(even[2], uneven[2], "rank 2's stream gives the same rows");
    assert_eq!(
        even[0][..],
        uneven[0][..32],
        "rank 0's stream goes on where it stopped"
    );
}

#[test]
fn dropout_streams_are_reproducible_from_the_mesh_seed() {
    let _serial = serial();
    let (a, _) = dropout_run(3, 7, false);
    let (b, _) = dropout_run(3, 7, false);
    let (pooled, _) = dropout_run(3, 7, true);
    let (other, _) = dropout_run(3, 8, false);
    let a = values(a);
    assert_eq!(a, values(b), "same seed, same masks");
    assert_eq!(a, values(pooled), "the same on the thread pool");
    assert_ne!(a, values(other), "another seed, other masks");
}

#[test]
fn a_mask_used_without_a_sharded_operand_is_drawn_whole() {
    let _serial = serial();
    let m = mesh(3);
    SAd::seed(&m, 3);
    let mask = Tensor::<S, 2>::random([4, 5], Distribution::Bernoulli(0.5), &m);
    let copy = mask.clone();
    let (read, counts) = stats::count(|| mask.into_data());
    assert_eq!(counts.total_redistributions(), 0, "{counts:?}");
    assert_eq!(placement(&copy), Placement::Replicated);
    assert_eq!(read, copy.to_data(), "clones share one draw");
    let v: Vec<f32> = read.to_vec().expect("f32");
    assert!(v.iter().all(|x| *x == 0.0 || *x == 1.0));
    // Every rank holds the same whole draw.
    let parts = shards(copy);
    assert!(parts.iter().all(|p| p.to_data() == parts[0].to_data()));
}

#[test]
fn on_one_rank_dropout_matches_the_inner_backend() {
    let _serial = serial();
    let m = mesh(1);
    SAd::seed(&m, 5);
    let got = values(dropout().forward(Tensor::<SAd, 2>::ones([12, 8], &m)));
    RefAd::seed(&CPU, 5);
    let want = dropout().forward(Tensor::<RefAd, 2>::ones([12, 8], &CPU));
    assert_eq!(TensorData::new(got, [12, 8]), want.into_data());
}

#[test]
fn parameter_draws_are_one_draw_equal_to_one_device() {
    let _serial = serial();
    let m = mesh(3);
    Ref::seed(&CPU, 9);
    let want = Tensor::<Ref, 2>::random([6, 4], Distribution::Normal(0.0, 1.0), &CPU);
    S::seed(&m, 9);
    let got = Tensor::<S, 2>::random([6, 4], Distribution::Normal(0.0, 1.0), &m);
    assert_eq!(placement(&got), Placement::Replicated);
    assert_eq!(got.into_data(), want.into_data());
}
