//! The tensor of `Sharded<B>`: one inner tensor per rank and a placement, or a random draw whose
//! placement is decided by the first op that uses it (see [`crate::rules::random`]).

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::placement::Placement;
use burn_backend::quantization::QuantScheme;
use burn_backend::{Backend, DType, QTensorPrimitive, Shape, TensorMetadata};
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// One inner tensor per rank of `mesh`, laid out as its placement says. `K` is the tensor kind
/// (float, int, bool, quantized).
pub struct ShardedTensor<B: Backend, K: Kind<B>> {
    layout: Layout<B, K>,
    pub(crate) mesh: Mesh<B::Device>,
    kind: PhantomData<K>,
}

enum Layout<B: Backend, K: Kind<B>> {
    Ready {
        parts: Vec<K::P>,
        placement: Placement,
    },
    /// Not drawn yet. Clones share the draw, so every use sees the same values.
    Pending(Arc<PendingDraw<B, K>>),
}

/// Draws the parts of a pending tensor: `whole` as a `Replicated` value, or the blocks of
/// `Shard(dim)` with the given sizes.
pub(crate) trait Draw<B: Backend, K: Kind<B>>: Send + Sync {
    fn whole(&self, mesh: &Mesh<B::Device>) -> Vec<K::P>;
    fn blocks(&self, mesh: &Mesh<B::Device>, dim: usize, sizes: &[usize]) -> Vec<K::P>;
}

pub(crate) struct PendingDraw<B: Backend, K: Kind<B>> {
    shape: Shape,
    dtype: DType,
    draw: Box<dyn Draw<B, K>>,
    drawn: OnceLock<(Vec<K::P>, Placement)>,
}

impl<B: Backend, K: Kind<B>> ShardedTensor<B, K> {
    /// Parts must be one per rank, in rank order, consistent with `placement` (the caller's duty;
    /// the public constructors in [`crate::api`] check it).
    pub(crate) fn new(parts: Vec<K::P>, placement: Placement, mesh: Mesh<B::Device>) -> Self {
        debug_assert_eq!(parts.len(), mesh.len(), "one part per rank");
        Self {
            layout: Layout::Ready { parts, placement },
            mesh,
            kind: PhantomData,
        }
    }

    /// A tensor drawn when first used.
    pub(crate) fn pending(
        shape: Shape,
        dtype: DType,
        draw: Box<dyn Draw<B, K>>,
        mesh: Mesh<B::Device>,
    ) -> Self {
        let pending = PendingDraw {
            shape,
            dtype,
            draw,
            drawn: OnceLock::new(),
        };
        Self {
            layout: Layout::Pending(Arc::new(pending)),
            mesh,
            kind: PhantomData,
        }
    }

    /// The parts and placement, drawing a pending tensor whole if no op has drawn it yet.
    fn ready(&self) -> (&[K::P], Placement) {
        match &self.layout {
            Layout::Ready { parts, placement } => (parts, *placement),
            Layout::Pending(p) => {
                let (parts, placement) = p
                    .drawn
                    .get_or_init(|| (p.draw.whole(&self.mesh), Placement::Replicated));
                (parts, *placement)
            }
        }
    }

    /// For a tensor not drawn yet: draws it as the blocks of `Shard(dim)` with these sizes, one
    /// block per rank. Other tensors are left as they are.
    pub(crate) fn draw_as_shard(&self, dim: usize, sizes: &[usize]) {
        if let Layout::Pending(p) = &self.layout {
            if p.shape.get(dim).copied() == Some(sizes.iter().sum()) {
                p.drawn
                    .get_or_init(|| (p.draw.blocks(&self.mesh, dim, sizes), Placement::Shard(dim)));
            }
        }
    }

    /// The placement once drawn; `None` for a tensor no op has drawn yet.
    pub(crate) fn settled_placement(&self) -> Option<Placement> {
        match &self.layout {
            Layout::Ready { placement, .. } => Some(*placement),
            Layout::Pending(p) => p.drawn.get().map(|(_, placement)| *placement),
        }
    }

    pub fn placement(&self) -> Placement {
        self.ready().1
    }

    pub fn mesh(&self) -> &Mesh<B::Device> {
        &self.mesh
    }

    pub fn parts(&self) -> &[K::P] {
        self.ready().0
    }

    pub fn into_parts(self) -> Vec<K::P> {
        self.into_split().0
    }

    /// The parts, the placement and the mesh, taken apart.
    pub(crate) fn into_split(self) -> (Vec<K::P>, Placement, Mesh<B::Device>) {
        match self.layout {
            Layout::Ready { parts, placement } => (parts, placement, self.mesh),
            Layout::Pending(_) => {
                let (parts, placement) = self.ready();
                (parts.to_vec(), placement, self.mesh)
            }
        }
    }

    /// The sizes of the blocks along the sharded dim (`None` unless `Shard`).
    pub fn shard_sizes(&self) -> Option<Vec<usize>> {
        match self.ready() {
            (parts, Placement::Shard(d)) => Some(parts.iter().map(|p| p.shape()[d]).collect()),
            _ => None,
        }
    }
}

impl<B: Backend, K: Kind<B>> Clone for ShardedTensor<B, K> {
    fn clone(&self) -> Self {
        let layout = match &self.layout {
            Layout::Ready { parts, placement } => Layout::Ready {
                parts: parts.clone(),
                placement: *placement,
            },
            Layout::Pending(p) => Layout::Pending(p.clone()),
        };
        Self {
            layout,
            mesh: self.mesh.clone(),
            kind: PhantomData,
        }
    }
}

impl<B: Backend, K: Kind<B>> core::fmt::Debug for ShardedTensor<B, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShardedTensor")
            .field("shape", &self.shape())
            .field("placement", &self.settled_placement())
            .field("mesh", &self.mesh)
            .finish()
    }
}

impl<B: Backend, K: Kind<B>> TensorMetadata for ShardedTensor<B, K> {
    fn dtype(&self) -> DType {
        match &self.layout {
            Layout::Ready { parts, .. } => parts[0].dtype(),
            Layout::Pending(p) => p.dtype,
        }
    }

    /// The global shape: a `Shard(d)` tensor's dim `d` is the sum of its blocks.
    fn shape(&self) -> Shape {
        let (parts, placement) = match &self.layout {
            Layout::Ready { parts, placement } => (parts, *placement),
            Layout::Pending(p) => return p.shape.clone(),
        };
        let mut shape = parts[0].shape();
        if let Placement::Shard(d) = placement {
            shape[d] = parts.iter().map(|p| p.shape()[d]).sum();
        }
        shape
    }

    fn rank(&self) -> usize {
        self.shape().num_dims()
    }
}

impl<B: Backend, K: Kind<B>> QTensorPrimitive for ShardedTensor<B, K>
where
    K::P: QTensorPrimitive,
{
    fn scheme(&self) -> &QuantScheme {
        self.parts()[0].scheme()
    }

    fn acc_precision(&self) -> burn_std::quantization::QuantAcc {
        self.parts()[0].acc_precision()
    }

    fn propagation(&self) -> burn_std::quantization::QuantPropagation {
        self.parts()[0].propagation()
    }

    fn default_scheme() -> QuantScheme {
        K::P::default_scheme()
    }
}
