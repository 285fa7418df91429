//! How a collective runs: algorithm choice, pipelining and time limits.

use std::time::Duration;

/// Which algorithm moves the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Pick by message size: one-shot below `small_message_bytes`, ring above.
    Auto,
    /// Reduce-scatter then all-gather around a ring: 2(N-1) steps, bandwidth-optimal.
    Ring,
    /// Every rank reads every other rank's buffer directly: one step, latency-optimal.
    OneShot,
}

/// How a transfer between two devices is ordered with the kernels around it (CUDA; a wgpu
/// transfer is a read-back, which always waits on the host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transfer {
    /// Each transfer waits on the host for the work queued on both devices, copies, and
    /// returns once the copy is complete (`CudaPeerCopy`): every copy drains both devices.
    Synchronous,
    /// Transfers are queued on raw streams and ordered against the devices' CubeCL streams
    /// with flags in device memory; the host never waits, and a rank's kernels that do not
    /// read the bytes in flight keep running (`CudaStreamCopy`). The default: a pair of devices
    /// whose driver refuses any of the stream memory operations it uses (probed when the pair
    /// first copies) takes the synchronous copy, with a warning. Untested on hardware so far.
    #[default]
    StreamOrdered,
}

/// Tuning knobs of a collective. `Default` gives the values a user should start from.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveConfig {
    pub algorithm: Algorithm,
    /// Messages smaller than this (bytes per rank) use the one-shot algorithm under `Auto`.
    pub small_message_bytes: usize,
    /// The ring splits each of its chunks into at most this many sub-chunks, so the transfer
    /// of one sub-chunk overlaps the reduction of the previous one.
    pub pipeline_depth: usize,
    /// A sub-chunk is never smaller than this many bytes.
    pub min_subchunk_bytes: usize,
    /// Transfers of one step run on one host thread per rank when a transfer is at least this big.
    pub parallel_transfer_bytes: usize,
    /// How long ranks joining a collective through a [`crate::Communicator`] wait for each other.
    pub timeout: Duration,
    /// How transfers between CUDA devices are ordered.
    pub transfer: Transfer,
    /// Which engine runs the sums ([`crate::engine`]): NCCL where it can, by default.
    pub engine: crate::Engine,
    /// Ranks that share a CUDA device copy between them as two GPUs would: peer copies
    /// (`cuMemcpyPeerAsync` rather than a copy within the device) and the pair's peer access
    /// probed. A test switch, so that a machine with one GPU runs every driver call of the CUDA
    /// transports; off by default.
    pub one_device_as_peers: bool,
}

impl Default for CollectiveConfig {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::Auto,
            small_message_bytes: 256 * 1024,
            pipeline_depth: 4,
            min_subchunk_bytes: 256 * 1024,
            parallel_transfer_bytes: 64 * 1024,
            timeout: Duration::from_secs(60),
            transfer: Transfer::default(),
            engine: crate::Engine::default(),
            one_device_as_peers: false,
        }
    }
}

impl CollectiveConfig {
    /// The config to start from for `transfer`. Synchronous transfers get no sub-chunks: each
    /// waits for the kernels queued on the devices it joins, so sub-chunks would add
    /// synchronisations and overlap nothing (ring all-reduce of 64 MiB over 2 lavapipe
    /// devices: 75 ms unpipelined, 117 ms at depth 4). Stream-ordered ones are pipelined: a
    /// sub-chunk moves while the one before it is reduced.
    pub fn with_transfer(transfer: Transfer) -> Self {
        let pipeline_depth = match transfer {
            Transfer::Synchronous => 1,
            Transfer::StreamOrdered => Self::default().pipeline_depth,
        };
        Self {
            transfer,
            pipeline_depth,
            ..Self::default()
        }
    }

    /// A config that always uses `algorithm`.
    pub fn with_algorithm(algorithm: Algorithm) -> Self {
        Self {
            algorithm,
            ..Self::default()
        }
    }

    /// The algorithm used for a message of `bytes` per rank.
    pub fn resolve(&self, bytes: usize) -> Algorithm {
        match self.algorithm {
            Algorithm::Auto if bytes < self.small_message_bytes => Algorithm::OneShot,
            Algorithm::Auto => Algorithm::Ring,
            chosen => chosen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CollectiveConfig, Transfer};

    #[test]
    fn transfers_are_stream_ordered_by_default() {
        assert_eq!(Transfer::default(), Transfer::StreamOrdered);
    }

    #[test]
    fn only_stream_ordered_transfers_are_pipelined_by_default() {
        let sync = CollectiveConfig::with_transfer(Transfer::Synchronous);
        let stream = CollectiveConfig::with_transfer(Transfer::StreamOrdered);
        assert_eq!(
            (sync.transfer, sync.pipeline_depth),
            (Transfer::Synchronous, 1)
        );
        assert_eq!(
            (stream.transfer, stream.pipeline_depth),
            (
                Transfer::StreamOrdered,
                CollectiveConfig::default().pipeline_depth
            )
        );
        assert!(stream.pipeline_depth > 1);
    }
}
