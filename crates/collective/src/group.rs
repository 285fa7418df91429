//! A group of ranks on CubeCL devices and the collectives it runs.

use crate::checks::{self, BufferMeta, BufferRules};
use crate::engine::{self, Engine, EngineChoice, EngineUsed};
use crate::fabric::device::{padded_bytes, DeviceBuffer, DeviceFabric};
use crate::fabric::Fabric;
use crate::stream::{DeviceStream, Handoff};
use crate::transport::{CollectiveRuntime, Rank, Transport};
use crate::{
    algorithms,
    error::{catch_runtime, try_runtime},
    CollectiveConfig, CollectiveError, Collectives, DType, ReduceOp, Result,
};
use cubecl::server::Handle;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// N ranks, each a device of the CubeCL runtime `R`, with the transport between them.
pub struct Group<R: CollectiveRuntime> {
    ranks: Vec<Rank<R>>,
    transport: Arc<dyn Transport<R>>,
    /// Whether `transport` was given by [`Group::with_transport`] rather than made from the
    /// config, which then no longer replaces it.
    chosen_transport: bool,
    config: CollectiveConfig,
    /// The engine of the sums, chosen with the config ([`crate::engine`]), or why the one asked
    /// for cannot run (every all-reduce then fails with it).
    engine: Result<EngineChoice>,
    /// (rank, dtype) pairs already checked against the device's capabilities.
    supported: Mutex<Vec<(usize, DType, bool)>>,
}

impl<R: CollectiveRuntime> Group<R> {
    /// A group with one rank per device; a device may appear only once.
    pub fn new(devices: Vec<R::Device>) -> Result<Self> {
        checks::ensure_distinct(&devices)?;
        Self::new_shared(devices)
    }

