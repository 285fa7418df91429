//! How bytes move between two ranks' memories. Kept apart from the algorithms (which decide
//! what moves where) and from the kernels (which reduce what arrived).

mod client_copy;
#[cfg(feature = "cuda")]
mod cuda_driver;
#[cfg(feature = "cuda")]
mod cuda_nccl;
#[cfg(feature = "cuda")]
mod cuda_peer;
#[cfg(feature = "cuda")]
mod cuda_stream;
mod flags;
#[cfg(all(test, feature = "wgpu"))]
mod recording_driver;
mod stream_driver;
mod stream_ordered;
#[cfg(feature = "wgpu")]
mod wgpu_staged;

pub use client_copy::ClientCopy;
#[cfg(feature = "cuda")]
pub use cuda_peer::CudaPeerCopy;
#[cfg(feature = "cuda")]
pub use cuda_stream::{CudaDriver, CudaStreamCopy};
pub use flags::FlagWait;
pub use stream_driver::{Raw, StreamDriver};
pub use stream_ordered::{synchronous_fallbacks, StreamOrderedCopy};
#[cfg(feature = "wgpu")]
pub use wgpu_staged::{WgpuStagedCopy, WgpuTransfers};

use crate::engine::NcclStatus;
use crate::error::{catch_runtime, try_runtime};
use crate::{CollectiveConfig, CollectiveError, DType, ReduceOp, Result, Transfer, Unavailable};
use cubecl::{client::ComputeClient, server::Handle, Runtime};
use std::sync::Arc;

/// One rank of a group: a device of a CubeCL runtime and the client that drives it.
#[derive(Clone)]
pub struct Rank<R: Runtime> {
    pub index: usize,
    pub device: R::Device,
    pub client: ComputeClient<R>,
}

/// A buffer copied to a rank, and what that rank must wait for before it reads it.
#[derive(Debug)]
pub struct Arrival<R: Runtime> {
    pub handle: Handle,
    /// `None`: kernels queued after the copy returned see the bytes. `Some`: the bytes are
    /// still moving; queue the wait ([`FlagWait::enqueue`]) before reading them (dropped, it
    /// is queued then; it holds `handle`'s memory until it is).
    pub pending: Option<FlagWait<R>>,
}

impl<R: Runtime> Arrival<R> {
    /// A buffer whose bytes are in place for any kernel queued from now on.
    pub fn landed(handle: Handle) -> Self {
        Self {
            handle,
            pending: None,
        }
    }
}

/// One source sent to several ranks, in a [`Transport::copy_round`].
pub struct Cast<'a, R: Runtime> {
    pub from: &'a Rank<R>,
    pub src: Handle,
    /// `Some` where the caller writes `src` on `from` again only after the copy has landed, as
    /// far as the work queued on the devices says (the ring's all-gather writes, in place, the
    /// chunks a rank sent in its reduce-scatter, but only with the reduced chunk, which, around
    /// the ring, waited for that send to land), and otherwise not before it calls
    /// [`Transport::settle`] for `from`: a transport may read it in place rather than copy it
    /// first. The device address of the buffer `src` is a slice of, once resolved (shared by
    /// the buffer's clones).
    pub held: Option<&'a AddressCell>,
    pub to: Vec<&'a Rank<R>>,
}

/// Where a cast lands in place: a slice of a buffer of the destination, and that buffer's
/// address cell.
pub type Target<'a> = (Handle, &'a AddressCell);

