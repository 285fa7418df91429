//! Choosing the devices to run on: CUDA GPUs when present, else a CPU mesh.

use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use firemesh_collective::{probe, wgpu_devices::wgpu_devices, Group, PortableGroup, Result};

/// Where the ranks of a run live.
pub enum DeviceMesh {
    /// One rank per CUDA GPU.
    Cuda(Vec<CudaDevice>),
    /// Separate wgpu clients (a GPU or Mesa's software Vulkan driver).
    Wgpu(Vec<WgpuDevice>),
    /// `n` ranks on the CPU, moved with plain Burn tensor ops.
    Cpu(usize),
}

/// Which kind of mesh to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MeshKind {
    /// CUDA GPUs if any, else the CPU.
    Auto,
    Cuda,
    Wgpu,
    Cpu,
}

impl DeviceMesh {
    /// The mesh for `kind`; `ranks` defaults to the number of GPUs, or 4 on the CPU.
    pub fn discover(kind: MeshKind, ranks: Option<usize>) -> std::result::Result<Self, String> {
        let gpus = probe::cuda_devices();
        match kind {
            MeshKind::Auto if !gpus.is_empty() => Ok(Self::Cuda(pick(gpus, ranks))),
            MeshKind::Auto | MeshKind::Cpu => Ok(Self::Cpu(ranks.unwrap_or(4))),
            MeshKind::Cuda if gpus.is_empty() => {
                Err(probe::cuda_unavailable_reason().unwrap_or_else(|| "no CUDA GPU found".into()))
            }
            MeshKind::Cuda => Ok(Self::Cuda(pick(gpus, ranks))),
            MeshKind::Wgpu => wgpu_devices(ranks.unwrap_or(4)).map(Self::Wgpu),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Cuda(d) => format!("{} CUDA GPU rank(s)", d.len()),
            Self::Wgpu(d) => format!("{} wgpu rank(s)", d.len()),
            Self::Cpu(n) => format!("CPU mesh of {n} rank(s) (no GPU found)"),
        }
    }

    pub fn cuda_group(devices: &[CudaDevice]) -> Result<Group<CudaRuntime>> {
        Group::new_shared(devices.to_vec())
    }

    pub fn wgpu_group(devices: &[WgpuDevice]) -> Result<Group<WgpuRuntime>> {
        Group::new(devices.to_vec())
    }

    pub fn cpu_group(n: usize) -> Result<PortableGroup<burn_ndarray::NdArray>> {
        PortableGroup::new_shared(vec![burn_ndarray::NdArrayDevice::Cpu; n])
    }
}

/// `ranks` ranks over the GPUs (round-robin when asking for more ranks than GPUs).
fn pick(gpus: Vec<CudaDevice>, ranks: Option<usize>) -> Vec<CudaDevice> {
    let n = ranks.unwrap_or(gpus.len());
    (0..n).map(|r| gpus[r % gpus.len()].clone()).collect()
}
