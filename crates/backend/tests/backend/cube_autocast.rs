//! Autocast on CubeCL devices (wgpu over lavapipe here, CUDA where a GPU is): products that sum
//! over a long axis add in f32 under f16 and bf16, convolutions (whose direct kernels add in the
//! element type) included.
//!
//! The bound of each comparison with f32: every addend here is non-negative, so the sum's
//! relative error is at most the largest relative error of one addend plus that of adding
//! them. Each operand rounded to the low precision is within u of its value (f16: u = 2^-11,
//! bf16: 2^-8; a product of two: 2u), the result rounded adds u more, and adding n terms in
//! f32 adds at most (n - 1) · 2^-24. So 3u + n · 2^-24: 5.4e-3 for 65,536 products in f16,
//! against the 94% that f16 sums lose (they stop growing at 2048, where f16's spacing passes
//! the addends).

use crate::common::rand;
use burn::tensor::backend::Backend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{DType, FloatDType, Tensor, TensorData};
use burn_wgpu::Wgpu;
use firemesh_backend::{shard, stats, ImplicitGemmConvs, Mesh, Sharded};

type Cuda = burn_cubecl::CubeBackend<cubecl::cuda::CudaRuntime, f32, i32, u8>;

/// The bound for sums of `n` non-negative products in `low` (module docs).
fn bound(low: FloatDType, n: usize) -> f64 {
    let u = match low {
        FloatDType::BF16 => 2f64.powi(-8),
        _ => 2f64.powi(-11),
    };
    3.0 * u + n as f64 * 2f64.powi(-24)
}

/// A wgpu mesh of `n` lavapipe clients that compute in f16, or `None` (said why).
fn wgpu_f16_mesh(n: usize) -> Option<Mesh<burn_wgpu::WgpuDevice>> {
    let mesh = Sharded::<Wgpu>::mesh(crate::wgpu::devices(n)?).expect("lavapipe clients");
    if !mesh
        .devices()
        .iter()
        .all(|d| <Wgpu as Backend>::supports_dtype(d, DType::F16))
    {
        let required = std::env::var("FIREMESH_REQUIRE_WGPU").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "FIREMESH_REQUIRE_WGPU=1 but the adapter has no f16"
        );
        eprintln!("SKIPPED: the wgpu adapter has no f16");
        return None;
    }
    Some(mesh)
}

/// A CUDA mesh of `n` ranks over the GPUs present (round-robin), or `None` (said why;
/// `FIREMESH_REQUIRE_CUDA=1` fails instead).
fn cuda_mesh(n: usize) -> Option<Mesh<cubecl::cuda::CudaDevice>> {
    let devices = firemesh_collective::probe::round_robin(&crate::common::cuda_gpus()?, n);
    Some(Sharded::<Cuda>::mesh(devices).expect("CUDA devices"))
}

/// Uniform values in [0, 1) of `shape`.
fn unit<const D: usize>(shape: [usize; D], seed: u64) -> TensorData {
    let data = rand(shape, seed).into_data().to_vec::<f32>().unwrap();
    let v: Vec<f32> = data.iter().map(|x| (x + 1.0) / 2.0).collect();
    TensorData::new(v, shape)
}

/// The largest difference between `got` and `want`, relative to `want`'s largest magnitude.
fn off(got: &TensorData, want: &TensorData) -> f64 {
    let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    let scale = w.iter().fold(0f32, |m, x| m.max(x.abs())) as f64;
    let worst = g
        .iter()
        .zip(&w)
        .fold(0f64, |m, (a, b)| m.max((a - b).abs() as f64));
    worst / scale
}