/// Copies a buffer from one rank to a new buffer on another.
pub trait Transport<R: Runtime>: Send + Sync {
    /// A short name for logs and benchmark tables.
    fn name(&self) -> &'static str;
    /// Whether a copy returns only once its bytes have moved (the host waits), rather than
    /// once it is queued. Host threads run the transfers of a step side by side only for
    /// transports that wait.
    fn waits_on_host(&self) -> bool {
        true
    }
    /// Copy all bytes `src` spans (its offsets are honoured) from `from` into a new buffer on
    /// `to`, issued on the device stream ([`crate::stream`]). Work already queued on `from` that writes
    /// `src` is complete before the copy reads, and work queued on `from` afterwards may write
    /// `src` at once.
    fn copy(&self, from: &Rank<R>, src: Handle, to: &Rank<R>, dtype: DType) -> Result<Arrival<R>>;
    /// [`Transport::copy`] of one source to several ranks, in `to` order. Transports that
    /// stage through the host override it to read the source once.
    fn copy_many(
        &self,
        from: &Rank<R>,
        src: Handle,
        to: &[&Rank<R>],
        dtype: DType,
    ) -> Result<Vec<Arrival<R>>> {
        to.iter()
            .map(|rank| self.copy(from, src.clone(), rank, dtype))
            .collect()
    }
    /// Copy `src` of `from` into each target: an existing slice of a buffer on that rank, as
    /// long as `src`; kernels queued after it returns see the bytes. Returns `Ok(false)`,
    /// having copied nothing, when this transport cannot land bytes in place; the caller then
    /// goes through [`Transport::copy_many`].
    /// One round of casts, each [`Transport::copy_many`] of its source (a transport that
    /// orders copies on the devices may issue the round's copies together); results in
    /// `casts` order.
    fn copy_round(&self, casts: &[Cast<'_, R>], dtype: DType) -> Result<Vec<Vec<Arrival<R>>>> {
        (casts.iter())
            .map(|c| self.copy_many(c.from, c.src.clone(), &c.to, dtype))
            .collect()
    }
    /// [`Transport::copy_into_many`] of a round of casts, all or none: `into[c][t]` is where
    /// `casts[c].to[t]` takes the bytes. `Ok(false)`, having copied nothing, where the transport
    /// cannot land them all in place; the caller then goes through [`Transport::copy_round`].
    fn copy_round_into(
        &self,
        _casts: &[Cast<'_, R>],
        _into: &[Vec<Target<'_>>],
        _dtype: DType,
    ) -> Result<bool> {
        Ok(false)
    }
    /// The end of a collective for rank `rank`: kernels queued on its device stream from now on
    /// may write every source it sent held ([`Cast::held`]).
    fn settle(&self, _rank: &Rank<R>) -> Result<()> {
        Ok(())
    }
    fn copy_into_many(
        &self,
        _from: &Rank<R>,
        _src: Handle,
        _to: &[(&Rank<R>, Handle)],
        _dtype: DType,
    ) -> Result<bool> {
        Ok(false)
    }
}

/// A buffer's device address, resolved at most once for the buffer and all its clones.
#[derive(Clone, Debug, Default)]
pub struct AddressCell(Arc<std::sync::OnceLock<u64>>);

impl AddressCell {
    /// The address, resolved by `resolve` on first use.
    pub fn get_or_resolve(&self, resolve: impl FnOnce() -> Result<u64>) -> Result<u64> {
        if let Some(&address) = self.0.get() {
            return Ok(address);
        }
        let address = resolve()?;
        Ok(*self.0.get_or_init(|| address))
    }
}

/// Read `src` back to the host from rank `from`'s device, once `from` finished writing it.
fn read_back<R: Runtime>(from: &Rank<R>, src: Handle) -> Result<cubecl::bytes::Bytes> {
    try_runtime(from.index, || from.client.read_one(src))
}

/// Host bytes into a new buffer on rank `to`.
fn upload_new<R: Runtime>(to: &Rank<R>, bytes: &[u8]) -> Result<Handle> {
    catch_runtime(to.index, || to.client.create_from_slice(bytes))
}

/// A CubeCL runtime that collectives run on, with its transports.
pub trait CollectiveRuntime: Runtime<Device: PartialEq> {
    /// The transport that carries out `config.transfer` on this runtime.
    fn transport(config: &CollectiveConfig) -> Arc<dyn Transport<Self>>;
    /// The config a [`crate::Group`] on this runtime starts from: that of synchronous
    /// transfers ([`CollectiveConfig::with_transfer`]).
    fn default_config() -> CollectiveConfig {
        CollectiveConfig::with_transfer(Transfer::Synchronous)
    }
    /// Whether `device` can be used, checked before any runtime call that could panic.
    fn check_device(device: &Self::Device) -> std::result::Result<(), Unavailable>;
    /// Whether NCCL can run the sums of a group over `devices`: its version, or why not.
    fn nccl_status(_devices: &[Self::Device]) -> NcclStatus {
        Err("NCCL runs the sums of CUDA groups only".into())
    }
    /// NCCL's all-reduce in place of `bufs` (rank r's on `ranks[r]`, each spanning exactly its
    /// elements of `dtype`), ordered with each rank's device stream; only called where
    /// [`CollectiveRuntime::nccl_status`] is `Ok`.
    fn nccl_all_reduce(
        ranks: &[Rank<Self>],
        _bufs: &[Handle],
        _dtype: DType,
        _op: ReduceOp,
    ) -> Result<()> {
        Err(CollectiveError::EngineUnavailable {
            engine: "nccl",
            reason: format!("not built for this runtime ({} ranks)", ranks.len()),
        })
    }
}

#[cfg(feature = "wgpu")]
impl CollectiveRuntime for cubecl::wgpu::WgpuRuntime {
    /// Synchronous whatever `config.transfer` asks: a wgpu transfer is a blocking read-back,
    /// which waits for every kernel queued on the source.
    fn transport(_config: &CollectiveConfig) -> Arc<dyn Transport<Self>> {
        Arc::new(WgpuStagedCopy::default())
    }

    fn check_device(_device: &Self::Device) -> std::result::Result<(), Unavailable> {
        Ok(()) // an unknown device makes the client panic, which `Group` turns into an error
    }
}

#[cfg(feature = "cuda")]
impl CollectiveRuntime for cubecl::cuda::CudaRuntime {
    /// [`CudaPeerCopy`] (each transfer waits for both devices) or [`CudaStreamCopy`] (nothing
    /// waits on the host).
    fn transport(config: &CollectiveConfig) -> Arc<dyn Transport<Self>> {
        match config.transfer {
            Transfer::Synchronous => Arc::new(CudaPeerCopy::new(config.one_device_as_peers)),
            Transfer::StreamOrdered => Arc::new(CudaStreamCopy::new(config.one_device_as_peers)),
        }
    }

    /// Stream-ordered transfers ([`Transfer::default`]), pipelined.
    fn default_config() -> CollectiveConfig {
        CollectiveConfig::with_transfer(Transfer::default())
    }

    fn nccl_status(devices: &[Self::Device]) -> NcclStatus {
        cuda_nccl::status(devices)
    }

    fn nccl_all_reduce(
        ranks: &[Rank<Self>],
        bufs: &[Handle],
        dtype: DType,
        op: ReduceOp,
    ) -> Result<()> {
        cuda_nccl::all_reduce(ranks, bufs, dtype, op)
    }

    fn check_device(device: &Self::Device) -> std::result::Result<(), Unavailable> {
        let present = crate::probe::usable_cuda_devices()?.len();
        if device.index >= present {
            return Err(Unavailable::NoSuchCudaDevice {
                index: device.index,
                present,
            });
        }
        Ok(())
    }
}
