//! Choosing the devices to run on: CUDA GPUs when they can run kernels, else a CPU mesh; and
//! the `Sharded` mesh over them, with our CubeCL collectives between GPU devices.

use crate::error::{Error, Result};
use crate::named::{by_name, Named};
use burn::tensor::backend::{Backend, DeviceOps};
#[cfg(feature = "cuda")]
use cubecl::cuda::{CudaDevice, CudaRuntime};
#[cfg(feature = "wgpu")]
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
#[cfg(feature = "cuda")]
use firemesh_backend::ImplicitGemmConvs;
use firemesh_backend::{Mesh, MeshConfig, Sharded};
#[cfg(feature = "cpu")]
use firemesh_collective::PortableGroup;
use firemesh_collective::{
    CollectiveConfig, CollectiveError, CollectiveRuntime, Engine, Group, TensorCollectives,
    Transfer, Unavailable,
};
use firemesh_world::ProcessLink;
use std::sync::Arc;

/// How firemesh runs the meshes it makes: made once at the program's edge (the command line
/// and its environment) and handed to every mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuntimeConfig {
    pub mesh: MeshConfig,
    /// How transfers between CUDA GPUs are ordered ([`Transfer`]).
    pub cuda_copy: Transfer,
    /// Which engine runs the sums of CUDA meshes ([`Engine`]).
    pub engine: Engine,
}

impl RuntimeConfig {
    /// The config of the collectives between GPUs.
    pub fn collectives(&self) -> CollectiveConfig {
        CollectiveConfig {
            engine: self.engine,
            ..CollectiveConfig::with_transfer(self.cuda_copy)
        }
    }

    /// What `mesh`'s sums run on, and why; or why the engine asked for cannot run there.
    pub fn engine_on(&self, mesh: &DeviceMesh) -> Result<(String, String)> {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        let choice = |c: firemesh_collective::EngineChoice| (c.used.name().to_string(), c.why);
        Ok(match mesh {
            #[cfg(feature = "cuda")]
            DeviceMesh::Cuda(d) => {
                choice(Group::<CudaRuntime>::engine_for(d, &self.collectives())?)
            }
            #[cfg(feature = "wgpu")]
            DeviceMesh::Wgpu(d) => {
                choice(Group::<WgpuRuntime>::engine_for(d, &self.collectives())?)
            }
            DeviceMesh::Cpu { .. } if self.engine == Engine::Nccl => {
                let reason = "NCCL runs the sums of CUDA groups only; a CPU mesh sums with \
                              Burn's tensor ops"
                    .into();
                return Err(CollectiveError::EngineUnavailable {
                    engine: "nccl",
                    reason,
                }
                .into());
            }
            DeviceMesh::Cpu { .. } => (
                "portable".into(),
                "a CPU mesh sums with Burn's tensor ops (PortableGroup)".into(),
            ),
        })
    }

    /// The CUDA mesh over `devices`, its sums and gathers on our collectives.
    /// Autocast convolutions run on CubeCL's implicit-GEMM kernels ([`ImplicitGemmConvs`]).
    #[cfg(feature = "cuda")]
    pub fn cuda_mesh(&self, devices: &[CudaDevice]) -> Result<Mesh<CudaDevice>> {
        let (config, group) = (&self.mesh, Some(self.collectives()));
        let mesh = sharded_on_group::<CudaRuntime, burn_cuda::Cuda>(devices, config, group, None)?;
        mesh.use_narrow_convs::<burn_cuda::Cuda>(ImplicitGemmConvs);
        Ok(mesh)
    }

    /// [`Self::cuda_mesh`] as this process's share of the world `link` joins (NCCL's, in
    /// `firemesh train`; every process calls it at once).
    #[cfg(feature = "cuda")]
    pub fn cuda_world_mesh(
        &self,
        devices: &[CudaDevice],
        link: Arc<dyn ProcessLink>,
    ) -> Result<Mesh<CudaDevice>> {
        let (config, group) = (&self.mesh, Some(self.collectives()));
        let link = Some(link);
        let mesh = sharded_on_group::<CudaRuntime, burn_cuda::Cuda>(devices, config, group, link)?;
        mesh.use_narrow_convs::<burn_cuda::Cuda>(ImplicitGemmConvs);
        Ok(mesh)
    }

