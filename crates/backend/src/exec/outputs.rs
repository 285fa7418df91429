//! The results of an op, assembled from one value per rank: tensors, pairs of tensors, and the
//! structs Burn's module ops return.

use crate::exec::Later;
use crate::kind::{FloatKind, IntKind, Kind, QuantizedKind};
use crate::mesh::Mesh;
use crate::part::Part;
use crate::placement::Placement;
use crate::tensor::ShardedTensor;
use crate::Sharded;
use burn_backend::ops::{
    DeformConv2dBackward, MaxPool1dBackward, MaxPool1dWithIndices, MaxPool2dBackward,
    MaxPool2dWithIndices,
};
use burn_backend::{Backend, TensorMetadata, TensorPrimitive};

/// A result made of one value per rank.
pub(crate) trait Outputs<B: Backend>: Sized {
    type Local: Send + 'static;
    /// The result on `mesh` (handed over: a single tensor keeps it without another count on
    /// the mesh).
    fn assemble(locals: Vec<Self::Local>, mesh: Mesh<B::Device>, out: Placement) -> Self;
    /// As [`Outputs::assemble`], from the values as the ranks make them.
    fn assemble_from(
        locals: impl Iterator<Item = Self::Local>,
        mesh: Mesh<B::Device>,
        out: Placement,
    ) -> Self {
        Self::assemble(locals.collect(), mesh, out)
    }
    /// The result from rank 0's value and the values rank threads are computing for the other
    /// ranks, which have the shapes of rank 0's (the executor issues to rank threads only then).
    fn assemble_issued(
        first: Self::Local,
        rest: Vec<Later<Self::Local>>,
        mesh: &Mesh<B::Device>,
        out: Placement,
    ) -> Self;
    /// The value of a rank that skipped the op (its block was empty), made from `template`, the
    /// value of a rank that ran it: an empty block of a `Shard` result, zeros of a `Partial`
    /// one, a copy of a `Replicated` one.
    fn blank(template: &Self::Local, out: Placement, device: &B::Device) -> Self::Local;
}

impl<B: Backend, K: Kind<B>> Outputs<B> for ShardedTensor<B, K> {
    type Local = K::P;
    fn assemble(locals: Vec<K::P>, mesh: Mesh<B::Device>, out: Placement) -> Self {
        ShardedTensor::new(locals, out, mesh)
    }
    /// Straight into the tensor's parts: no list of the values in between.
    fn assemble_from(
        locals: impl Iterator<Item = K::P>,
        mesh: Mesh<B::Device>,
        out: Placement,
    ) -> Self {
        ShardedTensor::issued(locals.map(Part::Ready).collect(), out, mesh)
    }
    fn assemble_issued(
        first: K::P,
        rest: Vec<Later<K::P>>,
        mesh: &Mesh<B::Device>,
        out: Placement,
    ) -> Self {
        let shape = first.shape();
        let parts = std::iter::once(Part::Ready(first))
            .chain(rest.into_iter().map(|value| Part::Issued {
                value,
                shape: shape.clone(),
            }))
            .collect();
        ShardedTensor::issued(parts, out, mesh.clone())
    }
    fn blank(template: &K::P, out: Placement, device: &B::Device) -> K::P {
        match out {
            Placement::Shard(d) => {
                let mut shape = template.shape();
                shape[d] = 0;
                K::zeros(template, shape, device)
            }
            Placement::Partial => K::zeros(template, template.shape(), device),
            Placement::Replicated => K::move_to(template.clone(), device),
        }
    }
}

