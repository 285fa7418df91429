//! How bytes move between two ranks' memories. Kept apart from the algorithms (which decide
//! what moves where) and from the kernels (which reduce what arrived).

mod client_copy;
mod cuda_peer;

pub use client_copy::ClientCopy;
pub use cuda_peer::CudaPeerCopy;

use crate::{DType, Result};
use cubecl::{client::ComputeClient, server::Handle, Runtime};
use std::sync::Arc;

/// One rank of a group: a device of a CubeCL runtime and the client that drives it.
#[derive(Clone)]
pub struct Rank<R: Runtime> {
    pub index: usize,
    pub device: R::Device,
    pub client: ComputeClient<R>,
}

/// Copies a buffer from one rank to a new buffer on another.
pub trait Transport<R: Runtime>: Send + Sync {
    /// A short name for logs and benchmark tables.
    fn name(&self) -> &'static str;
    /// Copy all bytes `src` spans (its offsets are honoured) from `from` into a new buffer on
    /// `to`. Work already queued on `from` that writes `src` is complete before the copy reads.
    fn copy(&self, from: &Rank<R>, src: Handle, to: &Rank<R>, dtype: DType) -> Result<Handle>;
}

/// A CubeCL runtime that collectives run on, with the transport it uses by default.
pub trait CollectiveRuntime: Runtime<Device: PartialEq> {
    fn default_transport() -> Arc<dyn Transport<Self>>;
    /// Whether `device` can be used, checked before any runtime call that could panic.
    fn check_device(device: &Self::Device) -> std::result::Result<(), String>;
}

impl CollectiveRuntime for cubecl::wgpu::WgpuRuntime {
    fn default_transport() -> Arc<dyn Transport<Self>> {
        Arc::new(ClientCopy)
    }

    fn check_device(_device: &Self::Device) -> std::result::Result<(), String> {
        Ok(()) // an unknown device makes the client panic, which `Group` turns into an error
    }
}

impl CollectiveRuntime for cubecl::cuda::CudaRuntime {
    fn default_transport() -> Arc<dyn Transport<Self>> {
        Arc::new(CudaPeerCopy::default())
    }

    fn check_device(device: &Self::Device) -> std::result::Result<(), String> {
        if let Some(reason) = crate::probe::cuda_unavailable_reason() {
            return Err(reason);
        }
        let count = crate::probe::cuda_device_count();
        if device.index >= count {
            return Err(format!(
                "CUDA device {} does not exist ({count} present)",
                device.index
            ));
        }
        Ok(())
    }
}
