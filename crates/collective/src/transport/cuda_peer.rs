//! Device-to-device copies between CUDA GPUs with the driver API: peer-to-peer over NVLink or
//! PCIe where `cuDeviceCanAccessPeer` allows it, staged by the driver otherwise. No NCCL.

use super::cuda_driver::{check, PeerAccess, PrimaryContext};
use super::{Arrival, Rank, Transport};
use crate::error::{catch_runtime, try_runtime};
use crate::{DType, Result};
use cubecl::cuda::CudaRuntime;
use cubecl::server::Handle;
use cudarc::driver::sys;

/// Copies between CUDA devices with `cuMemcpyPeer` in the devices' primary contexts (the ones
/// CubeCL uses). Ordering against CubeCL's streams, whichever threads queued work on them:
/// both clients are synchronized, so every command sent to either device before the copy has
/// been issued to its CUDA streams; both contexts are then synchronized, which waits for all
/// their streams; the copy runs; and it is complete on both devices before `copy` returns, so
/// kernels queued after it see the data. Correct but synchronous: overlap comes only from the
/// ring running its links on parallel host threads. [`super::CudaStreamCopy`] orders copies on
/// the devices instead ([`crate::Transfer::StreamOrdered`]).
#[derive(Default)]
pub struct CudaPeerCopy {
    peers: PeerAccess,
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
    ) -> Result<Arrival<CudaRuntime>> {
        let bytes = src.size_in_used() as usize;
        let dst = catch_runtime(to.index, || to.client.empty(bytes.max(1)))?;
        if bytes == 0 {
            return Ok(Arrival::landed(dst));
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
        // A client's sync covers the device stream only; work a caller queued on a stream of its
        // own (a kernel writing a source it handed over, an upload) may still run there.
        synchronize_both((from.index, &src_ctx), (to.index, &dst_ctx))?;
        self.peers.open(&src_ctx, &dst_ctx);
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
        Ok(Arrival::landed(dst))
    }
}
