//! One model replica and one optimizer per rank, stepped in lockstep.

use crate::{GradientSync, TrainError};
use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param};
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::{backend::AutodiffBackend, ElementConversion, Tensor};
use firemesh_collective::TensorCollectives;

/// Data-parallel training: rank r holds `replica(r)` on `devices[r]` and trains it on its shard
/// of every batch; gradients are averaged across ranks before every optimizer step.
pub struct DataParallel<B: AutodiffBackend, M, O, G> {
    replicas: Vec<M>,
    optimizers: Vec<O>,
    devices: Vec<B::Device>,
    sync: GradientSync<G>,
}

impl<B, M, O, G> DataParallel<B, M, O, G>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + Send + Sync,
    O: Optimizer<M, B>,
    G: TensorCollectives<B::InnerBackend>,
{
    /// Replicate `model` onto every device (identical parameters) with one optimizer each.
    pub fn new(
        model: M,
        devices: Vec<B::Device>,
        optimizer: impl Fn() -> O,
        sync: GradientSync<G>,
    ) -> Result<Self, TrainError> {
        if devices.len() != sync.group().size() {
            return Err(TrainError::WrongRankCount {
                expected: sync.group().size(),
                got: devices.len(),
            });
        }
        materialize(&model);
        let replicas = devices
            .iter()
            .map(|d| independent_copy(model.clone(), d))
            .collect();
        let optimizers = devices.iter().map(|_| optimizer()).collect();
        Ok(Self {
            replicas,
            optimizers,
            devices,
            sync,
        })
    }

    pub fn ranks(&self) -> usize {
        self.replicas.len()
    }

    pub fn devices(&self) -> &[B::Device] {
        &self.devices
    }

    /// Rank `rank`'s replica (all replicas hold the same parameters).
    pub fn replica(&self, rank: usize) -> &M {
        &self.replicas[rank]
    }

    /// Largest absolute difference between a parameter of any replica and replica 0's:
    /// 0 while the replicas are in lockstep.
    pub fn replica_divergence(&self) -> f64 {
        let reference = param_values::<B, M>(&self.replicas[0]);
        self.replicas[1..]
            .iter()
            .flat_map(|m| {
                param_values::<B, M>(m)
                    .into_iter()
                    .zip(reference.iter())
                    .map(|(a, b)| (a - b).abs())
                    .collect::<Vec<_>>()
            })
            .fold(0.0, f64::max)
    }

    /// One step: `loss_of(r, replica)` is rank r's mean loss over its shard (shards of equal
    /// size make the mean over ranks the loss of the whole batch). Ranks compute concurrently.
    /// Returns the mean loss over ranks.
    pub fn step(
        &mut self,
        lr: f64,
        loss_of: impl Fn(usize, &M) -> Tensor<B, 1> + Sync,
    ) -> Result<f64, TrainError> {
        let loss_of = &loss_of;
        let outcomes: Vec<std::thread::Result<(f64, GradientsParams)>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .replicas
                .iter()
                .enumerate()
                .map(|(r, m)| {
                    s.spawn(move || {
                        let loss = loss_of(r, m);
                        let value: f64 = loss.clone().into_scalar().elem();
                        (value, GradientsParams::from_grads(loss.backward(), m))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut losses = Vec::with_capacity(outcomes.len());
        let mut grads = Vec::with_capacity(outcomes.len());
        for (rank, outcome) in outcomes.into_iter().enumerate() {
            let (loss, g) = outcome.map_err(|p| TrainError::RankPanicked {
                rank,
                reason: panic_text(p.as_ref()),
            })?;
            losses.push(loss);
            grads.push(g);
        }
        self.sync
            .all_reduce_mean::<B, M>(&self.replicas, &mut grads)?;
        for ((replica, opt), g) in self
            .replicas
            .iter_mut()
            .zip(&mut self.optimizers)
            .zip(grads)
        {
            *replica = opt.step(lr, replica.clone(), g);
        }
        Ok(losses.iter().sum::<f64>() / losses.len() as f64)
    }
}

/// Run every lazy parameter initializer of `model` now: clones of an uninitialized parameter
/// draw their own random values, which would give every replica different weights.
fn materialize<B: AutodiffBackend, M: AutodiffModule<B>>(model: &M) {
    struct Touch;
    impl<B: AutodiffBackend> ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Touch);
}

/// `model` on `device` with every parameter a new autodiff leaf (same id, same values), so that
/// replicas on one device never share autodiff nodes and each backward pass, running on its own
/// thread, only walks its own replica's graph.
fn independent_copy<B: AutodiffBackend, M: AutodiffModule<B>>(model: M, device: &B::Device) -> M {
    struct FreshLeaves;
    impl<B: AutodiffBackend> ModuleMapper<B> for FreshLeaves {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let require_grad = tensor.is_require_grad();
            let fresh = Tensor::from_inner(tensor.inner()).set_require_grad(require_grad);
            Param::from_mapped_value(id, fresh, mapper)
        }
    }
    model.fork(device).map(&mut FreshLeaves)
}

/// Every float parameter of `model`, in module order.
fn param_values<B: AutodiffBackend, M: AutodiffModule<B>>(model: &M) -> Vec<f64> {
    struct Values(Vec<f64>);
    impl<B: AutodiffBackend> ModuleVisitor<B> for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0
                .extend(param.val().into_data().convert::<f64>().iter::<f64>());
        }
    }
    let mut v = Values(Vec::new());
    model.visit(&mut v);
    v.0
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}
