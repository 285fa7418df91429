//! EXPERIMENTAL (the `nccl` feature; it has not run on GPUs yet): the processes of a world
//! joined by NCCL (through cudarc's `nccl` module), the engine the field trusts to carry GPU
//! data between nodes. Inside a process,
//! firemesh's CubeCL collectives sum the ranks of the node; an [`NcclLink`] carries the one
//! buffer per process that then crosses the processes (`Mesh::in_world`).
//!
//! NCCL is loaded at run time: firemesh builds and runs without it, and a world that needs it
//! where it is missing fails at the start with one line naming what was looked for.
//!
//! Joining: process 0 makes a [`UniqueId`]; the caller carries its bytes to every other process
//! (firemesh does it over MPI, whose world the launcher started) and each process then joins
//! the communicator from one GPU, that of its mesh's first rank ([`NcclLink::connect`]). NCCL
//! takes one GPU per process: two processes of a node must start their meshes on different
//! GPUs ([`gpu_uuid`] tells them apart).
//!
//! What crosses, in this version, is staged through the host: the process's buffer is copied
//! to its GPU, all-gathered by NCCL (NVLink, InfiniBand or sockets, as NCCL finds them) and
//! copied back. Summing the mesh's own device buffers in place is the next step.
//!
//! Every wait has a deadline: joining, and each all-gather. The communicator lives on a thread
//! of its own, so that even a call that blocks inside NCCL (a join, or a connection NCCL makes
//! lazily at a first collective) leaves the caller free to give up: past the deadline the call
//! fails naming the wait and the link fails every later call, so no process hangs on a peer
//! that is lost or stopped.

mod join;
mod link;

pub use link::NcclLink;

use crate::link::LinkError;
use cudarc::driver::{sys as driver, CudaContext};
use cudarc::nccl::{result, sys};
use std::sync::Arc;

/// NCCL's version ("2.27.3"), or why NCCL cannot be used by this process.
pub fn version() -> Result<String, LinkError> {
    // SAFETY: only tries to load the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(LinkError(
            "NCCL cannot be loaded: no libnccl.so on the library path (install libnccl-dev; \
             where only libnccl.so.2 is there, from libnccl2 or a pip wheel's nvidia/nccl/lib, \
             link it as libnccl.so in a folder of LD_LIBRARY_PATH)"
                .into(),
        ));
    }
    let v = result::get_nccl_version().map_err(|e| failed("ncclGetVersion", e))?;
    Ok(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}

/// The UUID of CUDA GPU `ordinal`, as `nvidia-smi -L` writes it: the same GPU seen by two
/// processes has the same one, GPUs of two nodes never do.
pub fn gpu_uuid(ordinal: usize) -> Result<String, LinkError> {
    let ctx = context(ordinal)?;
    let uuid = ctx
        .uuid()
        .map_err(|e| LinkError(format!("GPU {ordinal}: its UUID: {e:?}")))?;
    Ok(uuid_text(&uuid.bytes.map(|b| b as u8)))
}

/// "GPU-" and the 16 bytes in hex, grouped 8-4-4-4-12.
fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let group = |r: std::ops::Range<usize>| hex[r].concat();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        group(0..4),
        group(4..6),
        group(6..8),
        group(8..10),
        group(10..16)
    )
}

/// The CUDA context of GPU `ordinal`, or why there is none (the driver missing or the GPU
/// absent), without panicking.
pub(crate) fn context(ordinal: usize) -> Result<Arc<CudaContext>, LinkError> {
    // SAFETY: only tries to load the library.
    if !unsafe { driver::is_culib_present() } {
        return Err(LinkError("no CUDA driver here (libcuda.so)".into()));
    }
    CudaContext::new(ordinal).map_err(|e| LinkError(format!("GPU {ordinal}: {e:?}")))
}

pub(crate) fn failed(call: &str, e: result::NcclError) -> LinkError {
    LinkError(format!("NCCL: {call} failed: {:?}", e.0))
}

/// The 128 bytes that name one NCCL communicator.
#[derive(Clone, Copy)]
pub struct UniqueId([u8; 128]);

impl UniqueId {
    /// A new id (process 0 makes it, once).
    pub fn new() -> Result<Self, LinkError> {
        version()?;
        let id = result::get_uniqueid().map_err(|e| failed("ncclGetUniqueId", e))?;
        Ok(Self(id.internal.map(|c| c as u8)))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The id as text (hex), for a bootstrap that carries text.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The id [`UniqueId::to_hex`] wrote.
    pub fn from_hex(text: &str) -> Result<Self, LinkError> {
        let bad = || LinkError(format!("not an NCCL id: {text:?}"));
        if !text.is_ascii() || !text.len().is_multiple_of(2) {
            return Err(bad());
        }
        let bytes = (0..text.len() / 2)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad()))
            .collect::<Result<Vec<u8>, _>>()?;
        Self::from_bytes(&bytes)
    }

    /// The id whose bytes another process sent.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LinkError> {
        let id = <[u8; 128]>::try_from(bytes).map_err(|_| {
            LinkError(format!(
                "an NCCL id is 128 bytes; {} came from process 0",
                bytes.len()
            ))
        })?;
        Ok(Self(id))
    }

    pub(crate) fn raw(&self) -> sys::ncclUniqueId {
        sys::ncclUniqueId {
            internal: self.0.map(|b| b as ::core::ffi::c_char),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_is_found_or_named_in_one_line() {
        match version() {
            Ok(v) => assert!(v.starts_with("2.") && v.split('.').count() == 3, "{v}"),
            Err(e) => {
                let line = e.to_string();
                assert!(
                    line.contains("libnccl.so") && !line.contains('\n'),
                    "{line}"
                );
                assert!(UniqueId::new().is_err(), "no id without NCCL");
            }
        }
    }

    #[test]
    fn an_id_of_the_wrong_length_is_refused() {
        let err = UniqueId::from_bytes(&[0; 12]).err().expect("refused");
        assert!(err.to_string().contains("128 bytes; 12"), "{err}");
        let id = UniqueId::from_bytes(&[7; 128]).unwrap();
        assert_eq!(id.as_bytes(), &[7; 128][..]);
        assert_eq!(id.raw().internal[5], 7);
        let text = id.to_hex();
        assert_eq!(text.len(), 256);
        assert_eq!(UniqueId::from_hex(&text).unwrap().as_bytes(), id.as_bytes());
        for bad in ["0g", "abc", "é0", "00"] {
            assert!(UniqueId::from_hex(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_uuid_is_written_as_nvidia_smi_writes_it() {
        let bytes: [u8; 16] = std::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(
            uuid_text(&bytes),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
