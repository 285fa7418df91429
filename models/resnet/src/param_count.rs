//! Parameter counts that match PyTorch's `sum(p.numel() for p in model.parameters())`.
//!
//! Burn's `Module::num_params` also counts BatchNorm running statistics (PyTorch buffers) and
//! materializes lazily initialized parameters; [`count_params`] separates the two kinds and
//! reads shapes only, so it is cheap even for ResNet-152.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;

/// Parameters of a module, split into trained weights and BatchNorm running statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamCount {
    /// Elements of parameters updated by the optimizer (PyTorch's `parameters()`).
    pub trainable: usize,
    /// Elements of BatchNorm `running_mean` and `running_var` (PyTorch buffers).
    pub running_stats: usize,
}

impl ParamCount {
    /// Everything Burn's `num_params` counts.
    pub fn total(&self) -> usize {
        self.trainable + self.running_stats
    }
}

/// Counts the parameters of `module` without initializing any of them.
pub fn count_params<B: Backend, M: Module<B>>(module: &M) -> ParamCount {
    let mut counter = Counter {
        path: Vec::new(),
        count: ParamCount::default(),
    };
    module.visit(&mut counter);
    counter.count
}

struct Counter {
    /// (field name, container type) of each module entered and not yet exited.
    path: Vec<(String, String)>,
    count: ParamCount,
}

impl Counter {
    fn in_running_stat(&self) -> bool {
        matches!(self.path.last(), Some((name, container))
            if container == "Struct:BatchNorm" && name.starts_with("running_"))
    }
}

impl<B: Backend> ModuleVisitor<B> for Counter {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let elements = param.lazy_shape().num_elements();
        if self.in_running_stat() {
            self.count.running_stats += elements;
        } else {
            self.count.trainable += elements;
        }
    }

    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path
            .push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
}