    /// The wgpu mesh over `devices` (one client each), its sums and gathers on our collectives.
    #[cfg(feature = "wgpu")]
    pub fn wgpu_mesh(&self, devices: &[WgpuDevice]) -> Result<Mesh<WgpuDevice>> {
        sharded_on_group::<WgpuRuntime, burn_wgpu::Wgpu>(devices, &self.mesh, None, None)
    }

    /// [`Self::wgpu_mesh`] as this process's share of the world `link` joins (every process
    /// calls it at once).
    #[cfg(feature = "wgpu")]
    pub fn wgpu_world_mesh(
        &self,
        devices: &[WgpuDevice],
        link: Arc<dyn ProcessLink>,
    ) -> Result<Mesh<WgpuDevice>> {
        sharded_on_group::<WgpuRuntime, burn_wgpu::Wgpu>(devices, &self.mesh, None, Some(link))
    }

    /// `ranks` ranks on the CPU (Flex).
    #[cfg(feature = "cpu")]
    pub fn cpu_mesh(&self, ranks: usize) -> Result<Mesh<burn_flex::FlexDevice>> {
        Ok(Mesh::with_config(
            vec![burn_flex::FlexDevice; ranks],
            &self.mesh,
        )?)
    }

    /// `ranks` ranks on the CPU as this process's share of the world `link` joins
    /// ([`Mesh::in_world`]; every process calls it at once).
    #[cfg(feature = "cpu")]
    pub fn cpu_world_mesh(
        &self,
        ranks: usize,
        link: Arc<dyn ProcessLink>,
    ) -> Result<Mesh<burn_flex::FlexDevice>> {
        let mesh = Mesh::in_world(vec![burn_flex::FlexDevice; ranks], link)?;
        mesh.configure(&self.mesh);
        Ok(mesh)
    }
}

/// Where the ranks of a run live.
pub enum DeviceMesh {
    /// One rank per CUDA GPU (round-robin when there are more ranks than GPUs).
    #[cfg(feature = "cuda")]
    Cuda(Vec<CudaDevice>),
    /// Separate wgpu clients (a GPU or Mesa's software Vulkan driver).
    #[cfg(feature = "wgpu")]
    Wgpu(Vec<WgpuDevice>),
    /// `ranks` ranks on the CPU, moved with plain Burn tensor ops; `no_gpu` says why no GPU
    /// was used when the mesh kind was `auto`.
    Cpu {
        ranks: usize,
        no_gpu: Option<Unavailable>,
    },
}

/// Work written once for every inner backend, run on the mesh of the devices a program found
/// ([`DeviceMesh::run`]): Rust has no closures generic over a type, so this trait stands in.
pub trait MeshJob {
    type Output;
    fn run<B: Backend>(self, mesh: Mesh<B::Device>) -> Self::Output;
}

/// Which kind of mesh to build (`auto`, `cuda`, `wgpu` or `cpu` as text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MeshKind {
    /// CUDA GPUs if they can run kernels, else the CPU.
    Auto,
    Cuda,
    Wgpu,
    Cpu,
}

impl Named for MeshKind {
    const WHAT: &'static str = "mesh kind";
    const ALL: &'static [Self] = &[Self::Auto, Self::Cuda, Self::Wgpu, Self::Cpu];
    fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cuda => "cuda",
            Self::Wgpu => "wgpu",
            Self::Cpu => "cpu",
        }
    }
}

by_name!(MeshKind);

