//! Collectives over plain Burn tensors, for inner backends that are not CubeCL (Flex).

use crate::checks::{self, BufferMeta, BufferRules};
use crate::config::Algorithm;
use crate::fabric::{portable::PortableFabric, Fabric};
use crate::stream::{self, DeviceStream, Handoff};
use crate::{algorithms, CollectiveConfig, CollectiveError, Collectives, DType, ReduceOp, Result};
use burn_tensor::{backend::Backend, Tensor};
use std::ops::Range;

/// N ranks, each a device of the Burn backend `B`; buffers are 1-D float tensors.
pub struct PortableGroup<B: Backend> {
    devices: Vec<B::Device>,
    config: CollectiveConfig,
}

impl<B: Backend> PortableGroup<B> {
    /// A group with one rank per device; a device may appear only once.
    pub fn new(devices: Vec<B::Device>) -> Result<Self> {
        checks::ensure_distinct(&devices)?;
        Self::new_shared(devices)
    }

    /// A group in which several ranks may share one device (N ranks on one CPU).
    pub fn new_shared(devices: Vec<B::Device>) -> Result<Self> {
        checks::ensure_nonempty(&devices)?;
        // On host memory the one-shot algorithm's N-1 extra copies cost more than the ring's
        // extra steps from a few KiB on, so the ring takes over much earlier than on GPUs.
        let config = CollectiveConfig {
            small_message_bytes: 8 * 1024,
            ..CollectiveConfig::default()
        };
        Ok(Self { devices, config })
    }

    pub fn with_config(mut self, config: CollectiveConfig) -> Self {
        self.config = config;
        self
    }

    pub fn devices(&self) -> &[B::Device] {
        &self.devices
    }

    /// Check one tensor per rank, each on its rank's device, one float dtype; returns the fabric.
    fn fabric(&self, bufs: &[Tensor<B, 1>], same_len: bool) -> Result<PortableFabric<'_, B>> {
        let metas = bufs.iter().map(|b| BufferMeta {
            device: b.device(),
            elem: b.dtype(),
            len: b.dims()[0],
        });
        let rules = BufferRules {
            noun: "tensor",
            same_len,
            // Tensor ops index with usize: no limit below the backend's own.
            max_len: usize::MAX,
            dtype_of: |rank, elem| {
                portable_dtype(elem).ok_or_else(|| CollectiveError::RankFailed {
                    rank,
                    reason: format!("collectives reduce float tensors; got {elem:?}"),
                })
            },
            usable: |_, _| Ok(()),
        };
        let dtype = checks::check_buffers(self.devices.iter().cloned(), metas, rules)?;
        Ok(PortableFabric {
            devices: &self.devices,
            dtype,
            elem_size: dtype.size(),
        })
    }
}

impl<B: Backend> PortableGroup<B> {
    /// The handoff of `bufs` made on another CubeCL stream than the device stream
    /// ([`crate::stream`]).
    fn handoff(&self, bufs: &[Tensor<B, 1>]) -> Handoff<Tensor<B, 1>> {
        let foreign = |r: usize| stream::is_foreign(&bufs[r]);
        let keep = |r: usize| bufs[r].clone();
        Handoff::of(bufs.len(), foreign, keep, "portable collective")
    }

    /// Waits until rank `r`'s device has finished the work queued on the device stream.
    fn wait(&self, r: usize) -> Result<()> {
        stream::wait_for::<B>(r, &self.devices[r])
    }
}

/// The collective dtype of a Burn float dtype. Unlike the kernels, the tensor ops here also
/// reduce f64 (as-is); errors report it as f32-class.
fn portable_dtype(dtype: burn_tensor::DType) -> Option<DType> {
    match dtype {
        burn_tensor::DType::F64 => Some(DType::F32),
        other => DType::from_burn(other),
    }
}

impl<B: Backend> crate::TensorBridge<B> for PortableGroup<B> {
    fn buf_from_tensor(&self, _rank: usize, t: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        Ok(t)
    }

    fn tensor_from_buf(&self, _rank: usize, buf: Tensor<B, 1>) -> Tensor<B, 1> {
        buf
    }
}

impl<B: Backend> Collectives for PortableGroup<B> {
    type Buf = Tensor<B, 1>;

    fn buf_len(&self, buf: &Tensor<B, 1>) -> usize {
        buf.dims()[0]
    }

    fn size(&self) -> usize {
        self.devices.len()
    }

    fn all_reduce(&self, bufs: &mut [Tensor<B, 1>], op: ReduceOp) -> Result<()> {
        let f = self.fabric(bufs, true)?;
        let one_device = self.devices.iter().all(|d| *d == self.devices[0]);
        DeviceStream::run(|| {
            let handoff = self.handoff(bufs);
            let out =
                if one_device && self.config.algorithm == Algorithm::Auto && f.len(&bufs[0]) > 0 {
                    f.all_reduce_on_one_device(bufs, op)
                } else {
                    algorithms::all_reduce(&f, bufs, op, &self.config)
                };
            handoff.finish(out, |r| self.wait(r))
        })
    }

    fn reduce_scatter_parts(
        &self,
        bufs: &mut [Tensor<B, 1>],
        op: ReduceOp,
        parts: &[usize],
    ) -> Result<Vec<Tensor<B, 1>>> {
        let f = self.fabric(bufs, true)?;
        DeviceStream::run(|| {
            let handoff = self.handoff(bufs);
            let out = algorithms::reduce_scatter(&f, bufs, op, parts, &self.config);
            handoff.finish(out, |r| self.wait(r))
        })
    }

    fn all_gather_placed(
        &self,
        shards: &[Tensor<B, 1>],
        places: &[Vec<Range<usize>>],
        len: usize,
    ) -> Result<Vec<Tensor<B, 1>>> {
        let f = self.fabric(shards, false)?;
        DeviceStream::run(|| {
            let handoff = self.handoff(shards);
            let out = algorithms::all_gather_placed(&f, shards.to_vec(), places, len, &self.config);
            handoff.finish(out, |r| self.wait(r))
        })
    }

    fn broadcast(&self, bufs: &mut [Tensor<B, 1>], root: usize) -> Result<()> {
        if root >= self.devices.len() {
            return Err(CollectiveError::BadRoot {
                root,
                ranks: self.devices.len(),
            });
        }
        let f = self.fabric(bufs, true)?;
        DeviceStream::run(|| {
            let handoff = self.handoff(bufs);
            let out = algorithms::broadcast(&f, bufs, root, &self.config);
            handoff.finish(out, |r| self.wait(r))
        })
    }
}
