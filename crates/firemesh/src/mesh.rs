//! Choosing the devices to run on: CUDA GPUs when they can run kernels, else a CPU mesh; and
//! the `Sharded` mesh over them, with our CubeCL collectives between GPU devices.

use crate::{Error, Result};
use burn::tensor::backend::{Backend, DeviceOps};
use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use firemesh_backend::{Mesh, Sharded};
use firemesh_collective::{
    probe, wgpu_devices::wgpu_devices, CollectiveRuntime, Group, PortableGroup, TensorCollectives,
    Unavailable,
};

/// Where the ranks of a run live.
pub enum DeviceMesh {
    /// One rank per CUDA GPU (round-robin when there are more ranks than GPUs).
    Cuda(Vec<CudaDevice>),
    /// Separate wgpu clients (a GPU or Mesa's software Vulkan driver).
    Wgpu(Vec<WgpuDevice>),
    /// `ranks` ranks on the CPU, moved with plain Burn tensor ops; `no_gpu` says why no GPU
    /// was used when the mesh kind was `auto`.
    Cpu {
        ranks: usize,
        no_gpu: Option<Unavailable>,
    },
}

/// Which kind of mesh to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MeshKind {
    /// CUDA GPUs if they can run kernels, else the CPU.
    Auto,
    Cuda,
    Wgpu,
    Cpu,
}

impl DeviceMesh {
    /// The mesh for `kind`; `ranks` defaults to the number of GPUs, or 4 on the CPU.
    pub fn discover(kind: MeshKind, ranks: Option<usize>) -> Result<Self> {
        if ranks == Some(0) {
            return Err(Error::Invalid("--ranks must be at least 1".into()));
        }
        let cpu = |no_gpu| Self::Cpu {
            ranks: ranks.unwrap_or(4),
            no_gpu,
        };
        match kind {
            MeshKind::Auto => Ok(match probe::usable_cuda_devices() {
                Ok(gpus) => Self::Cuda(pick(gpus, ranks)),
                Err(reason) => cpu(Some(reason)),
            }),
            MeshKind::Cpu => Ok(cpu(None)),
            MeshKind::Cuda => Ok(Self::Cuda(pick(probe::usable_cuda_devices()?, ranks))),
            MeshKind::Wgpu => Ok(Self::Wgpu(wgpu_devices(ranks.unwrap_or(4))?)),
        }
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        match self {
            Self::Cuda(d) => d.len(),
            Self::Wgpu(d) => d.len(),
            Self::Cpu { ranks, .. } => *ranks,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Cuda(d) => format!("{} CUDA GPU rank(s)", d.len()),
            Self::Wgpu(d) => format!("{} wgpu rank(s)", d.len()),
            Self::Cpu {
                ranks,
                no_gpu: None,
            } => format!("a CPU mesh of {ranks} rank(s)"),
            Self::Cpu {
                ranks,
                no_gpu: Some(why),
            } => format!("a CPU mesh of {ranks} rank(s) (no GPU used: {why})"),
        }
    }

    pub fn cuda_group(devices: &[CudaDevice]) -> Result<Group<CudaRuntime>> {
        Ok(Group::new_shared(devices.to_vec())?)
    }

    pub fn wgpu_group(devices: &[WgpuDevice]) -> Result<Group<WgpuRuntime>> {
        Ok(Group::new(devices.to_vec())?)
    }

    pub fn cpu_group(n: usize) -> Result<PortableGroup<burn_ndarray::NdArray>> {
        Ok(PortableGroup::new_shared(vec![
            burn_ndarray::NdArrayDevice::Cpu;
            n
        ])?)
    }
}

/// The `Sharded<B>` mesh over the CubeCL `devices` (each tried first), whose sums and gathers
/// across ranks run on a [`Group`] of the same devices: reduced in device memory by our
/// kernels, moved by the runtime's transport (peer copies between CUDA GPUs), instead of the
/// portable path through host memory. Ranks may share a device.
pub fn sharded_on_group<R, B>(devices: &[R::Device]) -> Result<Mesh<R::Device>>
where
    R: CollectiveRuntime<Device: DeviceOps>,
    B: Backend<Device = R::Device>,
    Group<R>: TensorCollectives<B> + Send + Sync + 'static,
{
    let mesh = Sharded::<B>::mesh(devices.to_vec())?;
    let group = Group::<R>::new_shared(devices.to_vec())?;
    mesh.use_collectives::<B>(group);
    Ok(mesh)
}

/// `ranks` ranks over the GPUs (round-robin when asking for more ranks than GPUs).
fn pick(gpus: Vec<CudaDevice>, ranks: Option<usize>) -> Vec<CudaDevice> {
    let n = ranks.unwrap_or(gpus.len());
    (0..n).map(|r| gpus[r % gpus.len()].clone()).collect()
}
