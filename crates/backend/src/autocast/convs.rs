//! Convolutions under autocast: their products are added in f32, whatever the operands' dtype.
//!
//! A convolution sums over a long axis: a ResNet-50 weight gradient at batch 256 adds 0.8 to
//! 3.2 million products per element. Added in bf16 or f16, such a sum stops growing once the
//! spacing of its value passes the addends. Burn's Flex widens narrow operands and adds in f32,
//! as CubeCL's matrix products do; CubeCL's direct convolution kernels (burn-cubecl 0.21's
//! default without `autotune`, and among the candidates its autotune picks from) add in the
//! element type. So on a CubeCL device (wgpu, CUDA) an autocast convolution runs
//! - through the kernels registered for its inner backend ([`Mesh::use_narrow_convs`];
//!   firemesh's CUDA meshes register CubeCL's implicit-GEMM kernels, whose tensor-core
//!   products add in f32) on operands cast to the low precision; where a kernel declines (the
//!   device has no tensor cores for the dtype, the shape does not suit it) it runs in f32 on
//!   those operands widened again, and its result is rounded as the kernel's would be;
//! - in f32 on its operands as they are, where none are registered (every 2-d convolution on
//!   wgpu; 1-d, 3-d and transposed convolutions on any CubeCL device).
//!
//! Each op that ran in f32 instead of the armed precision is counted
//! ([`crate::stats::Counts::products_in_f32`]). Other inner backends run a convolution on narrow
//! operands as they implement it.

use super::{restored, wanted, Operand};
use crate::exec::{run, Operands};
use crate::kind::FloatKind;
use crate::mesh::Mesh;
use crate::rules::{Meta, Plan};
use crate::stats;
use crate::tensor::ShardedTensor;
use burn_backend::ops::ConvOptions;
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, DeviceOps, FloatDType, Shape};
use std::sync::Arc;

type F<B> = ShardedTensor<B, FloatKind>;

/// The three ops of a 2-d convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conv2dOp {
    Forward,
    /// The gradient of the input.
    InputGradient,
    /// The gradient of the weight.
    WeightGradient,
}

/// 2-d convolution kernels for bf16 or f16 operands that add their products in f32, for inner
/// backend `B` ([`Mesh::use_narrow_convs`]). [`NarrowConvs::takes`] says, before any operand is
/// cast, which ops they cannot run at all (these run in f32 on their f32 operands); the others
/// return `None` where a launch fails (the device lacks the kernel, a shape its tiles do not
/// take): the op then runs in f32 on its operands widened again. The arguments are those of
/// Burn's `ModuleOps` methods of the same names, but for the operands an op reads only the
/// shape of, given as shapes.
pub trait NarrowConvs<B: Backend>: Send + Sync + 'static {
    /// Whether these kernels can run `op` with `options` at all.
    fn takes(&self, _op: Conv2dOp, _options: &ConvOptions<2>) -> bool {
        true
    }

    fn conv2d(
        &self,
        x: FloatTensor<B>,
        weight: FloatTensor<B>,
        bias: Option<FloatTensor<B>>,
        options: &ConvOptions<2>,
    ) -> Option<FloatTensor<B>>;

    /// The gradient of the input, of shape `x_shape`.
    fn conv2d_x_backward(
        &self,
        x_shape: Shape,
        weight: FloatTensor<B>,
        output_grad: FloatTensor<B>,
        options: &ConvOptions<2>,
    ) -> Option<FloatTensor<B>>;

    /// The gradient of the weight, of shape `weight_shape`.
    fn conv2d_weight_backward(
        &self,
        x: FloatTensor<B>,
        weight_shape: Shape,
        output_grad: FloatTensor<B>,
        options: &ConvOptions<2>,
    ) -> Option<FloatTensor<B>>;
}

impl<D: DeviceOps> Mesh<D> {
    /// Autocast 2-d convolutions of inner backend `B` on this mesh run through `kernels`
    /// (see `autocast/convs.rs`). Shared by every handle to this mesh.
    pub fn use_narrow_convs<B: Backend<Device = D>>(&self, kernels: impl NarrowConvs<B>) {
        let kernels: Arc<dyn NarrowConvs<B>> = Arc::new(kernels);
        self.register(kernels);
    }

    /// Takes back the kernels registered for backend `B`: its autocast 2-d convolutions run as
    /// the module docs say for a mesh with none.
    pub fn drop_narrow_convs<B: Backend<Device = D>>(&self) {
        self.unregister::<Arc<dyn NarrowConvs<B>>>();
    }

    /// The kernels registered with [`Mesh::use_narrow_convs`] for backend `B`.
    pub fn narrow_convs<B: Backend<Device = D>>(&self) -> Option<Arc<dyn NarrowConvs<B>>> {
        self.registered_value::<Arc<dyn NarrowConvs<B>>>()
    }
}

/// The precision a convolution other than the three 2-d ones runs in under autocast: the armed
/// one, or none (f32, counted) where its inner backend adds narrow products narrowly.
pub(crate) fn precision<B: Backend>(op: &'static str, lead: &F<B>) -> Option<FloatDType> {
    let low = wanted(lead)?;
    if adds_in_element_type::<B>() {
        stats::product_in_f32(op);
        return None;
    }
    Some(low)
}

