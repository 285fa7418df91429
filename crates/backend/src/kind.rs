//! The four kinds of tensor primitive (float, int, bool, quantized) behind one interface, so
//! that the executor, redistribution and the sum/gather route are written once for all of them.

use burn_backend::{Backend, Shape, Slice, TensorData, TensorMetadata};

/// The inner backend's operations on one kind of tensor primitive that moving a tensor between
/// placements needs.
pub trait Kind<B: Backend>: Send + Sync + 'static {
    /// The inner primitive of this kind.
    type P: TensorMetadata + 'static;
    /// Name used in messages.
    const NAME: &'static str;

    fn device(p: &Self::P) -> B::Device;
    fn slice(p: Self::P, slices: &[Slice]) -> Self::P;
    fn cat(ps: Vec<Self::P>, dim: usize) -> Self::P;
    fn from_data(data: TensorData, device: &B::Device) -> Self::P;
    fn into_data(p: Self::P) -> TensorData;
    /// Element-wise sum. Only float and int tensors are ever `Partial`.
    fn add(a: Self::P, b: Self::P) -> Self::P;
    /// Zeros of `shape` with `like`'s dtype on `device`: the addend of a rank with no rows, or an
    /// empty block (a dim of `shape` is 0).
    fn zeros(like: &Self::P, shape: Shape, device: &B::Device) -> Self::P;

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

/// Float tensors.
pub struct FloatKind;
/// Int tensors.
pub struct IntKind;
/// Bool tensors.
pub struct BoolKind;
/// Quantized tensors.
pub struct QuantizedKind;

fn read(
    data: impl core::future::Future<Output = Result<TensorData, burn_backend::ExecutionError>>,
) -> TensorData {
    match burn_backend::try_read_sync(data) {
        Some(Ok(data)) => data,
        Some(Err(e)) => panic!("firemesh: reading a rank's tensor failed: {e}"),
        None => panic!("firemesh: this platform cannot read tensors synchronously"),
    }
}

fn never_partial(kind: &str) -> ! {
    unreachable!("{kind} tensors are never Partial")
}

impl<B: Backend> Kind<B> for FloatKind {
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
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::float_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::float_into_data(p))
    }
    fn add(a: Self::P, b: Self::P) -> Self::P {
        B::float_add(a, b)
    }
    fn zeros(like: &Self::P, shape: Shape, device: &B::Device) -> Self::P {
        B::float_zeros(shape, device, like.dtype().into())
    }
}

impl<B: Backend> Kind<B> for IntKind {
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
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::int_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::int_into_data(p))
    }
    fn add(a: Self::P, b: Self::P) -> Self::P {
        B::int_add(a, b)
    }
    fn zeros(like: &Self::P, shape: Shape, device: &B::Device) -> Self::P {
        B::int_zeros(shape, device, like.dtype().into())
    }
}

impl<B: Backend> Kind<B> for BoolKind {
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
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::bool_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::bool_into_data(p))
    }
    fn add(_: Self::P, _: Self::P) -> Self::P {
        never_partial("bool")
    }
    fn zeros(like: &Self::P, shape: Shape, device: &B::Device) -> Self::P {
        B::bool_zeros(shape, device, like.dtype().into())
    }
}

impl<B: Backend> Kind<B> for QuantizedKind {
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
    fn from_data(data: TensorData, device: &B::Device) -> Self::P {
        B::q_from_data(data, device)
    }
    fn into_data(p: Self::P) -> TensorData {
        read(B::q_into_data(p))
    }
    fn add(_: Self::P, _: Self::P) -> Self::P {
        never_partial("quantized")
    }
    /// Quantized tensors are never `Partial`, so only empty blocks are asked for: `like`
    /// sliced to nothing along its first empty dim.
    fn zeros(like: &Self::P, shape: Shape, device: &B::Device) -> Self::P {
        let dim = shape
            .iter()
            .position(|s| *s == 0)
            .unwrap_or_else(|| never_partial("quantized"));
        let slices: Vec<Slice> = (0..shape.num_dims())
            .map(|d| {
                if d == dim {
                    Slice::new(0, Some(0), 1)
                } else {
                    Slice::full()
                }
            })
            .collect();
        <Self as Kind<B>>::move_to(B::q_slice(like.clone(), &slices), device)
    }
}
