//! GPU utilization and memory of the CUDA ranks, read through NVML (nvml-wrapper, which loads
//! the driver's `libnvidia-ml` at run time: nothing to install at build time).

use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};

/// One GPU at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// NVML's device index (the CUDA ordinal when `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub gpu: u32,
    pub util_percent: u32,
    pub mem_used_mib: u64,
    pub mem_total_mib: u64,
}

/// Reads the GPUs of a run; does nothing on meshes without CUDA GPUs.
pub struct GpuMonitor {
    nvml: Option<Nvml>,
    gpus: Vec<u32>,
}

impl GpuMonitor {
    pub fn none() -> Self {
        Self {
            nvml: None,
            gpus: Vec::new(),
        }
    }

    /// A monitor of the CUDA devices `ordinals`, or none and the reason NVML cannot be used.
    pub fn cuda(ordinals: impl IntoIterator<Item = usize>) -> (Self, Option<String>) {
        let mut gpus: Vec<u32> = ordinals.into_iter().map(|o| o as u32).collect();
        gpus.sort_unstable();
        gpus.dedup();
        match Nvml::init() {
            Ok(nvml) => (
                Self {
                    nvml: Some(nvml),
                    gpus,
                },
                None,
            ),
            Err(e) => (
                Self::none(),
                Some(format!(
                    "GPU utilization and memory not shown: NVML unavailable ({e})"
                )),
            ),
        }
    }

    /// The current utilization and memory of each GPU (those NVML cannot read are left out).
    pub fn sample(&self) -> Vec<GpuSample> {
        let Some(nvml) = &self.nvml else {
            return Vec::new();
        };
        self.gpus
            .iter()
            .filter_map(|&gpu| {
                let device = nvml.device_by_index(gpu).ok()?;
                let util = device.utilization_rates().ok()?;
                let memory = device.memory_info().ok()?;
                Some(GpuSample {
                    gpu,
                    util_percent: util.gpu,
                    mem_used_mib: memory.used >> 20,
                    mem_total_mib: memory.total >> 20,
                })
            })
            .collect()
    }
}

/// "gpu0 87% 12.3/80.0 GiB, gpu1 …" for a progress line.
pub fn describe(samples: &[GpuSample]) -> String {
    samples
        .iter()
        .map(|s| {
            format!(
                "gpu{} {}% {:.1}/{:.1} GiB",
                s.gpu,
                s.util_percent,
                s.mem_used_mib as f64 / 1024.0,
                s.mem_total_mib as f64 / 1024.0
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
