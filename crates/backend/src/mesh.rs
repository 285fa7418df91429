//! The device of `Sharded<B>`: a mesh of ranks, each one device of the inner backend.
//!
//! Meshes are registered once per device list, so the same list always gives the same mesh and
//! the same [`DeviceId`] (Burn keys per-device settings by id, and rebuilds devices from ids).

use crate::runtime::armed;
use crate::runtime::lanes::{Lanes, DEFAULT_POLL};
use burn_backend::{DeviceId, DeviceOps, FloatDType};
use firemesh_world::ProcessLink;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Duration;

/// `DeviceId::type_id` of every mesh; `index_id` is the mesh's place in the registry.
pub const MESH_TYPE_ID: u16 = 0xF1E5;

/// N ranks, each a device of the inner backend. A device may appear on several ranks: that is
/// how one CPU (or one GPU) runs N ranks.
///
/// A mesh lives as long as the process: the registry keeps every mesh made, so a handle is a
/// plain reference, and copying one (every tensor holds its mesh) counts nothing.
pub struct Mesh<D: 'static> {
    inner: &'static MeshInner<D>,
}

/// A mesh's state, made once and never freed (the registry would hold it to the end anyway).
fn leak<D>(inner: MeshInner<D>) -> &'static MeshInner<D> {
    Box::leak(Box::new(inner))
}

struct MeshInner<D> {
    index: u16,
    devices: Vec<D>,
    parallel: AtomicBool,
    /// How long idle rank threads poll before they sleep.
    lane_poll: Mutex<Duration>,
    /// [`MeshConfig::settle_before_comm`].
    settle_before_comm: AtomicBool,
    /// The threads of ranks 1.., started when first used.
    lanes: OnceLock<Lanes>,
    /// What was registered for one inner backend `B`, keyed by the registered value's type:
    /// its collective group (`Arc<dyn MeshCollectives<B>>`, see `route/`), its convolution
    /// kernels for autocast (`Arc<dyn NarrowConvs<B>>`, see `autocast/convs.rs`).
    per_backend: RwLock<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    /// The mesh seed and how many per-rank random draws were taken from it.
    streams: Mutex<(u64, u64)>,
    /// The processes this mesh's ranks are one of (`across.rs`); `None`: this process alone.
    world: Option<Arc<dyn ProcessLink>>,
    /// The world link's side channel, asked for once when the mesh is made.
    side: Option<Arc<dyn ProcessLink>>,
}

impl<D: 'static> MeshInner<D> {
    fn new(index: u16, devices: Vec<D>, world: Option<Arc<dyn ProcessLink>>) -> Self {
        // Unseeded meshes draw differently in every process, as Burn's backends do.
        let seed = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            index,
        );
        Self {
            index,
            devices,
            parallel: AtomicBool::new(MeshConfig::default().rank_threads_for::<D>()),
            lane_poll: Mutex::new(DEFAULT_POLL),
            settle_before_comm: AtomicBool::new(false),
            lanes: OnceLock::new(),
            per_backend: Default::default(),
            streams: Mutex::new((seed, 0)),
            side: world.as_ref().and_then(|w| w.side_channel()),
            world,
        }
    }
}

/// How a mesh runs. Made once, at the program's edge (command line, config file, environment),
/// and handed to the mesh when it is made ([`Mesh::with_config`]); `Default` gives the defaults
/// below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeshConfig {
    /// Whether ranks 1.. run on their own threads ([`Mesh::set_parallel`]). `None`: on CPU
    /// devices and CUDA GPUs, not on wgpu devices. On the CPU, Flex computes where it is
    /// called, so the ranks compute at once. On GPUs, one host thread issuing every rank's ops
    /// in turn is the bottleneck: the simulator's host model gives ResNet-50 on 8 GPUs 61%
    /// efficiency in turn against 87% on rank threads (not measured on a GPU yet). On wgpu,
    /// whose software driver stands in for GPUs here, rank threads cost a lavapipe mesh more
    /// host time per op than ranks in turn on the 2-core machine this was measured on
    /// (`op_host_time`).
    pub rank_threads: Option<bool>,
    /// How long an idle rank thread polls for its next op before it sleeps (waking a sleeping
    /// thread costs more than a small op); zero sleeps at once. `None`: 50 µs. Applies to rank
    /// threads started after it is set.
    pub lane_poll: Option<Duration>,
    /// Every sum or gather across ranks first waits for the work queued on each rank (its rank
    /// thread's, and its device's when the ranks have several), so that the time counted in
    /// communication (`stats::Counts::comm_nanos`) holds communication only, not compute still
    /// running beside it. For benchmarks: it costs any overlap of that work with the
    /// communication. Off by default.
    pub settle_before_comm: bool,
}

