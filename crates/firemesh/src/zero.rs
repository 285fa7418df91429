//! ZeRO-1: the optimizer state sharded over the ranks, as placements.
//!
//! The gradients are reduce-scattered in buckets: each rank receives the sum of its `Shard(0)`
//! block of every gradient (the rows it will update), half the bytes of an all-reduce; a
//! gradient with fewer rows than ranks is summed whole and sliced. With early buckets (the
//! `Trainer`'s default) a full bucket is reduce-scattered during the backward pass
//! (`EarlyBuckets::scattering`), the rest at the step. Before the update each parameter whose
//! gradient is `Shard(0)` is sliced to its block, a local slice with no communication
//! ([`shard_parameters`]): Burn's optimizer then meets `Shard(0)` parameters and gradients, so
//! its weight decay and update compute 1/N of each parameter (Burn's AdamW decays the whole
//! parameter it is given, SGD adds the whole parameter to the gradient), and every state tensor
//! it makes (momentum, Adam's moments) is `Shard(0)`: 1/N of the state per rank. (A backend
//! whose slice is a view keeps the whole parameter's memory until the gather replaces it.) The
//! updated parameters, `Shard(0)` too, are all-gathered in buckets for the next forward pass.
//!
//! A checkpoint reads the state whole (gathered); loaded, it is `Replicated` until the first
//! step slices it again, on whatever rank count the run resumes.
//!
//! ZeRO-3: the parameters stay `Shard(0)` between steps too ([`shard_model`], before each
//! step; no gather after the update). The trainer marks them as parameters and arms their
//! gathering for the forward and backward passes (`StepScope::set_gather_parameters`): each op
//! that reads a sharded parameter gathers it whole into a copy of its own, freed with the op;
//! autodiff keeps the sharded parameter, so the backward pass gathers it again, as FSDP does.
//! The gradients are reduce-scattered as ZeRO-1's. A parameter whose rows do not split (one
//! row, or rows that do not divide among a world's processes) stays whole, as under ZeRO-1.

use crate::error::{Error, Result};
use crate::optim::AnyOptimizer;
use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::{AdamWState, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::FloatDType;
use burn::tensor::{Tensor, TensorPrimitive};
use firemesh_backend::buckets::{gather_in_buckets, reduce_scatter_in_buckets, EarlyBuckets};
use firemesh_backend::kind::FloatKind;
use firemesh_backend::{placement, redistribute, Placement, Sharded, ShardedTensor};
use std::collections::HashMap;

type Ad<B> = Autodiff<Sharded<B>>;

/// `stage`, if it is a ZeRO stage built here: 0 (the optimizer state on every rank), 1 (each
/// rank keeps its `Shard(0)` block of it) or 3 (and of the parameters, between their uses).
/// The one check of a stage, for every program.
pub fn stage(stage: u8) -> Result<u8> {
    match stage {
        0 | 1 | 3 => Ok(stage),
        _ => Err(Error::ZeroStage(stage)),
    }
}

/// Whether a parameter (or gradient) of `dims` on `t`'s mesh is stored `Shard(0)`: more than
/// one row, in equal shares for a world's processes.
fn splits<B: Backend, const D: usize>(t: &Tensor<Sharded<B>, D>) -> bool {
    let rows = t.dims()[0];
    rows > 1 && rows.is_multiple_of(t.device().processes())
}

/// ZeRO-3's storage: `module` with every parameter whose rows split ([`splits`]) stored
/// `Shard(0)`, the even split its gradient is reduce-scattered into (a local slice of a
/// `Replicated` parameter: a new or resumed model; parameters already sharded stay so).
pub fn shard_model<B: Backend, M: AutodiffModule<Ad<B>>>(module: M) -> M {
    struct Store;
    impl<B: Backend> ModuleMapper<Ad<B>> for Store {
        fn map_float<const D: usize>(
            &mut self,
            param: Param<Tensor<Ad<B>, D>>,
        ) -> Param<Tensor<Ad<B>, D>> {
            let value = param.val().inner();
            if placement(&value) != Placement::Replicated || !splits(&value) {
                return param;
            }
            with_value(param, redistribute(value, Placement::Shard(0)))
        }
    }
    module.map(&mut Store)
}

/// ZeRO-3's end of the update: the parameters stay sharded (no collective).
pub fn keep_sharded<M>(module: M, _bucket_bytes: usize) -> (M, usize) {
    (module, 0)
}

/// Sums `module`'s `Partial` gradients in `grads` over the ranks into `Shard(0)` blocks, in
/// buckets of `bucket_bytes` reduce-scattered (in `wire` if given), after closing the `early`
/// buckets (ZeRO-1's reduce-scatter theirs during the backward pass, and the gradients they
/// hold are taken as their blocks); then slices what is left whole (`Replicated`) to
/// `Shard(0)`. Returns the collectives: the signature of [`crate::grads::reduce_gradients_on_wire`].
pub fn reduce_scatter_gradients<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: &M,
    grads: &mut GradientsParams,
    bucket_bytes: usize,
    early: Option<&EarlyBuckets>,
    wire: Option<FloatDType>,
) -> usize {
    let scatter = |g| reduce_scatter_in_buckets(g, bucket_bytes, wire);
    let collectives = crate::grads::reduce_with::<B, M>(module, grads, early, scatter);
    shard_gradients::<B, M>(module, grads);
    collectives
}

