//! What an algorithm needs from the memory of the ranks, whatever holds it.
//!
//! An algorithm (ring, one-shot) is written once against [`Fabric`]; a fabric combines a
//! transport (how bytes move between ranks) with kernels (how a chunk is reduced in place).
//! [`device::DeviceFabric`] does it with CubeCL kernels, [`portable::PortableFabric`] with
//! plain Burn tensor ops.

pub mod device;
pub mod portable;

use crate::{op::Combine, Result};
use std::ops::Range;

/// `src[range]` of rank `from`, sent to every rank of `tos`: one send of a
/// [`Fabric::send_round`].
pub struct Outgoing<'a, B> {
    pub from: usize,
    pub src: &'a B,
    pub range: Range<usize>,
    pub tos: &'a [usize],
}

/// Memory of N ranks and the primitive moves between them.
pub trait Fabric: Sync {
    /// One rank's whole buffer.
    type Buf: Send + Sync;
    /// A temporary resident on one rank: data received from a peer.
    type Staged: Send;

    /// Elements in a buffer.
    fn len(&self, buf: &Self::Buf) -> usize;
    /// Bytes per element.
    fn elem_size(&self) -> usize;
    /// Copy elements `range` of `src` (on rank `from`) into a new temporary on rank `to`.
    fn send(
        &self,
        from: usize,
        src: &Self::Buf,
        range: Range<usize>,
        to: usize,
    ) -> Result<Self::Staged>;
    /// [`Fabric::send`] of one range to several ranks, in `tos` order. Fabrics whose transport
    /// can read a source once for every destination override it. `held`: the collective
    /// writes no range of `from`'s buffer after sending it, until [`Fabric::settle`], so the
    /// fabric may read the source in place while the bytes move.
    fn send_many(
        &self,
        from: usize,
        src: &Self::Buf,
        range: Range<usize>,
        tos: &[usize],
        _held: bool,
    ) -> Result<Vec<Self::Staged>> {
        tos.iter()
            .map(|&to| self.send(from, src, range.clone(), to))
            .collect()
    }
    /// [`Fabric::send_many`] of each send, in order: one round, which a fabric whose sends do
    /// not wait on the host may issue together.
    fn send_round(
        &self,
        sends: &[Outgoing<'_, Self::Buf>],
        held: bool,
    ) -> Result<Vec<Vec<Self::Staged>>> {
        (sends.iter())
            .map(|s| self.send_many(s.from, s.src, s.range.clone(), s.tos, held))
            .collect()
    }
    /// Copy `src[range]` of rank `from` into `dst[range]` of every rank of `tos` (`dsts[i]` is
    /// rank `tos[i]`'s buffer), for a transport that can land bytes in place. Returns
    /// `Ok(false)`, having done nothing, where it cannot: the caller then sends and writes.
    fn send_in_place(
        &self,
        _from: usize,
        _src: &Self::Buf,
        _range: Range<usize>,
        _tos: &[usize],
        _dsts: &[&Self::Buf],
    ) -> Result<bool> {
        Ok(false)
    }
    /// [`Fabric::send_in_place`] of a round of sends from held sources ([`Fabric::send_many`]),
    /// all or none: `dsts[i][k]` is rank `sends[i].tos[k]`'s buffer. `Ok(false)`, having done
    /// nothing, where the fabric cannot.
    fn send_round_in_place(
        &self,
        _sends: &[Outgoing<'_, Self::Buf>],
        _dsts: &[Vec<&Self::Buf>],
    ) -> Result<bool> {
        Ok(false)
    }
    /// `dst[range] = combine(dst[range], staged)` on rank `rank`.
    fn combine(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        at: usize,
        staged: Self::Staged,
        op: Combine,
    ) -> Result<()>;
    /// `dst[at..at + len(staged)] = staged` on rank `rank`.
    fn write(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        at: usize,
        staged: Self::Staged,
    ) -> Result<()>;
    /// `dst[range] /= divisor` on rank `rank`.
    fn divide(
        &self,
        rank: usize,
        dst: &mut Self::Buf,
        range: Range<usize>,
        divisor: usize,
    ) -> Result<()>;
    /// A new buffer of `len` elements on rank `rank` (contents unspecified).
    fn alloc(&self, rank: usize, len: usize) -> Result<Self::Buf>;
    /// View a whole buffer as a temporary, without copying.
    fn buf_as_staged(&self, buf: Self::Buf) -> Self::Staged;
    /// A temporary as a whole buffer, without copying, once its bytes have arrived.
    fn staged_as_buf(&self, staged: Self::Staged) -> Result<Self::Buf>;
    /// The end of a collective: work queued on the ranks from now on may write what they sent.
    fn settle(&self) -> Result<()> {
        Ok(())
    }
    /// Whether a send returns only once its bytes have moved. Host threads run the sends of a
    /// step side by side only where they do.
    fn sends_wait_on_host(&self) -> bool {
        true
    }
}