impl MeshConfig {
    /// Whether a mesh of devices `D` runs its ranks on rank threads under this config.
    pub fn rank_threads_for<D: 'static>(&self) -> bool {
        use firemesh_collective::stream::{cube_runtime_of, CubeRuntime};
        self.rank_threads
            .unwrap_or(cube_runtime_of::<D>() != Some(CubeRuntime::Wgpu))
    }
}

/// Why a mesh could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MeshError {
    #[error("a mesh needs at least one device")]
    Empty,
    #[error("a mesh holds at most {max} ranks, got {got}")]
    TooManyRanks { max: usize, got: usize },
    #[error("rank {rank}'s device {device} cannot be used: {reason}")]
    DeviceMissing {
        rank: usize,
        device: String,
        reason: String,
    },
    #[error("too many distinct meshes were created (at most {0})")]
    RegistryFull(usize),
    #[error("the processes of the world disagree on the ranks per process: {0}")]
    UnevenWorld(String),
    #[error("{0}")]
    Link(#[from] firemesh_world::LinkError),
}

const MAX_RANKS: usize = 1024;
const MAX_MESHES: usize = u16::MAX as usize;

impl<D: DeviceOps> Mesh<D> {
    /// The mesh with one rank per entry of `devices` (in that order).
    pub fn new(devices: Vec<D>) -> Result<Self, MeshError> {
        if devices.is_empty() {
            return Err(MeshError::Empty);
        }
        Self::registered(devices, None)
    }

    /// The mesh of `devices` as this process's ranks of the world `link` joins: world rank
    /// `process * len + r` is local rank `r` (see `across.rs`). Every process of the world
    /// calls this at once, with the same number of devices (else every process gets the
    /// same [`MeshError::UnevenWorld`]).
    pub fn in_world(devices: Vec<D>, link: Arc<dyn ProcessLink>) -> Result<Self, MeshError> {
        if devices.is_empty() {
            return Err(MeshError::Empty);
        }
        let counts = link.all_gather(&(devices.len() as u64).to_le_bytes())?;
        let counts: Vec<String> = counts
            .iter()
            .map(|b| match <[u8; 8]>::try_from(&b[..]) {
                Ok(n) => u64::from_le_bytes(n).to_string(),
                Err(_) => format!("{b:?}"),
            })
            .collect();
        if counts.iter().any(|c| *c != counts[0]) {
            return Err(MeshError::UnevenWorld(format!(
                "ranks of processes 0.. are {}",
                counts.join(", ")
            )));
        }
        Self::registered(devices, Some(link))
    }

