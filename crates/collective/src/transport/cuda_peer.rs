//! Device-to-device copies between CUDA GPUs with the driver API: peer-to-peer over NVLink or
//! PCIe where `cuDeviceCanAccessPeer` allows it, staged by the driver otherwise. No NCCL.

use super::{Rank, Transport};
use crate::error::{catch_runtime, try_runtime};
use crate::{CollectiveError, DType, Result};
use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::server::Handle;
use cudarc::driver::sys;
use std::collections::HashSet;
use std::sync::Mutex;

/// Copies between CUDA devices with `cuMemcpyPeer` in the devices' primary contexts (the ones
/// CubeCL uses). Ordering against CubeCL's streams: both clients are synchronized before the
/// copy and the copy is complete before `copy` returns, so kernels queued after it see the data.
/// Correct but synchronous: overlap comes only from the ring running its links on parallel host
/// threads (event-based ordering on CubeCL's streams is the next step).
#[derive(Default)]
pub struct CudaPeerCopy {
    peers_enabled: Mutex<HashSet<(usize, usize)>>,
}

fn check(rank: usize, what: &str, code: sys::CUresult) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CollectiveError::Runtime {
            rank,
            reason: format!("{what} failed: {code:?}"),
        })
    }
}

fn primary_context(rank: usize, device: &CudaDevice) -> Result<(sys::CUdevice, sys::CUcontext)> {
    let mut dev: sys::CUdevice = 0;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: plain driver calls with valid out-pointers; the primary context is reference
    // counted and stays alive while CubeCL holds it.
    unsafe {
        check(
            rank,
            "cuDeviceGet",
            sys::cuDeviceGet(&mut dev, device.index as i32),
        )?;
        check(
            rank,
            "cuDevicePrimaryCtxRetain",
            sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
        )?;
    }
    Ok((dev, ctx))
}

impl CudaPeerCopy {
    /// Enable direct access from `from`'s context to `to`'s memory once, if the hardware allows.
    fn enable_peer(
        &self,
        from: (usize, sys::CUdevice, sys::CUcontext),
        to: (usize, sys::CUdevice, sys::CUcontext),
    ) {
        let key = (from.0, to.0);
        let mut done = self.peers_enabled.lock().unwrap_or_else(|e| e.into_inner());
        if from.0 == to.0 || !done.insert(key) {
            return;
        }
        let mut can = 0;
        // SAFETY: valid device handles and contexts obtained above.
        unsafe {
            if sys::cuDeviceCanAccessPeer(&mut can, from.1, to.1) == sys::CUresult::CUDA_SUCCESS
                && can == 1
            {
                sys::cuCtxSetCurrent(from.2);
                // Already-enabled is fine; anything else leaves the driver's staged copy in use.
                let _ = sys::cuCtxEnablePeerAccess(to.2, 0);
            }
        }
    }
}

impl Transport<CudaRuntime> for CudaPeerCopy {
    fn name(&self) -> &'static str {
        "cuda-peer"
    }

    fn copy(
        &self,
        from: &Rank<CudaRuntime>,
        src: Handle,
        to: &Rank<CudaRuntime>,
        _dtype: DType,
    ) -> Result<Handle> {
        let bytes = src.size_in_used() as usize;
        let dst = catch_runtime(to.index, || to.client.empty(bytes.max(1)))?;
        if bytes == 0 {
            return Ok(dst);
        }
        let sync = |rank: &Rank<CudaRuntime>| -> Result<()> {
            try_runtime(rank.index, || cubecl::future::block_on(rank.client.sync()))
        };
        sync(from)?;
        sync(to)?;
        let resource = |rank: &Rank<CudaRuntime>, h: Handle| -> Result<u64> {
            let r = try_runtime(rank.index, || rank.client.get_resource(h))?;
            Ok(r.resource().ptr)
        };
        let src_ptr = resource(from, src)?;
        let dst_ptr = resource(to, dst.clone())?;
        let (src_dev, src_ctx) = primary_context(from.index, &from.device)?;
        let (dst_dev, dst_ctx) = primary_context(to.index, &to.device)?;
        self.enable_peer(
            (from.device.index, src_dev, src_ctx),
            (to.device.index, dst_dev, dst_ctx),
        );
        // SAFETY: both pointers are live device allocations of at least `bytes` bytes, owned by
        // the handles held above; both clients are idle, so nothing races the copy.
        unsafe {
            check(from.index, "cuCtxSetCurrent", sys::cuCtxSetCurrent(src_ctx))?;
            check(
                from.index,
                "cuMemcpyPeer",
                sys::cuMemcpyPeer(dst_ptr, dst_ctx, src_ptr, src_ctx, bytes),
            )?;
            // A device-to-device copy may return before it completes, on the legacy stream that
            // CubeCL's non-blocking streams do not wait for: finish it before kernels use `dst`.
            check(from.index, "cuCtxSynchronize", sys::cuCtxSynchronize())?;
            sys::cuDevicePrimaryCtxRelease_v2(src_dev);
            sys::cuDevicePrimaryCtxRelease_v2(dst_dev);
        }
        Ok(dst)
    }
}
