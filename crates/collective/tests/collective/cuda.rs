//! The collective suite on CUDA GPUs: the ranks are the GPUs present, or N logical ranks on one
//! GPU; every test runs with both transfers (synchronous, stream-ordered), and again with ranks
//! on one GPU copying as two GPUs would (`*_as_peers`). Skipped with a
//! message where no GPU is present (`FIREMESH_REQUIRE_CUDA=1` fails instead, as
//! `scripts/gpu-check.sh` sets).

use crate::common;

use common::DeviceHarness;
use cubecl::cuda::{CudaDevice, CudaRuntime};
use firemesh_collective::{probe, DType, Transfer};

/// `n` ranks over the GPUs present (round-robin when there are fewer GPUs than ranks).
fn cuda_ranks(n: usize) -> Option<Vec<CudaDevice>> {
    let gpus = common::or_skip(probe::usable_cuda_devices(), "FIREMESH_REQUIRE_CUDA", "")?;
    Some(probe::round_robin(&gpus, n))
}

const fn cuda(transfer: Transfer, one_device_as_peers: bool) -> DeviceHarness<CudaRuntime> {
    DeviceHarness {
        devices: cuda_ranks,
        shared: true,
        transfer,
        one_device_as_peers,
    }
}

const SYNC: DeviceHarness<CudaRuntime> = cuda(Transfer::Synchronous, false);
const STREAM: DeviceHarness<CudaRuntime> = cuda(Transfer::StreamOrdered, false);
/// Ranks on one GPU copy as two GPUs would (peer copies, peer access probed, the stream-ordered
/// copy's raw streams and flag waits between two "devices"): what a one-GPU machine can check of
/// the paths between GPUs.
const SYNC_AS_PEERS: DeviceHarness<CudaRuntime> = cuda(Transfer::Synchronous, true);
const STREAM_AS_PEERS: DeviceHarness<CudaRuntime> = cuda(Transfer::StreamOrdered, true);

/// Under `FIREMESH_REQUIRE_CUDA=1` (the GPU check), a stream-ordered test that made any copy
/// synchronously (the driver refused a stream memory operation) fails when this drops: else the
/// stream-ordered suite could pass without one stream-ordered copy.
struct NoSynchronousFallback(Option<u64>);

impl NoSynchronousFallback {
    fn arm(transfer: Transfer) -> Self {
        let required = std::env::var("FIREMESH_REQUIRE_CUDA").is_ok_and(|v| v == "1");
        let checked = required && transfer == Transfer::StreamOrdered;
        Self(checked.then(firemesh_collective::transport::synchronous_fallbacks))
    }
}

impl Drop for NoSynchronousFallback {
    fn drop(&mut self) {
        let Some(before) = self.0 else { return };
        let made = firemesh_collective::transport::synchronous_fallbacks() - before;
        if !std::thread::panicking() {
            assert_eq!(
                made, 0,
                "{made} stream-ordered copies fell back to synchronous ones"
            );
        }
    }
}

/// The suite for one transfer, as tests named `cuda::<transfer>::…`.
macro_rules! suite {
    ($name:ident, $harness:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn every_op_dtype_and_length() {
                let _checked = NoSynchronousFallback::arm($harness.transfer);
                common::run_matrix(&$harness, 8);
            }

            #[test]
            fn rounding_and_agreement() {
                let _checked = NoSynchronousFallback::arm($harness.transfer);
                common::run_rounding(&$harness, 4, 100_003);
            }

            #[test]
            fn four_million_elements() {
                let _checked = NoSynchronousFallback::arm($harness.transfer);
                for dtype in DType::ALL {
                    common::run_large(&$harness, 8, 4 * 1024 * 1024 + 3, dtype);
                }
            }

            #[test]
            fn inputs_uploaded_and_results_read_on_other_threads() {
                let _checked = NoSynchronousFallback::arm($harness.transfer);
                // 64 MiB per rank: a copy that does not wait for an upload still in flight on
                // another thread's stream reads stale memory.
                for n in [2, 8] {
                    common::run_inputs_from_other_threads(&$harness, n, 16 * 1024 * 1024);
                }
            }

            #[test]
            fn sources_rewritten_after_return_leave_results_unchanged() {
                let _checked = NoSynchronousFallback::arm($harness.transfer);
                for n in [2, 5] {
                    common::run_sources_rewritten_after_return(&$harness, n, 4 * 1024 * 1024 + 3);
                }
            }
        }
    };
}

suite!(sync, SYNC);
suite!(stream, STREAM);
suite!(sync_as_peers, SYNC_AS_PEERS);
suite!(stream_as_peers, STREAM_AS_PEERS);
