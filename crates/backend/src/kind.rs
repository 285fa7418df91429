//! The four kinds of tensor primitive (float, int, bool, quantized) behind one interface, so
//! placement rules and redistribution are written once for all of them.

use crate::mesh::Mesh;
use crate::mesh_collectives;
use burn_backend::{Backend, Scalar, Shape, Slice, TensorData, TensorMetadata};

/// The inner backend's operations that moving a tensor between placements needs.
pub trait Kind<B: Backend>: Send + Sync + 'static {
    /// The inner primitive of this kind.
    type P: TensorMetadata + 'static;
    /// Name used in messages.
    const NAME: &'static str;

    fn device(p: &Self::P) -> B::Device;
    fn slice(p: Self::P, slices: &[Slice]) -> Self::P;
    fn cat(ps: Vec<Self::P>, dim: usize) -> Self::P;
    fn reshape(p: Self::P, shape: Shape) -> Self::P;
    fn from_data(data: TensorData, device: &B::Device) -> Self::P;
    fn into_data(p: Self::P) -> TensorData;
    /// Element-wise sum; only float and int tensors can be `Partial`.
    fn add(a: Self::P, b: Self::P) -> Self::P;
    /// Zeros with `p`'s shape, dtype and device.
    fn zeros_like(p: &Self::P) -> Self::P;
    fn mul_scalar(p: Self::P, s: Scalar) -> Self::P;

    /// Partial→Replicated: the sum of the ranks' addends, on every rank.
    fn sum_over_ranks(parts: Vec<Self::P>, mesh: &Mesh<B::Device>) -> Vec<Self::P>
    where
        Self: Sized,
    {
        sum_in_rank_order::<B, Self>(parts, mesh.devices())
    }

    /// Shard→Replicated: the blocks concatenated along `dim`, on every rank.
    fn gather_over_ranks(parts: Vec<Self::P>, dim: usize, mesh: &Mesh<B::Device>) -> Vec<Self::P>
    where
        Self: Sized,
    {
        cat_on_every_rank::<B, Self>(parts, dim, mesh.devices())
    }

    /// `p` on `device`: free when it is there already, through host memory otherwise (Burn 0.21
    /// cannot copy between two wgpu devices).
    fn move_to(p: Self::P, device: &B::Device) -> Self::P {
        if Self::device(&p) == *device {
            p
        } else {
            Self::from_data(Self::into_data(p), device)
        }
    }
}

pub struct Float;
pub struct Int;
pub struct Bool;
pub struct Quantized;

fn read(
    data: impl core::future::Future<Output = Result<TensorData, burn_backend::ExecutionError>>,
) -> TensorData {
    match burn_backend::try_read_sync(data) {
        Some(Ok(data)) => data,
        Some(Err(e)) => panic!("firemesh: reading a rank's tensor failed: {e}"),
        None => panic!("firemesh: this platform cannot read tensors synchronously"),
    }
}

fn not_partial(kind: &str) -> ! {
    unreachable!("{kind} tensors are never Partial")
}

impl<B: Backend> Kind<B> for Float {
    type P = B::FloatTensorPrimitive;
    const NAME: &'static str = "float";
    fn device(p: &Self::P) -> B::Device {
        B::float_device(p)
    }
    fn slice(p: Self::P, slices: &[Slice]) -> Self::P {
        B::float_slice(p, slices)
    }
    fn cat(ps: Vec<Self::P>, dim: usize) -> Self::P {
        B::float_cat(ps, dim)
    }
    fn reshape(p: Self::P, shape: Shape) -> Self::P {
        B::float_reshape(p, shape)
    }
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::float_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::float_into_data(p))
    }
    fn add(a: Self::P, b: Self::P) -> Self::P {
        B::float_add(a, b)
    }
    fn zeros_like(p: &Self::P) -> Self::P {
        B::float_zeros(p.shape(), &B::float_device(p), p.dtype().into())
    }
    fn mul_scalar(p: Self::P, s: Scalar) -> Self::P {
        B::float_mul_scalar(p, s)
    }
    /// Ranks on one device sum in place; ranks on several devices all-reduce through
    /// firemesh-collective.
    fn sum_over_ranks(parts: Vec<Self::P>, mesh: &Mesh<B::Device>) -> Vec<Self::P> {
        if mesh.single_device() {
            return sum_in_rank_order::<B, Self>(parts, mesh.devices());
        }
        mesh_collectives::sum_float::<B>(parts, mesh)
    }
    fn gather_over_ranks(parts: Vec<Self::P>, dim: usize, mesh: &Mesh<B::Device>) -> Vec<Self::P> {
        if mesh.single_device() {
            return cat_on_every_rank::<B, Self>(parts, dim, mesh.devices());
        }
        mesh_collectives::gather_float::<B>(parts, dim, mesh)
    }
}