/// `conv2d(x, w)` summed, on `mesh` (x's batch sharded over its ranks) with `low` armed: the
/// output, x's gradient, w's gradient, and what the mesh counted.
fn conv<B: Backend>(
    mesh: &Mesh<B::Device>,
    x: &TensorData,
    w: &TensorData,
    padding: usize,
    stride: usize,
    low: Option<FloatDType>,
) -> ([TensorData; 3], stats::Counts) {
    type Ad<B> = burn::backend::Autodiff<Sharded<B>>;
    let armed = low.map(|low| mesh.autocast(low));
    let (out, counts) = stats::count(|| {
        let x = Tensor::<Ad<B>, 4>::from_data(x.clone(), mesh);
        let x = shard(x, 0).unwrap().require_grad();
        let w = Tensor::<Ad<B>, 4>::from_data(w.clone(), mesh).require_grad();
        let options = ConvOptions::new([stride, stride], [padding, padding], [1, 1], 1);
        let y = conv2d(x.clone(), w.clone(), None, options);
        let grads = y.clone().sum().backward();
        [
            y.into_data(),
            x.grad(&grads).unwrap().into_data(),
            w.grad(&grads).unwrap().into_data(),
        ]
    });
    drop(armed);
    (out, counts)
}

const OPS: [&str; 3] = ["conv2d", "conv2d_x_backward", "conv2d_weight_backward"];

/// Runs each of a convolution's three products over a long axis, in `low` against f32 on
/// `mesh`, and checks the bound; returns how far each low-precision run was from f32 and what
/// it counted. The cases: the weight gradient over a batch of 64 images of 32 × 32 (65,536
/// products per element: f16 sums gave 2048 for 30,744.9 with one channel), the forward pass
/// over 1,024 input channels and the input gradient over 1,024 output channels (9,216 products
/// each). 16 channels on the other side, a size tensor-core tiles take. A batch of one is not
/// sharded over several ranks.
fn long_sums<B: Backend>(mesh: &Mesh<B::Device>, low: FloatDType) -> Vec<(f64, stats::Counts)> {
    let cases = [
        // (what, x, w, padding, the product checked, products per element)
        (
            "weight gradient",
            [64, 16, 32, 32],
            [16, 16, 3, 3],
            1,
            2,
            65_536,
        ),
        ("forward", [1, 1024, 6, 6], [16, 1024, 3, 3], 0, 0, 9_216),
        (
            "input gradient",
            [1, 16, 6, 6],
            [1024, 16, 3, 3],
            0,
            1,
            9_216,
        ),
    ];
    let mut counted = Vec::new();
    for (what, xs, ws, padding, checked, n) in cases {
        if mesh.len() > 1 && xs[0] == 1 {
            continue;
        }
        let (x, w) = (unit(xs, 1), unit(ws, 2));
        let (want, _) = conv::<B>(mesh, &x, &w, padding, 1, None);
        let (got, counts) = conv::<B>(mesh, &x, &w, padding, 1, Some(low));
        let (off, bound) = (off(&got[checked], &want[checked]), bound(low, n));
        let ranks = mesh.len();
        println!("{ranks} rank(s), {what}: {low:?} {off:.2e} from f32 (bound {bound:.2e})");
        assert!(
            off <= bound,
            "{ranks} rank(s), {what}: {low:?} is {off:.3e} from f32, over {bound:.3e}"
        );
        counted.push((off, counts));
    }
    counted
}

/// Kernels registered on `mesh` (shared by every test on its devices) until this drops; the
/// tests that register hold the lock of [`crate::common::serial`] meanwhile.
struct Registered<'a, B: Backend>(&'a Mesh<B::Device>);

impl<B: Backend> Drop for Registered<'_, B> {
    fn drop(&mut self) {
        self.0.drop_narrow_convs::<B>();
    }
}

/// With no convolution kernels registered, the three ran in f32, on their f32 operands: the
/// f32 results exactly.
#[test]
fn wgpu_convolutions_run_in_f32_under_f16() {
    let _serial = crate::common::serial();
    for ranks in [1, 2] {
        let Some(mesh) = wgpu_f16_mesh(ranks) else {
            return;
        };
        for (off, counts) in long_sums::<Wgpu>(&mesh, FloatDType::F16) {
            assert_eq!(off, 0.0, "run in f32 on the f32 operands");
            for op in OPS {
                assert_eq!(counts.products_in_f32.get(op), Some(&1), "{op}: {counts:?}");
            }
        }
    }
}

