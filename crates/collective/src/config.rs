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
        }
    }
}

impl CollectiveConfig {
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
