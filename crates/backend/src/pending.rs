//! A random tensor not drawn yet (`draw.rs` makes them): its shape and dtype, how to draw it,
//! and the draw once taken, shared by the clones of its tensor.

use crate::kind::Kind;
use crate::mesh::Mesh;
use crate::placement::Placement;
use crate::runtime::lanes::on_device_stream;
use burn_backend::{Backend, DType, Shape};
use std::sync::OnceLock;

/// Draws the parts of a pending tensor: `whole` as a `Replicated` value, or the blocks of
/// `Shard(dim)` with the given sizes.
pub(crate) trait Draw<B: Backend, K: Kind<B>>: Send + Sync {
    fn whole(&self, mesh: &Mesh<B::Device>) -> Vec<K::P>;
    fn blocks(&self, mesh: &Mesh<B::Device>, dim: usize, sizes: &[usize]) -> Vec<K::P>;
}

/// A draw not taken yet, shared by the clones of its tensor.
pub(crate) struct Pending<B: Backend, K: Kind<B>> {
    shape: Shape,
    dtype: DType,
    draw: Box<dyn Draw<B, K>>,
    taken: OnceLock<(Vec<K::P>, Placement)>,
}

impl<B: Backend, K: Kind<B>> Pending<B, K> {
    pub(crate) fn new(shape: Shape, dtype: DType, draw: Box<dyn Draw<B, K>>) -> Self {
        Self {
            shape,
            dtype,
            draw,
            taken: OnceLock::new(),
        }
    }

    pub(crate) fn shape(&self) -> &Shape {
        &self.shape
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    /// The parts and placement, once drawn.
    pub(crate) fn taken(&self) -> Option<&(Vec<K::P>, Placement)> {
        self.taken.get()
    }

    /// Draws (once; later calls return the first draw): as the blocks of `Shard(dim)` when
    /// `blocks` gives sizes that add up to the length of `dim`, whole otherwise.
    pub(crate) fn take(
        &self,
        mesh: &Mesh<B::Device>,
        blocks: Option<(usize, &[usize])>,
    ) -> &(Vec<K::P>, Placement) {
        self.taken.get_or_init(|| {
            on_device_stream::<B, _>(|| match blocks {
                Some((dim, sizes)) if self.shape.get(dim) == Some(&sizes.iter().sum()) => {
                    (self.draw.blocks(mesh, dim, sizes), Placement::Shard(dim))
                }
                _ => (self.draw.whole(mesh), Placement::Replicated),
            })
        })
    }
}
