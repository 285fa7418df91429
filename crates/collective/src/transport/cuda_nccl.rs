//! NCCL's all-reduce of a CUDA group, through CubeCL's own collective path (the `nccl`
//! engine, [`crate::engine`]): CubeCL joins one communicator over the group's GPUs, runs
//! each rank's part on its device's communication stream after an event on the device stream,
//! and `sync_collective` makes the device stream wait for it in turn. Nothing waits on the host.
//! CubeCL's device threads log a failed NCCL call rather than return it, so the engine is
//! only taken once a small sum through it read back right ([`checked`]); a failure later in a
//! run is not seen. EXPERIMENTAL: built, and not yet run on a GPU.

use super::Rank;
use crate::engine::NcclStatus;
use crate::error::catch_runtime;
use crate::stream::DeviceStream;
use crate::DType;
use crate::{CollectiveError, ReduceOp, Result};
use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::device::Device as _;
use cubecl::server::Handle;
use cubecl::server::ReduceOperation;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// Held while a sum's NCCL calls are queued on the devices (see [`all_reduce`]).
static QUEUEING: Mutex<()> = Mutex::new(());

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
    checked(
        devices,
        format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100),
    )
}

/// How long NCCL's check sum may take (its communicator's set-up included).
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// NCCL `version`, once a small sum over `devices` through it read back right within
/// [`CHECK_LIMIT`] (once per set of GPUs in a process): CubeCL's NCCL path reports no failure
/// to its caller (its device threads log them), so a broken one would otherwise sum nothing.
fn checked(devices: &[CudaDevice], version: String) -> NcclStatus {
    static CHECKED: Mutex<Vec<(Vec<usize>, NcclStatus)>> = Mutex::new(Vec::new());
    let key: Vec<usize> = devices.iter().map(|d| d.index).collect();
    let mut done = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, status)) = done.iter().find(|(k, _)| *k == key) {
        return status.clone();
    }
    let (tx, rx) = mpsc::channel();
    let on = devices.to_vec();
    std::thread::spawn(move || tx.send(sum_check(&on)));
    let status = match rx.recv_timeout(CHECK_LIMIT) {
        Ok(Ok(())) => Ok(format!(
            "{version}, its check sum over the GPUs read back right"
        )),
        Ok(Err(why)) => Err(format!(
            "NCCL {version} loaded, but its check sum failed: {why}"
        )),
        Err(RecvTimeoutError::Disconnected) => {
            Err(format!("NCCL {version} loaded, but its check sum panicked"))
        }
        Err(RecvTimeoutError::Timeout) => Err(format!(
            "NCCL {version} loaded, but its check sum did not finish in {} s",
            CHECK_LIMIT.as_secs()
        )),
    };
    done.push((key, status.clone()));
    status
}

/// 1024 elements of rank r + 1 on each device, summed through NCCL and read back.
fn sum_check(devices: &[CudaDevice]) -> std::result::Result<(), String> {
    let len = 1024;
    let ranks: Vec<Rank<CudaRuntime>> = (devices.iter().enumerate())
        .map(|(index, device)| Rank {
            index,
            device: device.clone(),
            client: DeviceStream::client::<CudaRuntime>(device),
        })
        .collect();
    let bufs: Vec<Handle> = (ranks.iter())
        .map(|r| {
            let bytes = DType::F32.encode(&vec![(r.index + 1) as f64; len]);
            r.client.create_from_slice(&bytes)
        })
        .collect();
    all_reduce(&ranks, &bufs, DType::F32, ReduceOp::Sum).map_err(|e| e.to_string())?;
    let n = ranks.len() as f64;
    let want = n * (n + 1.0) / 2.0;
    for (r, buf) in ranks.iter().zip(&bufs) {
        let bytes = r
            .client
            .read_one(buf.clone())
            .map_err(|e| format!("{e:?}"))?;
        let got = DType::F32.decode(&bytes[..len * 4]);
        if let Some(bad) = got.iter().find(|&&v| v != want) {
            return Err(format!(
                "rank {} read {bad} where the sum is {want}",
                r.index
            ));
        }
    }
    Ok(())
}

/// Each rank's buffer of `dtype` summed (or averaged) in place over the group, on the
/// devices; NCCL counts the elements of the bytes each handle spans.
pub(super) fn all_reduce(
    ranks: &[Rank<CudaRuntime>],
    bufs: &[Handle],
    dtype: DType,
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
    if bufs.first().is_none_or(|b| b.size_in_used() == 0) {
        return Ok(());
    }
    let ids: Vec<_> = ranks.iter().map(|r| r.device.to_id()).collect();
    // Every rank's part is queued while the lock is held, so that each device's NCCL calls
    // come in one order even when several threads sum on the same GPUs.
    let _one_at_a_time = QUEUEING.lock().unwrap_or_else(|e| e.into_inner());
    let dtype = dtype.elem_type();
    for (rank, handle) in ranks.iter().zip(bufs) {
        let mut client = rank.client.clone();
        let handle = handle.clone();
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
            // Loaded with no GPU here, the check sum cannot run.
            Err(why) => assert!(
                (!loads && why.contains("libnccl.so")) || (loads && why.contains("check sum")),
                "{why}"
            ),
        }
    }
}
