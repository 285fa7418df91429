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
/// CubeCL uses). Ordering against CubeCL's streams, whichever threads queued work on them:
/// both clients are synchronized, so every command sent to either device before the copy has
/// been issued to its CUDA streams; both contexts are then synchronized, which waits for all
/// their streams; the copy runs; and it is complete on both devices before `copy` returns, so
/// kernels queued after it see the data. Correct but synchronous: overlap comes only from the
/// ring running its links on parallel host threads (event-based ordering on CubeCL's streams
/// is the next step).
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

/// A device's primary context (the one CubeCL uses), retained while this value lives.
struct PrimaryContext {
    index: usize,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
}

impl PrimaryContext {
    fn retain(rank: usize, device: &CudaDevice) -> Result<Self> {
        let mut dev: sys::CUdevice = 0;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: plain driver calls with valid out-pointers.
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
        Ok(Self {
            index: device.index,
            device: dev,
            ctx,
        })
    }

    /// Make this context current on the calling thread and wait for all its work.
    fn synchronize(&self, rank: usize) -> Result<()> {
        // SAFETY: the context is retained while `self` lives.
        unsafe {
            check(rank, "cuCtxSetCurrent", sys::cuCtxSetCurrent(self.ctx))?;
            check(rank, "cuCtxSynchronize", sys::cuCtxSynchronize())
        }
    }
}

/// Wait for all work on both ranks' devices (once when they share one), given as
/// (rank, context) pairs.
fn synchronize_both(a: (usize, &PrimaryContext), b: (usize, &PrimaryContext)) -> Result<()> {
    a.1.synchronize(a.0)?;
    if b.1.index != a.1.index {
        b.1.synchronize(b.0)?;
    }
    Ok(())
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: releases the reference taken in `retain`; CubeCL holds its own.
        unsafe {
            sys::cuDevicePrimaryCtxRelease_v2(self.device);
        }
    }
}

impl CudaPeerCopy {
    /// Enable direct access from `from`'s context to `to`'s memory once, if the hardware allows.
    /// CubeCL allocates from the stream-ordered pool (`cuMemAllocAsync`), whose memory this
    /// does not open to peers (that takes `cuMemPoolSetAccess`): `cuMemcpyPeer` stays correct
    /// either way, but the driver may stage it. Which one runs is for a multi-GPU measurement
    /// to show before pool access is granted.
    fn enable_peer(&self, from: &PrimaryContext, to: &PrimaryContext) {
        let key = (from.index, to.index);
        let mut done = self.peers_enabled.lock().unwrap_or_else(|e| e.into_inner());
        if from.index == to.index || !done.insert(key) {
            return;
        }
        let mut can = 0;
        // SAFETY: valid device handles and retained contexts.
        unsafe {
            if sys::cuDeviceCanAccessPeer(&mut can, from.device, to.device)
                == sys::CUresult::CUDA_SUCCESS
                && can == 1
            {
                sys::cuCtxSetCurrent(from.ctx);
                // Already-enabled is fine; anything else leaves the driver's staged copy in use.
                let _ = sys::cuCtxEnablePeerAccess(to.ctx, 0);
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
        // The resolved resources keep both allocations out of the memory pool's hands until
        // the copy is done.
        let src_mem = try_runtime(from.index, || from.client.get_resource(src))?;
        let dst_mem = try_runtime(to.index, || to.client.get_resource(dst.clone()))?;
        let sync = |rank: &Rank<CudaRuntime>| -> Result<()> {
            try_runtime(rank.index, || cubecl::future::block_on(rank.client.sync()))
        };
        sync(from)?;
        sync(to)?;
        let src_ctx = PrimaryContext::retain(from.index, &from.device)?;
        let dst_ctx = PrimaryContext::retain(to.index, &to.device)?;
        // A client's sync covers the calling thread's stream only; work other threads queued
        // (a kernel writing the source, an upload) may still run on theirs.
        synchronize_both((from.index, &src_ctx), (to.index, &dst_ctx))?;
        self.enable_peer(&src_ctx, &dst_ctx);
        // SAFETY: both pointers are live device allocations of at least `bytes` bytes, held
        // by the resources above; both clients are idle, so nothing races the copy.
        unsafe {
            check(
                from.index,
                "cuCtxSetCurrent",
                sys::cuCtxSetCurrent(src_ctx.ctx),
            )?;
            check(
                from.index,
                "cuMemcpyPeer",
                sys::cuMemcpyPeer(
                    dst_mem.resource().ptr,
                    dst_ctx.ctx,
                    src_mem.resource().ptr,
                    src_ctx.ctx,
                    bytes,
                ),
            )?;
        }
        // The copy may return before it completes, on the legacy stream that CubeCL's
        // non-blocking streams do not wait for; where the driver stages it through the host,
        // its last leg runs in the destination's context. Finish it on both devices.
        synchronize_both((from.index, &src_ctx), (to.index, &dst_ctx))?;
        drop((src_mem, dst_mem));
        Ok(dst)
    }
}
