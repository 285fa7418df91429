//! Copies between wgpu devices of one process through an upload buffer kept per destination.
//!
//! The source is read back by the runtime (into a mapped staging buffer that it reuses); the
//! bytes are copied once on the host into the destination's mapped upload buffer, and the
//! destination's queue copies them into place. The runtime's own `to_client` writes through
//! `Queue::write_buffer`, which allocates a fresh upload buffer for every transfer: on a
//! software driver (lavapipe) its pages are faulted in anew each time, which costs more than
//! the copy itself.

use super::{Arrival, ClientCopy, Rank, Transport};
use crate::error::{catch_runtime, try_runtime};
use crate::{wgpu_devices, CollectiveError, DType, Result};
use cubecl::{server::Handle, wgpu::WgpuDevice, wgpu::WgpuRuntime};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// How long a transfer waits for its destination's previous upload to finish.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Smaller transfers go through the queue's own write: its fresh upload buffer costs little
/// there, and it does not wait for the previous transfer to the same device. (On lavapipe the
/// staged path wins from about 1 MiB per transfer: ring all-reduce at N=4, 16 MiB, 1.65× the
/// client copy's busbw; at N=8, 4 MiB, whose transfers are 512 KiB, the client copy wins.)
const STAGED_MIN_BYTES: u64 = 1024 * 1024;

/// Reads back through the runtime, writes through a reused, mapped upload buffer per
/// destination device. Devices not created by [`wgpu_devices::wgpu_devices`] (whose wgpu
/// queue this crate cannot reach) fall back to [`ClientCopy`].
///
/// Each upload buffer keeps the size of the largest transfer it served (rounded up to a power
/// of two) until the transport, which its [`crate::Group`] owns, is dropped.
#[derive(Default)]
pub struct WgpuStagedCopy {
    uploads: Mutex<HashMap<WgpuDevice, Arc<Mutex<Upload>>>>,
    staged: AtomicU64,
    through_client_copy: AtomicU64,
}

/// The transfers a [`WgpuStagedCopy`] made each way, one per destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WgpuTransfers {
    /// Through the destination's reused upload buffer.
    pub staged: u64,
    /// Through the runtime's client copy (small transfers, devices outside the pool).
    pub client_copy: u64,
}

impl WgpuStagedCopy {
    /// The transfers made so far, each way.
    pub fn transfers(&self) -> WgpuTransfers {
        WgpuTransfers {
            staged: self.staged.load(Ordering::Relaxed),
            client_copy: self.through_client_copy.load(Ordering::Relaxed),
        }
    }

    fn count(&self, staged: bool, transfers: usize) {
        let counter = if staged {
            &self.staged
        } else {
            &self.through_client_copy
        };
        counter.fetch_add(transfers as u64, Ordering::Relaxed);
    }
}

/// A `MAP_WRITE | COPY_SRC` buffer and, once its last copy is submitted, the pending remap.
struct Upload {
    buffer: wgpu::Buffer,
    remapped: Option<mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>>,
}

impl Transport<WgpuRuntime> for WgpuStagedCopy {
    fn name(&self) -> &'static str {
        "wgpu-staged"
    }

    fn copy(
        &self,
        from: &Rank<WgpuRuntime>,
        src: Handle,
        to: &Rank<WgpuRuntime>,
        dtype: DType,
    ) -> Result<Arrival<WgpuRuntime>> {
        Ok(self.copy_many(from, src, &[to], dtype)?.remove(0))
    }

    /// One read-back, then one upload per destination.
    fn copy_many(
        &self,
        from: &Rank<WgpuRuntime>,
        src: Handle,
        to: &[&Rank<WgpuRuntime>],
        dtype: DType,
    ) -> Result<Vec<Arrival<WgpuRuntime>>> {
        let bytes = src.size_in_used();
        let setups: Vec<_> = to
            .iter()
            .map(|rank| wgpu_devices::setup_of(&rank.device).filter(|_| stageable(bytes)))
            .collect();
        if setups.iter().all(Option::is_none) {
            self.count(false, to.len());
            return ClientCopy.copy_many(from, src, to, dtype);
        }
        let data = super::read_back(from, src)?;
        to.iter()
            .zip(setups)
            .map(|(rank, setup)| {
                self.count(setup.is_some(), 1);
                match setup {
                    Some(setup) => self.upload_new(&setup, rank, &data),
                    None => super::upload_new(rank, &data),
                }
                .map(Arrival::landed)
            })
            .collect()
    }

    /// One read-back, then one upload into each target slice; only when every destination's
    /// queue is reachable and the transfer is big enough to be staged.
    fn copy_into_many(
        &self,
        from: &Rank<WgpuRuntime>,
        src: Handle,
        to: &[(&Rank<WgpuRuntime>, Handle)],
        _dtype: DType,
    ) -> Result<bool> {
        let bytes = src.size_in_used();
        let setups: Option<Vec<_>> = to
            .iter()
            .map(|(rank, _)| wgpu_devices::setup_of(&rank.device))
            .collect();
        let Some(setups) = setups else {
            return Ok(false);
        };
        if !stageable(bytes) {
            return Ok(false);
        }
        let data = super::read_back(from, src)?;
        for ((rank, dst), setup) in to.iter().zip(&setups) {
            self.upload_into(setup, rank, &data, dst.clone())?;
        }
        self.count(true, to.len());
        Ok(true)
    }
}

