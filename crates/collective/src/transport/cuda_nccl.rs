//! NCCL's all-reduce of a CUDA group, through CubeCL's own collective path (the `nccl`
//! engine, [`crate::engine`]): CubeCL joins one communicator over the group's GPUs, runs
//! each rank's part on its device's communication stream after an event on the device stream,
//! and `sync_collective` makes the device stream wait for it in turn. Nothing waits on the host.
//! EXPERIMENTAL: built, and not yet run on a GPU.

use super::Rank;
use crate::engine::NcclStatus;
use crate::error::catch_runtime;
use crate::{CollectiveError, DeviceBuffer, ReduceOp, Result};
use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::device::Device as _;
use cubecl::server::ReduceOperation;

/// NCCL's version where it can sum a group over `devices`, or why it cannot.
pub(super) fn status(devices: &[CudaDevice]) -> NcclStatus {
    if devices.len() < 2 {
        return Err("one GPU: nothing to sum between GPUs".into());
    }
    if let Some((i, d)) = (devices.iter().enumerate()).find(|(i, d)| devices[..*i].contains(d)) {
        return Err(format!(
            "NCCL takes each GPU once per communicator, and rank {i} shares GPU {} with another",
            d.index
        ));
    }
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Err("no libnccl.so on the library path".into());
    }
    let v =
        cudarc::nccl::result::get_nccl_version().map_err(|e| format!("ncclGetVersion: {e:?}"))?;
    Ok(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}

/// Each rank's buffer summed (or averaged) in place over the group, on the devices.
pub(super) fn all_reduce(
    ranks: &[Rank<CudaRuntime>],
    bufs: &[DeviceBuffer<CudaRuntime>],
    op: ReduceOp,
) -> Result<()> {
    let nccl_op = match op {
        ReduceOp::Sum => || ReduceOperation::Sum,
        ReduceOp::Mean => || ReduceOperation::Mean,
        ReduceOp::Max => {
            return Err(CollectiveError::EngineUnavailable {
                engine: "nccl",
                reason: "CubeCL's NCCL path sums and averages; the ring takes the maximum".into(),
            })
        }
    };
    let ids: Vec<_> = ranks.iter().map(|r| r.device.to_id()).collect();
    for (rank, buf) in ranks.iter().zip(bufs) {
        let mut client = rank.client.clone();
        let (handle, dtype) = (buf.handle.clone(), buf.dtype.elem_type());
        catch_runtime(rank.index, || {
            client.all_reduce(handle.clone(), handle, dtype, ids.clone(), nccl_op())
        })?;
    }
    for rank in ranks {
        catch_runtime(rank.index, || rank.client.sync_collective())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_needs_two_distinct_gpus_and_the_library() {
        let gpu = |index| CudaDevice { index };
        assert!(status(&[gpu(0)]).unwrap_err().contains("one GPU"));
        let shared = status(&[gpu(0), gpu(1), gpu(1)]).unwrap_err();
        assert!(shared.contains("rank 2 shares GPU 1"), "{shared}");
        // SAFETY: only tries to load the library.
        let loads = unsafe { cudarc::nccl::sys::is_culib_present() };
        match status(&[gpu(0), gpu(1)]) {
            Ok(version) => assert!(loads && version.split('.').count() == 3, "{version}"),
            Err(why) => assert!(!loads && why.contains("libnccl.so"), "{why}"),
        }
    }
}