impl<B: Backend> Kind<B> for Int {
    type P = B::IntTensorPrimitive;
    const NAME: &'static str = "int";
    fn device(p: &Self::P) -> B::Device {
        B::int_device(p)
    }
    fn slice(p: Self::P, slices: &[Slice]) -> Self::P {
        B::int_slice(p, slices)
    }
    fn cat(ps: Vec<Self::P>, dim: usize) -> Self::P {
        B::int_cat(ps, dim)
    }
    fn reshape(p: Self::P, shape: Shape) -> Self::P {
        B::int_reshape(p, shape)
    }
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::int_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::int_into_data(p))
    }
    fn add(a: Self::P, b: Self::P) -> Self::P {
        B::int_add(a, b)
    }
    fn zeros_like(p: &Self::P) -> Self::P {
        B::int_zeros(p.shape(), &B::int_device(p), p.dtype().into())
    }
    fn mul_scalar(p: Self::P, s: Scalar) -> Self::P {
        B::int_mul_scalar(p, s)
    }
}

impl<B: Backend> Kind<B> for Bool {
    type P = B::BoolTensorPrimitive;
    const NAME: &'static str = "bool";
    fn device(p: &Self::P) -> B::Device {
        B::bool_device(p)
    }
    fn slice(p: Self::P, slices: &[Slice]) -> Self::P {
        B::bool_slice(p, slices)
    }
    fn cat(ps: Vec<Self::P>, dim: usize) -> Self::P {
        B::bool_cat(ps, dim)
    }
    fn reshape(p: Self::P, shape: Shape) -> Self::P {
        B::bool_reshape(p, shape)
    }
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::bool_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::bool_into_data(p))
    }
    fn add(_: Self::P, _: Self::P) -> Self::P {
        not_partial("bool")
    }
    fn zeros_like(p: &Self::P) -> Self::P {
        B::bool_zeros(p.shape(), &B::bool_device(p), p.dtype().into())
    }
    fn mul_scalar(_: Self::P, _: Scalar) -> Self::P {
        not_partial("bool")
    }
}

impl<B: Backend> Kind<B> for Quantized {
    type P = B::QuantizedTensorPrimitive;
    const NAME: &'static str = "quantized";
    fn device(p: &Self::P) -> B::Device {
        B::q_device(p)
    }
    fn slice(p: Self::P, slices: &[Slice]) -> Self::P {
        B::q_slice(p, slices)
    }
    fn cat(ps: Vec<Self::P>, dim: usize) -> Self::P {
        B::q_cat(ps, dim)
    }
    fn reshape(p: Self::P, shape: Shape) -> Self::P {
        B::q_reshape(p, shape)
    }
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::q_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::q_into_data(p))
    }
    fn add(_: Self::P, _: Self::P) -> Self::P {
        not_partial("quantized")
    }
    fn zeros_like(_: &Self::P) -> Self::P {
        not_partial("quantized")
    }
    fn mul_scalar(_: Self::P, _: Scalar) -> Self::P {
        not_partial("quantized")
    }
}

/// The sum of one addend per rank, on every rank's device, summed in rank order so that every
/// rank holds the same bits.
pub(crate) fn sum_in_rank_order<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    devices: &[B::Device],
) -> Vec<K::P> {
    let sum = sum_on::<B, K>(parts, &devices[0]);
    devices.iter().map(|d| K::move_to(sum.clone(), d)).collect()
}

/// The sum of the parts, in rank order, on `home`.
pub(crate) fn sum_on<B: Backend, K: Kind<B>>(parts: Vec<K::P>, home: &B::Device) -> K::P {
    let mut it = parts.into_iter();
    let first = K::move_to(it.next().expect("a mesh has at least one rank"), home);
    it.fold(first, |acc, p| K::add(acc, K::move_to(p, home)))
}

/// Every rank's copy of the blocks concatenated along `dim`, moved through host memory where
/// ranks are on different devices.
pub(crate) fn cat_on_every_rank<B: Backend, K: Kind<B>>(
    parts: Vec<K::P>,
    dim: usize,
    devices: &[B::Device],
) -> Vec<K::P> {
    if devices.iter().all(|d| *d == devices[0]) {
        let whole = K::cat(parts, dim);
        return vec![whole; devices.len()];
    }
    devices
        .iter()
        .map(|dev| {
            let local = parts.iter().map(|p| K::move_to(p.clone(), dev)).collect();
            K::cat(local, dim)
        })
        .collect()
}
