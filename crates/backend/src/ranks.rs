//! Running an inner-backend op once per rank: splitting arguments into per-rank parts
//! ([`Parts`]) and assembling per-rank results ([`FromRanks`]).

use crate::kind::{Float, Int, Kind};
use crate::mesh::Mesh;
use crate::placement::Placement;
use crate::redistribute::to_replicated;
use crate::tensor::ShardedTensor;
use crate::Sharded;
use burn_backend::ops::{
    DeformConv2dBackward, MaxPool1dBackward, MaxPool1dWithIndices, MaxPool2dBackward,
    MaxPool2dWithIndices,
};
use burn_backend::quantization::QuantizationParametersPrimitive;
use burn_backend::{Backend, TensorPrimitive};

/// An op argument that holds one value per rank.
pub(crate) trait Parts<B: Backend>: Sized {
    type Local;
    fn mesh(&self) -> Option<&Mesh<B::Device>>;
    /// Whether every rank already holds the whole value.
    fn is_replicated(&self) -> bool;
    fn replicated(self) -> Self;
    fn into_parts(self, ranks: usize) -> Vec<Self::Local>;
}

impl<B: Backend, K: Kind<B>> Parts<B> for ShardedTensor<B, K> {
    type Local = K::P;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        Some(&self.mesh)
    }
    fn is_replicated(&self) -> bool {
        self.placement() == Placement::Replicated
    }
    fn replicated(self) -> Self {
        to_replicated(self)
    }
    fn into_parts(self, _ranks: usize) -> Vec<K::P> {
        self.into_parts()
    }
}

impl<B: Backend, K: Kind<B>> Parts<B> for Option<ShardedTensor<B, K>> {
    type Local = Option<K::P>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        self.as_ref().map(|t| &t.mesh)
    }
    fn is_replicated(&self) -> bool {
        self.as_ref().is_none_or(|t| t.is_replicated())
    }
    fn replicated(self) -> Self {
        self.map(to_replicated)
    }
    fn into_parts(self, ranks: usize) -> Vec<Option<K::P>> {
        match self {
            Some(t) => t.into_parts().into_iter().map(Some).collect(),
            None => (0..ranks).map(|_| None).collect(),
        }
    }
}

impl<B: Backend, K: Kind<B>> Parts<B> for Vec<ShardedTensor<B, K>> {
    type Local = Vec<K::P>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        self.first().map(|t| &t.mesh)
    }
    fn is_replicated(&self) -> bool {
        self.iter().all(|t| t.is_replicated())
    }
    fn replicated(self) -> Self {
        self.into_iter().map(to_replicated).collect()
    }
    fn into_parts(self, ranks: usize) -> Vec<Vec<K::P>> {
        let mut out: Vec<Vec<K::P>> = (0..ranks).map(|_| Vec::with_capacity(self.len())).collect();
        for t in self {
            for (r, p) in t.into_parts().into_iter().enumerate() {
                out[r].push(p);
            }
        }
        out
    }
}

impl<B: Backend> Parts<B> for &Mesh<B::Device> {
    type Local = B::Device;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        Some(self)
    }
    fn is_replicated(&self) -> bool {
        true
    }
    fn replicated(self) -> Self {
        self
    }
    fn into_parts(self, _ranks: usize) -> Vec<B::Device> {
        self.devices().to_vec()
    }
}

impl<B: Backend> Parts<B> for TensorPrimitive<Sharded<B>> {
    type Local = TensorPrimitive<B>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        match self {
            TensorPrimitive::Float(t) => Some(&t.mesh),
            TensorPrimitive::QFloat(t) => Some(&t.mesh),
        }
    }
    fn is_replicated(&self) -> bool {
        match self {
            TensorPrimitive::Float(t) => t.is_replicated(),
            TensorPrimitive::QFloat(t) => t.is_replicated(),
        }
    }
    fn replicated(self) -> Self {
        match self {
            TensorPrimitive::Float(t) => TensorPrimitive::Float(to_replicated(t)),
            TensorPrimitive::QFloat(t) => TensorPrimitive::QFloat(to_replicated(t)),
        }
    }
    fn into_parts(self, _ranks: usize) -> Vec<TensorPrimitive<B>> {
        match self {
            TensorPrimitive::Float(t) => t
                .into_parts()
                .into_iter()
                .map(TensorPrimitive::Float)
                .collect(),
            TensorPrimitive::QFloat(t) => t
                .into_parts()
                .into_iter()
                .map(TensorPrimitive::QFloat)
                .collect(),
        }
    }
}

