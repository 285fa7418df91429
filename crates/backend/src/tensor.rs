//! The tensor of `Sharded<B>`: one inner tensor per rank and a placement.

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::placement::Placement;
use burn_backend::quantization::QuantScheme;
use burn_backend::{Backend, DType, QTensorPrimitive, Shape, TensorMetadata};
use std::marker::PhantomData;

/// One inner tensor per rank of `mesh`, laid out as `placement` says. `K` is the tensor kind
/// (float, int, bool, quantized).
pub struct ShardedTensor<B: Backend, K: Kind<B>> {
    pub(crate) parts: Vec<K::P>,
    pub(crate) placement: Placement,
    pub(crate) mesh: Mesh<B::Device>,
    kind: PhantomData<K>,
}

impl<B: Backend, K: Kind<B>> ShardedTensor<B, K> {
    /// Parts must be one per rank, in rank order, consistent with `placement` (the caller's duty;
    /// the public constructors in [`crate::api`] check it).
    pub(crate) fn new(parts: Vec<K::P>, placement: Placement, mesh: Mesh<B::Device>) -> Self {
        debug_assert_eq!(parts.len(), mesh.len(), "one part per rank");
        Self {
            parts,
            placement,
            mesh,
            kind: PhantomData,
        }
    }

    pub fn placement(&self) -> Placement {
        self.placement
    }

    pub fn mesh(&self) -> &Mesh<B::Device> {
        &self.mesh
    }

    pub fn parts(&self) -> &[K::P] {
        &self.parts
    }

    pub fn into_parts(self) -> Vec<K::P> {
        self.parts
    }

    /// The sizes of the blocks along the sharded dim (`None` unless `Shard`).
    pub fn shard_sizes(&self) -> Option<Vec<usize>> {
        match self.placement {
            Placement::Shard(d) => Some(self.parts.iter().map(|p| p.shape()[d]).collect()),
            _ => None,
        }
    }
}

impl<B: Backend, K: Kind<B>> Clone for ShardedTensor<B, K> {
    fn clone(&self) -> Self {
        Self::new(self.parts.clone(), self.placement, self.mesh.clone())
    }
}

impl<B: Backend, K: Kind<B>> core::fmt::Debug for ShardedTensor<B, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShardedTensor")
            .field("shape", &self.shape())
            .field("placement", &self.placement)
            .field("mesh", &self.mesh)
            .finish()
    }
}

impl<B: Backend, K: Kind<B>> TensorMetadata for ShardedTensor<B, K> {
    fn dtype(&self) -> DType {
        self.parts[0].dtype()
    }

    /// The global shape: a `Shard(d)` tensor's dim `d` is the sum of its blocks.
    fn shape(&self) -> Shape {
        let mut shape = self.parts[0].shape();
        if let Placement::Shard(d) = self.placement {
            shape[d] = self.parts.iter().map(|p| p.shape()[d]).sum();
        }
        shape
    }

    fn rank(&self) -> usize {
        self.parts[0].rank()
    }
}

impl<B: Backend, K: Kind<B>> QTensorPrimitive for ShardedTensor<B, K>
where
    K::P: QTensorPrimitive,
{
    fn scheme(&self) -> &QuantScheme {
        self.parts[0].scheme()
    }

    fn acc_precision(&self) -> burn_std::quantization::QuantAcc {
        self.parts[0].acc_precision()
    }

    fn propagation(&self) -> burn_std::quantization::QuantPropagation {
        self.parts[0].propagation()
    }

    fn default_scheme() -> QuantScheme {
        K::P::default_scheme()
    }
}
