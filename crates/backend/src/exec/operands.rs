//! The operands of an op: each holds one value per rank. A tensor, an optional tensor, a list of
//! tensors, the mesh itself (for ops that create tensors), or quantization parameters; an op
//! takes a tuple of them.

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::part::Part;
use crate::placement::Placement;
use crate::redistribute::apply_want;
use crate::rules::{Meta, Want};
use crate::runtime::armed;
use crate::tensor::ShardedTensor;
use crate::Sharded;
use burn_backend::quantization::QuantizationParametersPrimitive;
use burn_backend::{Backend, TensorPrimitive};
use std::slice::Iter;

/// One operand.
pub(crate) trait Operand<B: Backend>: Sized {
    /// What one rank's share of the op gets.
    type Local: Send + 'static;
    /// One rank's share as split off: parts that the rank's thread may still be computing.
    type Issued: Send + 'static;
    fn mesh(&self) -> Option<&Mesh<B::Device>>;
    /// Its tensors as the rule should see them: a `Partial` tensor whose sum a clone has
    /// computed replaced by that sum, and (`gather`) a sharded parameter of a fully sharded
    /// model gathered whole where the step armed it (the tensor's own `settled` below).
    fn settled(self, _gather: bool) -> Self {
        self
    }
    /// Appends the metas of its tensors (none for an absent optional tensor or the mesh).
    fn metas(&self, out: &mut Vec<Meta>);
    /// Redistributes its tensors, taking one want per tensor.
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self;
    fn split(self, ranks: usize) -> Vec<Self::Issued>;
    /// The share itself, waited for where a rank thread is computing it.
    fn resolve(issued: Self::Issued) -> Self::Local;
}

fn next<'a>(wants: &mut Iter<'a, Want>) -> &'a Want {
    wants.next().expect("a rule gives one want per operand")
}

impl<B: Backend, K: Kind<B>> Operand<B> for ShardedTensor<B, K> {
    type Local = K::P;
    type Issued = Part<K::P>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        Some(&self.mesh)
    }
    /// [`ShardedTensor::with_known_sum`], and, where `gather` (the op needs its operands whole:
    /// every op but a cast or a dim-moving layout op) and the calling thread armed it on the mesh
    /// (ZeRO-3, `StepScope::set_gather_parameters`), a sharded parameter gathered whole into a
    /// copy of the op's own.
    fn settled(self, gather: bool) -> Self {
        let t = self.with_known_sum();
        let sharded_parameter = t.is_parameter() && t.placement() != Placement::Replicated;
        if !(gather && sharded_parameter && armed::gathers_parameters(t.mesh.key())) {
            return t;
        }
        crate::stats::parameter_gathered();
        crate::gathers::gathered_parameter(t)
    }
    fn metas(&self, out: &mut Vec<Meta>) {
        out.push(Meta::of(self));
    }
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
        apply_want(self, next(wants))
    }
    fn split(self, _ranks: usize) -> Vec<Part<K::P>> {
        self.into_issued().0
    }
    fn resolve(issued: Part<K::P>) -> K::P {
        issued.into_value()
    }
}

impl<B: Backend, T: Operand<B>> Operand<B> for Option<T> {
    type Local = Option<T::Local>;
    type Issued = Option<T::Issued>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        self.as_ref().and_then(T::mesh)
    }
    fn settled(self, gather: bool) -> Self {
        self.map(|t| t.settled(gather))
    }
    fn metas(&self, out: &mut Vec<Meta>) {
        if let Some(t) = self {
            t.metas(out);
        }
    }
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
        self.map(|t| t.apply(wants))
    }
    fn split(self, ranks: usize) -> Vec<Self::Issued> {
        match self {
            Some(t) => t.split(ranks).into_iter().map(Some).collect(),
            None => (0..ranks).map(|_| None).collect(),
        }
    }
    fn resolve(issued: Self::Issued) -> Self::Local {
        issued.map(T::resolve)
    }
}

