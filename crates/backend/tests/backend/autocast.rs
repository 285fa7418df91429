//! Autocast: while a thread has a precision armed on a mesh, its matrix products, linear
//! layers and convolutions (and their backward ops) run in that precision on every rank and
//! give f32 back; everything else, and every other thread, stays f32.

use crate::common::{assert_close, lift, mesh, rand, Layout, Ref, RefAd, SAd, CPU};
use burn::tensor::module::{conv2d, linear};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{DType, FloatDType, Tensor, TensorData};
use firemesh_backend::{shard, Mesh};

/// The largest relative difference between two tensors' values.
fn rel_difference(a: &TensorData, b: &TensorData) -> f32 {
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-12);
    a.iter()
        .zip(&b)
        .fold(0f32, |m, (x, y)| m.max((x - y).abs() / scale))
}

/// `x · w` on the mesh (x sharded by rows), its value and the gradients of `x` and `w`.
fn product_on(mesh: &Mesh<crate::common::Dev>) -> [TensorData; 3] {
    let (x, w) = (rand([12, 7], 1), rand([7, 5], 2));
    let x = lift::<SAd, 2>(&x, mesh, Layout::Shard(0)).require_grad();
    let w = lift::<SAd, 2>(&w, mesh, Layout::Replicated).require_grad();
    let y = x.clone().matmul(w.clone());
    let f32 = DType::F32;
    assert_eq!(y.dtype(), f32, "autodiff sees f32 results");
    let grads = y.clone().tanh().sum().backward();
    let (gx, gw) = (x.grad(&grads).unwrap(), w.grad(&grads).unwrap());
    assert_eq!((gx.dtype(), gw.dtype()), (f32, f32), "and f32 gradients");
    [y.into_data(), gx.into_data(), gw.into_data()]
}

/// The same on one device, with the casts written out around the product.
fn product_cast_by_hand(low: FloatDType) -> [TensorData; 3] {
    let x = Tensor::<RefAd, 2>::from_data(rand([12, 7], 1).into_data(), &CPU).require_grad();
    let w = Tensor::<RefAd, 2>::from_data(rand([7, 5], 2).into_data(), &CPU).require_grad();
    let y = x.clone().cast(low).matmul(w.clone().cast(low));
    // tanh of a narrow result runs narrow (`autocast/narrow.rs`).
    let grads = y.clone().tanh().cast(FloatDType::F32).sum().backward();
    let y = y.cast(FloatDType::F32);
    [
        y.into_data(),
        x.grad(&grads).unwrap().into_data(),
        w.grad(&grads).unwrap().into_data(),
    ]
}

#[test]
fn products_and_their_gradients_run_in_the_armed_precision() {
    let mesh = mesh(3);
    let f32_run = product_on(&mesh);
    for low in [FloatDType::BF16, FloatDType::F16] {
        let armed = mesh.autocast(low);
        assert_eq!(mesh.autocast_precision(), Some(low));
        let got = product_on(&mesh);
        drop(armed);
        let want = product_cast_by_hand(low);
        // The product and x's gradient are each rank's rows: as on one device. w's gradient
        // sums the ranks' low-precision products (each rounded once) in f32, where one device
        // rounds one product: a few units of the low precision's last place apart.
        let last_place = if low == FloatDType::BF16 { 2e-2 } else { 3e-3 };
        for (i, what) in ["product", "x's gradient", "w's gradient"]
            .iter()
            .enumerate()
        {
            // In f16, tanh's backward squares in f32 (powers leave f16's range, so they
            // widen), where by hand it squares in f16: x's gradient a few last places apart.
            let f16_square = i == 1 && low == FloatDType::F16;
            let tolerance = if i == 2 || f16_square {
                last_place
            } else {
                1e-6
            };
            assert_close(
                got[i].clone(),
                want[i].clone(),
                tolerance,
                &format!("{low:?} {what}"),
            );
            // bf16 keeps 8 significant bits, f16 11: far from f32's 24.
            let off = rel_difference(&got[i], &f32_run[i]);
            assert!(
                off > 1e-5,
                "{low:?} {what}: only {off} from f32, was it cast?"
            );
            assert!(off < 5e-2, "{low:?} {what}: {off} from f32");
        }
    }
    assert_eq!(mesh.autocast_precision(), None, "disarmed on drop");
    let again = product_on(&mesh);
    assert_eq!(again[0], f32_run[0], "f32 again once disarmed");
}