impl<B: Backend, X: Outputs<B>, Y: Outputs<B>> Outputs<B> for (X, Y) {
    type Local = (X::Local, Y::Local);
    fn assemble(locals: Vec<Self::Local>, mesh: Mesh<B::Device>, out: Placement) -> Self {
        let (x, y): (Vec<_>, Vec<_>) = locals.into_iter().unzip();
        (X::assemble(x, mesh.clone(), out), Y::assemble(y, mesh, out))
    }
    fn assemble_issued(
        (x, y): Self::Local,
        rest: Vec<Later<Self::Local>>,
        mesh: &Mesh<B::Device>,
        out: Placement,
    ) -> Self {
        let xs = rest.iter().map(|l| l.project(|v| &v.0)).collect();
        let ys = rest.iter().map(|l| l.project(|v| &v.1)).collect();
        (
            X::assemble_issued(x, xs, mesh, out),
            Y::assemble_issued(y, ys, mesh, out),
        )
    }
    fn blank(template: &Self::Local, out: Placement, device: &B::Device) -> Self::Local {
        (
            X::blank(&template.0, out, device),
            Y::blank(&template.1, out, device),
        )
    }
}

impl<B: Backend> Outputs<B> for TensorPrimitive<Sharded<B>> {
    type Local = TensorPrimitive<B>;
    fn assemble(locals: Vec<TensorPrimitive<B>>, mesh: Mesh<B::Device>, out: Placement) -> Self {
        let quantized = |l: &TensorPrimitive<B>| matches!(l, TensorPrimitive::QFloat(_));
        if locals.iter().all(quantized) {
            let parts = locals.into_iter().filter_map(|l| match l {
                TensorPrimitive::QFloat(q) => Some(q),
                TensorPrimitive::Float(_) => None,
            });
            TensorPrimitive::QFloat(ShardedTensor::new(parts.collect(), out, mesh))
        } else {
            let parts = locals.into_iter().map(TensorPrimitive::tensor).collect();
            TensorPrimitive::Float(ShardedTensor::new(parts, out, mesh))
        }
    }
    /// Rank 0's value says whether the result is quantized; every rank's is alike.
    fn assemble_issued(
        first: TensorPrimitive<B>,
        rest: Vec<Later<TensorPrimitive<B>>>,
        mesh: &Mesh<B::Device>,
        out: Placement,
    ) -> Self {
        match first {
            TensorPrimitive::QFloat(q) => {
                let rest = rest.iter().map(|l| l.project(quantized_part)).collect();
                TensorPrimitive::QFloat(ShardedTensor::<B, QuantizedKind>::assemble_issued(
                    q, rest, mesh, out,
                ))
            }
            TensorPrimitive::Float(f) => {
                let rest = rest.iter().map(|l| l.project(float_part)).collect();
                TensorPrimitive::Float(ShardedTensor::<B, FloatKind>::assemble_issued(
                    f, rest, mesh, out,
                ))
            }
        }
    }
    fn blank(template: &TensorPrimitive<B>, out: Placement, device: &B::Device) -> Self::Local {
        match template {
            TensorPrimitive::Float(t) => TensorPrimitive::Float(
                <ShardedTensor<B, FloatKind> as Outputs<B>>::blank(t, out, device),
            ),
            TensorPrimitive::QFloat(t) => TensorPrimitive::QFloat(
                <ShardedTensor<B, QuantizedKind> as Outputs<B>>::blank(t, out, device),
            ),
        }
    }
}

fn float_part<B: Backend>(t: &TensorPrimitive<B>) -> &B::FloatTensorPrimitive {
    match t {
        TensorPrimitive::Float(f) => f,
        TensorPrimitive::QFloat(_) => panic!("firemesh: ranks disagree on quantization"),
    }
}

fn quantized_part<B: Backend>(t: &TensorPrimitive<B>) -> &B::QuantizedTensorPrimitive {
    match t {
        TensorPrimitive::QFloat(q) => q,
        TensorPrimitive::Float(_) => panic!("firemesh: ranks disagree on quantization"),
    }
}

type Float<B> = ShardedTensor<B, FloatKind>;
type Int<B> = ShardedTensor<B, IntKind>;