impl<B: Backend> Parts<B> for QuantizationParametersPrimitive<Sharded<B>> {
    type Local = QuantizationParametersPrimitive<B>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        Some(&self.scales.mesh)
    }
    fn is_replicated(&self) -> bool {
        self.scales.is_replicated()
    }
    fn replicated(self) -> Self {
        Self {
            scales: to_replicated(self.scales),
        }
    }
    fn into_parts(self, _ranks: usize) -> Vec<QuantizationParametersPrimitive<B>> {
        let parts = self.scales.into_parts().into_iter();
        parts
            .map(|scales| QuantizationParametersPrimitive { scales })
            .collect()
    }
}

/// The mesh all arguments of `op` live on; two different meshes in one op is a usage error.
pub(crate) fn common_mesh<D: core::fmt::Debug>(meshes: &[Option<&Mesh<D>>], op: &str) -> Mesh<D> {
    let mut found = meshes.iter().flatten();
    let first = *found
        .next()
        .unwrap_or_else(|| panic!("firemesh: {op} got no tensor or mesh argument"));
    if let Some(other) = found.find(|m| **m != first) {
        panic!("firemesh: {op} got tensors from two different meshes: {first:?} and {other:?}; move one with `to_device` first");
    }
    first.clone()
}

/// A result assembled from one value per rank.
pub(crate) trait FromRanks<B: Backend, L>: Sized {
    fn from_ranks(locals: Vec<L>, mesh: &Mesh<B::Device>, placement: Placement) -> Self;
}

impl<B: Backend, K: Kind<B>> FromRanks<B, K::P> for ShardedTensor<B, K> {
    fn from_ranks(locals: Vec<K::P>, mesh: &Mesh<B::Device>, placement: Placement) -> Self {
        ShardedTensor::new(locals, placement, mesh.clone())
    }
}

impl<B: Backend, K1: Kind<B>, K2: Kind<B>> FromRanks<B, (K1::P, K2::P)>
    for (ShardedTensor<B, K1>, ShardedTensor<B, K2>)
{
    fn from_ranks(locals: Vec<(K1::P, K2::P)>, mesh: &Mesh<B::Device>, p: Placement) -> Self {
        let (a, b): (Vec<_>, Vec<_>) = locals.into_iter().unzip();
        (
            ShardedTensor::new(a, p, mesh.clone()),
            ShardedTensor::new(b, p, mesh.clone()),
        )
    }
}

/// Plain values (flags, sizes) are the same on every rank; rank 0's is returned.
impl<B: Backend> FromRanks<B, bool> for bool {
    fn from_ranks(locals: Vec<bool>, _: &Mesh<B::Device>, _: Placement) -> Self {
        locals[0]
    }
}

impl<B: Backend> FromRanks<B, TensorPrimitive<B>> for TensorPrimitive<Sharded<B>> {
    fn from_ranks(locals: Vec<TensorPrimitive<B>>, mesh: &Mesh<B::Device>, p: Placement) -> Self {
        if locals
            .iter()
            .all(|l| matches!(l, TensorPrimitive::QFloat(_)))
        {
            let parts = locals.into_iter().map(|l| match l {
                TensorPrimitive::QFloat(q) => q,
                TensorPrimitive::Float(_) => unreachable!(),
            });
            TensorPrimitive::QFloat(ShardedTensor::new(parts.collect(), p, mesh.clone()))
        } else {
            let parts = locals.into_iter().map(TensorPrimitive::tensor).collect();
            TensorPrimitive::Float(ShardedTensor::new(parts, p, mesh.clone()))
        }
    }
}

fn float<B: Backend>(
    parts: Vec<B::FloatTensorPrimitive>,
    m: &Mesh<B::Device>,
    p: Placement,
) -> ShardedTensor<B, Float> {
    ShardedTensor::new(parts, p, m.clone())
}

fn int<B: Backend>(
    parts: Vec<B::IntTensorPrimitive>,
    m: &Mesh<B::Device>,
    p: Placement,
) -> ShardedTensor<B, Int> {
    ShardedTensor::new(parts, p, m.clone())
}

impl<B: Backend> FromRanks<B, MaxPool2dWithIndices<B>> for MaxPool2dWithIndices<Sharded<B>> {
    fn from_ranks(locals: Vec<MaxPool2dWithIndices<B>>, m: &Mesh<B::Device>, p: Placement) -> Self {
        let (o, i): (Vec<_>, Vec<_>) = locals.into_iter().map(|l| (l.output, l.indices)).unzip();
        MaxPool2dWithIndices::new(float(o, m, p), int(i, m, p))
    }
}

impl<B: Backend> FromRanks<B, MaxPool1dWithIndices<B>> for MaxPool1dWithIndices<Sharded<B>> {
    fn from_ranks(locals: Vec<MaxPool1dWithIndices<B>>, m: &Mesh<B::Device>, p: Placement) -> Self {
        let (o, i): (Vec<_>, Vec<_>) = locals.into_iter().map(|l| (l.output, l.indices)).unzip();
        MaxPool1dWithIndices::new(float(o, m, p), int(i, m, p))
    }
}