/// Most ranks of a CPU mesh (ranks there are logical: they share the host's cores).
pub const MAX_CPU_RANKS: usize = 64;
/// The CUDA devices CubeCL can run kernels on, or why there are none (this build may have no
/// CUDA at all).
#[cfg(feature = "cuda")]
fn cuda_devices() -> std::result::Result<Vec<CudaDevice>, Unavailable> {
    firemesh_collective::probe::usable_cuda_devices()
}

#[cfg(not(feature = "cuda"))]
fn cuda_devices() -> std::result::Result<std::convert::Infallible, Unavailable> {
    Err(Unavailable::NotBuilt {
        runtime: "CUDA",
        feature: "cuda",
    })
}

/// Most wgpu clients of a mesh.
pub const MAX_WGPU_RANKS: usize = 16;

impl DeviceMesh {
    /// The mesh for `kind`; `ranks` defaults to the number of GPUs, or 4 on the CPU. More
    /// ranks than GPUs is an error unless `share_devices` (then ranks go round-robin). `Auto`
    /// takes CUDA GPUs where this build has them and they can run kernels, else the CPU.
    pub fn discover(kind: MeshKind, ranks: Option<usize>, share_devices: bool) -> Result<Self> {
        if ranks == Some(0) {
            return Err(Error::NoRanks);
        }
        match kind {
            MeshKind::Auto => match cuda_devices() {
                Ok(found) => Self::on_gpus(found, ranks, share_devices),
                Err(reason) => Self::on_cpu(ranks, Some(reason)),
            },
            MeshKind::Cpu => Self::on_cpu(ranks, None),
            MeshKind::Cuda => Self::on_gpus(cuda_devices()?, ranks, share_devices),
            MeshKind::Wgpu => Self::on_wgpu(ranks.unwrap_or(4)),
        }
    }

    fn on_cpu(ranks: Option<usize>, no_gpu: Option<Unavailable>) -> Result<Self> {
        let ranks = ranks.unwrap_or(4);
        if ranks > MAX_CPU_RANKS {
            return Err(Error::TooManyRanks {
                asked: ranks,
                most: MAX_CPU_RANKS,
                on: "a CPU mesh",
            });
        }
        Ok(Self::Cpu { ranks, no_gpu })
    }

    #[cfg(feature = "cuda")]
    fn on_gpus(gpus: Vec<CudaDevice>, ranks: Option<usize>, share: bool) -> Result<Self> {
        match ranks {
            Some(n) if n > gpus.len() && !share => Err(Error::TooFewGpus {
                asked: n,
                found: gpus.len(),
            }),
            _ => Ok(Self::Cuda(firemesh_collective::probe::round_robin(
                &gpus,
                ranks.unwrap_or(gpus.len()),
            ))),
        }
    }

    #[cfg(not(feature = "cuda"))]
    fn on_gpus(gpus: std::convert::Infallible, _: Option<usize>, _: bool) -> Result<Self> {
        match gpus {}
    }

    #[cfg(feature = "wgpu")]
    fn on_wgpu(n: usize) -> Result<Self> {
        if n > MAX_WGPU_RANKS {
            return Err(Error::TooManyRanks {
                asked: n,
                most: MAX_WGPU_RANKS,
                on: "a wgpu mesh",
            });
        }
        Ok(Self::Wgpu(firemesh_collective::wgpu_devices::wgpu_devices(
            n,
        )?))
    }

    #[cfg(not(feature = "wgpu"))]
    fn on_wgpu(_: usize) -> Result<Self> {
        Err(Unavailable::NotBuilt {
            runtime: "wgpu",
            feature: "wgpu",
        }
        .into())
    }

