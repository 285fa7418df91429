//! Finding the GPUs present, and whether CubeCL can run kernels on them, without panicking
//! when there are none.

use cudarc::driver::sys;

/// Number of CUDA GPUs this process can use: 0 when the driver library is absent, fails to
/// initialize, or reports no device.
pub fn cuda_device_count() -> usize {
    driver_device_count().unwrap_or(0)
}

/// The GPU count, or why the driver cannot give one.
fn driver_device_count() -> Result<usize, String> {
    // SAFETY: `is_culib_present` only tries to load the library; the driver calls below run
    // only once it is loaded, with valid out-pointers.
    unsafe {
        if !sys::is_culib_present() {
            return Err("the CUDA driver library (libcuda) is not installed".into());
        }
        let init = sys::cuInit(0);
        if init != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("the CUDA driver failed to start ({init:?})"));
        }
        let mut count = 0;
        let got = sys::cuDeviceGetCount(&mut count);
        if got != sys::CUresult::CUDA_SUCCESS {
            return Err(format!(
                "the CUDA driver could not count its GPUs ({got:?})"
            ));
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
pub fn cuda_unavailable_reason() -> Option<String> {
    match driver_device_count() {
        Err(reason) => return Some(reason),
        Ok(0) => return Some("the CUDA driver found no GPU".into()),
        Ok(_) => {}
    }
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Some(
            "the CUDA runtime compiler (libnvrtc, part of the CUDA toolkit) is not installed; \
             CubeCL compiles its kernels with it"
                .into(),
        );
    }
    let headers = cubecl::cuda::install::cuda_path().map(|p| p.join("include/cuda_runtime.h"));
    if !headers.as_ref().is_some_and(|h| h.exists()) {
        return Some(
            "the CUDA toolkit's headers (include/cuda_runtime.h) were not found under CUDA_PATH, \
             /usr/local/cuda, /opt/cuda or /usr (with /usr/bin/nvcc); CubeCL compiles its \
             kernels against them"
                .into(),
        );
    }
    None
}

/// The CUDA devices CubeCL can run kernels on, in index order, or why there are none.
pub fn usable_cuda_devices() -> Result<Vec<cubecl::cuda::CudaDevice>, String> {
    match cuda_unavailable_reason() {
        Some(reason) => Err(reason),
        None => Ok(cuda_devices()),
    }
}