/// Burn's structs of float (and int) tensors, assembled field by field.
macro_rules! struct_outputs {
    ($name:ident::new($($field:ident: $kind:ident),+)) => {
        impl<B: Backend> Outputs<B> for $name<Sharded<B>> {
            type Local = $name<B>;
            fn assemble(locals: Vec<$name<B>>, mesh: Mesh<B::Device>, out: Placement) -> Self {
                $(let mut $field = Vec::with_capacity(locals.len());)+
                for l in locals {
                    $($field.push(l.$field);)+
                }
                $name::new($($kind::<B>::assemble($field, mesh.clone(), out)),+)
            }
            fn assemble_issued(
                first: $name<B>,
                rest: Vec<Later<$name<B>>>,
                mesh: &Mesh<B::Device>,
                out: Placement,
            ) -> Self {
                $name::new($($kind::<B>::assemble_issued(
                    first.$field,
                    rest.iter().map(|l| l.project(|v: &$name<B>| &v.$field)).collect(),
                    mesh,
                    out,
                )),+)
            }
            fn blank(t: &$name<B>, out: Placement, device: &B::Device) -> $name<B> {
                $name::new($($kind::<B>::blank(&t.$field, out, device)),+)
            }
        }
    };
}

struct_outputs!(MaxPool2dWithIndices::new(output: Float, indices: Int));
struct_outputs!(MaxPool1dWithIndices::new(output: Float, indices: Int));
struct_outputs!(MaxPool2dBackward::new(x_grad: Float));
struct_outputs!(MaxPool1dBackward::new(x_grad: Float));

const ALIKE: &str = "firemesh: ranks disagree on which deformable-convolution gradients exist";

/// Deformable convolutions have no rule and run replicated, so their optional gradients are
/// either there on every rank or on none.
impl<B: Backend> Outputs<B> for DeformConv2dBackward<Sharded<B>> {
    type Local = DeformConv2dBackward<B>;
    fn assemble(locals: Vec<Self::Local>, mesh: Mesh<B::Device>, out: Placement) -> Self {
        let (mut x, mut off, mut w, mut mask, mut bias) = (vec![], vec![], vec![], vec![], vec![]);
        for l in locals {
            x.push(l.x_grad);
            off.push(l.offset_grad);
            w.push(l.weight_grad);
            mask.push(l.mask_grad);
            bias.push(l.bias_grad);
        }
        let float = |v| Float::<B>::assemble(v, mesh.clone(), out);
        let optional = |v: Vec<Option<_>>| v.into_iter().collect::<Option<Vec<_>>>().map(float);
        DeformConv2dBackward::new(
            float(x),
            float(off),
            float(w),
            optional(mask),
            optional(bias),
        )
    }
    fn assemble_issued(
        first: Self::Local,
        rest: Vec<Later<Self::Local>>,
        mesh: &Mesh<B::Device>,
        out: Placement,
    ) -> Self {
        type L<B> = DeformConv2dBackward<B>;
        let float = |first, field: fn(&L<B>) -> &B::FloatTensorPrimitive| {
            let rest = rest.iter().map(|l| l.project(field)).collect();
            Float::<B>::assemble_issued(first, rest, mesh, out)
        };
        let mask = first
            .mask_grad
            .map(|m| float(m, |l| l.mask_grad.as_ref().expect(ALIKE)));
        let bias = first
            .bias_grad
            .map(|b| float(b, |l| l.bias_grad.as_ref().expect(ALIKE)));
        DeformConv2dBackward::new(
            float(first.x_grad, |l| &l.x_grad),
            float(first.offset_grad, |l| &l.offset_grad),
            float(first.weight_grad, |l| &l.weight_grad),
            mask,
            bias,
        )
    }
    fn blank(t: &Self::Local, out: Placement, device: &B::Device) -> Self::Local {
        let float = |p| Float::<B>::blank(p, out, device);
        DeformConv2dBackward::new(
            float(&t.x_grad),
            float(&t.offset_grad),
            float(&t.weight_grad),
            t.mask_grad.as_ref().map(float),
            t.bias_grad.as_ref().map(float),
        )
    }
}