    /// Builds the mesh of these devices as `runtime` says and runs `job` on it, with the inner
    /// backend of their runtime: Burn's CUDA, wgpu or Flex (CPU) backend. This is how a program
    /// writes its training once, generic over the backend, for whatever devices it finds.
    pub fn run<J: MeshJob>(&self, runtime: &RuntimeConfig, job: J) -> Result<J::Output> {
        match self {
            #[cfg(feature = "cuda")]
            Self::Cuda(d) => Ok(job.run::<burn_cuda::Cuda>(runtime.cuda_mesh(d)?)),
            #[cfg(feature = "wgpu")]
            Self::Wgpu(d) => Ok(job.run::<burn_wgpu::Wgpu>(runtime.wgpu_mesh(d)?)),
            #[cfg(feature = "cpu")]
            Self::Cpu { ranks, .. } => Ok(job.run::<burn_flex::Flex>(runtime.cpu_mesh(*ranks)?)),
            #[cfg(not(feature = "cpu"))]
            Self::Cpu { .. } => Err(Unavailable::NotBuilt {
                runtime: "the CPU",
                feature: "cpu",
            }
            .into()),
        }
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        match self {
            #[cfg(feature = "cuda")]
            Self::Cuda(d) => d.len(),
            #[cfg(feature = "wgpu")]
            Self::Wgpu(d) => d.len(),
            Self::Cpu { ranks, .. } => *ranks,
        }
    }

    /// Number of distinct devices under the ranks (ranks may share a GPU; a CPU mesh is one).
    pub fn distinct_devices(&self) -> usize {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        fn distinct<T: PartialEq>(d: &[T]) -> usize {
            (0..d.len()).filter(|&i| !d[..i].contains(&d[i])).count()
        }
        match self {
            #[cfg(feature = "cuda")]
            Self::Cuda(d) => distinct(d),
            #[cfg(feature = "wgpu")]
            Self::Wgpu(d) => distinct(d),
            Self::Cpu { .. } => 1,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            #[cfg(feature = "cuda")]
            Self::Cuda(d) => format!("{} CUDA GPU rank(s)", d.len()),
            #[cfg(feature = "wgpu")]
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

    #[cfg(feature = "cuda")]
    pub fn cuda_group(devices: &[CudaDevice]) -> Result<Group<CudaRuntime>> {
        Ok(Group::new_shared(devices.to_vec())?)
    }

    #[cfg(feature = "wgpu")]
    pub fn wgpu_group(devices: &[WgpuDevice]) -> Result<Group<WgpuRuntime>> {
        Ok(Group::new(devices.to_vec())?)
    }

    #[cfg(feature = "cpu")]
    pub fn cpu_group(n: usize) -> Result<PortableGroup<burn_flex::Flex>> {
        Ok(PortableGroup::new_shared(vec![burn_flex::FlexDevice; n])?)
    }
}

/// The `Sharded<B>` mesh over the CubeCL `devices` (each tried first), whose sums and gathers
/// across ranks run on a [`Group`] of the same devices: reduced in device memory by our
/// kernels, moved by the runtime's transport (peer copies between CUDA GPUs), instead of the
/// portable path through host memory. Ranks may share a device. The mesh runs as `config` says;
/// the group takes `collectives`, or the runtime's default config. With a `world`, the mesh
/// is this process's share of it (the group sums the process's ranks, the link the processes).
pub fn sharded_on_group<R, B>(
    devices: &[R::Device],
    config: &MeshConfig,
    collectives: Option<CollectiveConfig>,
    world: Option<Arc<dyn ProcessLink>>,
) -> Result<Mesh<R::Device>>
where
    R: CollectiveRuntime<Device: DeviceOps>,
    B: Backend<Device = R::Device>,
    Group<R>: TensorCollectives<B> + Send + Sync + 'static,
{
    let mesh = match world {
        None => Sharded::<B>::mesh(devices.to_vec())?,
        Some(link) => Sharded::<B>::world_mesh(devices.to_vec(), link)?,
    };
    mesh.configure(config);
    let mut group = Group::<R>::new_shared(devices.to_vec())?;
    if let Some(collectives) = collectives {
        group = group.with_config(collectives);
    }
    mesh.use_collectives::<B>(group);
    Ok(mesh)
}

/// `MemAvailable` of /proc/meminfo (Linux), in bytes; `None` where it cannot be read.
pub fn available_host_bytes() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}
