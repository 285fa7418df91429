//! [`super::StreamOrderedCopy`] over CUDA: [`CudaDriver`] makes its calls with the driver API
//! in the devices' primary contexts (the ones CubeCL uses), on raw non-blocking streams.

use super::cuda_driver::{PeerAccess, PrimaryContext};
use super::stream_driver::{Raw, StreamDriver};
use super::{CudaPeerCopy, Rank, StreamOrderedCopy};
use crate::error::try_runtime;
use crate::Result;
use cubecl::cuda::CudaRuntime;
use cubecl::server::Handle;
use cudarc::driver::sys;
use std::sync::Arc;

/// Stream-ordered CUDA copies; [`crate::Transfer::StreamOrdered`].
pub type CudaStreamCopy = StreamOrderedCopy<CudaRuntime, CudaDriver>;

impl StreamOrderedCopy<CudaRuntime, CudaDriver> {
    /// The copy, taking ranks on one device as two GPUs where `one_device_as_peers`
    /// ([`crate::CollectiveConfig::one_device_as_peers`]); pairs whose driver refuses the
    /// stream memory operations copy with [`CudaPeerCopy`].
    pub fn new(one_device_as_peers: bool) -> Self {
        Self::with_driver(
            "cuda-stream",
            CudaDriver {
                peers: PeerAccess::new(one_device_as_peers),
            },
            Arc::new(CudaPeerCopy::new(one_device_as_peers)),
        )
    }
}

/// CUDA's driver API as a [`StreamDriver`]: each call first makes its device's context current
/// on the calling thread.
pub struct CudaDriver {
    peers: PeerAccess,
}

/// A raw driver object: a handle the driver hands out, usable from any thread.
#[derive(Clone, Copy)]
pub struct Object<T>(T);

// SAFETY: streams and events are process-wide driver objects that any thread may use; the
// transport orders its own uses of each under a lane's lock.
unsafe impl<T> Send for Object<T> {}

/// `code` as a [`Raw`] outcome.
fn raw(code: sys::CUresult) -> Raw {
    if code == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{code:?}"))
    }
}

/// `call` with `device`'s context current.
fn current(device: &PrimaryContext, call: impl FnOnce() -> sys::CUresult) -> Raw {
    // SAFETY: the context is retained while `device` lives.
    raw(unsafe { sys::cuCtxSetCurrent(device.ctx) })?;
    raw(call())
}

impl StreamDriver<CudaRuntime> for CudaDriver {
    type Device = PrimaryContext;
    type Stream = Object<sys::CUstream>;
    type Event = Object<sys::CUevent>;

    fn device(&self, rank: &Rank<CudaRuntime>) -> Result<PrimaryContext> {
        PrimaryContext::retain(rank.index, &rank.device)
    }

    fn pair(&self, from: &PrimaryContext, to: &PrimaryContext) -> bool {
        self.peers.open(from, to);
        self.peers.as_peers(from, to)
    }

    fn new_stream(&self, device: &PrimaryContext) -> Raw<Self::Stream> {
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: an out-pointer, in the current context.
        current(device, || unsafe {
            sys::cuStreamCreate(&mut stream, flags)
        })?;
        Ok(Object(stream))
    }

    fn new_event(&self, device: &PrimaryContext) -> Raw<Self::Event> {
        let mut event: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: an out-pointer, in the current context.
        current(device, || unsafe { sys::cuEventCreate(&mut event, flags) })?;
        Ok(Object(event))
    }

    fn destroy_stream(&self, device: &PrimaryContext, stream: Self::Stream) {
        // SAFETY: a stream of this context with nothing queued, destroyed once.
        let _ = current(device, || unsafe { sys::cuStreamDestroy_v2(stream.0) });
    }

    fn destroy_event(&self, device: &PrimaryContext, event: Self::Event) {
        // SAFETY: an event of this context, destroyed once.
        let _ = current(device, || unsafe { sys::cuEventDestroy_v2(event.0) });
    }

    fn address(&self, rank: &Rank<CudaRuntime>, handle: &Handle) -> Result<u64> {
        let resource = try_runtime(rank.index, || rank.client.get_resource(handle.clone()))?;
        Ok(resource.resource().ptr)
    }

    fn wait_value(
        &self,
        device: &PrimaryContext,
        stream: Self::Stream,
        address: u64,
        value: u32,
    ) -> Raw {
        let flags = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: a live stream of this context; the transport keeps the flag word alive.
        current(device, || unsafe {
            sys::cuStreamWaitValue32_v2(stream.0, address, value, flags)
        })
    }

    fn write_value(
        &self,
        device: &PrimaryContext,
        stream: Self::Stream,
        address: u64,
        value: u32,
    ) -> Raw {
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: a live stream of this context; the transport keeps the flag word alive.
        current(device, || unsafe {
            sys::cuStreamWriteValue32_v2(stream.0, address, value, flags)
        })
    }

    fn record(&self, device: &PrimaryContext, event: Self::Event, stream: Self::Stream) -> Raw {
        // SAFETY: a live event and stream of this context.
        current(device, || unsafe { sys::cuEventRecord(event.0, stream.0) })
    }

    fn wait_event(&self, device: &PrimaryContext, stream: Self::Stream, event: Self::Event) -> Raw {
        // SAFETY: a live stream of this context and a live event.
        current(device, || unsafe {
            sys::cuStreamWaitEvent(stream.0, event.0, 0)
        })
    }

    fn copy(
        &self,
        to: &PrimaryContext,
        from: &PrimaryContext,
        peers: bool,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: Self::Stream,
    ) -> Raw {
        // SAFETY: a live stream of `to`'s context; the transport keeps both buffers alive until
        // the copy has run.
        current(to, || unsafe {
            if peers {
                sys::cuMemcpyPeerAsync(dst, to.ctx, src, from.ctx, bytes, stream.0)
            } else {
                sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.0)
            }
        })
    }

    fn landed(&self, event: Self::Event) -> Raw<bool> {
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(event.0) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => Err(format!("{code:?}")),
        }
    }

    fn synchronize_event(&self, device: &PrimaryContext, event: Self::Event) -> Raw {
        // SAFETY: a live event.
        current(device, || unsafe { sys::cuEventSynchronize(event.0) })
    }

    fn synchronize_stream(&self, device: &PrimaryContext, stream: Self::Stream) -> Raw {
        // SAFETY: a live stream of this context.
        current(device, || unsafe { sys::cuStreamSynchronize(stream.0) })
    }
}
