//! Early gradient buckets are the state of whoever arms them on a mesh: a backward pass on that
//! mesh sums its parameter gradients into the buckets armed there, and into no others; disarming
//! arms again what was armed before. Arming is the calling thread's: two training loops on one
//! mesh (the same device list gives the same mesh) keep their buckets apart.

use crate::common::{rand, Dev, SAd};
use burn::tensor::module::linear;
use burn::tensor::Tensor;
use firemesh_backend::buckets::EarlyBuckets;
use firemesh_backend::{shard, stats, Mesh};
use std::sync::Barrier;

/// A linear layer's backward pass on `mesh`, its batch sharded: two parameter gradients, each
/// `Partial` (with buckets of 1 byte, one early bucket each).
fn backward(mesh: &Mesh<Dev>) {
    let (x, w, b) = (rand([18, 3], 1), rand([3, 2], 2), rand([2], 3));
    let w = Tensor::<SAd, 2>::from_data(w.to_data(), mesh).require_grad();
    let b = Tensor::<SAd, 1>::from_data(b.to_data(), mesh).require_grad();
    let x = shard(Tensor::<SAd, 2>::from_data(x.to_data(), mesh), 0).expect("18 rows");
    let _ = linear(x, w, Some(b)).tanh().sum().backward();
}

#[test]
fn early_buckets_sum_for_whoever_armed_them_on_the_mesh() {
    // Meshes of 9 and 10 ranks: no other test arms or runs on them.
    let mesh = Mesh::replicate(Dev::default(), 9).expect("mesh");
    let other = Mesh::replicate(Dev::default(), 10).expect("mesh");
    let (outer, inner) = (EarlyBuckets::new(1), EarlyBuckets::new(1));
    let summed = || (outer.close(), inner.close());
    backward(&mesh);
    assert_eq!(summed(), (0, 0), "nothing armed");
    let armed = outer.arm(&mesh);
    backward(&mesh);
    assert_eq!(summed(), (2, 0), "armed");
    {
        let _inner = inner.arm(&mesh);
        backward(&mesh);
        assert_eq!(summed(), (0, 2), "the inner buckets, while they are armed");
    }
    backward(&mesh);
    assert_eq!(summed(), (2, 0), "the outer buckets armed again");
    backward(&other);
    assert_eq!(summed(), (0, 0), "another mesh's backward pass");
    drop(armed);
    backward(&mesh);
    assert_eq!(summed(), (0, 0), "disarmed");
}

#[test]
fn two_threads_on_one_mesh_keep_their_buckets_apart() {
    // A mesh of 11 ranks: no other test arms or runs on it.
    let mesh = Mesh::replicate(Dev::default(), 11).expect("mesh");
    let (first, second) = (EarlyBuckets::new(1), EarlyBuckets::new(1));
    let both = Barrier::new(2);
    let (mesh, first, second, both) = (&mesh, &first, &second, &both);
    let (armed_elsewhere, own, unarmed, armed_here) = std::thread::scope(|s| {
        let a = s.spawn(move || {
            let armed = first.arm(mesh);
            both.wait(); // the other thread runs its backward passes now
            both.wait();
            let armed_elsewhere = first.close();
            backward(mesh);
            drop(armed);
            (armed_elsewhere, first.close())
        });
        let b = s.spawn(move || {
            both.wait();
            let (_, unarmed) = stats::count(|| backward(mesh));
            let armed = second.arm(mesh);
            backward(mesh);
            drop(armed);
            both.wait();
            (unarmed.early_buckets, second.close())
        });
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        (a.0, a.1, b.0, b.1)
    });
    assert_eq!(unarmed, 0, "a thread that armed nothing sums nothing early");
    assert_eq!(
        armed_elsewhere, 0,
        "the other thread's gradients stayed out"
    );
    assert_eq!(own, 2, "this thread's own backward pass");
    assert_eq!(armed_here, 2, "the second thread's own buckets");
}

/// Buckets armed for one thread and disarmed on another (a `Bucketed` optimizer dropped
/// elsewhere) are disarmed for the thread that armed them.
#[test]
fn buckets_dropped_on_another_thread_are_disarmed_where_they_were_armed() {
    // A mesh of 12 ranks: no other test arms or runs on it.
    let mesh = Mesh::replicate(Dev::default(), 12).expect("mesh");
    let buckets = EarlyBuckets::new(1);
    let armed = buckets.arm(&mesh);
    backward(&mesh);
    assert_eq!(buckets.close(), 2, "armed here");
    std::thread::spawn(move || drop(armed)).join().unwrap();
    backward(&mesh);
    assert_eq!(buckets.close(), 0, "disarmed for this thread");
}

/// ZeRO-1's early buckets (`EarlyBuckets::scattering`): a bucket that fills only with both of a
/// linear layer's gradients (32 bytes: the weight's 3 rows for 3 ranks, 24 bytes, and the
/// bias's 2 rows, 8 bytes) is reduce-scattered, the short bias summed whole: two collectives,
/// both counted. Each gradient carries its sum (the weight's as `Shard(0)` blocks, taken as
/// they are), with the values of the same backward pass unarmed.
#[test]
fn scattering_buckets_count_every_collective_and_keep_the_sums() {
    use burn::tensor::module::linear;
    use firemesh_backend::{placement, redistribute, Placement};
    // A mesh of 3 ranks that no other test arms.
    let mesh = Mesh::replicate(Dev::default(), 3).expect("mesh");
    let (x, w, b) = (rand([12, 3], 4), rand([3, 2], 5), rand([2], 6));
    let grads = |early: Option<&EarlyBuckets>| {
        let _armed = early.map(|e| e.arm(&mesh));
        let w = Tensor::<SAd, 2>::from_data(w.to_data(), &mesh).require_grad();
        let b = Tensor::<SAd, 1>::from_data(b.to_data(), &mesh).require_grad();
        let x = shard(Tensor::<SAd, 2>::from_data(x.to_data(), &mesh), 0).expect("12 rows");
        let g = linear(x, w.clone(), Some(b.clone()))
            .tanh()
            .sum()
            .backward();
        (w.grad(&g).unwrap(), b.grad(&g).unwrap())
    };
    let (want_w, want_b) = grads(None);
    let scattering = EarlyBuckets::scattering(32, None);
    let (got_w, got_b) = grads(Some(&scattering));
    assert_eq!(scattering.close(), 2, "a reduce-scatter and a sum");
    let (blocks, counts) = stats::count(|| redistribute(got_w, Placement::Shard(0)));
    assert_eq!(placement(&blocks), Placement::Shard(0));
    assert_eq!(
        counts.total_redistributions(),
        0,
        "the blocks are there: {counts:?}"
    );
    crate::common::assert_close(blocks.into_data(), want_w.to_data(), 1e-6, "weight");
    crate::common::assert_close(got_b.into_data(), want_b.to_data(), 1e-6, "bias");
}
