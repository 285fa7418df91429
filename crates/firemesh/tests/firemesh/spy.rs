//! An optimizer for the tests that looks at what each update meets before it runs Burn's: every
//! parameter's placement and bytes per rank, and its gradient's.

use crate::step::Ad;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer};
use burn::tensor::Tensor;
use burn_flex::Flex;
use firemesh::backend::{placement, Placement, Sharded};
use firemesh::optim::AnyOptimizer;
use firemesh::zero::blocks;

/// One parameter as an update met it.
#[derive(Clone, Debug)]
pub(crate) struct Met {
    pub placement: Placement,
    pub bytes: Vec<usize>,
    /// Its gradient's placement and bytes per rank (`None`: no gradient, as BatchNorm's
    /// running statistics).
    pub gradient: Option<(Placement, Vec<usize>)>,
}

/// `inner`, recording what each of its updates met in `met`.
#[derive(Clone)]
pub(crate) struct Spy<M: AutodiffModule<Ad>> {
    pub inner: AnyOptimizer<M, Ad>,
    pub met: Vec<Vec<Met>>,
}

impl<M: AutodiffModule<Ad>> Spy<M> {
    pub(crate) fn new(inner: AnyOptimizer<M, Ad>) -> Self {
        Self {
            inner,
            met: Vec::new(),
        }
    }
}

impl<M: AutodiffModule<Ad>> Optimizer<M, Ad> for Spy<M> {
    type Record = <AnyOptimizer<M, Ad> as Optimizer<M, Ad>>::Record;

    fn step(&mut self, lr: LearningRate, model: M, grads: GradientsParams) -> M {
        struct Look<'a>(&'a GradientsParams, Vec<Met>);
        impl ModuleVisitor<Ad> for Look<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad, D>>) {
                let grad = self.0.get::<Sharded<Flex>, D>(param.id);
                let value = param.val().inner();
                // A gradient in other blocks than its parameter's would gather it again.
                if let Some(g) = &grad {
                    if placement(&value) == Placement::Shard(0) {
                        assert_eq!(blocks(g), blocks(&value));
                    }
                }
                let bytes =
                    |t: Tensor<Sharded<Flex>, D>| t.into_primitive().tensor().bytes_per_rank();
                self.1.push(Met {
                    placement: placement(&value),
                    gradient: grad.map(|g| (placement(&g), bytes(g))),
                    bytes: bytes(value),
                });
            }
        }
        let mut look = Look(&grads, Vec::new());
        burn::module::Module::visit(&model, &mut look);
        self.met.push(look.1);
        self.inner.step(lr, model, grads)
    }

    fn step_multi(&mut self, lr: LearningRate, model: M, grads: MultiGradientsParams) -> M {
        self.inner.step_multi(lr, model, grads)
    }

    fn to_record(&self) -> Self::Record {
        self.inner.to_record()
    }

    fn load_record(self, record: Self::Record) -> Self {
        Self {
            inner: self.inner.load_record(record),
            ..self
        }
    }
}
