//! The fabric of CubeCL devices: buffers are device allocations, moves go through a
//! [`Transport`], reductions are the kernels of [`crate::kernels`].

use super::{Fabric, Outgoing};
use crate::transport::{AddressCell, Arrival, Cast, FlagWait, Rank, Transport};
use crate::{error::catch_runtime, kernels, op::Combine, DType, Result};
use cubecl::{client::ComputeClient, server::Handle, Runtime};
use std::ops::Range;

/// A flat buffer of `len` elements of `dtype` in the memory of one rank's device.
pub struct DeviceBuffer<R: Runtime> {
    pub(crate) handle: Handle,
    pub(crate) len: usize,
    pub(crate) dtype: DType,
    pub(crate) device: R::Device,
    /// The device address of `handle`, once a transport has resolved it.
    pub(crate) address: AddressCell,
}

impl<R: Runtime> Clone for DeviceBuffer<R> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
            len: self.len,
            dtype: self.dtype,
            device: self.device.clone(),
            address: self.address.clone(),
        }
    }
}

impl<R: Runtime> std::fmt::Debug for DeviceBuffer<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer({} x {:?} on {:?})",
            self.len, self.dtype, self.device
        )
    }
}

impl<R: Runtime> DeviceBuffer<R> {
    /// Wrap a device allocation holding `len` elements of `dtype`.
    pub fn from_handle(handle: Handle, len: usize, dtype: DType, device: R::Device) -> Self {
        Self {
            handle,
            len,
            dtype,
            device,
            address: AddressCell::default(),
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn device(&self) -> &R::Device {
        &self.device
    }
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// A buffer received by one rank, and the wait its stream queues before the first kernel that
/// reads it, while the bytes may still be moving.
pub(crate) struct Incoming<R: Runtime> {
    buf: DeviceBuffer<R>,
    pending: Option<FlagWait<R>>,
}

impl<R: Runtime> Incoming<R> {
    fn landed(buf: DeviceBuffer<R>) -> Self {
        Self { buf, pending: None }
    }

    /// The buffer, once a kernel queued next on its rank's stream may read it.
    fn read(self) -> Result<DeviceBuffer<R>> {
        if let Some(wait) = self.pending {
            wait.enqueue()?;
        }
        Ok(self.buf)
    }
}

/// Allocation sizes are rounded up to whole 4-byte words (the copy granularity of wgpu).
pub(crate) fn padded_bytes(len: usize, dtype: DType) -> usize {
    (len * dtype.size()).div_ceil(4).max(1) * 4
}

/// The ranks of a group, seen as a [`Fabric`] for one collective of one dtype.
pub(crate) struct DeviceFabric<'a, R: Runtime> {
    pub ranks: &'a [Rank<R>],
    pub transport: &'a dyn Transport<R>,
    pub dtype: DType,
}

impl<R: Runtime> DeviceFabric<'_, R> {
    fn rank(&self, r: usize) -> &Rank<R> {
        &self.ranks[r]
    }

    /// `len` elements of this fabric's dtype held by `handle` on rank `r`.
    fn buffer(&self, r: usize, handle: Handle, len: usize) -> DeviceBuffer<R> {
        DeviceBuffer::from_handle(handle, len, self.dtype, self.rank(r).device.clone())
    }

    /// Run a kernel launch on rank `r`'s client; a runtime panic becomes an error for `r`.
    fn launch(&self, r: usize, kernel: impl FnOnce(&ComputeClient<R>)) -> Result<()> {
        let client = &self.rank(r).client;
        catch_runtime(r, || kernel(client))
    }

    /// A copy of `src[range]` in a new buffer on the same rank.
    fn local_copy(
        &self,
        r: usize,
        src: &DeviceBuffer<R>,
        range: Range<usize>,
    ) -> Result<DeviceBuffer<R>> {
        let out = self.alloc(r, range.len())?;
        self.launch(r, |client| kernels::copy(client, &out, 0, src, range))?;
        Ok(out)
    }

    /// Each send's range moved to each of its ranks (a local copy for its source itself), the
    /// moves between devices in one round of the transport; read in place where `held`
    /// ([`Fabric::send_many`]).
    fn send_round_on_stream(
        &self,
        sends: &[Outgoing<'_, DeviceBuffer<R>>],
        held: bool,
    ) -> Result<Vec<Vec<Incoming<R>>>> {
        let mut casts: Vec<Cast<'_, R>> = Vec::new();
        for s in sends {
            let peers: Vec<&Rank<R>> = (s.tos.iter())
                .filter(|&&to| to != s.from && !s.range.is_empty())
                .map(|&to| self.rank(to))
                .collect();
            if !peers.is_empty() {
                let (src, in_place) = self.source_slice(s.from, s.src, s.range.clone())?;
                casts.push(Cast {
                    from: self.rank(s.from),
                    src,
                    held: (held && in_place).then_some(&s.src.address),
                    to: peers,
                });
            }
        }
        let mut moved = self.transport.copy_round(&casts, self.dtype)?.into_iter();
        sends
            .iter()
            .map(|s| {
                let crosses = s.tos.iter().any(|&to| to != s.from) && !s.range.is_empty();
                let mut arrivals = match crosses {
                    true => moved.next().expect("one cast per send that crosses"),
                    false => Vec::new(),
                }
                .into_iter();
                (s.tos.iter())
                    .map(|&to| {
                        if to == s.from || s.range.is_empty() {
                            let copy = self.local_copy(to, s.src, s.range.clone())?;
                            return Ok(Incoming::landed(copy));
                        }
                        let Arrival { handle, pending } = arrivals.next().expect("one per peer");
                        Ok(Incoming {
                            buf: self.buffer(to, handle, s.range.len()),
                            pending,
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// The `bytes` of `dst` from byte `start`, as a slice of its handle.
    fn place(&self, dst: &DeviceBuffer<R>, start: usize, bytes: usize) -> Handle {
        let end = dst.handle.size_in_used() as usize - start - bytes;
        let slice = dst.handle.clone().offset_start(start as u64);
        slice.offset_end(end as u64)
    }

    /// A handle spanning exactly `src[range]`, padded to whole 4-byte words, and whether it is
    /// a slice of `src` (rather than a realigned copy).
    fn source_slice(
        &self,
        from: usize,
        src: &DeviceBuffer<R>,
        range: Range<usize>,
    ) -> Result<(Handle, bool)> {
        let size = self.dtype.size();
        let (start, bytes) = (range.start * size, range.len() * size);
        // Runtimes copy whole 4-byte words from 4-byte offsets: realign odd half-precision
        // ranges into a padded temporary first.
        let in_place = start % 4 == 0 && bytes % 4 == 0;
        let (handle, start) = if in_place {
            (src.handle.clone(), start)
        } else {
            (self.local_copy(from, src, range.clone())?.handle, 0)
        };
        let used = handle.size_in_used() as usize;
        let moved = padded_bytes(range.len(), self.dtype);
        let slice = handle
            .offset_start(start as u64)
            .offset_end((used - start - moved) as u64);
        Ok((slice, in_place))
    }
}

impl<R: Runtime> Fabric for DeviceFabric<'_, R> {
    type Buf = DeviceBuffer<R>;
    type Staged = Incoming<R>;

    fn len(&self, buf: &Self::Buf) -> usize {
        buf.len
    }

    fn elem_size(&self) -> usize {
        self.dtype.size()
    }

    fn sends_wait_on_host(&self) -> bool {
        self.transport.waits_on_host()
    }

    fn send(
        &self,
        from: usize,
        src: &Self::Buf,
        range: Range<usize>,
        to: usize,
    ) -> Result<Self::Staged> {
        let mut one = self.send_many(from, src, range, &[to], false)?;
        Ok(one.pop().expect("one destination"))
    }

    fn send_in_place(
        &self,
        from: usize,
        src: &Self::Buf,
        range: Range<usize>,
        tos: &[usize],
        dsts: &[&Self::Buf],
    ) -> Result<bool> {
        let size = self.dtype.size();
        let (start, bytes) = (range.start * size, range.len() * size);
        // Only whole 4-byte words land in place: a padded tail would overwrite a neighbour.
        if bytes == 0 || start % 4 != 0 || bytes % 4 != 0 || tos.contains(&from) {
            return Ok(false);
        }
        let targets: Vec<(&Rank<R>, Handle)> = tos
            .iter()
            .zip(dsts)
            .map(|(&to, dst)| (self.rank(to), self.place(dst, start, bytes)))
            .collect();
        let (slice, _) = self.source_slice(from, src, range)?;
        self.transport
            .copy_into_many(self.rank(from), slice, &targets, self.dtype)
    }

    fn send_round_in_place(
        &self,
        sends: &[Outgoing<'_, Self::Buf>],
        dsts: &[Vec<&Self::Buf>],
    ) -> Result<bool> {
        let size = self.dtype.size();
        let mut casts = Vec::with_capacity(sends.len());
        let mut into = Vec::with_capacity(sends.len());
        for (s, dsts) in sends.iter().zip(dsts) {
            let (start, bytes) = (s.range.start * size, s.range.len() * size);
            // Only whole 4-byte words land in place: a padded tail would overwrite a neighbour.
            if bytes == 0 || start % 4 != 0 || bytes % 4 != 0 || s.tos.contains(&s.from) {
                return Ok(false);
            }
            let (src, _) = self.source_slice(s.from, s.src, s.range.clone())?;
            casts.push(Cast {
                from: self.rank(s.from),
                src,
                held: Some(&s.src.address),
                to: s.tos.iter().map(|&to| self.rank(to)).collect(),
            });
            into.push(
                (dsts.iter())
                    .map(|dst| (self.place(dst, start, bytes), &dst.address))
                    .collect::<Vec<_>>(),
            );
        }
        self.transport.copy_round_into(&casts, &into, self.dtype)
    }

    fn send_many(
        &self,
        from: usize,
        src: &Self::Buf,
        range: Range<usize>,
        tos: &[usize],
        held: bool,
    ) -> Result<Vec<Self::Staged>> {
        let send = Outgoing {
            from,
            src,
            range,
            tos,
        };
        Ok(self.send_round(&[send], held)?.pop().expect("one send"))
    }

    fn send_round(
        &self,
        sends: &[Outgoing<'_, Self::Buf>],
        held: bool,
    ) -> Result<Vec<Vec<Self::Staged>>> {
        self.send_round_on_stream(sends, held)
    }

    /// Every rank, even after one fails; the first failure is returned.
    fn settle(&self) -> Result<()> {
        let settled: Vec<Result<()>> = (self.ranks.iter())
            .map(|rank| self.transport.settle(rank))
            .collect();
        settled.into_iter().collect()
    }

    fn combine(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        at: usize,
        staged: Self::Staged,
        op: Combine,
    ) -> Result<()> {
        let staged = staged.read()?;
        self.launch(rank, |client| {
            kernels::combine(client, dst, at, &staged, op)
        })
    }

    fn write(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        at: usize,
        staged: Self::Staged,
    ) -> Result<()> {
        let staged = staged.read()?;
        let whole = 0..staged.len;
        self.launch(rank, |client| {
            kernels::copy(client, dst, at, &staged, whole)
        })
    }

    fn divide(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        range: Range<usize>,
        divisor: usize,
    ) -> Result<()> {
        self.launch(rank, |client| kernels::divide(client, dst, range, divisor))
    }

    fn alloc(&self, rank: usize, len: usize) -> Result<Self::Buf> {
        let client = &self.rank(rank).client;
        let handle = catch_runtime(rank, || client.empty(padded_bytes(len, self.dtype)))?;
        Ok(self.buffer(rank, handle, len))
    }

    fn buf_as_staged(&self, buf: Self::Buf) -> Self::Staged {
        Incoming::landed(buf)
    }

    fn staged_as_buf(&self, staged: Self::Staged) -> Result<Self::Buf> {
        staged.read()
    }
}