impl<B: Backend, T: Operand<B>> Operand<B> for Vec<T> {
    type Local = Vec<T::Local>;
    type Issued = Vec<T::Issued>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        self.iter().find_map(T::mesh)
    }
    fn settled(self, gather: bool) -> Self {
        self.into_iter().map(|t| t.settled(gather)).collect()
    }
    fn metas(&self, out: &mut Vec<Meta>) {
        self.iter().for_each(|t| t.metas(out));
    }
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
        self.into_iter().map(|t| t.apply(wants)).collect()
    }
    fn split(self, ranks: usize) -> Vec<Self::Issued> {
        let mut out: Vec<Vec<T::Issued>> =
            (0..ranks).map(|_| Vec::with_capacity(self.len())).collect();
        for t in self {
            for (r, part) in t.split(ranks).into_iter().enumerate() {
                out[r].push(part);
            }
        }
        out
    }
    fn resolve(issued: Self::Issued) -> Self::Local {
        issued.into_iter().map(T::resolve).collect()
    }
}

/// A pair of results fed to the next step of a reduction (values and their indices).
impl<B: Backend, X: Operand<B>, Y: Operand<B>> Operand<B> for (X, Y) {
    type Local = (X::Local, Y::Local);
    type Issued = (X::Issued, Y::Issued);
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        self.0.mesh().or(self.1.mesh())
    }
    fn settled(self, gather: bool) -> Self {
        (self.0.settled(gather), self.1.settled(gather))
    }
    fn metas(&self, out: &mut Vec<Meta>) {
        self.0.metas(out);
        self.1.metas(out);
    }
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
        let x = self.0.apply(wants);
        (x, self.1.apply(wants))
    }
    fn split(self, ranks: usize) -> Vec<Self::Issued> {
        self.0
            .split(ranks)
            .into_iter()
            .zip(self.1.split(ranks))
            .collect()
    }
    fn resolve((x, y): Self::Issued) -> Self::Local {
        (X::resolve(x), Y::resolve(y))
    }
}

/// The mesh of an op that creates a tensor: each rank gets its device.
impl<B: Backend> Operand<B> for &Mesh<B::Device> {
    type Local = B::Device;
    type Issued = B::Device;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        Some(self)
    }
    fn metas(&self, _: &mut Vec<Meta>) {}
    fn apply(self, _: &mut Iter<'_, Want>) -> Self {
        self
    }
    fn split(self, _ranks: usize) -> Vec<B::Device> {
        self.devices().to_vec()
    }
    fn resolve(device: B::Device) -> B::Device {
        device
    }
}

impl<B: Backend> Operand<B> for TensorPrimitive<Sharded<B>> {
    type Local = TensorPrimitive<B>;
    type Issued = IssuedPrimitive<B>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        match self {
            TensorPrimitive::Float(t) => Some(&t.mesh),
            TensorPrimitive::QFloat(t) => Some(&t.mesh),
        }
    }
    fn settled(self, gather: bool) -> Self {
        match self {
            TensorPrimitive::Float(t) => TensorPrimitive::Float(t.settled(gather)),
            quantized => quantized,
        }
    }
    fn metas(&self, out: &mut Vec<Meta>) {
        match self {
            TensorPrimitive::Float(t) => t.metas(out),
            TensorPrimitive::QFloat(t) => t.metas(out),
        }
    }
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
        match self {
            TensorPrimitive::Float(t) => TensorPrimitive::Float(t.apply(wants)),
            TensorPrimitive::QFloat(t) => TensorPrimitive::QFloat(t.apply(wants)),
        }
    }
    fn split(self, ranks: usize) -> Vec<IssuedPrimitive<B>> {
        match self {
            TensorPrimitive::Float(t) => Operand::<B>::split(t, ranks)
                .into_iter()
                .map(IssuedPrimitive::Float)
                .collect(),
            TensorPrimitive::QFloat(t) => Operand::<B>::split(t, ranks)
                .into_iter()
                .map(IssuedPrimitive::QFloat)
                .collect(),
        }
    }
    fn resolve(issued: IssuedPrimitive<B>) -> TensorPrimitive<B> {
        match issued {
            IssuedPrimitive::Float(p) => TensorPrimitive::Float(p.into_value()),
            IssuedPrimitive::QFloat(p) => TensorPrimitive::QFloat(p.into_value()),
        }
    }
}

