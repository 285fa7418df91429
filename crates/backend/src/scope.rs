//! What a training step arms for the ops it issues on a mesh: the precision of products and
//! convolutions ([`Mesh::autocast`]) and the early gradient buckets its backward pass fills
//! ([`EarlyBuckets::arm`]). A loop owns them, as one [`StepScope`] (firemesh's `Trainer` does)
//! or as the guards the arming returns; the ops find them in the arming thread's own list
//! (`runtime/armed.rs`), nothing of it on the mesh.

use crate::buckets::EarlyBuckets;
use crate::mesh::Mesh;
use crate::runtime::armed::{arm, MeshKey, Setting, Token};
use burn_backend::FloatDType;

/// What one training step arms for its forward and backward passes on one mesh: the precision
/// of matrix products and convolutions (none: their operands' own) and the early gradient
/// buckets its backward pass fills (none: the gradients are summed after it). A loop owns one
/// and enters it for each step: [`StepScope::enter`] around the forward and backward passes,
/// [`StepScope::enter_backward`] around the backward pass.
pub struct StepScope {
    mesh: MeshKey,
    /// Whether early buckets can cross this mesh's processes ([`EarlyBuckets::arm`]).
    crossing: bool,
    autocast: Option<FloatDType>,
    early: Option<EarlyBuckets>,
}

impl StepScope {
    /// A scope on `mesh` that arms nothing.
    pub fn new<D: 'static>(mesh: &Mesh<D>) -> Self {
        Self {
            mesh: mesh.key(),
            crossing: mesh.processes() == 1 || mesh.side_link().is_some(),
            autocast: None,
            early: None,
        }
    }

    /// Products and convolutions in `dtype` (`None`: their operands' own).
    pub fn set_autocast(&mut self, dtype: Option<FloatDType>) {
        self.autocast = dtype;
    }

    /// Gradients summed in `early`'s buckets during the backward pass (`None`: after it).
    pub fn set_early_buckets(&mut self, early: Option<EarlyBuckets>) {
        self.early = early;
    }

    pub fn autocast(&self) -> Option<FloatDType> {
        self.autocast
    }

    pub fn early_buckets(&self) -> Option<&EarlyBuckets> {
        self.early.as_ref()
    }

    /// Arms this scope's precision for the ops the calling thread issues on its mesh (the
    /// forward and backward passes), until the returned value drops.
    pub fn enter(&self) -> Entered {
        let tokens = self
            .autocast
            .map(|dtype| arm(self.mesh, Setting::Autocast(dtype)));
        Entered {
            _tokens: tokens.into_iter().collect(),
        }
    }

    /// Arms this scope's early buckets for the calling thread's backward pass on its mesh,
    /// until the returned value drops. A loss that runs a backward pass of its own (a gradient
    /// penalty) runs it before this, so its gradients stay out of the step's buckets.
    pub fn enter_backward(&self) -> Entered {
        let tokens = self
            .early
            .as_ref()
            .map(|e| e.arm_on(self.mesh, self.crossing));
        Entered {
            _tokens: tokens.into_iter().collect(),
        }
    }
}

/// A [`StepScope`] in force; it ends when this drops.
#[must_use = "the scope ends when this is dropped"]
pub struct Entered {
    _tokens: Vec<Token>,
}
