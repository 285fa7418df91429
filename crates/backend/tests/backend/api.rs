//! The placement API: sharding, changing placement, reading parts, moving between meshes.

use crate::common;

use burn::tensor::Tensor;
use common::{assert_close, mesh, rand, CPU, S};
use firemesh_backend::{placement, redistribute, shard, shards, to_inner, Placement};

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