/// Slices every gradient of `module` in `grads` to `Shard(0)`: each rank keeps its block. A
/// gradient whose rows do not split ([`splits`]: one row, or on a mesh that is one process's
/// share of a world, rows that do not split into equal shares for the processes) stays whole
/// (`Replicated`): its parameter and state are not sharded.
pub fn shard_gradients<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: &M,
    grads: &mut GradientsParams,
) {
    struct Slice<'a>(&'a mut GradientsParams);
    impl<B: Backend> ModuleVisitor<Ad<B>> for Slice<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad<B>, D>>) {
            if let Some(g) = self.0.remove::<Sharded<B>, D>(param.id) {
                // Shard(0) only: a gradient that came through an early bucket's blocks and a
                // later op (a transpose of a tied weight) may be sharded along another dim, and
                // `gather_parameters` gathers Shard(0) parameters.
                let g = match placement(&g) {
                    Placement::Shard(0) => g,
                    _ if splits(&g) => redistribute(g, Placement::Shard(0)),
                    _ => redistribute(g, Placement::Replicated),
                };
                self.0.register::<Sharded<B>, D>(param.id, g);
            }
        }
    }
    module.visit(&mut Slice(grads));
}

/// `module` with every `Replicated` parameter whose gradient in `grads` is `Shard(0)` sliced
/// to its own `Shard(0)` block on each rank (a local slice, no communication): the optimizer's
/// weight decay and update then touch each rank's block only. Parameters of other gradients,
/// or of none, are returned as they are. [`gather_parameters`] makes them whole again.
pub fn shard_parameters<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: M,
    grads: &GradientsParams,
) -> M {
    struct Slice<'a>(&'a GradientsParams);
    impl<B: Backend> ModuleMapper<Ad<B>> for Slice<'_> {
        fn map_float<const D: usize>(
            &mut self,
            param: Param<Tensor<Ad<B>, D>>,
        ) -> Param<Tensor<Ad<B>, D>> {
            let sharded = |g: &Tensor<Sharded<B>, D>| placement(g) == Placement::Shard(0);
            let grad = self.0.get::<Sharded<B>, D>(param.id);
            let Some(grad) = grad.filter(sharded) else {
                return param;
            };
            let value = param.val().inner();
            // A parameter whose rows do not split is not sliced (an op sees no sharded dim of
            // length 1), nor one whose gradient came in other blocks than the even split
            // (uneven early blocks): the update would gather the parameter again.
            let block = match placement(&value) {
                Placement::Replicated if splits(&value) => {
                    let block = redistribute(value.clone(), Placement::Shard(0));
                    match blocks(&block) == blocks(&grad) {
                        true => block,
                        false => value,
                    }
                }
                _ => value,
            };
            with_value(param, block)
        }
    }
    module.map(&mut Slice(grads))
}

/// `param` holding `value` instead, as trained (requiring a gradient) as it was.
fn with_value<B: Backend, const D: usize>(
    param: Param<Tensor<Ad<B>, D>>,
    value: Tensor<Sharded<B>, D>,
) -> Param<Tensor<Ad<B>, D>> {
    let (id, tensor, mapper) = param.consume();
    let fresh = Tensor::<Ad<B>, D>::from_inner(value);
    let tensor = match tensor.is_require_grad() {
        true => fresh.require_grad(),
        false => fresh,
    };
    Param::from_mapped_value(id, tensor, mapper)
}