/// With CubeCL's implicit-GEMM kernels registered on a lavapipe mesh, each declines (WGSL has
/// no tensor cores): the op runs in f32 on its operands rounded to f16 and widened, its result
/// rounded to f16, and it is counted.
#[test]
fn implicit_gemm_kernels_decline_on_wgpu_and_the_ops_add_in_f32() {
    let _serial = crate::common::serial();
    let Some(mesh) = wgpu_f16_mesh(1) else { return };
    mesh.use_narrow_convs::<Wgpu>(ImplicitGemmConvs);
    let _registered = Registered::<Wgpu>(&mesh);
    for (off, counts) in long_sums::<Wgpu>(&mesh, FloatDType::F16) {
        assert!(off > 0.0, "the operands were rounded to f16");
        for op in OPS {
            assert_eq!(counts.products_in_f32.get(op), Some(&1), "{op}: {counts:?}");
        }
    }
    // The input gradient of a strided convolution is not one the kernels take
    // (`NarrowConvs::takes`): it runs in f32 on its f32 operands, uncast, and is counted.
    let (x, w) = (unit([2, 16, 8, 8], 5), unit([16, 16, 3, 3], 6));
    let (want, _) = conv::<Wgpu>(&mesh, &x, &w, 1, 2, None);
    let (got, counts) = conv::<Wgpu>(&mesh, &x, &w, 1, 2, Some(FloatDType::F16));
    assert_eq!(
        off(&got[1], &want[1]),
        0.0,
        "the strided input gradient ran in f32"
    );
    for op in OPS {
        assert_eq!(counts.products_in_f32.get(op), Some(&1), "{op}: {counts:?}");
    }
}

/// CubeCL's matrix products add in f32 under f16 on their own: 65,536 products per element.
#[test]
fn wgpu_matrix_products_add_in_f32_under_f16() {
    let Some(mesh) = wgpu_f16_mesh(1) else { return };
    type Ad = burn::backend::Autodiff<Sharded<Wgpu>>;
    let n = 65_536;
    let (a, b) = (unit([2, n], 3), unit([n, 2], 4));
    let product = |low: Option<FloatDType>| {
        let armed = low.map(|low| mesh.autocast(low));
        let (out, counts) = stats::count(|| {
            let a = Tensor::<Ad, 2>::from_data(a.clone(), &mesh);
            let b = Tensor::<Ad, 2>::from_data(b.clone(), &mesh);
            a.matmul(b).into_data()
        });
        drop(armed);
        (out, counts)
    };
    let (want, _) = product(None);
    let (got, counts) = product(Some(FloatDType::F16));
    let (off, bound) = (off(&got, &want), bound(FloatDType::F16, n));
    println!("matmul: f16 {off:.2e} from f32 (bound {bound:.2e})");
    assert!(off <= bound, "f16 matmul {off:.3e} from f32");
    assert!(off > 0.0, "the operands were rounded to f16");
    assert!(counts.products_in_f32.is_empty(), "{counts:?}");
}

/// On CUDA, with the kernels firemesh's CUDA meshes register: bf16 and f16 within their bounds,
/// whether a kernel took an op or declined it (counted, and printed); a test where every op
/// declined fails, as the kernels would then never run.
#[test]
fn cuda_convolutions_take_the_implicit_gemm_kernels_under_bf16_and_f16() {
    let _serial = crate::common::serial();
    for ranks in [1, 2] {
        let Some(mesh) = cuda_mesh(ranks) else { return };
        mesh.use_narrow_convs::<Cuda>(ImplicitGemmConvs);
        let _registered = Registered::<Cuda>(&mesh);
        for low in [FloatDType::BF16, FloatDType::F16] {
            let runs = long_sums::<Cuda>(&mesh, low);
            let declined: u64 = runs.iter().map(|(_, c)| c.total_products_in_f32()).sum();
            let ops = 3 * runs.len() as u64;
            println!("{ranks} rank(s), {low:?}: {declined} of {ops} ops declined by the kernels");
            assert!(declined < ops, "{low:?}: every op declined");
        }
    }
}