/// On one rank the casts by hand give the same gradients; on two, the ranks' low-precision
/// parameter gradients are summed in f32 (a few bf16 last places from one rounding).
#[test]
fn linear_and_convolution_autocast_forward_and_backward() {
    for (ranks, tolerance) in [(1, 1e-6), (2, 3e-2)] {
        linear_and_convolution_on(ranks, tolerance);
    }
}

fn linear_and_convolution_on(ranks: usize, tolerance: f64) {
    let mesh = mesh(ranks);
    let low = FloatDType::BF16;
    let (x, w, b) = (rand([6, 8], 3), rand([8, 4], 4), rand([4], 5));
    let (img, k) = (rand([4, 2, 5, 5], 6), rand([3, 2, 3, 3], 7));
    let options = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    let run_sharded = |armed: bool| {
        let _autocast = armed.then(|| mesh.autocast(low));
        let xs = shard(Tensor::<SAd, 2>::from_data(x.to_data(), &mesh), 0).unwrap();
        let ws = Tensor::<SAd, 2>::from_data(w.to_data(), &mesh).require_grad();
        let bs = Tensor::<SAd, 1>::from_data(b.to_data(), &mesh).require_grad();
        let imgs = shard(Tensor::<SAd, 4>::from_data(img.to_data(), &mesh), 0).unwrap();
        let ks = Tensor::<SAd, 4>::from_data(k.to_data(), &mesh).require_grad();
        let y = linear(xs, ws.clone(), Some(bs.clone()));
        let z = conv2d(imgs, ks.clone(), None, options.clone());
        let loss = y.tanh().sum() + z.tanh().sum();
        let grads = loss.backward();
        [
            ws.grad(&grads).unwrap().into_data(),
            bs.grad(&grads).unwrap().into_data(),
            ks.grad(&grads).unwrap().into_data(),
        ]
    };
    let by_hand = {
        let xr = Tensor::<RefAd, 2>::from_data(x.to_data(), &CPU);
        let wr = Tensor::<RefAd, 2>::from_data(w.to_data(), &CPU).require_grad();
        let br = Tensor::<RefAd, 1>::from_data(b.to_data(), &CPU).require_grad();
        let imgr = Tensor::<RefAd, 4>::from_data(img.to_data(), &CPU);
        let kr = Tensor::<RefAd, 4>::from_data(k.to_data(), &CPU).require_grad();
        let y = linear(
            xr.cast(low),
            wr.clone().cast(low),
            Some(br.clone().cast(low)),
        );
        let z = conv2d(imgr.cast(low), kr.clone().cast(low), None, options.clone());
        let loss = y.tanh().cast(FloatDType::F32).sum() + z.tanh().cast(FloatDType::F32).sum();
        let grads = loss.backward();
        [
            wr.grad(&grads).unwrap().into_data(),
            br.grad(&grads).unwrap().into_data(),
            kr.grad(&grads).unwrap().into_data(),
        ]
    };
    let (got, f32_run) = (run_sharded(true), run_sharded(false));
    for (i, what) in ["linear weight", "linear bias", "kernel"]
        .iter()
        .enumerate()
    {
        assert_eq!(got[i].dtype, DType::F32, "{what}: an f32 gradient");
        // The bias gradient is a sum, which autocast leaves in f32; by hand, Burn sums the bf16
        // gradient in bf16.
        let tolerance = if i == 1 { 1e-2 } else { tolerance };
        assert_close(
            got[i].clone(),
            by_hand[i].clone(),
            tolerance,
            &format!("{ranks} rank(s): {what}"),
        );
        let off = rel_difference(&got[i], &f32_run[i]);
        assert!(off > 1e-5, "{what}: only {off} from f32, was it cast?");
    }
}