/// The block sizes of `t` along its sharded dim, over the world (`None` unless sharded).
pub fn blocks<B: Backend, const D: usize>(t: &Tensor<Sharded<B>, D>) -> Option<Vec<usize>> {
    t.clone().into_primitive().tensor().shard_sizes()
}

/// Gathers every `Shard(0)` parameter of `module` (`Replicated` again), in buckets of
/// `bucket_bytes`; returns the module and the collectives it took.
pub fn gather_parameters<B: Backend, M: AutodiffModule<Ad<B>>>(
    module: M,
    bucket_bytes: usize,
) -> (M, usize) {
    struct Collect<B: Backend>(Vec<(ParamId, ShardedTensor<B, FloatKind>)>);
    impl<B: Backend> ModuleVisitor<Ad<B>> for Collect<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad<B>, D>>) {
            let inner = param.val().inner();
            if placement(&inner) == Placement::Shard(0) {
                self.0.push((param.id, inner.into_primitive().tensor()));
            }
        }
    }
    struct Put<B: Backend>(HashMap<ParamId, ShardedTensor<B, FloatKind>>);
    impl<B: Backend> ModuleMapper<Ad<B>> for Put<B> {
        fn map_float<const D: usize>(
            &mut self,
            param: Param<Tensor<Ad<B>, D>>,
        ) -> Param<Tensor<Ad<B>, D>> {
            let Some(whole) = self.0.remove(&param.id) else {
                return param;
            };
            let whole = Tensor::<Sharded<B>, D>::from_primitive(TensorPrimitive::Float(whole));
            with_value(param, whole)
        }
    }
    let mut collect = Collect::<B>(Vec::new());
    module.visit(&mut collect);
    if collect.0.is_empty() {
        return (module, 0);
    }
    let (ids, tensors): (Vec<ParamId>, Vec<_>) = collect.0.into_iter().unzip();
    let (wholes, collectives) = gather_in_buckets(tensors, bucket_bytes);
    let module = module.map(&mut Put(ids.into_iter().zip(wholes).collect()));
    (module, collectives)
}

/// The bytes of `module`'s parameters each rank stores, in rank order, counted from their
/// parts on the mesh (exact): every parameter's bytes on each rank without ZeRO or with
/// ZeRO-1, about 1/N of them with ZeRO-3.
pub fn parameter_bytes_per_rank<B: Backend, M: AutodiffModule<Ad<B>>>(module: &M) -> Vec<usize> {
    struct Count(Vec<usize>);
    impl<B: Backend> ModuleVisitor<Ad<B>> for Count {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad<B>, D>>) {
            let per_rank = param
                .val()
                .inner()
                .into_primitive()
                .tensor()
                .bytes_per_rank();
            if self.0.is_empty() {
                self.0 = vec![0; per_rank.len()];
            }
            self.0.iter_mut().zip(per_rank).for_each(|(t, b)| *t += b);
        }
    }
    let mut count = Count(Vec::new());
    module.visit(&mut count);
    count.0
}

/// The bytes of optimizer state each rank holds for `module`'s parameters: AdamW's two moment
/// estimates, in rank order (`None` for SGD, whose momentum Burn keeps private).
pub fn state_bytes_per_rank<B: Backend, M: AutodiffModule<Ad<B>>>(
    optimizer: &AnyOptimizer<M, Ad<B>>,
    module: &M,
) -> Option<Vec<usize>> {
    let AnyOptimizer::AdamW(adamw) = optimizer else {
        return None;
    };
    type Records<B> =
        HashMap<ParamId, burn::optim::record::AdaptorRecord<burn::optim::AdamW, Ad<B>>>;
    struct Count<B: Backend> {
        records: Records<B>,
        bytes: Vec<usize>,
    }
    impl<B: Backend> ModuleVisitor<Ad<B>> for Count<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad<B>, D>>) {
            let Some(record) = self.records.remove(&param.id) else {
                return;
            };
            let state: AdamWState<Sharded<B>, D> = record.into_state::<D>();
            for moment in [state.momentum.moment_1, state.momentum.moment_2] {
                let per_rank = moment.into_primitive().tensor().bytes_per_rank();
                if self.bytes.is_empty() {
                    self.bytes = vec![0; per_rank.len()];
                }
                for (total, b) in self.bytes.iter_mut().zip(per_rank) {
                    *total += b;
                }
            }
        }
    }
    let mut count = Count::<B> {
        records: adamw.to_record().into_iter().collect(),
        bytes: Vec::new(),
    };
    module.visit(&mut count);
    Some(count.bytes)
}
