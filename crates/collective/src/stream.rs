//! The one CubeCL stream that firemesh issues all its device work on, whichever thread issues
//! it: a rank's ops, its uploads and reads, its part of every collective, the communication
//! thread's sums and the input pipeline's uploads.
//!
//! Why one: CubeCL 0.10 keeps a stream per issuing thread (`StreamId::current`), and each stream
//! has its own memory pool and its own list of launches not yet handed to the device. A buffer
//! that crosses streams is not safe there (the example `cubecl_stream_reuse` reproduces it with
//! CubeCL alone):
//! - freed while a launch queued on another stream still reads it, it goes back to the pool of
//!   the stream that made it, whose next allocation of that size writes it first;
//! - written in place by a kernel queued on another stream, it is read back by its own stream
//!   without that kernel being run first (a read flushes only the reader's and the owner's
//!   streams).
//!
//! Both returned wrong elements in firemesh's tests (`crates/backend/tests/backend/stress.rs`
//! checks it). On one stream per device, every
//! launch, copy, read and free is ordered as it was issued.
//!
//! A buffer made elsewhere (a tensor the caller made on its own thread's stream) crosses once, at
//! the edge where it enters, and that crossing is its handoff:
//! - a collective uses it on the device stream and waits for its devices before it returns, so
//!   that nothing of the device stream still reads or writes the buffer when the stream that
//!   made it may reuse its memory;
//! - a part given to `Sharded` (`from_parts`) is read back and uploaded on the device stream.
//!
//! Each handoff is counted ([`handoffs`]) and logged (`firemesh::stream`, debug): firemesh's
//! own paths make none.
//!
//! The other way round, CubeCL leaves a hazard that only it can close. Buffers handed back live
//! on the device stream: a part from `shards`, a collective's result. Burn ops that the caller
//! issues on them go to the caller's own stream (except ops whose first operand is a tensor a
//! `Group` returned: it keeps the group's client, pinned to the device stream). Such a buffer must
//! not be dropped while a read of it is still queued on another stream, nor written there and
//! handed back (`from_parts` tells streams by where a buffer was allocated, not by who wrote it
//! last). Issue work on such buffers under [`DeviceStream::run`], or read them back first.
//!
//! Tensors are told apart by their primitive's type: `burn-wgpu`'s and `burn-cuda`'s without
//! fusion. A fused backend's tensors are not recognised, and are taken as the device stream's.

use cubecl::server::Handle;
use cubecl::stream_id::StreamId;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stream id firemesh's work runs under. CubeCL maps an id to a stream of each device (the
/// id modulo its stream count), so this one id names one stream on every device; threads that
/// CubeCL numbers itself (from 0 upwards) reach the same stream only after 127 others.
const ID: StreamId = StreamId { value: u64::MAX };

/// The device stream: one per device, the same for every rank on it.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceStream;

impl DeviceStream {
    /// The CubeCL stream id of the device stream.
    pub fn id() -> StreamId {
        ID
    }

    /// Runs `f` with the device stream as the calling thread's CubeCL stream, then restores the
    /// thread's own. Nested calls cost one thread-local read.
    pub fn run<T>(f: impl FnOnce() -> T) -> T {
        if StreamId::current() == ID {
            f()
        } else {
            ID.executes(f)
        }
    }

    /// Whether the calling thread issues to the device stream now.
    pub fn is_current() -> bool {
        StreamId::current() == ID
    }

    /// A client of `device` whose every call, from any thread, issues to the device stream.
    pub fn client<R: cubecl::Runtime>(device: &R::Device) -> cubecl::client::ComputeClient<R> {
        let mut client = R::client(device);
        // SAFETY: CubeCL maps this id to a stream of the device like any thread's own id; a
        // pinned client only changes which stream the calls it makes are queued on.
        unsafe { client.set_stream(ID) };
        client
    }

    /// Whether `handle`'s memory belongs to the device stream.
    pub fn holds(handle: &Handle) -> bool {
        handle.stream == ID
    }
}

/// The CubeCL runtimes whose devices firemesh knows by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CubeRuntime {
    Wgpu,
    Cuda,
}

/// The CubeCL runtime whose device `D` is, or `None` for other Burn backends' devices (Flex,
/// NdArray), which compute where they are called.
pub fn cube_runtime_of<D: 'static>() -> Option<CubeRuntime> {
    use std::any::TypeId;
    let d = TypeId::of::<D>();
    #[cfg(feature = "wgpu")]
    if d == TypeId::of::<cubecl::wgpu::WgpuDevice>() {
        return Some(CubeRuntime::Wgpu);
    }
    #[cfg(feature = "cuda")]
    if d == TypeId::of::<cubecl::cuda::CudaDevice>() {
        return Some(CubeRuntime::Cuda);
    }
    let _ = d;
    None
}

/// Whether `D` is the device of a CubeCL runtime (wgpu, CUDA), whose work runs on streams.
pub fn has_streams<D: 'static>() -> bool {
    cube_runtime_of::<D>().is_some()
}