    /// A group in which several ranks may share one device (N logical ranks on one GPU).
    pub fn new_shared(devices: Vec<R::Device>) -> Result<Self> {
        checks::ensure_nonempty(&devices)?;
        let ranks = devices
            .into_iter()
            .enumerate()
            .map(|(index, device)| {
                R::check_device(&device).map_err(|reason| CollectiveError::DeviceUnavailable {
                    rank: index,
                    device: format!("{device:?}"),
                    reason: reason.to_string(),
                })?;
                // Every call of this group, from any thread, issues to the device stream (and
                // so does the later work of the Burn tensors it returns, which keep this client).
                let client =
                    catch_runtime(index, || DeviceStream::client::<R>(&device)).map_err(|e| {
                        CollectiveError::DeviceUnavailable {
                            rank: index,
                            device: format!("{device:?}"),
                            reason: e.to_string(),
                        }
                    })?;
                Ok(Rank {
                    index,
                    device,
                    client,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let config = R::default_config();
        let devices: Vec<R::Device> = ranks.iter().map(|r| r.device.clone()).collect();
        Ok(Self {
            ranks,
            transport: R::transport(&config),
            chosen_transport: false,
            engine: Self::engine_for(&devices, &config),
            config,
            supported: Mutex::new(Vec::new()),
        })
    }

    /// Replace the transport (e.g. to compare transports in a benchmark); a config given
    /// afterwards keeps it.
    pub fn with_transport(mut self, transport: Arc<dyn Transport<R>>) -> Self {
        self.transport = transport;
        self.chosen_transport = true;
        self
    }

    /// Use `config`, and the transport of its `transfer` (unless one was chosen).
    pub fn with_config(mut self, config: CollectiveConfig) -> Self {
        let transport_changes = config.transfer != self.config.transfer
            || config.one_device_as_peers != self.config.one_device_as_peers;
        if !self.chosen_transport && transport_changes {
            self.transport = R::transport(&config);
        }
        if config.engine != self.config.engine {
            let devices: Vec<R::Device> = self.ranks.iter().map(|r| r.device.clone()).collect();
            self.engine = Self::engine_for(&devices, &config);
        }
        self.config = config;
        self
    }

    /// The engine a group over `devices` with `config` runs its sums on, and why; or why the
    /// engine `config` asks for cannot run them.
    pub fn engine_for(devices: &[R::Device], config: &CollectiveConfig) -> Result<EngineChoice> {
        let nccl = match config.engine {
            Engine::Cubecl => Err("not asked for".into()),
            Engine::Auto | Engine::Nccl => R::nccl_status(devices),
        };
        engine::choose(config.engine, nccl)
    }

    /// The engine this group runs its sums on, and why ([`Group::engine_for`]).
    pub fn engine(&self) -> Result<&EngineChoice> {
        self.engine.as_ref().map_err(Clone::clone)
    }

    pub fn config(&self) -> &CollectiveConfig {
        &self.config
    }

    pub fn transport_name(&self) -> &'static str {
        self.transport.name()
    }

    pub fn ranks(&self) -> &[Rank<R>] {
        &self.ranks
    }

    /// Whether rank `rank`'s device can hold and reduce `dtype`.
    pub fn supports(&self, rank: usize, dtype: DType) -> bool {
        let mut seen = self.supported.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(_, _, ok)) = seen.iter().find(|(r, d, _)| *r == rank && *d == dtype) {
            return ok;
        }
        let ok = self.ranks[rank]
            .client
            .properties()
            .supports_type(dtype.storage_type());
        seen.push((rank, dtype, ok));
        ok
    }

    /// Copy host values (rounded to `dtype`) into a new buffer on rank `rank`.
    pub fn upload(&self, rank: usize, dtype: DType, values: &[f64]) -> Result<DeviceBuffer<R>> {
        self.check_rank(rank)?;
        self.check_dtype(rank, dtype)?;
        let mut bytes = dtype.encode(values);
        bytes.resize(padded_bytes(values.len(), dtype), 0);
        let r = &self.ranks[rank];
        let handle = catch_runtime(rank, || r.client.create_from_slice(&bytes))?;
        Ok(DeviceBuffer::from_handle(
            handle,
            values.len(),
            dtype,
            r.device.clone(),
        ))
    }

    /// Read a buffer back to the host as f64 values.
    pub fn download(&self, buf: &DeviceBuffer<R>) -> Result<Vec<f64>> {
        let rank = self.rank_of(buf)?;
        let client = &self.ranks[rank].client;
        let bytes = try_runtime(rank, || client.read_one(buf.handle.clone()))?;
        Ok(buf.dtype.decode(&bytes[..buf.len * buf.dtype.size()]))
    }

    /// Wait until every rank's device has finished the work queued so far.
    pub fn sync(&self) -> Result<()> {
        for r in &self.ranks {
            try_runtime(r.index, || cubecl::future::block_on(r.client.sync()))?;
        }
        Ok(())
    }

    /// The first rank whose device is `device`.
    pub(crate) fn rank_on(&self, device: &R::Device) -> Option<usize> {
        self.ranks.iter().position(|r| &r.device == device)
    }

    fn rank_of(&self, buf: &DeviceBuffer<R>) -> Result<usize> {
        self.rank_on(buf.device())
            .ok_or_else(|| CollectiveError::DeviceUnavailable {
                rank: usize::MAX,
                device: format!("{:?}", buf.device()),
                reason: "no rank of this group holds that device".into(),
            })
    }

    fn check_rank(&self, rank: usize) -> Result<()> {
        if rank < self.ranks.len() {
            Ok(())
        } else {
            Err(CollectiveError::BadRank {
                rank,
                ranks: self.ranks.len(),
            })
        }
    }

    fn check_dtype(&self, rank: usize, dtype: DType) -> Result<()> {
        if self.supports(rank, dtype) {
            Ok(())
        } else {
            Err(CollectiveError::UnsupportedDType { rank, dtype })
        }
    }

    /// Check one buffer per rank, each on its rank's device, of one dtype the devices support
    /// and at most 2^32 - 1 elements (the kernels' offsets are u32); returns the dtype.
    fn check_buffers(&self, bufs: &[DeviceBuffer<R>], same_len: bool) -> Result<DType> {
        let metas = bufs.iter().map(|b| BufferMeta {
            device: &b.device,
            elem: b.dtype,
            len: b.len,
        });
        let rules = BufferRules {
            noun: "buffer",
            same_len,
            max_len: u32::MAX as usize,
            dtype_of: |_, dtype| Ok(dtype),
            usable: |rank, dtype| self.check_dtype(rank, dtype),
        };
        checks::check_buffers(self.ranks.iter().map(|r| &r.device), metas, rules)
    }

    /// The ranks as a fabric for one collective of `dtype`, on the device stream.
    pub(crate) fn fabric(&self, dtype: DType) -> DeviceFabric<'_, R> {
        DeviceFabric {
            ranks: &self.ranks,
            transport: self.transport.as_ref(),
            dtype,
        }
    }

    /// The handoff of `bufs` made on another stream than the device stream ([`crate::stream`]).
    fn handoff(&self, bufs: &[DeviceBuffer<R>]) -> Handoff<DeviceBuffer<R>> {
        let foreign = |r: usize| !DeviceStream::holds(&bufs[r].handle);
        let keep = |r: usize| bufs[r].clone();
        Handoff::of(bufs.len(), foreign, keep, "collective on CubeCL buffers")
    }

    /// Waits until rank `r`'s device has finished the work queued on the device stream.
    pub(crate) fn wait(&self, r: usize) -> Result<()> {
        let client = &self.ranks[r].client;
        try_runtime(r, || cubecl::future::block_on(client.sync()))
    }
}

impl<R: CollectiveRuntime> Collectives for Group<R> {
    type Buf = DeviceBuffer<R>;

