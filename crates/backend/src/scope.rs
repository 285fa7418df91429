//! What a training step arms for the ops it issues on a mesh: the precision of products and
//! convolutions ([`Mesh::autocast`]) and the early gradient buckets its backward pass fills
//! ([`EarlyBuckets::arm`]). A loop owns them, as one [`StepScope`] (firemesh's `Trainer` does)
//! or as the guards the arming returns; the ops find them in the arming thread's own list
//! (`runtime/armed.rs`), nothing of it on the mesh.

use crate::buckets::EarlyBuckets;
use crate::gathers::ParameterGathers;
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
    /// ZeRO-3: parameters (marked, `ShardedTensor::mark_parameter`) stored sharded are gathered
    /// whole for each op of the forward and backward passes that reads them, some ahead of use.
    gathers: Option<ParameterGathers>,
}

impl StepScope {
    /// A scope on `mesh` that arms nothing.
    pub fn new<D: 'static>(mesh: &Mesh<D>) -> Self {
        Self {
            mesh: mesh.key(),
            crossing: mesh.processes() == 1 || mesh.side_link().is_some(),
            autocast: None,
            early: None,
            gathers: None,
        }
    }

    /// Sharded parameters gathered whole for each op that reads them, in the forward and the
    /// backward pass (ZeRO-3), into a copy that op owns: autodiff keeps the sharded parameter
    /// for the backward pass, which gathers it again, as FSDP does. A cast of a parameter casts
    /// each rank's block, so a narrow parameter is gathered narrow. Each gather is made when
    /// its op runs; [`StepScope::set_parameter_gathers`] issues them ahead of use.
    pub fn set_gather_parameters(&mut self, gather: bool) {
        self.gathers = gather.then(|| ParameterGathers::new(0));
    }

    /// As [`StepScope::set_gather_parameters`], with `gathers` issuing them ahead of use
    /// (`None`: parameters are not gathered). After entering the scope the loop begins the
    /// step's gathers ([`ParameterGathers::begin`]) and marks its parameters with their place
    /// (`ShardedTensor::mark_parameter_at`); it closes them after the backward pass
    /// ([`ParameterGathers::close`]).
    pub fn set_parameter_gathers(&mut self, gathers: Option<ParameterGathers>) {
        self.gathers = gathers;
    }

    pub fn gathers_parameters(&self) -> bool {
        self.gathers.is_some()
    }

    pub fn parameter_gathers(&self) -> Option<&ParameterGathers> {
        self.gathers.as_ref()
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

    /// Arms this scope's precision and parameter gathering for the ops the calling thread
    /// issues on its mesh (the forward and backward passes), until the returned value drops.
    pub fn enter(&self) -> Entered {
        let autocast = self.autocast.map(|a| arm(self.mesh, Setting::Autocast(a)));
        let gather = self.gathers.as_ref().map(|g| g.arm_on(self.mesh));
        Entered {
            _tokens: autocast.into_iter().chain(gather).collect(),
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
