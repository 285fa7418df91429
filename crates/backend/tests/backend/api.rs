//! The placement API: sharding, changing placement, reading parts, moving between meshes.

use crate::common;

use burn::tensor::Tensor;
use common::{assert_close, mesh, rand, CPU, S};
use firemesh_backend::{placement, redistribute, shard, shards, stats, to_inner, Placement};

#[test]
fn placements_round_trip_and_keep_the_value() {
    let x = rand([5, 4], 1);
    let mesh = mesh(3);
    let t = shard(Tensor::<S, 2>::from_data(x.to_data(), &mesh), 0).unwrap();
    assert_eq!(placement(&t), Placement::Shard(0));
    let sizes: Vec<usize> = shards(t.clone()).iter().map(|s| s.dims()[0]).collect();
    assert_eq!(
        sizes,
        [2, 2, 1],
        "an uneven split puts the extra rows first"
    );
    for p in [
        Placement::Shard(1),
        Placement::Partial,
        Placement::Replicated,
        Placement::Shard(0),
    ] {
        let moved = redistribute(t.clone(), p);
        assert_eq!(placement(&moved), p);
        assert_close(
            moved.clone().into_data(),
            x.to_data(),
            0.0,
            &format!("{p:?}"),
        );
        assert_close(
            to_inner(moved, &CPU).into_data(),
            x.to_data(),
            0.0,
            "to_inner",
        );
    }
}

#[test]
fn a_partial_value_is_the_sum_of_its_parts() {
    let mesh = mesh(2);
    let x = rand([4, 3], 2);
    let t = shard(Tensor::<S, 2>::from_data(x.to_data(), &mesh), 0).unwrap();
    let total = t.sum_dim(0);
    assert_eq!(placement(&total), Placement::Partial);
    let parts: Vec<Tensor<common::Ref, 2>> = shards(total.clone());
    let summed = parts[0].clone() + parts[1].clone();
    assert_close(
        summed.into_data(),
        x.clone().sum_dim(0).into_data(),
        1e-6,
        "parts add up",
    );
    assert_close(
        total.into_data(),
        x.sum_dim(0).into_data(),
        1e-6,
        "read back summed",
    );
}

#[test]
fn tensors_move_between_meshes() {
    let x = rand([6, 2], 3);
    let (small, large) = (mesh(2), mesh(3));
    let t = shard(Tensor::<S, 2>::from_data(x.to_data(), &small), 0).unwrap();
    let moved = t.to_device(&large);
    assert_eq!(moved.device(), large);
    assert_close(moved.clone().into_data(), x.to_data(), 0.0, "moved value");
    let resharded = shard(moved, 0).unwrap();
    assert_eq!(shards(resharded).len(), 3);
}

#[test]
fn a_product_sums_a_small_partial_operand_before_it_broadcasts() {
    let mesh = mesh(3);
    let (g, big) = (rand([4, 1], 3), rand([4, 7], 4));
    let partial = redistribute(
        Tensor::<S, 2>::from_data(g.to_data(), &mesh),
        Placement::Partial,
    );
    let replicated = Tensor::<S, 2>::from_data(big.to_data(), &mesh);
    let (y, counts) = stats::count(|| partial * replicated);
    // The sum is of the 4-element operand, not of the 28-element result; the result is split
    // along the dim the operand broadcast over.
    assert_eq!(counts.summed_elements, 4);
    assert_eq!(placement(&y), Placement::Shard(1));
    assert_close(y.into_data(), (g * big).into_data(), 1e-6, "product");
}

#[test]
fn clones_of_a_partial_tensor_share_one_sum() {
    let mesh = mesh(3);
    let (g, r) = (rand([4, 5], 6), rand([4, 5], 7));
    let partial = redistribute(
        Tensor::<S, 2>::from_data(g.to_data(), &mesh),
        Placement::Partial,
    );
    let replicated = Tensor::<S, 2>::from_data(r.to_data(), &mesh);
    // As BatchNorm uses its batch mean: once where a non-linear op needs its sum, once more
    // (detached, scaled) beside a replicated tensor, and squared.
    let ((e, scaled, squared), counts) = stats::count(|| {
        let e = partial.clone().exp();
        let scaled = partial.clone().mul_scalar(0.5) + replicated.clone();
        let squared = partial.clone() * partial.clone();
        (e, scaled, squared)
    });
    let sums = counts
        .redistributions
        .get(&stats::Redistribution::PartialToReplicated)
        .copied();
    assert_eq!(sums, Some(1), "{counts:?}");
    assert_eq!(counts.sums_reused, 3, "{counts:?}");
    assert_eq!(placement(&scaled), Placement::Replicated);
    assert_close(e.into_data(), g.clone().exp().into_data(), 1e-6, "exp");
    let expected = g.clone().mul_scalar(0.5) + r;
    assert_close(scaled.into_data(), expected.into_data(), 1e-6, "scaled");
    assert_close(
        squared.into_data(),
        (g.clone() * g).into_data(),
        1e-6,
        "squared",
    );
    // The original is still the same Partial value.
    assert_eq!(placement(&partial), Placement::Partial);
}

#[test]
fn a_partial_tensor_with_a_live_clone_is_summed_where_it_is_scaled() {
    let mesh = mesh(3);
    let (v, r) = (rand([6], 8), rand([6], 9));
    let partial = redistribute(
        Tensor::<S, 1>::from_data(v.to_data(), &mesh),
        Placement::Partial,
    );
    let replicated = Tensor::<S, 1>::from_data(r.to_data(), &mesh);
    // Without clones, a scaled Partial tensor stays Partial: no communication.
    let lone = redistribute(
        Tensor::<S, 1>::from_data(v.to_data(), &mesh),
        Placement::Partial,
    );
    let (scaled, counts) = stats::count(|| lone.mul_scalar(3.0));
    assert_eq!(placement(&scaled), Placement::Partial);
    assert_eq!(counts.total_redistributions(), 0);
    assert_close(
        scaled.into_data(),
        v.clone().mul_scalar(3.0).into_data(),
        1e-6,
        "scaled",
    );
    // As BatchNorm's running variance: scaled while the variance itself is still to be used
    // (here by a square root); one sum serves both.
    let ((running, sqrt), counts) = stats::count(|| {
        let running = replicated.clone() + partial.clone().mul_scalar(0.1);
        (running, partial.clone().sqrt())
    });
    let sums = counts
        .redistributions
        .get(&stats::Redistribution::PartialToReplicated)
        .copied();
    assert_eq!(sums, Some(1), "{counts:?}");
    let expected = r + v.clone().mul_scalar(0.1);
    assert_close(running.into_data(), expected.into_data(), 1e-6, "running");
    assert_close(sqrt.into_data(), v.sqrt().into_data(), 1e-6, "sqrt");
}

#[test]
fn a_reshape_recuts_blocks_that_do_not_fill_whole_rows() {
    let mesh = mesh(3);
    let x = rand([20], 5);
    // 20 elements split 7, 7, 6: as 5 rows of 4, no block holds whole rows.
    let flat = shard(Tensor::<S, 1>::from_data(x.to_data(), &mesh), 0).unwrap();
    let (rows, counts) = stats::count(|| flat.reshape([5, 4]));
    assert_eq!(counts.total_fallbacks(), 0);
    assert_eq!(placement(&rows), Placement::Shard(0));
    let sizes: Vec<usize> = shards(rows.clone()).iter().map(|s| s.dims()[0]).collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert_close(
        rows.into_data(),
        x.reshape([5, 4]).into_data(),
        0.0,
        "reshape",
    );
}
