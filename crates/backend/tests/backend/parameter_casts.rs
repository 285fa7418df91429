//! A parameter is cast once per step: under autocast, a tensor marked as a parameter
//! (`ShardedTensor::mark_parameter`) is cast down once for all its clones while the precision
//! is armed, and the narrow copy ends with the arming (the step's scope). Other tensors are
//! cast at each product that reads them, but where one of the two latest casts was of a clone
//! of theirs (a gradient read by both products of a layer's backward pass).

use crate::common::{lift, mesh, rand, Layout, S};
use burn::tensor::{FloatDType, Tensor, TensorPrimitive};
use firemesh_backend::stats::{count, Counts};
use firemesh_backend::Mesh;

/// `w`, whole on every rank, marked as a parameter.
fn parameter(mesh: &Mesh<crate::common::Dev>) -> Tensor<S, 2> {
    let w = lift::<S, 2>(&rand([7, 5], 2), mesh, Layout::Replicated);
    let mut w = w.into_primitive().tensor();
    w.mark_parameter();
    Tensor::from_primitive(TensorPrimitive::Float(w))
}

/// Two products reading clones of `w` (as the forward and the backward pass read a weight),
/// inside one arming of bf16; the counts of the casts.
fn two_reads(x: &Tensor<S, 2>, w: &Tensor<S, 2>) -> Counts {
    let _armed = x.device().autocast(FloatDType::BF16);
    let (sum, counts) = count(|| {
        let a = x.clone().matmul(w.clone());
        let b = x.clone().matmul(w.clone());
        (a + b).into_data()
    });
    drop(sum);
    counts
}

#[test]
fn a_parameter_is_cast_once_per_arming_for_all_its_clones() {
    let mesh = mesh(3);
    let x = lift::<S, 2>(&rand([12, 7], 1), &mesh, Layout::Shard(0));
    let w = parameter(&mesh);
    let casts = |c: &Counts| {
        let reused = (c.casts_reused, c.activation_casts_reused);
        (c.casts_down, c.parameter_casts, reused)
    };
    // x and w once; w's second read reuses the parameter's cast, x's the latest casts'.
    let c = two_reads(&x, &w);
    assert_eq!(casts(&c), (2, 1, (1, 1)), "{c:?}");
    // The arming ended, and with it the copies (the parameter's slot no longer reaches its
    // copy): the next arming casts both again, once.
    let c = two_reads(&x, &w);
    assert_eq!(casts(&c), (2, 1, (1, 1)), "{c:?}");
}

#[test]
fn a_tensor_not_marked_is_cast_again_once_two_other_casts_came_between() {
    let mesh = mesh(2);
    let x = lift::<S, 2>(&rand([12, 7], 1), &mesh, Layout::Shard(0));
    // Whole on every rank, as an activation of a batch that is not sharded is.
    let w = lift::<S, 2>(&rand([7, 5], 2), &mesh, Layout::Replicated);
    let c = two_reads(&x, &w);
    let casts = |c: &Counts| (c.casts_down, c.parameter_casts, c.activation_casts_reused);
    assert_eq!(casts(&c), (2, 0, 2), "{c:?}");
    // x · w, then a product of two other tensors, then x · w again: x's and w's casts are no
    // longer among the two latest, so each is cast again.
    let u = lift::<S, 2>(&rand([12, 7], 3), &mesh, Layout::Shard(0));
    let v = lift::<S, 2>(&rand([7, 5], 4), &mesh, Layout::Replicated);
    let _armed = mesh.autocast(FloatDType::BF16);
    let (_, c) = count(|| {
        let a = x.clone().matmul(w.clone());
        let b = u.clone().matmul(v.clone());
        let c = x.clone().matmul(w.clone());
        (a + b + c).into_data()
    });
    assert_eq!(casts(&c), (6, 0, 0), "{c:?}");
    // The latest casts are x's and w's. A tensor never cloned (nothing else can read it) is
    // not kept: the casts of the product between leave them there.
    let fresh = |shape: [usize; 2], seed, layout| lift::<S, 2>(&rand(shape, seed), &mesh, layout);
    let (_, c) = count(|| {
        let a = x.clone().matmul(w.clone());
        let b = fresh([12, 7], 5, Layout::Shard(0)).matmul(fresh([7, 5], 6, Layout::Replicated));
        let c = x.clone().matmul(w.clone());
        (a + b + c).into_data()
    });
    assert_eq!(casts(&c), (2, 0, 4), "{c:?}");
}

#[test]
fn the_shared_cast_gives_the_same_products() {
    let mesh = mesh(2);
    let x = lift::<S, 2>(&rand([12, 7], 1), &mesh, Layout::Shard(0));
    let plain = lift::<S, 2>(&rand([7, 5], 2), &mesh, Layout::Replicated);
    let marked = parameter(&mesh);
    let _armed = mesh.autocast(FloatDType::BF16);
    let want = x.clone().matmul(plain).into_data();
    let first = x.clone().matmul(marked.clone()).into_data();
    let reused = x.matmul(marked).into_data();
    assert_eq!(first, want);
    assert_eq!(reused, want);
}

#[test]
fn a_view_of_a_parameter_takes_its_cast_from_the_parameters() {
    let mesh = mesh(2);
    let x = lift::<S, 2>(&rand([12, 5], 1), &mesh, Layout::Shard(0));
    let y = lift::<S, 2>(&rand([12, 7], 3), &mesh, Layout::Shard(0));
    let plain = lift::<S, 2>(&rand([7, 5], 2), &mesh, Layout::Replicated);
    let want = {
        let _armed = mesh.autocast(FloatDType::BF16);
        let a = x.clone().matmul(plain.clone().transpose());
        (a.into_data(), y.clone().matmul(plain).into_data())
    };
    // A tied output head: the forward pass reads the weight's transpose, the backward pass the
    // transpose of that.
    let head = parameter(&mesh).transpose();
    let _armed = mesh.autocast(FloatDType::BF16);
    let ((a, b), c) = count(|| {
        let a = x.matmul(head.clone());
        let b = y.matmul(head.transpose());
        (a.into_data(), b.into_data())
    });
    assert_eq!((a, b), want);
    assert_eq!((c.parameter_casts, c.casts_reused), (1, 1), "{c:?}");
}

/// One arming kept over many steps (a loop of one's own around `Mesh::autocast`): each step's
/// parameters are new tensors, and the copies of the last step's go once their tensors do.
#[test]
fn an_arming_kept_over_steps_keeps_the_live_parameters_copies_only() {
    let mesh = mesh(2);
    let x = lift::<S, 2>(&rand([12, 7], 1), &mesh, Layout::Shard(0));
    let armed = mesh.autocast(FloatDType::BF16);
    let mut w = parameter(&mesh);
    for step in 0..4 {
        let y = x.clone().matmul(w.clone());
        assert_eq!(armed.copies_kept(), 1, "step {step}");
        // The update: a new tensor, marked again; the old one (and its copy) goes.
        let updated = w.clone().sub(y.sum().mul_scalar(1e-3).unsqueeze());
        let mut t = updated.into_primitive().tensor();
        t.mark_parameter();
        w = Tensor::from_primitive(TensorPrimitive::Float(t));
    }
    drop(w);
    assert_eq!(armed.copies_kept(), 0);
}
