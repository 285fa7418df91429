//! Elementwise ops and activations on narrow results: while a precision is armed, an op whose
//! float operands are all held in one narrow dtype runs in it and its result stays narrow (no
//! cast), with the values the inner backend gives for the same op on a bf16 tensor; an op that
//! mixes in an f32 operand widens, as type promotion does; f16 widens the ops that can leave
//! its range (exponentials, powers); a thread with nothing armed widens.

use crate::common::{lift, mesh, rand, Layout, Ref, S};
use burn::tensor::activation::{gelu, gelu_approximate, relu};
use burn::tensor::{FloatDType, Tensor, TensorData};
use firemesh_backend::stats::{count, Counts};
use firemesh_backend::Mesh;

/// The bytes each rank holds of `t`.
fn held(t: &Tensor<S, 2>) -> Vec<usize> {
    t.clone().into_primitive().tensor().bytes_per_rank()
}

/// `x · w` on `mesh` (x sharded by rows): a product's result, held in the armed precision.
fn product(mesh: &Mesh<crate::common::Dev>) -> Tensor<S, 2> {
    let x = lift::<S, 2>(&rand([8, 6], 1), mesh, Layout::Shard(0));
    let w = lift::<S, 2>(&rand([6, 4], 2), mesh, Layout::Replicated);
    x.matmul(w)
}

/// An MLP's activation and what follows it: GELU (tanh form, 8 elementwise ops in Burn),
/// exact GELU, ReLU, a residual add of two narrow tensors and a scale.
fn activations<B: burn::tensor::backend::Backend>(y: Tensor<B, 2>) -> Tensor<B, 2> {
    let a = gelu_approximate(y.clone());
    let b = gelu(y.clone()).mul_scalar(0.5);
    relu(a + b).neg().abs()
}

#[test]
fn elementwise_ops_on_narrow_results_stay_narrow() {
    let mesh = mesh(2);
    let armed = mesh.autocast(FloatDType::BF16);
    let y = product(&mesh);
    let (out, c): (Tensor<S, 2>, Counts) = count(|| activations(y.clone()));
    assert_eq!(
        held(&out),
        vec![4 * 4 * 2; 2],
        "held in bf16, 4 rows a rank"
    );
    assert_eq!((c.casts_down, c.casts_up, c.cast_bytes), (0, 0, 0), "{c:?}");
    // 8 ops of the tanh GELU, the exact GELU and its scale, the add, ReLU, neg, abs.
    assert_eq!(c.ops_kept_narrow, 14, "{c:?}");
    let got = out.into_data();
    drop(armed);
    // One device, the same ops on the product in bf16, then f32.
    let bf16 = FloatDType::BF16;
    let x = rand([8, 6], 1).cast(bf16);
    let w = rand([6, 4], 2).cast(bf16);
    let want = activations::<Ref>(x.matmul(w)).cast(FloatDType::F32);
    assert_eq!(got, want.into_data());
}

#[test]
fn an_f32_operand_widens_the_narrow_one() {
    let mesh = mesh(2);
    let _armed = mesh.autocast(FloatDType::BF16);
    let y = product(&mesh);
    let residual = lift::<S, 2>(&rand([8, 4], 3), &mesh, Layout::Shard(0));
    let (sum, c) = count(|| y.clone() + residual.clone());
    assert_eq!(held(&sum), vec![4 * 4 * 4; 2], "f32");
    assert_eq!((c.casts_up, c.ops_kept_narrow), (1, 0), "{c:?}");
    let want: Vec<f32> = y.into_data().iter::<f32>().collect();
    let plus: Vec<f32> = residual.into_data().iter::<f32>().collect();
    let want: Vec<f32> = want.iter().zip(&plus).map(|(a, b)| a + b).collect();
    assert_eq!(sum.into_data(), TensorData::new(want, [8, 4]));
}

#[test]
fn f16_widens_exponentials_and_powers() {
    let mesh = mesh(2);
    let _armed = mesh.autocast(FloatDType::F16);
    let y = product(&mesh);
    let (kept, c) = count(|| y.clone().tanh());
    assert_eq!((held(&kept), c.casts_up), (vec![4 * 4 * 2; 2], 0));
    for (op, out) in [
        (
            "exp",
            (|t: Tensor<S, 2>| t.exp()) as fn(Tensor<S, 2>) -> Tensor<S, 2>,
        ),
        ("powf", |t| t.powf_scalar(3.0)),
    ] {
        // A product of its own: a clone of `y` would take the widening made for the other op.
        let y = product(&mesh);
        let (wide, c) = count(|| out(y.clone()));
        assert_eq!(held(&wide), vec![4 * 4 * 4; 2], "{op}: f32");
        assert_eq!((c.casts_up, c.ops_kept_narrow), (1, 0), "{op}: {c:?}");
    }
}

#[test]
fn a_thread_with_nothing_armed_widens() {
    let mesh = mesh(2);
    let armed = mesh.autocast(FloatDType::BF16);
    let y = product(&mesh);
    drop(armed);
    let (out, c) = count(|| relu(y.clone()));
    assert_eq!(held(&out), vec![4 * 4 * 4; 2]);
    assert_eq!((c.casts_up, c.ops_kept_narrow), (1, 0), "{c:?}");
}