    /// The registered mesh of `devices` in `world`, made on first use.
    fn registered(devices: Vec<D>, world: Option<Arc<dyn ProcessLink>>) -> Result<Self, MeshError> {
        if devices.len() > MAX_RANKS {
            return Err(MeshError::TooManyRanks {
                max: MAX_RANKS,
                got: devices.len(),
            });
        }
        registry::<D, _>(|meshes| {
            let same_world = |w: &Option<Arc<dyn ProcessLink>>| match (w, &world) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            };
            let found = meshes
                .iter()
                .find(|m| m.inner.devices == devices && same_world(&m.inner.world));
            if let Some(m) = found {
                return Ok(m.clone());
            }
            if meshes.len() >= MAX_MESHES {
                return Err(MeshError::RegistryFull(MAX_MESHES));
            }
            let mesh = Mesh {
                inner: leak(MeshInner::new(meshes.len() as u16, devices, world)),
            };
            meshes.push(mesh.clone());
            Ok(mesh)
        })
    }

    /// The mesh of `devices` ([`Mesh::new`]), run as `config` says ([`Mesh::configure`]).
    pub fn with_config(devices: Vec<D>, config: &MeshConfig) -> Result<Self, MeshError> {
        let mesh = Self::new(devices)?;
        mesh.configure(config);
        Ok(mesh)
    }

    /// Runs this mesh as `config` says, from now on (for every handle to it: meshes are shared
    /// by device list).
    pub fn configure(&self, config: &MeshConfig) {
        *locked(&self.inner.lane_poll) = config.lane_poll.unwrap_or(DEFAULT_POLL);
        self.inner
            .settle_before_comm
            .store(config.settle_before_comm, Ordering::Relaxed);
        self.set_parallel(config.rank_threads_for::<D>());
    }

    /// `ranks` ranks that all run on `device`.
    pub fn replicate(device: D, ranks: usize) -> Result<Self, MeshError> {
        Self::new(vec![device; ranks])
    }

    /// Number of this process's ranks (of the world's: [`Mesh::world_len`]).
    pub fn len(&self) -> usize {
        self.inner.devices.len()
    }

    /// Always false: a mesh has at least one rank.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The inner device of every rank.
    pub fn devices(&self) -> &[D] {
        &self.inner.devices
    }

    /// The inner device of rank `rank`.
    pub fn device(&self, rank: usize) -> &D {
        &self.inner.devices[rank]
    }

    /// Registers `value` here for its type (a value made for one inner backend: a collective
    /// group, convolution kernels), replacing the one registered before.
    pub(crate) fn register<T: Any + Send + Sync>(&self, value: T) {
        let mut map = self
            .inner
            .per_backend
            .write()
            .unwrap_or_else(|p| p.into_inner());
        map.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// Takes back the value of type `T` registered here, if any.
    pub(crate) fn unregister<T: Any>(&self) {
        let mut map = self
            .inner
            .per_backend
            .write()
            .unwrap_or_else(|p| p.into_inner());
        map.remove(&TypeId::of::<T>());
    }

    /// The value of type `T` registered here, if any.
    pub(crate) fn registered_value<T: Any + Clone>(&self) -> Option<T> {
        let map = self
            .inner
            .per_backend
            .read()
            .unwrap_or_else(|p| p.into_inner());
        map.get(&TypeId::of::<T>())?.downcast_ref::<T>().cloned()
    }

    /// Whether every rank runs on the same inner device (then moving data between ranks is free).
    pub fn single_device(&self) -> bool {
        let d = &self.inner.devices;
        d.iter().all(|x| *x == d[0])
    }
}

/// Runs `f` on the list of meshes over device type `D`; the default mesh is always entry 0.
fn registry<D: DeviceOps, T>(f: impl FnOnce(&mut Vec<Mesh<D>>) -> T) -> T {
    static REGISTRY: OnceLock<Mutex<HashMap<TypeId, Box<dyn Any + Send>>>> = OnceLock::new();
    let mut all = REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let entry = all.entry(TypeId::of::<D>()).or_insert_with(|| {
        let default = Mesh {
            inner: leak(MeshInner::new(0, vec![D::default()], None)),
        };
        Box::new(vec![default])
    });
    let meshes = entry
        .downcast_mut::<Vec<Mesh<D>>>()
        .expect("the registry is keyed by device type");
    f(meshes)
}

impl<D> Mesh<D> {
    /// The link to the other processes of this mesh's world, if it has several.
    pub fn link(&self) -> Option<&Arc<dyn ProcessLink>> {
        self.inner.world.as_ref()
    }

    /// The link's side channel ([`ProcessLink::side_channel`]), which early gradient buckets
    /// cross the processes through; `None` without a world or where the link has none.
    pub fn side_link(&self) -> Option<&Arc<dyn ProcessLink>> {
        self.inner.side.as_ref()
    }

    /// The processes of the world (1 without a link).
    pub fn processes(&self) -> usize {
        self.link().map_or(1, |l| l.processes())
    }

    /// This process's place in the world (0 without a link).
    pub fn process(&self) -> usize {
        self.link().map_or(0, |l| l.process())
    }

    /// The ranks of the whole world: this process's times the processes.
    pub fn world_len(&self) -> usize {
        self.inner.devices.len() * self.processes()
    }

    /// The world rank of local rank `rank`.
    pub fn world_rank(&self, rank: usize) -> usize {
        self.process() * self.inner.devices.len() + rank
    }

    /// Whether every rank but the first has its own long-lived thread that runs the rank's
    /// share of each op, in order, while the calling thread runs rank 0's and goes on (instead
    /// of all ranks in turn on the calling thread). The calling thread waits for a rank's thread
    /// only where it needs that rank's data: a sum or gather across ranks, a read back to the
    /// host, [`Backend::sync`](burn_backend::Backend::sync). On CubeCL devices (wgpu, CUDA) a
    /// rank's thread issues to the device stream, as every thread of firemesh does
    /// (`firemesh_collective::stream`), so each device sees its work in issue order. On by
    /// default on CPU devices and CUDA GPUs, off on wgpu devices ([`MeshConfig::rank_threads`]).
    /// Ranks in turn cost less for streams of tiny ops on a machine with fewer cores than ranks
    /// (`op_host_time`). The setting is shared by every handle to this mesh.
    pub fn set_parallel(&self, parallel: bool) {
        if !parallel {
            self.wait_issued();
        }
        self.inner.parallel.store(parallel, Ordering::Relaxed);
    }

