//! Finding the GPUs present, and whether CubeCL can run kernels on them, without panicking
//! when there are none.

#[cfg(feature = "cuda")]
pub use cuda::*;

/// `ranks` ranks over `devices`: rank r on device r mod `devices.len()`, so that ranks share
/// devices only when there are more ranks than devices. No devices give no ranks.
pub fn round_robin<D: Clone>(devices: &[D], ranks: usize) -> Vec<D> {
    if devices.is_empty() {
        return Vec::new();
    }
    (0..ranks)
        .map(|r| devices[r % devices.len()].clone())
        .collect()
}

/// Finding CUDA GPUs through the driver (the `cuda` feature).
#[cfg(feature = "cuda")]
mod cuda {
    use crate::Unavailable;
    use cudarc::driver::sys;

    /// Number of CUDA GPUs this process can use: 0 when the driver library is absent, fails to
    /// initialize, or reports no device.
    pub fn cuda_device_count() -> usize {
        driver_device_count().unwrap_or(0)
    }

    /// The GPU count, or why the driver cannot give one.
    fn driver_device_count() -> Result<usize, Unavailable> {
        // SAFETY: `is_culib_present` only tries to load the library; the driver calls below run
        // only once it is loaded, with valid out-pointers.
        unsafe {
            if !sys::is_culib_present() {
                return Err(Unavailable::NoCudaDriver);
            }
            let init = sys::cuInit(0);
            if init != sys::CUresult::CUDA_SUCCESS {
                return Err(Unavailable::CudaDriverFailed(format!("{init:?}")));
            }
            let mut count = 0;
            let got = sys::cuDeviceGetCount(&mut count);
            if got != sys::CUresult::CUDA_SUCCESS {
                return Err(Unavailable::CudaCountFailed(format!("{got:?}")));
            }
            Ok(count.max(0) as usize)
        }
    }

    /// The CUDA devices present, in index order (empty on a machine with no GPU).
    pub fn cuda_devices() -> Vec<cubecl::cuda::CudaDevice> {
        (0..cuda_device_count())
            .map(|index| cubecl::cuda::CudaDevice { index })
            .collect()
    }

    /// Why CUDA cannot be used here, or `None` when at least one GPU is present and CubeCL can
    /// compile kernels for it. CubeCL compiles every kernel at run time with NVRTC against the
    /// toolkit's headers, so a machine with the driver alone cannot run them: a missing compiler
    /// would otherwise surface as kernels that silently never ran.
    pub fn cuda_unavailable_reason() -> Option<Unavailable> {
        match driver_device_count() {
            Err(reason) => return Some(reason),
            Ok(0) => return Some(Unavailable::NoGpu),
            Ok(_) => {}
        }
        // SAFETY: only tries to load the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Some(Unavailable::NoNvrtc);
        }
        let headers = cubecl::cuda::install::cuda_path().map(|p| p.join("include/cuda_runtime.h"));
        if !headers.as_ref().is_some_and(|h| h.exists()) {
            return Some(Unavailable::NoCudaHeaders);
        }
        None
    }

    /// The CUDA devices CubeCL can run kernels on, in index order, or why there are none.
    pub fn usable_cuda_devices() -> Result<Vec<cubecl::cuda::CudaDevice>, Unavailable> {
        match cuda_unavailable_reason() {
            Some(reason) => Err(reason),
            None => Ok(cuda_devices()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranks_go_round_robin_over_the_devices() {
        assert_eq!(
            super::round_robin(&['a', 'b'], 5),
            ['a', 'b', 'a', 'b', 'a']
        );
        assert_eq!(super::round_robin(&['a', 'b', 'c'], 2), ['a', 'b']);
        assert!(super::round_robin::<char>(&[], 3).is_empty());
    }
}
