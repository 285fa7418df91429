//! The runtime's own client-to-client copy (through the host on wgpu).

use super::{Arrival, Rank, Transport};
use crate::{error::catch_runtime, DType, Result};
use cubecl::{server::Handle, Runtime};

/// Moves data with `ComputeClient::to_client`. Portable across runtimes; on wgpu the bytes go
/// through host memory. Not used on CUDA, where CubeCL implements it with NCCL.
pub struct ClientCopy;

impl<R: Runtime> Transport<R> for ClientCopy {
    fn name(&self) -> &'static str {
        "client-copy"
    }

    fn copy(&self, from: &Rank<R>, src: Handle, to: &Rank<R>, dtype: DType) -> Result<Arrival<R>> {
        let mut client = from.client.clone();
        catch_runtime(from.index, || {
            client.to_client(src, &to.client, dtype.elem_type())
        })
        .map(Arrival::landed)
    }

    /// One read-back for all destinations instead of one per destination.
    fn copy_many(
        &self,
        from: &Rank<R>,
        src: Handle,
        to: &[&Rank<R>],
        dtype: DType,
    ) -> Result<Vec<Arrival<R>>> {
        if let [only] = to {
            return Ok(vec![self.copy(from, src, only, dtype)?]);
        }
        let bytes = super::read_back(from, src)?;
        to.iter()
            .map(|rank| super::upload_new(rank, &bytes).map(Arrival::landed))
            .collect()
    }
}
