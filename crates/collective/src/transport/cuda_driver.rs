//! The CUDA driver calls that both CUDA transports make: error checks, the devices' primary
//! contexts (the ones CubeCL uses), and direct access between two devices' memories.

use crate::{CollectiveError, Result};
use cubecl::cuda::CudaDevice;
use cudarc::driver::sys;
use std::collections::HashMap;
use std::sync::Mutex;

/// A driver result as this crate's error, naming the rank and the call.
pub(super) fn check(rank: usize, what: &str, code: sys::CUresult) -> Result<()> {
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
pub struct PrimaryContext {
    pub index: usize,
    pub device: sys::CUdevice,
    pub ctx: sys::CUcontext,
}

// SAFETY: a context handle names a process-wide driver object that any thread may make current;
// this value only retains and releases it.
unsafe impl Send for PrimaryContext {}
unsafe impl Sync for PrimaryContext {}

impl PrimaryContext {
    pub fn retain(rank: usize, device: &CudaDevice) -> Result<Self> {
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

    /// Make this context current on the calling thread.
    pub fn make_current(&self, rank: usize) -> Result<()> {
        // SAFETY: the context is retained while `self` lives.
        unsafe { check(rank, "cuCtxSetCurrent", sys::cuCtxSetCurrent(self.ctx)) }
    }

    /// Make this context current and wait for all its work, on every stream.
    pub fn synchronize(&self, rank: usize) -> Result<()> {
        self.make_current(rank)?;
        // SAFETY: a current, retained context.
        unsafe { check(rank, "cuCtxSynchronize", sys::cuCtxSynchronize()) }
    }
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: releases the reference taken in `retain`; CubeCL holds its own.
        unsafe {
            sys::cuDevicePrimaryCtxRelease_v2(self.device);
        }
    }
}

/// Direct access between pairs of devices, opened once per pair where the hardware allows it.
#[derive(Default)]
pub(super) struct PeerAccess {
    opened: Mutex<HashMap<(usize, usize), bool>>,
    /// A device paired with itself is probed like two devices
    /// ([`crate::CollectiveConfig::one_device_as_peers`]).
    one_device_as_peers: bool,
}

impl PeerAccess {
    pub fn new(one_device_as_peers: bool) -> Self {
        Self {
            opened: Mutex::default(),
            one_device_as_peers,
        }
    }

    /// Whether copies between `a` and `b` go between two devices' memories: they are distinct
    /// devices, or one device taken as two.
    pub fn as_peers(&self, a: &PrimaryContext, b: &PrimaryContext) -> bool {
        a.index != b.index || self.one_device_as_peers
    }

    /// Whether `a` and `b` reach each other's memory directly (always, on one device). The
    /// first call for a pair opens it both ways: the contexts' peer access, for memory
    /// allocated with `cuMemAlloc`, and the access of each device to the other's current memory
    /// pool (`cuMemPoolSetAccess`), from which CubeCL allocates with `cuMemAllocAsync`. Where
    /// it cannot be opened, copies between the two stay correct and the driver stages them.
    pub fn open(&self, a: &PrimaryContext, b: &PrimaryContext) -> bool {
        if !self.as_peers(a, b) {
            return true;
        }
        let key = (a.index.min(b.index), a.index.max(b.index));
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&direct) = opened.get(&key) {
            return direct;
        }
        let direct = Self::can_access(a, b) && Self::can_access(b, a) && {
            let ab = Self::grant(a, b);
            let ba = Self::grant(b, a);
            ab && ba
        };
        if direct {
            tracing::info!(target: "firemesh::transport", "CUDA devices {} and {}: direct peer access to each other's memory pool", a.index, b.index);
        } else {
            tracing::warn!(target: "firemesh::transport", "CUDA devices {} and {}: no direct peer access; the driver stages their copies", a.index, b.index);
        }
        opened.insert(key, direct);
        direct
    }

    fn can_access(from: &PrimaryContext, to: &PrimaryContext) -> bool {
        let mut can = 0;
        // SAFETY: valid device handles and an out-pointer.
        let code = unsafe { sys::cuDeviceCanAccessPeer(&mut can, from.device, to.device) };
        code == sys::CUresult::CUDA_SUCCESS && can == 1
    }

    /// Let `to` reach `from`'s memory: `from`'s allocations through the contexts, and the
    /// allocations of `from`'s current pool. Whether both took.
    fn grant(from: &PrimaryContext, to: &PrimaryContext) -> bool {
        // SAFETY: retained contexts and device handles; every out-pointer is valid.
        unsafe {
            if sys::cuCtxSetCurrent(to.ctx) != sys::CUresult::CUDA_SUCCESS {
                return false;
            }
            let enabled = sys::cuCtxEnablePeerAccess(from.ctx, 0);
            let contexts = matches!(
                enabled,
                sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            );
            let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
            if sys::cuDeviceGetMemPool(&mut pool, from.device) != sys::CUresult::CUDA_SUCCESS {
                return false;
            }
            let access = sys::CUmemAccessDesc {
                location: device_location(to.device),
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            let pools = sys::cuMemPoolSetAccess(pool, &access, 1) == sys::CUresult::CUDA_SUCCESS;
            contexts && pools
        }
    }
}

/// The memory location "device `device`".
fn device_location(device: sys::CUdevice) -> sys::CUmemLocation {
    // SAFETY: `CUmemLocation` is `#[repr(C)]` plain data in every CUDA version cudarc binds: a
    // 4-byte location type, then the device id (a plain `int` before CUDA 13.2, a 4-byte union
    // whose `id` member is that int since). Zeroed, it is a valid value; the writes below set
    // the type and, at the id's offset, the id.
    unsafe {
        let mut location: sys::CUmemLocation = std::mem::zeroed();
        location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        let words = &mut location as *mut sys::CUmemLocation as *mut i32;
        words.add(1).write(device);
        location
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_location_holds_the_type_then_the_device() {
        assert_eq!(std::mem::size_of::<sys::CUmemLocation>(), 8);
        let location = device_location(3);
        // SAFETY: two 4-byte words, as checked above.
        let words: [i32; 2] = unsafe { std::mem::transmute(location) };
        assert_eq!(
            words,
            [
                sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE as i32,
                3
            ]
        );
    }
}
