//! Which parameter a tensor comes from: ZeRO-3's gathers ahead of use (`gathers.rs`) gather
//! a parameter and make the view an op reads again from the gathered copy. Its layout ops also
//! take a view held narrow back to the tensor it views (`ViewOf` in `tensor/clones.rs`).

use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, Shape};
use std::sync::atomic::{AtomicU64, Ordering};

/// A layout op that keeps a sharded parameter sharded (`crate::autocast::moved`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Layout {
    Transpose,
    SwapDims(usize, usize),
    Permute(Vec<usize>),
    Reshape(Shape),
}

impl Layout {
    /// This op on a float tensor of any backend (`Sharded`'s own, or the inner one's parts).
    pub(crate) fn applied<X: Backend>(&self, t: FloatTensor<X>) -> FloatTensor<X> {
        match self {
            Self::Transpose => X::float_transpose(t),
            Self::SwapDims(a, b) => X::float_swap_dims(t, *a, *b),
            Self::Permute(axes) => X::float_permute(t, axes),
            Self::Reshape(shape) => X::float_reshape(t, shape.clone()),
        }
    }

    /// The layout op that takes this op's result back to its operand, of shape `before`.
    pub(crate) fn undone(self, before: Shape) -> Self {
        match self {
            Self::Transpose | Self::SwapDims(..) => self,
            Self::Permute(axes) => {
                let mut back = vec![0; axes.len()];
                for (to, &from) in axes.iter().enumerate() {
                    back[from] = to;
                }
                Self::Permute(back)
            }
            Self::Reshape(_) => Self::Reshape(before),
        }
    }
}

/// Which parameter a tensor is, or which view of it: the parameter's place in its model, and
/// the layout ops that made the view from it (a cast changes the dtype only, and casting
/// commutes with moving values, so a cast keeps its operand's origin).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Origin {
    pub(crate) index: u64,
    /// Which marking of a parameter at that place: another model's parameter at the same
    /// place, or the same parameter marked at another step, has another.
    pub(crate) mark: u64,
    pub(crate) layout: Vec<Layout>,
}

impl Origin {
    /// A parameter at place `index`, newly marked.
    pub(crate) fn parameter(index: u64) -> Self {
        static MARKS: AtomicU64 = AtomicU64::new(0);
        Self {
            index,
            mark: MARKS.fetch_add(1, Ordering::Relaxed),
            layout: Vec::new(),
        }
    }

    /// The origin of `op` applied to a tensor of this origin.
    pub(crate) fn then(&self, op: Layout) -> Self {
        let mut layout = self.layout.clone();
        layout.push(op);
        Self {
            index: self.index,
            mark: self.mark,
            layout,
        }
    }
}
