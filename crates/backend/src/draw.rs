//! Random draws. A `Replicated` draw (parameter init) is one draw on rank 0 from the inner
//! backend's generator, shared by every rank: the values a one-device program gets from the same
//! seed. A Bernoulli draw (a dropout mask) on a mesh of several ranks is pending until an op
//! uses it: when the op's rule wants it as the blocks of a `Shard(d)` operand, each rank draws
//! its block from its own stream of the mesh seed, so no rank draws or holds the whole mask;
//! otherwise it is drawn whole. [`ShardedTensor::drawn`] is the one place a draw is taken.

use crate::data::{replicated_from_first, share};
use crate::kind::{FloatKind, IntKind};
use crate::mesh::Mesh;
use crate::pending::{Draw, Pending};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, DType, Distribution, FloatDType, IntDType, Shape};
use firemesh_rng::mix;
use std::sync::Mutex;

/// A random float tensor (see the module docs for when it is drawn).
pub(crate) fn random_float<B: Backend>(
    shape: Shape,
    distribution: Distribution,
    mesh: &Mesh<B::Device>,
    dtype: FloatDType,
) -> ShardedTensor<B, FloatKind> {
    if mesh.world_len() > 1 && matches!(distribution, Distribution::Bernoulli(_)) {
        let draw = RankStreams {
            shape: shape.clone(),
            distribution,
            dtype,
            stream: mesh.next_stream(),
        };
        let pending = Pending::new(shape, DType::from(dtype), Box::new(draw));
        return ShardedTensor::pending(pending, mesh.clone());
    }
    crate::exec::on_device_stream::<B, _>(|| {
        replicated_from_first(
            B::float_random(shape, distribution, mesh.device(0), dtype),
            mesh,
        )
    })
}

/// A `Replicated` random int tensor: one draw on rank 0, identical on every rank.
pub(crate) fn random_int<B: Backend>(
    shape: Shape,
    distribution: Distribution,
    mesh: &Mesh<B::Device>,
    dtype: IntDType,
) -> ShardedTensor<B, IntKind> {
    crate::exec::on_device_stream::<B, _>(|| {
        replicated_from_first(
            B::int_random(shape, distribution, mesh.device(0), dtype),
            mesh,
        )
    })
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

impl<B: Backend> Draw<B, FloatKind> for RankStreams {
    fn whole(&self, mesh: &Mesh<B::Device>) -> Vec<B::FloatTensorPrimitive> {
        let seed = rank_seed(self.stream, mesh.world_len());
        let first = self.seeded::<B>(seed, self.shape.clone(), mesh.device(0));
        share::<B, FloatKind>(first, mesh)
    }

    fn blocks(
        &self,
        mesh: &Mesh<B::Device>,
        dim: usize,
        sizes: &[usize],
    ) -> Vec<B::FloatTensorPrimitive> {
        let (sizes, _) = crate::across::own_blocks(sizes, mesh);
        (0..mesh.len())
            .map(|rank| {
                let mut shape = self.shape.clone();
                shape[dim] = sizes[rank];
                let seed = rank_seed(self.stream, mesh.world_rank(rank));
                self.seeded::<B>(seed, shape, mesh.device(rank))
            })
            .collect()
    }
}
