//! ZeRO-3's gathers ahead of use (`ParameterGathers`): a step gathers its sharded parameters
//! in the order the step before did, the next ones issued ahead on the communication thread;
//! the products are the ones of gathers made at use, bit for bit, in f32 and bf16, through a
//! transpose of a parameter, and in f32 those of replicated parameters; a step that reads its
//! parameters in another order gathers them at use, with the same results.

use crate::common::{lift, mesh, rand, Dev, Layout, S};
use burn::tensor::{FloatDType, Tensor, TensorData, TensorPrimitive};
use firemesh_backend::stats::count;
use firemesh_backend::{Mesh, ParameterGathers, StepScope};

/// A parameter at place `index` of its model, stored `Shard(0)` over the ranks (`Replicated`
/// where `whole`).
fn parameter(shape: [usize; 2], seed: u64, index: u64, mesh: &Mesh<Dev>) -> Tensor<S, 2> {
    let layout = match index >= WHOLE {
        true => Layout::Replicated,
        false => Layout::Shard(0),
    };
    let w = lift::<S, 2>(&rand(shape, seed), mesh, layout);
    let mut w = w.into_primitive().tensor();
    w.mark_parameter_at(index);
    Tensor::from_primitive(TensorPrimitive::Float(w))
}

/// Places from this one up mark parameters stored whole (the replicated reference).
const WHOLE: u64 = 100;

/// One step: `w1` ([7, 5]) and `w2` ([3, 5], read through its transpose) marked inside the
/// step's scope at places `first` and `first + 1`, and read in `order` (true: `w1` first). The
/// results and the gathers taken from ahead.
fn step(
    scope: &StepScope,
    gathers: &ParameterGathers,
    w1_first: bool,
    first: u64,
) -> (Vec<TensorData>, u64) {
    let mesh = mesh(3);
    let x = lift::<S, 2>(&rand([12, 7], 1), &mesh, Layout::Shard(0));
    let y = lift::<S, 2>(&rand([12, 5], 2), &mesh, Layout::Shard(0));
    let entered = scope.enter();
    let w1 = parameter([7, 5], 3, first, &mesh);
    let w2 = parameter([3, 5], 4, first + 1, &mesh);
    let (out, counts) = count(|| {
        let first = |x: &Tensor<S, 2>| x.clone().matmul(w1.clone());
        let second = |y: &Tensor<S, 2>| y.clone().matmul(w2.clone().transpose());
        let (a, b) = match w1_first {
            true => {
                let a = first(&x);
                (a, second(&y))
            }
            false => {
                let b = second(&y);
                (first(&x), b)
            }
        };
        vec![a.into_data(), b.into_data()]
    });
    drop(entered);
    gathers.close();
    let gathered = if first >= WHOLE { 0 } else { 2 };
    assert_eq!(counts.parameter_gathers, gathered);
    (out, counts.parameter_gathers_ahead)
}

#[test]
fn parameters_are_gathered_ahead_in_the_last_steps_order() {
    for precision in [None, Some(FloatDType::BF16)] {
        let scope_with = |gathers: &ParameterGathers| {
            let mut scope = StepScope::new(&mesh(3));
            scope.set_autocast(precision);
            scope.set_parameter_gathers(Some(gathers.clone()));
            scope
        };
        let (ahead, at_use) = (ParameterGathers::new(1 << 20), ParameterGathers::new(0));
        let (scope, plain) = (scope_with(&ahead), scope_with(&at_use));
        // (w1 first, gathers taken from ahead): the first step has no order to follow; the
        // second takes w2 from ahead; reading w2 first breaks the order (both at use); the
        // next step in that order takes w1 from ahead.
        for (i, (w1_first, taken)) in [(true, 0), (true, 1), (false, 0), (false, 1)]
            .into_iter()
            .enumerate()
        {
            let (got, k) = step(&scope, &ahead, w1_first, 0);
            let (want, none) = step(&plain, &at_use, w1_first, 0);
            assert_eq!((k, none), (taken, 0), "{precision:?} step {i}");
            assert_eq!(
                got, want,
                "{precision:?} step {i}: gathered ahead or at use"
            );
            if precision.is_none() {
                // The replicated parameters' products, bit for bit.
                let (whole, _) = step(&plain, &at_use, w1_first, WHOLE);
                assert_eq!(got, whole, "step {i}: against replicated parameters");
            }
        }
    }
}

/// Two models' parameters at the same place (both marked from 0), read in one step: each op
/// gets its own parameter, gathered ahead or at use, as replicated parameters give.
#[test]
fn parameters_of_two_models_at_the_same_place_stay_apart() {
    let mesh = mesh(3);
    let x = lift::<S, 2>(&rand([12, 7], 1), &mesh, Layout::Shard(0));
    let whole = |seed| lift::<S, 2>(&rand([7, 5], seed), &mesh, Layout::Replicated);
    let want: Vec<TensorData> = [3, 5]
        .map(|seed| x.clone().matmul(whole(seed)).into_data())
        .into();
    for ahead in [0, 1 << 20] {
        let gathers = ParameterGathers::new(ahead);
        let mut scope = StepScope::new(&mesh);
        scope.set_parameter_gathers(Some(gathers.clone()));
        for step in 0..3 {
            let entered = scope.enter();
            gathers.begin();
            let (a, b) = (
                parameter([7, 5], 3, 0, &mesh),
                parameter([7, 5], 5, 0, &mesh),
            );
            let got: Vec<TensorData> = [a, b].map(|w| x.clone().matmul(w).into_data()).into();
            drop(entered);
            gathers.close();
            assert_eq!(got, want, "ahead {ahead} step {step}");
        }
    }
}
