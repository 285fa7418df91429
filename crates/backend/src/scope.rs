//! What a training step arms for the ops it issues on a mesh: the precision of products and
//! convolutions ([`Mesh::autocast`]) and the early gradient buckets its backward pass fills
//! ([`EarlyBuckets::arm`]). A loop owns them, as one [`StepScope`] (firemesh's `Trainer` does)
//! or as the guards the arming returns; the ops find them in the arming thread's own list
//! (`runtime/armed.rs`), nothing of it on the mesh.

use crate::buckets::EarlyBuckets;
use crate::mesh::Mesh;
use crate::runtime::armed::{arm, Setting, Token};
use burn_backend::FloatDType;

/// What one training step arms for its forward and backward passes on one mesh: the precision
/// of matrix products and convolutions (none: their operands' own) and the early gradient
/// buckets its backward pass fills (none: the gradients are summed after it). A loop owns one
/// and [enters](StepScope::enter) it for each step's passes.
pub struct StepScope {
    mesh: u16,
    /// Whether early buckets can cross this mesh's processes ([`EarlyBuckets::arm`]).
    crossing: bool,
    autocast: Option<FloatDType>,
    early: Option<EarlyBuckets>,
}

impl StepScope {
    /// A scope on `mesh` that arms nothing.
    pub fn new<D>(mesh: &Mesh<D>) -> Self {
        Self {
            mesh: mesh.index(),
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

    /// Arms this scope for the ops the calling thread issues on its mesh, until the returned
    /// value drops.
    pub fn enter(&self) -> Entered {
        let mut tokens = Vec::new();
        if let Some(dtype) = self.autocast {
            tokens.push(arm(self.mesh, Setting::Autocast(dtype)));
        }
        if let Some(early) = &self.early {
            tokens.push(early.arm_on(self.mesh, self.crossing));
        }
        Entered { _tokens: tokens }
    }
}

/// A [`StepScope`] in force; it ends when this drops.
#[must_use = "the scope ends when this is dropped"]
pub struct Entered {
    _tokens: Vec<Token>,
}