#[test]
fn another_thread_on_the_same_mesh_stays_f32() {
    let mesh = mesh(2);
    let before = product_on(&mesh);
    let _armed = mesh.autocast(FloatDType::BF16);
    let elsewhere = std::thread::scope(|s| s.spawn(|| product_on(&mesh)).join().unwrap());
    assert_eq!(elsewhere[0], before[0], "the other thread armed nothing");
    assert_ne!(product_on(&mesh)[0], before[0], "this thread did");
    {
        let _nested = mesh.autocast(FloatDType::F32);
        assert_eq!(
            product_on(&mesh)[0],
            before[0],
            "f32 armed inside casts nothing"
        );
    }
    assert_eq!(
        mesh.autocast_precision(),
        Some(FloatDType::BF16),
        "restored"
    );
}

/// Casts keep placements: a weight gradient made in bf16 from a sharded batch stays `Partial`
/// (summed later, in its bucket), and the gradient flowing back is cast addend by addend. An
/// autocast backward pass sums across ranks exactly as often as an f32 one.
#[test]
fn autocast_sums_no_more_than_f32() {
    use firemesh_backend::{placement, stats, Placement};
    let mesh = mesh(3);
    let (x, w) = (rand([9, 4], 8), rand([4, 6], 9));
    let run = |armed: bool| {
        let _autocast = armed.then(|| mesh.autocast(FloatDType::BF16));
        stats::count(|| {
            let xs = shard(Tensor::<SAd, 2>::from_data(x.to_data(), &mesh), 0).unwrap();
            let ws = Tensor::<SAd, 2>::from_data(w.to_data(), &mesh).require_grad();
            let hidden = linear(xs, ws.clone(), None).tanh();
            let out = hidden.clone().matmul(hidden.transpose());
            let grads = out.sum().backward();
            placement(&ws.grad(&grads).unwrap())
        })
    };
    let ((full, f32_counts), (low, bf16_counts)) = (run(false), run(true));
    assert_eq!((full, low), (Placement::Partial, Placement::Partial));
    let sums = |c: &stats::Counts| c.routes.values().sum::<u64>();
    assert_eq!(sums(&bf16_counts), sums(&f32_counts), "{bf16_counts:?}");
}

/// The bytes each rank holds of `t`.
fn held<const D: usize>(t: &Tensor<SAd, D>) -> Vec<usize> {
    t.clone()
        .into_primitive()
        .tensor()
        .primitive
        .bytes_per_rank()
}

/// A product's result is kept in the low precision, which holds it exactly, and presents
/// itself as f32: half the bytes of f32 on every rank (also after layout ops, and in what
/// autodiff saves for the backward pass), the same values and gradients as casting it back to
/// f32 at once, and widened (full bytes) by the ops that compute in f32.
#[test]
fn product_results_are_held_narrow_exactly() {
    let mesh = mesh(2);
    let (x, w, v) = (rand([8, 6], 10), rand([6, 4], 11), rand([4, 4], 12));
    for low in [FloatDType::BF16, FloatDType::F16] {
        let armed = mesh.autocast(low);
        let xs = lift::<SAd, 2>(&x, &mesh, Layout::Shard(0)).require_grad();
        let ws = lift::<SAd, 2>(&w, &mesh, Layout::Replicated).require_grad();
        let vs = lift::<SAd, 2>(&v, &mesh, Layout::Replicated);
        let y = linear(xs.clone(), ws.clone(), None);
        assert_eq!(y.dtype(), DType::F32, "{low:?}: presented as f32");
        let narrow = 2;
        assert_eq!(held(&y), vec![4 * 4 * narrow; 2], "{low:?}: 4 rows a rank");
        let moved = y.clone().reshape([8, 2, 2]).swap_dims(1, 2).reshape([8, 4]);
        assert_eq!(held(&moved), held(&y), "{low:?}: layout ops keep it narrow");
        let kept = y.clone().tanh();
        assert_eq!(held(&kept), held(&y), "{low:?}: tanh of it stays narrow");
        let computed = y.clone().sin();
        assert_eq!(held(&computed), vec![4 * 4 * 4; 2], "{low:?}: sin is f32");
        // A product taking it (a GELU's input kept for backward, then the next layer).
        let out = burn::tensor::activation::gelu(moved.clone()).matmul(vs.clone())
            + moved.matmul(vs.clone()).tanh();
        let grads = out.clone().sum().backward();
        let got = [
            y.into_data(),
            out.into_data(),
            xs.grad(&grads).unwrap().into_data(),
            ws.grad(&grads).unwrap().into_data(),
        ];
        drop(armed);
        // By hand: every product's operands cast, the elementwise ops on its results in the
        // low precision, the output cast back to f32.
        let f32 = FloatDType::F32;
        let xr = Tensor::<RefAd, 2>::from_data(x.to_data(), &CPU).require_grad();
        let wr = Tensor::<RefAd, 2>::from_data(w.to_data(), &CPU).require_grad();
        let vr = Tensor::<RefAd, 2>::from_data(v.to_data(), &CPU);
        let product = |a: Tensor<RefAd, 2>, b: Tensor<RefAd, 2>| a.cast(low).matmul(b.cast(low));
        let yr = product(xr.clone(), wr.clone());
        let movedr = yr
            .clone()
            .reshape([8, 2, 2])
            .swap_dims(1, 2)
            .reshape([8, 4]);
        let outr = product(burn::tensor::activation::gelu(movedr.clone()), vr.clone())
            + product(movedr, vr).tanh();
        let outr = outr.cast(f32);
        let grads = outr.clone().sum().backward();
        let want = [
            yr.cast(f32).into_data(),
            outr.into_data(),
            xr.grad(&grads).unwrap().into_data(),
            wr.grad(&grads).unwrap().into_data(),
        ];
        for (i, what) in ["product", "output", "x's gradient", "w's gradient"]
            .iter()
            .enumerate()
        {
            assert_eq!(got[i].dtype, DType::F32, "{low:?} {what}: f32 data");
            // w's gradient sums the two ranks' low-precision partial products in f32.
            let tolerance = if i == 3 { 3e-2 } else { 1e-6 };
            assert_close(
                got[i].clone(),
                want[i].clone(),
                tolerance,
                &format!("{low:?} {what}"),
            );
        }
    }
}