/// A rank's share of a float-or-quantized operand.
pub(crate) enum IssuedPrimitive<B: Backend> {
    Float(Part<B::FloatTensorPrimitive>),
    QFloat(Part<B::QuantizedTensorPrimitive>),
}

impl<B: Backend> Operand<B> for QuantizationParametersPrimitive<Sharded<B>> {
    type Local = QuantizationParametersPrimitive<B>;
    type Issued = Part<B::FloatTensorPrimitive>;
    fn mesh(&self) -> Option<&Mesh<B::Device>> {
        Some(&self.scales.mesh)
    }
    fn metas(&self, out: &mut Vec<Meta>) {
        self.scales.metas(out);
    }
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
        Self {
            scales: self.scales.apply(wants),
        }
    }
    fn split(self, ranks: usize) -> Vec<Self::Issued> {
        Operand::<B>::split(self.scales, ranks)
    }
    fn resolve(scales: Self::Issued) -> Self::Local {
        QuantizationParametersPrimitive {
            scales: scales.into_value(),
        }
    }
}

/// All operands of an op, as a tuple.
pub(crate) trait Operands<B: Backend>: Sized {
    type Local: Send + 'static;
    type Issued: Send + 'static;
    /// The mesh every operand lives on; operands from two meshes are a usage error.
    fn mesh(&self, op: &str) -> Mesh<B::Device>;
    fn settled(self, gather: bool) -> Self;
    fn metas(&self) -> Vec<Meta>;
    fn apply(self, wants: &mut Iter<'_, Want>) -> Self;
    /// Each rank's share, in rank order (made as they are taken: no list of them is kept).
    fn split(self, ranks: usize) -> impl Iterator<Item = Self::Issued>;
    fn resolve(issued: Self::Issued) -> Self::Local;
}

fn common_mesh<D: core::fmt::Debug>(meshes: &[Option<&Mesh<D>>], op: &str) -> Mesh<D> {
    let mut found = meshes.iter().flatten();
    let first = *found
        .next()
        .unwrap_or_else(|| panic!("firemesh: {op} got no tensor or mesh argument"));
    if let Some(other) = found.find(|m| **m != first) {
        panic!("firemesh: {op} got tensors from two different meshes: {first:?} and {other:?}; move one with `to_device` first");
    }
    first.clone()
}

macro_rules! tuple_operands {
    ($($t:ident),+) => {
        #[allow(non_snake_case)]
        impl<B: Backend, $($t: Operand<B>),+> Operands<B> for ($($t,)+) {
            type Local = ($($t::Local,)+);
            type Issued = ($($t::Issued,)+);
            fn mesh(&self, op: &str) -> Mesh<B::Device> {
                let ($($t,)+) = self;
                common_mesh(&[$($t.mesh()),+], op)
            }
            fn settled(self, gather: bool) -> Self {
                let ($($t,)+) = self;
                ($($t.settled(gather),)+)
            }
            fn metas(&self) -> Vec<Meta> {
                let ($($t,)+) = self;
                let mut out = Vec::new();
                $($t.metas(&mut out);)+
                out
            }
            fn apply(self, wants: &mut Iter<'_, Want>) -> Self {
                let ($($t,)+) = self;
                ($($t.apply(wants),)+)
            }
            fn split(self, ranks: usize) -> impl Iterator<Item = Self::Issued> {
                let ($($t,)+) = self;
                $(let mut $t = $t.split(ranks).into_iter();)+
                (0..ranks).map(move |_| ($($t.next().expect("one part per rank"),)+))
            }
            fn resolve(issued: Self::Issued) -> Self::Local {
                let ($($t,)+) = issued;
                ($($t::resolve($t),)+)
            }
        }
    };
}

tuple_operands!(A);
tuple_operands!(A, C);
tuple_operands!(A, C, D);
tuple_operands!(A, C, D, E);
tuple_operands!(A, C, D, E, F);
tuple_operands!(A, C, D, E, F, G);
