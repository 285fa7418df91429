//! Finding the GPUs present without panicking when there are none.

use cudarc::driver::sys;

/// Number of CUDA GPUs this process can use: 0 when the driver library is absent, fails to
/// initialize, or reports no device.
pub fn cuda_device_count() -> usize {
    // SAFETY: `is_culib_present` only tries to load the library; the driver calls below run
    // only once it is loaded, with valid out-pointers.
    unsafe {
        if !sys::is_culib_present() {
            return 0;
        }
        if sys::cuInit(0) != sys::CUresult::CUDA_SUCCESS {
            return 0;
        }
        let mut count = 0;
        if sys::cuDeviceGetCount(&mut count) != sys::CUresult::CUDA_SUCCESS {
            return 0;
        }
        count.max(0) as usize
    }
}

/// The CUDA devices present, in index order (empty on a machine with no GPU).
pub fn cuda_devices() -> Vec<cubecl::cuda::CudaDevice> {
    (0..cuda_device_count())
        .map(|index| cubecl::cuda::CudaDevice { index })
        .collect()
}

/// Why CUDA cannot be used here, or `None` when at least one GPU is present.
pub fn cuda_unavailable_reason() -> Option<String> {
    // SAFETY: see `cuda_device_count`.
    if !unsafe { sys::is_culib_present() } {
        return Some("the CUDA driver library (libcuda) is not installed".into());
    }
    if cuda_device_count() == 0 {
        return Some("the CUDA driver found no GPU".into());
    }
    None
}
