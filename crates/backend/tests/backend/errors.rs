//! Bad input gives a clear error, never a silent wrong answer.

use crate::common;

use burn::tensor::{Int, Tensor, TensorData};
use common::{mesh, rand, S};
use firemesh_backend::{from_shards, shard, shard_int, Mesh, MeshError, ShardError};

#[test]
fn a_batch_smaller_than_the_mesh_is_an_error() {
    let mesh = mesh(4);
    let x = Tensor::<S, 2>::from_data(rand([3, 2], 1).into_data(), &mesh);
    let err = shard(x, 0).unwrap_err();
    assert_eq!(
        err,
        ShardError::TooFewRows {
            dim: 0,
            len: 3,
            ranks: 4
        }
    );
    assert!(err.to_string().contains("fewer than the 4 ranks"), "{err}");
    let y = Tensor::<S, 1, Int>::from_data(TensorData::from([1i64, 2]), &mesh);
    assert!(matches!(
        shard_int(y, 0),
        Err(ShardError::TooFewRows { .. })
    ));
}

#[test]
fn sharding_a_missing_dim_is_an_error() {
    let mesh = mesh(2);
    let x = Tensor::<S, 2>::from_data(rand([4, 2], 2).into_data(), &mesh);
    assert_eq!(
        shard(x, 2).unwrap_err(),
        ShardError::DimOutOfRange { dim: 2, rank: 2 }
    );
}

#[test]
fn shards_must_match_the_mesh() {
    let mesh = mesh(3);
    let parts = vec![rand([2, 4], 3), rand([2, 4], 4)];
    let err = from_shards::<S, 2>(&mesh, parts, 0).unwrap_err();
    assert_eq!(err, ShardError::WrongShardCount { got: 2, ranks: 3 });
    let parts = vec![rand([2, 4], 3), rand([1, 4], 4), rand([2, 5], 5)];
    let err = from_shards::<S, 2>(&mesh, parts, 0).unwrap_err();
    assert!(
        matches!(err, ShardError::ShapeMismatch { rank: 2, .. }),
        "{err:?}"
    );
    let parts = vec![rand([2, 4], 3), rand([1, 4], 4), rand([2, 4], 5)];
    let t = from_shards::<S, 2>(&mesh, parts, 0).expect("uneven blocks are fine");
    assert_eq!(t.dims(), [5, 4]);
}

#[test]
fn an_empty_mesh_is_an_error() {
    assert_eq!(
        Mesh::<common::Dev>::new(vec![]).unwrap_err(),
        MeshError::Empty
    );
}

#[test]
fn the_same_devices_give_the_same_mesh() {
    let (a, b) = (mesh(2), mesh(2));
    assert_eq!(a, b);
    assert_ne!(a, mesh(3));
    use burn::tensor::backend::DeviceOps;
    assert_eq!(a.id(), b.id());
    assert_eq!(
        <Mesh<common::Dev> as burn::tensor::backend::Device>::from_id(a.id()),
        a
    );
    assert_eq!(Mesh::<common::Dev>::default().len(), 1);
}

#[test]
#[should_panic(expected = "not on the same device")]
fn tensors_from_two_meshes_in_one_op_panic_with_a_clear_message() {
    let x = Tensor::<S, 2>::from_data(rand([4, 2], 6).into_data(), &mesh(2));
    let y = Tensor::<S, 2>::from_data(rand([4, 2], 7).into_data(), &mesh(3));
    let _ = x + y;
}
