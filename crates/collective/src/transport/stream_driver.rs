//! The one narrow way from a stream-ordered transport ([`super::StreamOrderedCopy`]) to a device
//! and its driver: one method per call, each of one of three kinds.
//!
//! - **Launches**: a kernel queued on a rank's device stream ([`crate::stream`]) through
//!   CubeCL: [`StreamDriver::signal`], [`StreamDriver::wait`], [`StreamDriver::copy_words`].
//! - **Queued calls**: a driver call that queues work on a raw stream and returns at once:
//!   [`StreamDriver::wait_value`], [`StreamDriver::write_value`], [`StreamDriver::record`],
//!   [`StreamDriver::wait_event`], [`StreamDriver::copy`], and the poll
//!   [`StreamDriver::landed`].
//! - **Host-blocking calls**: the host waits, for a device or for CubeCL's own thread:
//!   [`StreamDriver::address`] and [`StreamDriver::flush`] (CubeCL hands every command it
//!   holds for the client to the driver, then answers), [`StreamDriver::synchronize_event`],
//!   [`StreamDriver::synchronize_stream`].
//!
//! `CudaDriver` (the `cuda` feature) makes them with CUDA's driver API; the tests' recording
//! driver makes them on wgpu devices, one after another, and counts them.

use super::Rank;
use crate::{error::catch_runtime, Result};
use cubecl::{server::Handle, Runtime};

/// The outcome of one driver call: `Err` holds the driver's code, as text.
pub type Raw<T = ()> = std::result::Result<T, String>;

/// What a stream-ordered copy asks of a device and its driver (see the module docs).
pub trait StreamDriver<R: Runtime>: Send + Sync + 'static {
    /// A device, as the driver calls name it (CUDA: its primary context, retained).
    type Device: Send + Sync;
    /// A raw stream of one device, apart from CubeCL's.
    type Stream: Copy + Send;
    /// A point on a raw stream that other streams and the host can wait for.
    type Event: Copy + Send;

    /// The device of `rank`, retained while the value lives.
    fn device(&self, rank: &Rank<R>) -> Result<Self::Device>;
    /// Opens direct access between `from` and `to` where the hardware allows it (once per
    /// pair); whether copies between them go between two devices' memories (`copy`'s `peers`).
    fn pair(&self, from: &Self::Device, to: &Self::Device) -> bool;
    fn new_stream(&self, device: &Self::Device) -> Raw<Self::Stream>;
    fn new_event(&self, device: &Self::Device) -> Raw<Self::Event>;
    /// Destroys a stream with nothing queued on it any more.
    fn destroy_stream(&self, device: &Self::Device, stream: Self::Stream);
    fn destroy_event(&self, device: &Self::Device, event: Self::Event);

    /// Launch: `flags[slot] = value` on `rank`'s device stream, after the kernels queued before.
    fn signal(&self, rank: &Rank<R>, flags: &Handle, slot: u32, value: u32) -> Result<()> {
        catch_runtime(rank.index, || {
            super::flags::signal(&rank.client, flags, slot, value)
        })
    }
    /// Launch: `rank`'s device stream holds the kernels queued after this one until
    /// `flags[slot]` has reached `value`.
    fn wait(&self, rank: &Rank<R>, flags: &Handle, slot: u32, value: u32) -> Result<()> {
        let client = rank.client.clone();
        super::FlagWait::new(flags.clone(), slot, value, rank.index, client).enqueue()
    }
    /// Launch: the first `words` 32-bit words of `src` into `dst`, on `rank`'s device stream.
    fn copy_words(&self, rank: &Rank<R>, dst: &Handle, src: &Handle, words: usize) -> Result<()> {
        catch_runtime(rank.index, || {
            crate::kernels::copy_words(&rank.client, dst, src, words)
        })
    }
    /// Host-blocking (on CubeCL's thread, not on the device): every command queued on `rank`'s
    /// client so far is handed to the driver.
    fn flush(&self, rank: &Rank<R>) -> Result<()> {
        crate::error::try_runtime(rank.index, || rank.client.flush())
    }
    /// Host-blocking: the device address of `handle`'s first byte (valid while the handle
    /// lives). When it returns, every command queued on `rank`'s client before it has been
    /// handed to the driver.
    fn address(&self, rank: &Rank<R>, handle: &Handle) -> Result<u64>;

    /// Queued: `stream` waits until the word at `address` has reached `value` (wrapping, as
    /// [`super::flags`] compares).
    fn wait_value(
        &self,
        device: &Self::Device,
        stream: Self::Stream,
        address: u64,
        value: u32,
    ) -> Raw;
    /// Queued: `stream` writes `value` to the word at `address`.
    fn write_value(
        &self,
        device: &Self::Device,
        stream: Self::Stream,
        address: u64,
        value: u32,
    ) -> Raw;
    /// Queued: `event` marks the work queued on `stream` so far.
    fn record(&self, device: &Self::Device, event: Self::Event, stream: Self::Stream) -> Raw;
    /// Queued: `stream` (of `device`) waits for `event` (of any device).
    fn wait_event(&self, device: &Self::Device, stream: Self::Stream, event: Self::Event) -> Raw;
    /// Queued on `stream` of `to`: `bytes` from `src` (on `from`) to `dst` (on `to`), between
    /// the two devices' memories where `peers`, within one memory otherwise.
    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        to: &Self::Device,
        from: &Self::Device,
        peers: bool,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: Self::Stream,
    ) -> Raw;
    /// A poll, not a wait: whether the work `event` marks has run (`Ok(false)`: not yet).
    fn landed(&self, event: Self::Event) -> Raw<bool>;

    /// Host-blocking: waits for the work `event` marks.
    fn synchronize_event(&self, device: &Self::Device, event: Self::Event) -> Raw;
    /// Host-blocking: waits for everything queued on `stream`.
    fn synchronize_stream(&self, device: &Self::Device, stream: Self::Stream) -> Raw;
}