    fn buf_len(&self, buf: &DeviceBuffer<R>) -> usize {
        buf.len()
    }

    fn size(&self) -> usize {
        self.ranks.len()
    }

    fn all_reduce(&self, bufs: &mut [DeviceBuffer<R>], op: ReduceOp) -> Result<()> {
        let dtype = self.check_buffers(bufs, true)?;
        let nccl = self.engine()?.used == EngineUsed::Nccl && op != ReduceOp::Max;
        let handoff = self.handoff(bufs);
        if nccl && bufs.len() > 1 {
            // Each handle spans its buffer's elements (padded to whole 4-byte words), however
            // big the allocation: NCCL counts the elements of the bytes it is given.
            let spans: Vec<Handle> = (bufs.iter())
                .map(|b| {
                    let extra = b.handle.size_in_used() - padded_bytes(b.len, dtype) as u64;
                    b.handle.clone().offset_end(extra)
                })
                .collect();
            let out = R::nccl_all_reduce(&self.ranks, &spans, dtype, op);
            return handoff.finish(out, |r| self.wait(r));
        }
        let f = self.fabric(dtype);
        let out = settled(&f, algorithms::all_reduce(&f, bufs, op, &self.config));
        handoff.finish(out, |r| self.wait(r))
    }

    fn reduce_scatter_parts(
        &self,
        bufs: &mut [DeviceBuffer<R>],
        op: ReduceOp,
        parts: &[usize],
    ) -> Result<Vec<DeviceBuffer<R>>> {
        let dtype = self.check_buffers(bufs, true)?;
        let handoff = self.handoff(bufs);
        let f = self.fabric(dtype);
        let out = settled(
            &f,
            algorithms::reduce_scatter(&f, bufs, op, parts, &self.config),
        );
        handoff.finish(out, |r| self.wait(r))
    }

    fn all_gather_placed(
        &self,
        shards: &[DeviceBuffer<R>],
        places: &[Vec<Range<usize>>],
        len: usize,
    ) -> Result<Vec<DeviceBuffer<R>>> {
        let dtype = self.check_buffers(shards, false)?;
        let handoff = self.handoff(shards);
        let f = self.fabric(dtype);
        let out = algorithms::all_gather_placed(&f, shards.to_vec(), places, len, &self.config);
        let out = settled(&f, out);
        handoff.finish(out, |r| self.wait(r))
    }

    fn broadcast(&self, bufs: &mut [DeviceBuffer<R>], root: usize) -> Result<()> {
        if root >= self.ranks.len() {
            return Err(CollectiveError::BadRoot {
                root,
                ranks: self.ranks.len(),
            });
        }
        let dtype = self.check_buffers(bufs, true)?;
        let handoff = self.handoff(bufs);
        let f = self.fabric(dtype);
        let out = settled(&f, algorithms::broadcast(&f, bufs, root, &self.config));
        handoff.finish(out, |r| self.wait(r))
    }
}

/// `out`, once every rank of `f` is settled ([`Fabric::settle`]) whether the collective
/// failed or not: copies still reading a rank's buffer must not race what the caller does
/// next. The collective's error comes first.
fn settled<T>(f: &impl Fabric, out: Result<T>) -> Result<T> {
    let settle = f.settle();
    out.and_then(|value| settle.map(|()| value))
}