/// Whether `B`'s convolutions add narrow products in the narrow dtype: CubeCL's direct kernels.
fn adds_in_element_type<B: Backend>() -> bool {
    firemesh_collective::stream::has_streams::<B::Device>()
}

/// The operands of a 2-d convolution op: cast to the low precision together, and widened
/// together on a rank where a kernel declined them; `read[i]`: whether the op reads operand
/// `i`'s values (not only its shape), the others are left as they are.
pub(crate) trait ConvOperands<B: Backend>: Operands<B> {
    /// The operand whose dtype and mesh the op follows.
    fn lead(&self) -> &F<B>;
    fn lowered(self, low: Option<FloatDType>, read: [bool; 3]) -> Self;
    fn widened(local: Self::Local, read: [bool; 3]) -> Self::Local;
}

/// `t` cast to `low` where `read`, else as it is.
fn lowered_if<B: Backend>(t: F<B>, low: Option<FloatDType>, read: bool) -> F<B> {
    if read {
        t.lowered(low)
    } else {
        t
    }
}

/// An inner tensor widened to f32 where `read`, else as it is.
fn widened_if<B: Backend>(t: FloatTensor<B>, read: bool) -> FloatTensor<B> {
    if read {
        wide::<B>(t)
    } else {
        t
    }
}

impl<B: Backend> ConvOperands<B> for (F<B>, F<B>, Option<F<B>>) {
    fn lead(&self) -> &F<B> {
        &self.0
    }

    fn lowered(self, low: Option<FloatDType>, read: [bool; 3]) -> Self {
        (
            lowered_if(self.0, low, read[0]),
            lowered_if(self.1, low, read[1]),
            self.2.map(|t| lowered_if(t, low, read[2])),
        )
    }

    fn widened((a, b, c): Self::Local, read: [bool; 3]) -> Self::Local {
        (
            widened_if::<B>(a, read[0]),
            widened_if::<B>(b, read[1]),
            c.map(|c| widened_if::<B>(c, read[2])),
        )
    }
}

impl<B: Backend> ConvOperands<B> for (F<B>, F<B>, F<B>) {
    fn lead(&self) -> &F<B> {
        &self.0
    }

    fn lowered(self, low: Option<FloatDType>, read: [bool; 3]) -> Self {
        (
            lowered_if(self.0, low, read[0]),
            lowered_if(self.1, low, read[1]),
            lowered_if(self.2, low, read[2]),
        )
    }

    fn widened((a, b, c): Self::Local, read: [bool; 3]) -> Self::Local {
        (
            widened_if::<B>(a, read[0]),
            widened_if::<B>(b, read[1]),
            widened_if::<B>(c, read[2]),
        )
    }
}

fn wide<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    B::float_cast(t, FloatDType::F32)
}

/// What each 2-d convolution op reads of its operands (`x, weight, bias` or `x, weight,
/// output_grad`): the input gradient reads x's shape only, the weight gradient the weight's.
fn reads(op: Conv2dOp) -> [bool; 3] {
    match op {
        Conv2dOp::Forward => [true, true, true],
        Conv2dOp::InputGradient => [false, true, true],
        Conv2dOp::WeightGradient => [true, false, true],
    }
}

/// A 2-d convolution op (`name`, planned by `rule`) under autocast as the module docs say:
/// `kernel` runs it through the registered kernels, `inner` through the inner backend.
pub(crate) fn conv2d<B, I>(
    name: &'static str,
    op: Conv2dOp,
    options: &ConvOptions<2>,
    inputs: I,
    rule: impl FnOnce(&[Meta]) -> Plan,
    kernel: impl Fn(&dyn NarrowConvs<B>, I::Local) -> Option<FloatTensor<B>> + Send + Sync + 'static,
    inner: impl Fn(I::Local) -> FloatTensor<B> + Send + Sync + 'static,
) -> F<B>
where
    B: Backend,
    I: ConvOperands<B>,
    I::Local: Clone,
{
    let Some(low) = wanted(inputs.lead()) else {
        return run(name, inputs, rule, move |_, local| inner(local));
    };
    if !adds_in_element_type::<B>() {
        let all = [true; 3];
        let out = run(
            name,
            inputs.lowered(Some(low), all),
            rule,
            move |_, local| inner(local),
        );
        return restored(out, Some(low));
    }
    let mesh = inputs.lead().mesh().clone();
    let kernels = mesh.narrow_convs::<B>().filter(|k| k.takes(op, options));
    let Some(kernels) = kernels else {
        stats::product_in_f32(name);
        return run(name, inputs, rule, move |_, local| inner(local));
    };
    // A launch that fails is counted once per op, by the calling thread's rank (local rank
    // 0): the ranks of an even split, on GPUs of one model, decline alike.
    let counted = mesh.world_rank(0);
    let read = reads(op);
    let out = run(
        name,
        inputs.lowered(Some(low), read),
        rule,
        move |rank, local: I::Local| {
            if let Some(out) = kernel(&*kernels, local.clone()) {
                return out;
            }
            if rank.index == counted {
                stats::product_in_f32(name);
            }
            B::float_cast(inner(I::widened(local, read)), low)
        },
    );
    restored(out, Some(low))
}