#[test]
fn a_narrow_result_is_widened_once_for_all_its_f32_readers() {
    let mesh = mesh(2);
    let _armed = mesh.autocast(FloatDType::BF16);
    let y = product(&mesh);
    let r = lift::<S, 2>(&rand([8, 4], 3), &mesh, Layout::Shard(0));
    let readers = |y: Tensor<S, 2>| (y.clone() + r.clone(), y.clone() * r.clone(), y.sum());
    let ((sum, product, total), c) = count(|| readers(y.clone()));
    assert_eq!((c.casts_up, c.casts_up_reused), (1, 2), "{c:?}");
    assert_eq!(c.cast_bytes, 8 * 4 * (2 + 4), "one widening: {c:?}");
    // The same values as each reader widening y on its own.
    let wide: Vec<f32> = y.into_data().iter::<f32>().collect();
    let r: Vec<f32> = r.into_data().iter::<f32>().collect();
    let each = |f: fn(f32, f32) -> f32| -> Vec<f32> {
        wide.iter().zip(&r).map(|(a, b)| f(*a, *b)).collect()
    };
    assert_eq!(sum.into_data(), TensorData::new(each(|a, b| a + b), [8, 4]));
    assert_eq!(
        product.into_data(),
        TensorData::new(each(|a, b| a * b), [8, 4])
    );
    let want: f32 = wide.iter().sum();
    let got = total.into_scalar();
    assert!(
        (got - want).abs() <= 1e-5 * want.abs().max(1.0),
        "{got} vs {want}"
    );
}

#[test]
fn a_view_widened_leaves_the_tensor_it_views_widened() {
    let mesh = mesh(2);
    let _armed = mesh.autocast(FloatDType::BF16);
    let y = product(&mesh);
    let r = lift::<S, 2>(&rand([8, 4], 3), &mesh, Layout::Shard(0));
    // A reshape then a permutation (not its own inverse) of the sharded product, read in f32,
    // then the product itself: the view's widening, moved back, serves the product.
    let readers = |y: Tensor<S, 2>| {
        let view = y.clone().reshape([2, 4, 4]).permute([2, 0, 1]);
        (view.sum_dim(2), y + r.clone())
    };
    let ((sums, sum), c) = count(|| readers(y.clone()));
    assert_eq!((c.casts_up, c.casts_up_reused), (1, 1), "{c:?}");
    assert_eq!(c.cast_bytes, 8 * 4 * (2 + 4), "one widening: {c:?}");
    let wide: Vec<f32> = y.into_data().iter::<f32>().collect();
    let r: Vec<f32> = r.into_data().iter::<f32>().collect();
    let added: Vec<f32> = wide.iter().zip(&r).map(|(a, b)| a + b).collect();
    assert_eq!(sum.into_data(), TensorData::new(added, [8, 4]));
    // view[k, i, j] = y[i * 4 + j, k] (y as [2, 4, 4] is y[i * 4 + j][k]).
    let mut want = vec![0.0f32; 4 * 2];
    for k in 0..4 {
        for i in 0..2 {
            want[k * 2 + i] = (0..4).map(|j| wide[(i * 4 + j) * 4 + k]).sum();
        }
    }
    let got: Vec<f32> = sums.into_data().iter::<f32>().collect();
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn batch_norm_widens_its_narrow_input_once() {
    use crate::common::SAd;
    use burn::nn::conv::Conv2dConfig;
    use burn::nn::BatchNormConfig;
    let mesh = mesh(2);
    let _armed = mesh.autocast(FloatDType::BF16);
    let x = lift::<SAd, 4>(&rand([4, 3, 8, 8], 1), &mesh, Layout::Shard(0));
    let conv = Conv2dConfig::new([3, 8], [3, 3]).init::<SAd>(&x.device());
    let norm = BatchNormConfig::new(8).init::<SAd>(&x.device());
    let y = conv.forward(x);
    assert_eq!(
        y.clone().inner().into_primitive().tensor().bytes_per_rank(),
        vec![2 * 8 * 6 * 6 * 2; 2],
        "bf16"
    );
    let (out, c) = count(|| norm.forward(y.clone()));
    // The mean reads a transposed view of the input, widened; the view's widening, moved
    // back, serves the variance and the output, which read the input itself.
    assert_eq!(
        (c.casts_up, c.casts_up_reused, c.casts_down),
        (1, 2, 0),
        "{c:?}"
    );
    // The same values as the same BatchNorm on the input widened on its own.
    let wide = Tensor::<Ref, 4>::from_data(y.into_data(), &Default::default());
    let wide = lift::<SAd, 4>(&wide, &mesh, Layout::Shard(0));
    let want = BatchNormConfig::new(8)
        .init::<SAd>(&wide.device())
        .forward(wide);
    out.into_data()
        .assert_approx_eq::<f32>(&want.into_data(), burn::tensor::Tolerance::absolute(1e-6));
}