/// Layout ops that must move a held-narrow result between ranks (a reshape across the blocks
/// of a sharded dim, a slice over rank boundaries) move it in the low precision on rank
/// threads, with an empty block on the last rank too, and give the values of casting back to
/// f32 at once.
#[test]
fn held_narrow_results_move_between_ranks_exactly() {
    let mesh = mesh(3);
    assert!(mesh.parallel(), "rank threads");
    let (x, w) = (rand([8, 5], 13), rand([5, 9], 14));
    for layout in [Layout::Shard(0), Layout::ShardEmptyLast(0)] {
        let armed = mesh.autocast(FloatDType::F16);
        let xs = lift::<SAd, 2>(&x, &mesh, layout);
        let ws = lift::<SAd, 2>(&w, &mesh, Layout::Replicated);
        let y = xs.matmul(ws);
        let reshaped = y.clone().reshape([9, 8]);
        let sliced = y.clone().slice([2..7, 1..4]);
        for (what, t, elements) in [("reshaped", &reshaped, 72), ("sliced", &sliced, 15)] {
            let bytes: usize = held(t).iter().sum();
            assert!(
                bytes <= 3 * elements * 2,
                "{layout:?} {what}: {bytes} bytes on 3 ranks, more than f16's copies"
            );
        }
        let got = [reshaped.into_data(), sliced.into_data()];
        drop(armed);
        let product = Tensor::<Ref, 2>::from_data(x.to_data(), &CPU)
            .cast(FloatDType::F16)
            .matmul(Tensor::<Ref, 2>::from_data(w.to_data(), &CPU).cast(FloatDType::F16))
            .cast(FloatDType::F32);
        let want = [
            product.clone().reshape([9, 8]).into_data(),
            product.slice([2..7, 1..4]).into_data(),
        ];
        // Each rank's rows of the product, as on one device.
        for (g, w) in got.into_iter().zip(want) {
            assert_close(g, w, 1e-6, &format!("{layout:?}"));
        }
    }
}

/// Meshes of different device types share registry indices (each type's default mesh is 0): a
/// precision armed on one is not armed on the other.
#[test]
fn a_precision_armed_on_one_device_type_stays_off_another() {
    let flex = Mesh::<burn::backend::flex::FlexDevice>::default();
    let wgpu = Mesh::<burn_wgpu::WgpuDevice>::default();
    let _armed = flex.autocast(FloatDType::BF16);
    assert_eq!(flex.autocast_precision(), Some(FloatDType::BF16));
    assert_eq!(wgpu.autocast_precision(), None, "the other type's mesh 0");
}
