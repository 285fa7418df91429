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

impl CudaPeerCopy {
    /// The copy, taking ranks on one device as two GPUs where `one_device_as_peers`
    /// ([`crate::CollectiveConfig::one_device_as_peers`]).
    pub fn new(one_device_as_peers: bool) -> Self {
        Self {
            peers: PeerAccess::new(one_device_as_peers),
        }
    }
}

/// Waits for all work on each of `contexts`' devices, once per device, given as (rank, context)
/// pairs.
fn synchronize_each(contexts: &[(usize, &PrimaryContext)]) -> Result<()> {
    let mut done: Vec<usize> = Vec::new();
    for &(rank, ctx) in contexts {
        if !done.contains(&ctx.index) {
            ctx.synchronize(rank)?;
            done.push(ctx.index);
        }
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
        dtype: DType,
    ) -> Result<Arrival<CudaRuntime>> {
        Ok(self.copy_many(from, src, &[to], dtype)?.remove(0))
    }

    /// One source to every rank of `to`: each device is waited for once before the copies and
    /// once after them, not once per copy.
    fn copy_many(
        &self,
        from: &Rank<CudaRuntime>,
        src: Handle,
        to: &[&Rank<CudaRuntime>],
        _dtype: DType,
    ) -> Result<Vec<Arrival<CudaRuntime>>> {
        let bytes = src.size_in_used() as usize;
        let dsts = to
            .iter()
            .map(|rank| catch_runtime(rank.index, || rank.client.empty(bytes.max(1))))
            .collect::<Result<Vec<Handle>>>()?;
        if bytes == 0 {
            return Ok(dsts.into_iter().map(Arrival::landed).collect());
        }
        // The resolved resources keep the allocations out of the memory pool's hands until the
        // copies are done.
        let src_mem = try_runtime(from.index, || from.client.get_resource(src))?;
        let dst_mems = to
            .iter()
            .zip(&dsts)
            .map(|(rank, dst)| try_runtime(rank.index, || rank.client.get_resource(dst.clone())))
            .collect::<Result<Vec<_>>>()?;
        for rank in std::iter::once(from).chain(to.iter().copied()) {
            try_runtime(rank.index, || cubecl::future::block_on(rank.client.sync()))?;
        }
        let src_ctx = PrimaryContext::retain(from.index, &from.device)?;
        let dst_ctxs = to
            .iter()
            .map(|rank| PrimaryContext::retain(rank.index, &rank.device))
            .collect::<Result<Vec<_>>>()?;
        let contexts: Vec<(usize, &PrimaryContext)> = std::iter::once((from.index, &src_ctx))
            .chain(
                to.iter()
                    .zip(&dst_ctxs)
                    .map(|(rank, ctx)| (rank.index, ctx)),
            )
            .collect();
        // A client's sync covers the device stream only; work a caller queued on a stream of its
        // own (a kernel writing a source it handed over, an upload) may still run there.
        synchronize_each(&contexts)?;
        for ((rank, dst_ctx), dst_mem) in to.iter().zip(&dst_ctxs).zip(&dst_mems) {
            self.peers.open(&src_ctx, dst_ctx);
            // SAFETY: both pointers are live device allocations of at least `bytes` bytes,
            // held by the resources above; the devices are idle, so nothing races the copy.
            unsafe {
                check(
                    from.index,
                    "cuCtxSetCurrent",
                    sys::cuCtxSetCurrent(src_ctx.ctx),
                )?;
                check(
                    rank.index,
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
        }
        // A copy may return before it completes, on the legacy stream that CubeCL's
        // non-blocking streams do not wait for; where the driver stages it through the host,
        // its last leg runs in the destination's context. Finish them on every device.
        synchronize_each(&contexts)?;
        drop((src_mem, dst_mems));
        Ok(dsts.into_iter().map(Arrival::landed).collect())
    }
}