static HANDOFFS: AtomicU64 = AtomicU64::new(0);

/// Buffers of other streams handed to the device stream since the process started.
pub fn handoffs() -> u64 {
    HANDOFFS.load(Ordering::Relaxed)
}

/// The ranks of one collective whose buffers were made on another stream than the device
/// stream, and a handle to each of those buffers: the handoff of collectives. Taken before the
/// collective runs, so that the collective cannot let go of the last handle to such a buffer
/// (replacing it with its result) while work of the device stream on it is still queued;
/// [`Handoff::finish`] waits for those ranks' devices, then lets go.
pub(crate) struct Handoff<K> {
    ranks: Vec<usize>,
    kept: Vec<K>,
}

impl<K> Handoff<K> {
    /// The ranks r < `ranks` for which `foreign(r)` holds, each with `keep(r)`; counted and
    /// logged (on `what`).
    pub(crate) fn of(
        ranks: usize,
        foreign: impl Fn(usize) -> bool,
        keep: impl Fn(usize) -> K,
        what: &str,
    ) -> Self {
        let ranks: Vec<usize> = (0..ranks).filter(|&r| foreign(r)).collect();
        record_handoff(ranks.len(), what);
        let kept = ranks.iter().map(|&r| keep(r)).collect();
        Self { ranks, kept }
    }

    /// `out`, once `wait(r)` (which waits for rank r's device to finish the work queued on
    /// the device stream) has returned for every rank of the handoff, failed or not: then the
    /// streams those buffers came from may reuse their memory. The first error wins.
    pub(crate) fn finish<T>(
        self,
        out: crate::Result<T>,
        wait: impl Fn(usize) -> crate::Result<()>,
    ) -> crate::Result<T> {
        // Every rank is waited for, even after an error (not `try_fold`, which would stop).
        #[allow(clippy::manual_try_fold)]
        let waited = self
            .ranks
            .into_iter()
            .map(wait)
            .fold(Ok(()), |first, w| first.and(w));
        drop(self.kept);
        out.and_then(|v| waited.map(|()| v))
    }
}

/// Waits until `device` (rank `rank`'s) has finished the work queued on the device stream.
pub(crate) fn wait_for<B: burn_tensor::backend::Backend>(
    rank: usize,
    device: &B::Device,
) -> crate::Result<()> {
    DeviceStream::run(|| B::sync(device)).map_err(|e| crate::CollectiveError::Runtime {
        rank,
        reason: format!("{e:?}"),
    })
}

/// Counts and logs the handoff of `buffers` buffers of other streams (on `what`) to the device
/// stream.
pub fn record_handoff(buffers: usize, what: &str) {
    if buffers > 0 {
        HANDOFFS.fetch_add(buffers as u64, Ordering::Relaxed);
        tracing::debug!(
            target: "firemesh::stream",
            "{what}: {buffers} buffer(s) made on another CubeCL stream handed to the device stream"
        );
    }
}

/// The CubeCL stream of a tensor primitive's memory (a float, int or bool tensor of a Burn
/// backend), where the backend is CubeCL's own (`burn-wgpu`, `burn-cuda`, without fusion);
/// `None` for any other backend, which has no streams.
pub fn primitive_stream(primitive: &dyn std::any::Any) -> Option<StreamId> {
    #[cfg(feature = "wgpu")]
    if let Some(p) =
        primitive.downcast_ref::<burn_cubecl::tensor::CubeTensor<cubecl::wgpu::WgpuRuntime>>()
    {
        return Some(p.handle.stream);
    }
    #[cfg(feature = "cuda")]
    if let Some(p) =
        primitive.downcast_ref::<burn_cubecl::tensor::CubeTensor<cubecl::cuda::CudaRuntime>>()
    {
        return Some(p.handle.stream);
    }
    let _ = primitive;
    None
}

/// Whether a tensor primitive's memory was made on another CubeCL stream than the device
/// stream.
pub fn is_foreign_primitive(primitive: &dyn std::any::Any) -> bool {
    primitive_stream(primitive).is_some_and(|s| s != ID)
}

/// Whether a float tensor's memory was made on another CubeCL stream than the device stream.
pub(crate) fn is_foreign<B: burn_tensor::backend::Backend, const D: usize>(
    t: &burn_tensor::Tensor<B, D>,
) -> bool {
    is_foreign_primitive(&t.clone().into_primitive().tensor())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_switches_to_the_device_stream_and_back() {
        let own = StreamId::current();
        assert_ne!(own, ID, "a thread starts on its own stream");
        assert!(DeviceStream::run(DeviceStream::is_current));
        assert!(DeviceStream::run(|| DeviceStream::run(
            DeviceStream::is_current
        )));
        assert_eq!(
            StreamId::current(),
            own,
            "the thread's own stream is restored"
        );
        let thread = std::thread::spawn(|| DeviceStream::run(StreamId::current));
        assert_eq!(thread.join().unwrap(), ID, "the same id on every thread");
    }
}