impl WgpuStagedCopy {
    /// `data` in a new buffer on `to`, whose wgpu device and queue are `setup`'s.
    fn upload_new(
        &self,
        setup: &cubecl::wgpu::WgpuSetup,
        to: &Rank<WgpuRuntime>,
        data: &[u8],
    ) -> Result<Handle> {
        let dst = catch_runtime(to.index, || to.client.empty(data.len()))?;
        self.upload_into(setup, to, data, dst.clone())?;
        Ok(dst)
    }

    /// `data` into the slice `dst` (as long as `data`) of a buffer on `to`.
    fn upload_into(
        &self,
        setup: &cubecl::wgpu::WgpuSetup,
        to: &Rank<WgpuRuntime>,
        data: &[u8],
        dst: Handle,
    ) -> Result<()> {
        // Resolving the buffer also hands every command queued on it so far to the stream;
        // the flush submits them, so our copy is ordered after them on the queue and before
        // any kernel the runtime queues on `dst` later.
        let resource = try_runtime(to.index, || to.client.get_resource(dst))?;
        try_runtime(to.index, || to.client.flush())?;
        let target = resource.resource();
        catch_runtime(to.index, || {
            self.upload(setup, &to.device, data, &target.buffer, target.offset)
        })?
        .map_err(|reason| CollectiveError::Runtime {
            rank: to.index,
            reason,
        })
    }

    /// Copy `data` into `target[offset..]` on the device of `setup`.
    fn upload(
        &self,
        setup: &cubecl::wgpu::WgpuSetup,
        device: &WgpuDevice,
        data: &[u8],
        target: &wgpu::Buffer,
        offset: u64,
    ) -> std::result::Result<(), String> {
        let slot = {
            let mut uploads = self.uploads.lock().unwrap_or_else(|e| e.into_inner());
            let slot = uploads.entry(device.clone()).or_insert_with(|| {
                Arc::new(Mutex::new(Upload::new(&setup.device, data.len() as u64)))
            });
            slot.clone()
        };
        let mut upload = slot.lock().unwrap_or_else(|e| e.into_inner());
        let len = data.len() as u64;
        if let Err(reason) = upload.wait_mapped(&setup.device) {
            // Its mapping state is unknown now: the next transfer starts from a new buffer.
            *upload = Upload::new(&setup.device, len);
            return Err(reason);
        }
        if upload.buffer.size() < len {
            *upload = Upload::new(&setup.device, len);
        }
        upload
            .buffer
            .get_mapped_range_mut(..len)
            .copy_from_slice(data);
        upload.buffer.unmap();
        let mut encoder = setup
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("firemesh upload"),
            });
        encoder.copy_buffer_to_buffer(&upload.buffer, 0, target, offset, len);
        setup.queue.submit([encoder.finish()]);
        // Remap for the next transfer; it completes once the copy above has run.
        let (sender, receiver) = mpsc::channel();
        upload.buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            let _ = sender.send(r);
        });
        upload.remapped = Some(receiver);
        Ok(())
    }
}

impl Upload {
    /// A new buffer of at least `len` bytes, mapped for writing.
    fn new(device: &wgpu::Device, len: u64) -> Self {
        let size = len
            .next_power_of_two()
            .max(wgpu::COPY_BUFFER_ALIGNMENT * 1024);
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("firemesh upload"),
            size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        Self {
            buffer,
            remapped: None,
        }
    }

    /// Block until the previous copy out of this buffer is done and it is mapped again.
    fn wait_mapped(&mut self, device: &wgpu::Device) -> std::result::Result<(), String> {
        let Some(receiver) = self.remapped.take() else {
            return Ok(());
        };
        device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(UPLOAD_TIMEOUT),
            })
            .map_err(|e| format!("waiting for the previous upload: {e}"))?;
        match receiver.recv_timeout(UPLOAD_TIMEOUT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("could not map the upload buffer: {e}")),
            Err(e) => Err(format!("the upload buffer was not mapped in time: {e}")),
        }
    }
}

/// Whether a transfer of `bytes` goes through the upload buffer.
fn stageable(bytes: u64) -> bool {
    bytes >= STAGED_MIN_BYTES && bytes.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
}