impl<B: Backend> FromRanks<B, MaxPool2dBackward<B>> for MaxPool2dBackward<Sharded<B>> {
    fn from_ranks(locals: Vec<MaxPool2dBackward<B>>, m: &Mesh<B::Device>, p: Placement) -> Self {
        MaxPool2dBackward::new(float(locals.into_iter().map(|l| l.x_grad).collect(), m, p))
    }
}

impl<B: Backend> FromRanks<B, MaxPool1dBackward<B>> for MaxPool1dBackward<Sharded<B>> {
    fn from_ranks(locals: Vec<MaxPool1dBackward<B>>, m: &Mesh<B::Device>, p: Placement) -> Self {
        MaxPool1dBackward::new(float(locals.into_iter().map(|l| l.x_grad).collect(), m, p))
    }
}

impl<B: Backend> FromRanks<B, DeformConv2dBackward<B>> for DeformConv2dBackward<Sharded<B>> {
    fn from_ranks(locals: Vec<DeformConv2dBackward<B>>, m: &Mesh<B::Device>, p: Placement) -> Self {
        let (mut x, mut off, mut w, mut mask, mut bias) = (vec![], vec![], vec![], vec![], vec![]);
        for l in locals {
            x.push(l.x_grad);
            off.push(l.offset_grad);
            w.push(l.weight_grad);
            mask.push(l.mask_grad);
            bias.push(l.bias_grad);
        }
        let opt = |v: Vec<Option<B::FloatTensorPrimitive>>| {
            v.into_iter()
                .collect::<Option<Vec<_>>>()
                .map(|v| float(v, m, p))
        };
        DeformConv2dBackward::new(
            float(x, m, p),
            float(off, m, p),
            float(w, m, p),
            opt(mask),
            opt(bias),
        )
    }
}

/// Runs `$body` once per rank, with each listed argument bound to that rank's part, and
/// assembles the results with placement `$placement`. Uses the backend type `B` in scope.
macro_rules! on_ranks {
    ($mesh:expr, $placement:expr, [$($t:ident),*], $body:expr) => {{
        let mesh = $mesh;
        let placement = $placement;
        let ranks = mesh.len();
        $(let mut $t = $crate::ranks::Parts::<B>::into_parts($t, ranks).into_iter();)*
        let args: Vec<_> = (0..ranks)
            .map(|_| ($($t.next().expect("one part per rank"),)*))
            .collect();
        let outs = $crate::ranks::run(&mesh, args, |($($t,)*)| $body);
        $crate::ranks::FromRanks::<B, _>::from_ranks(outs, &mesh, placement)
    }};
}

/// Calls `f` on every rank's arguments: in turn on the calling thread (the default, right for
/// backends that queue work asynchronously), or on a thread pool when the mesh asks for it
/// (backends that compute on the calling thread, like NdArray).
pub(crate) fn run<D, A: Send, O: Send>(
    mesh: &Mesh<D>,
    args: Vec<A>,
    f: impl Fn(A) -> O + Sync,
) -> Vec<O> {
    if mesh.parallel() && args.len() > 1 {
        use rayon::prelude::*;
        args.into_par_iter().map(&f).collect()
    } else {
        args.into_iter().map(f).collect()
    }
}

/// One plain value per rank (block offsets, local shapes), passed to `on_ranks!` like a tensor.
pub(crate) struct PerRank<T>(pub Vec<T>);

impl<B: Backend, T> Parts<B> for PerRank<T> {
    type Local = T;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        None
    }
    fn is_replicated(&self) -> bool {
        true
    }
    fn replicated(self) -> Self {
        self
    }
    fn into_parts(self, _ranks: usize) -> Vec<T> {
        self.0
    }
}

/// An op with no placement rule for its inputs: makes every input `Replicated` (counted as a
/// fallback unless they all were) and runs the op on every rank.
macro_rules! fallback {
    ($op:literal, [$($t:ident),*], $body:expr) => {{
        let mesh = $crate::ranks::common_mesh(&[$($crate::ranks::Parts::<B>::mesh(&$t)),*], $op);
        if !(true $(&& $crate::ranks::Parts::<B>::is_replicated(&$t))*) {
            $crate::stats::fallback($op);
        }
        $(let $t = $crate::ranks::Parts::<B>::replicated($t);)*
        on_ranks!(mesh, $crate::placement::Placement::Replicated, [$($t),*], $body)
    }};
}

pub(crate) use {fallback, on_ranks};
