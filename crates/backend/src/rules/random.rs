//! Random draws. A `Replicated` draw (parameter init) is one draw on rank 0 from the inner
//! backend's generator, shared by every rank: the values a one-device program gets from the same
//! seed. A Bernoulli draw (a dropout mask) on a mesh of several ranks waits for its first use:
//! met with a `Shard(d)` operand it is drawn block by block, each rank from its own stream of the
//! mesh seed, so no rank draws or holds the whole mask; used any other way it is drawn whole.

use crate::kind::{Float, Int, Kind};
use crate::mesh::{mix, Mesh};
use crate::placement::Placement;
use crate::ranks::run;
use crate::rules::{replicated_from_first, share};
use crate::tensor::{Draw, ShardedTensor};
use burn_backend::{Backend, DType, Distribution, FloatDType, IntDType, Shape, TensorMetadata};
use std::sync::Mutex;

/// A random float tensor (see the module docs for when it is drawn).
pub(crate) fn random_float<B: Backend>(
    shape: Shape,
    distribution: Distribution,
    mesh: &Mesh<B::Device>,
    dtype: FloatDType,
) -> ShardedTensor<B, Float> {
    if mesh.len() > 1 && matches!(distribution, Distribution::Bernoulli(_)) {
        let draw = RankStreams {
            shape: shape.clone(),
            distribution,
            dtype,
            stream: mesh.next_stream(),
        };
        return ShardedTensor::pending(shape, DType::from(dtype), Box::new(draw), mesh.clone());
    }
    replicated_from_first(
        B::float_random(shape, distribution, mesh.device(0), dtype),
        mesh,
    )
}

/// A `Replicated` random int tensor: one draw on rank 0, identical on every rank.
pub(crate) fn random_int<B: Backend>(
    shape: Shape,
    distribution: Distribution,
    mesh: &Mesh<B::Device>,
    dtype: IntDType,
) -> ShardedTensor<B, Int> {
    replicated_from_first(
        B::int_random(shape, distribution, mesh.device(0), dtype),
        mesh,
    )
}

/// An operand of an element-wise op, seen by [`settle_pending`] whatever its kind.
pub(crate) trait Operand {
    fn is_pending(&self) -> bool;
    /// `Shard(d)` and its block sizes, for a drawn operand split along a dim longer than 1.
    fn shard_layout(&self) -> Option<(usize, Vec<usize>)>;
    fn draw_as_shard(&self, dim: usize, sizes: &[usize]);
}

impl<B: Backend, K: Kind<B>> Operand for ShardedTensor<B, K> {
    fn is_pending(&self) -> bool {
        self.settled_placement().is_none()
    }

    fn shard_layout(&self) -> Option<(usize, Vec<usize>)> {
        match self.settled_placement()? {
            Placement::Shard(d) if self.shape()[d] > 1 => Some((d, self.shard_sizes()?)),
            _ => None,
        }
    }

    fn draw_as_shard(&self, dim: usize, sizes: &[usize]) {
        ShardedTensor::draw_as_shard(self, dim, sizes)
    }
}

/// Draws the pending operands of an element-wise op as the blocks of its first `Shard(d)`
/// operand, so a mask meets a sharded batch rank by rank. Nothing to do (and no cost beyond one
/// check per operand) when no operand is pending.
pub(crate) fn settle_pending(operands: &[&dyn Operand]) {
    if !operands.iter().any(|o| o.is_pending()) {
        return;
    }
    if let Some((d, sizes)) = operands.iter().find_map(|o| o.shard_layout()) {
        operands.iter().for_each(|o| o.draw_as_shard(d, &sizes));
    }
}

/// A draw taken from the mesh's per-rank streams: stream `stream` for the draw, split by rank.
struct RankStreams {
    shape: Shape,
    distribution: Distribution,
    dtype: FloatDType,
    stream: u64,
}

/// Rank `rank`'s stream of this draw; the whole draw uses one more.
fn rank_seed(stream: u64, rank: usize) -> u64 {
    mix(stream, rank as u64 + 1)
}

impl RankStreams {
    /// Inner backends keep one generator per process: seeding it and drawing is one step, under
    /// a lock, so that ranks drawing at once each get their own stream.
    fn seeded<B: Backend>(
        &self,
        seed: u64,
        shape: Shape,
        device: &B::Device,
    ) -> B::FloatTensorPrimitive {
        static GENERATOR: Mutex<()> = Mutex::new(());
        let _one_at_a_time = GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
        B::seed(device, seed);
        B::float_random(shape, self.distribution, device, self.dtype)
    }
}

impl<B: Backend> Draw<B, Float> for RankStreams {
    fn whole(&self, mesh: &Mesh<B::Device>) -> Vec<B::FloatTensorPrimitive> {
        let seed = rank_seed(self.stream, mesh.len());
        let first = self.seeded::<B>(seed, self.shape.clone(), mesh.device(0));
        share::<B, Float>(first, mesh)
    }

    fn blocks(
        &self,
        mesh: &Mesh<B::Device>,
        dim: usize,
        sizes: &[usize],
    ) -> Vec<B::FloatTensorPrimitive> {
        let args: Vec<_> = (0..mesh.len()).map(|r| (r, sizes[r])).collect();
        run(mesh, args, |(rank, size)| {
            let mut shape = self.shape.clone();
            shape[dim] = size;
            self.seeded::<B>(rank_seed(self.stream, rank), shape, mesh.device(rank))
        })
    }
}