    pub fn parallel(&self) -> bool {
        self.inner.parallel.load(Ordering::Relaxed)
    }

    /// Whether sums and gathers wait for queued work first ([`MeshConfig::settle_before_comm`]).
    pub fn settles_before_comm(&self) -> bool {
        self.inner.settle_before_comm.load(Ordering::Relaxed)
    }

    /// The ranks' threads, when the mesh has more than one rank and runs them in parallel.
    pub(crate) fn lanes(&self) -> Option<&Lanes> {
        let ranks = self.inner.devices.len();
        (self.parallel() && ranks > 1).then(|| {
            self.inner.lanes.get_or_init(|| {
                Lanes::start(ranks, self.inner.index, *locked(&self.inner.lane_poll))
            })
        })
    }

    /// Waits until every rank's thread has run the work queued so far (for a CubeCL backend:
    /// issued it to the device; [`Backend::sync`](burn_backend::Backend::sync) also waits for
    /// the devices). Returns at once when the ranks have no threads.
    pub fn wait_issued(&self) {
        if let Some(lanes) = self.inner.lanes.get() {
            lanes.flush();
        }
    }

    /// Restarts the mesh's per-rank random streams from `seed` (called by `Backend::seed`).
    pub(crate) fn seed_streams(&self, seed: u64) {
        *self.lock_streams() = (seed, 0);
    }

    /// The seed of the next per-rank draw: each draw gets its own, in the order the draws are
    /// asked for, so a seeded program draws the same values on every run.
    pub(crate) fn next_stream(&self) -> u64 {
        let mut streams = self.lock_streams();
        streams.1 += 1;
        firemesh_rng::mix(streams.0, streams.1)
    }

    /// What names this mesh among every mesh of the process: its device type and its place
    /// in that type's registry (its [`DeviceId`]'s `index_id`).
    pub(crate) fn key(&self) -> armed::MeshKey
    where
        D: 'static,
    {
        (TypeId::of::<D>(), self.inner.index)
    }

    /// The early gradient buckets the calling thread armed here, if any (`runtime/armed.rs`).
    pub(crate) fn early_buckets(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        armed::early_buckets(self.key())
    }

    /// The precision the calling thread's matrix products and convolutions run in here, if one
    /// is armed ([`Mesh::autocast`], or a `StepScope` entered;
    /// `runtime/armed.rs`).
    pub fn autocast_precision(&self) -> Option<FloatDType> {
        armed::autocast(self.key())
    }

    fn lock_streams(&self) -> MutexGuard<'_, (u64, u64)> {
        locked(&self.inner.streams)
    }
}

/// The value behind `m`, also after a thread panicked holding it (every value kept under a lock
/// here is whole between statements).
pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<D> Clone for Mesh<D> {
    fn clone(&self) -> Self {
        Self { inner: self.inner }
    }
}

impl<D> PartialEq for Mesh<D> {
    fn eq(&self, other: &Self) -> bool {
        self.inner.index == other.inner.index
    }
}

impl<D: core::fmt::Debug> core::fmt::Debug for Mesh<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Mesh#{}{:?}", self.inner.index, self.inner.devices)
    }
}

/// One rank on the inner backend's default device: valid everywhere, with a stable id.
impl<D: DeviceOps> Default for Mesh<D> {
    fn default() -> Self {
        registry::<D, _>(|meshes| meshes[0].clone())
    }
}

impl<D: DeviceOps> burn_backend::Device for Mesh<D> {
    fn from_id(id: DeviceId) -> Self {
        registry::<D, _>(|meshes| {
            meshes
                .get(id.index_id as usize)
                .cloned()
                .unwrap_or_else(|| panic!("no firemesh mesh has id {id}"))
        })
    }

    fn to_id(&self) -> DeviceId {
        DeviceId::new(MESH_TYPE_ID, self.inner.index)
    }
}

impl<D: DeviceOps> DeviceOps for Mesh<D> {}

/// Number of meshes registered over device type `D` (the default mesh included).
pub(crate) fn mesh_count<D: DeviceOps>() -> usize {
    registry::<D, _>(|meshes| meshes.len())
}
