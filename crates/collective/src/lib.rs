//! firemesh-collective: collectives over the N ranks of one machine — all-reduce (sum, mean,
//! max), reduce-scatter, all-gather, broadcast — with the reduction kernels in CubeCL.
//!
//! Layers, each replaceable on its own:
//! - [`algorithms`](crate::algorithms): ring (bandwidth-optimal, pipelined) and one-shot
//!   (latency-optimal), written once against a [`fabric::Fabric`];
//! - [`transport`]: how bytes move between ranks (the runtime's client copy; CUDA peer copies);
//! - [`kernels`](crate::kernels): the vectorized `#[cube]` reduction kernels.
//!
//! [`Group`] runs collectives on CubeCL devices (CUDA, wgpu); [`PortableGroup`] runs the same
//! algorithms with plain Burn tensor ops on any backend. Both take one buffer per rank from a
//! single caller; [`Communicator`] gives each rank its own handle for one-thread-per-rank use.

pub(crate) mod algorithms;
mod checks;
mod communicator;
mod config;
mod cube_tensors;
mod dtype;
pub mod engine;
mod error;
pub mod fabric;
mod group;
mod kernels;
mod op;
mod portable_group;
pub mod probe;
pub mod stream;
mod tensors;
pub mod transport;
#[cfg(feature = "wgpu")]
pub mod wgpu_devices;

pub use algorithms::{ranges_from_lens, shard_ranges};
pub use communicator::Communicator;
pub use config::{Algorithm, CollectiveConfig, Transfer};
pub use dtype::DType;
pub use engine::{Engine, EngineChoice, EngineUsed};
pub use error::{panic_message, CollectiveError, Result, Unavailable};
pub use fabric::device::DeviceBuffer;
pub use group::Group;
pub use op::{Combine, ReduceOp};
pub use portable_group::PortableGroup;
pub use stream::DeviceStream;
pub use tensors::{TensorBridge, TensorCollectives};
pub use transport::{Arrival, CollectiveRuntime, Rank, Transport};

/// The collectives a group of N ranks runs. Every method takes one buffer per rank, in rank
/// order, from a single caller.
pub trait Collectives: Send + Sync + 'static {
    /// One rank's buffer.
    type Buf: Clone + Send + Sync + 'static;

    /// Number of ranks.
    fn size(&self) -> usize;
    /// Elements in a buffer.
    fn buf_len(&self, buf: &Self::Buf) -> usize;
    /// Reduce in place: afterwards every rank holds `op` over all ranks' buffers. When it
    /// returns an error, the buffers' values are unspecified (as in NCCL).
    fn all_reduce(&self, bufs: &mut [Self::Buf], op: ReduceOp) -> Result<()>;
    /// Reduce, returning to rank r its part `shard_ranges(len, N)[r]` of the result.
    /// The input buffers are used as scratch space.
    fn reduce_scatter(&self, bufs: &mut [Self::Buf], op: ReduceOp) -> Result<Vec<Self::Buf>> {
        let len = bufs.first().map_or(0, |b| self.buf_len(b));
        let parts: Vec<usize> = shard_ranges(len, self.size())
            .iter()
            .map(|r| r.len())
            .collect();
        self.reduce_scatter_parts(bufs, op, &parts)
    }
    /// Reduce, returning to rank r the `parts[r]` elements that follow the parts of ranks < r.
    fn reduce_scatter_parts(
        &self,
        bufs: &mut [Self::Buf],
        op: ReduceOp,
        parts: &[usize],
    ) -> Result<Vec<Self::Buf>>;
    /// Concatenate the shards (lengths may differ) in rank order, on every rank.
    fn all_gather(&self, shards: &[Self::Buf]) -> Result<Vec<Self::Buf>> {
        let lens: Vec<usize> = shards.iter().map(|b| self.buf_len(b)).collect();
        let places: Vec<_> = algorithms::ranges_from_lens(&lens)
            .into_iter()
            .map(|part| vec![part])
            .collect();
        self.all_gather_placed(shards, &places, lens.iter().sum())
    }
    /// Every rank's shard on every rank, in one buffer of `len` elements laid out by
    /// `places`: `places[r]` are the ranges of the result that rank r's shard fills, its
    /// elements in order; they do not overlap (else `BadPlaces`), and elements no place
    /// covers (padding) are left unspecified. A shard of several tensors' row blocks lands
    /// each block inside its tensor, so that the gathered tensors lie whole one after
    /// another, each a view of the one buffer.
    fn all_gather_placed(
        &self,
        shards: &[Self::Buf],
        places: &[Vec<std::ops::Range<usize>>],
        len: usize,
    ) -> Result<Vec<Self::Buf>>;
    /// Copy the root's buffer into every rank's buffer, in place.
    fn broadcast(&self, bufs: &mut [Self::Buf], root: usize) -> Result<()>;
}
