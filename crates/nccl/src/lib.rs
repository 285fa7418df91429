//! firemesh-nccl: the processes of a firemesh world joined by NCCL (through cudarc's `nccl`
//! module), the engine the field trusts to carry GPU data between nodes. Inside a process,
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
//! Every wait has a deadline: joining, and each all-gather. Past it the communicator is aborted
//! and the call fails naming the wait, so no process hangs on a peer that is lost or stopped.

use cudarc::driver::{sys as driver, CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::{result, sys};
use firemesh_collective::{no_answer, wait_for_exchange, LinkError, ProcessLink};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// NCCL's version ("2.27.3"), or why NCCL cannot be used by this process.
pub fn version() -> Result<String, LinkError> {
    // SAFETY: only tries to load the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(LinkError(
            "NCCL is not installed here: no libnccl.so on the library path (install NCCL, or \
             link a pip wheel's nvidia/nccl/lib/libnccl.so.2 as libnccl.so in a folder of \
             LD_LIBRARY_PATH)"
                .into(),
        ));
    }
    let v = result::get_nccl_version().map_err(|e| failed("ncclGetVersion", e))?;
    Ok(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}

/// The UUID of CUDA GPU `ordinal` ("GPU-" and 32 hex digits): the same GPU seen by two
/// processes has the same one, GPUs of two nodes never do.
pub fn gpu_uuid(ordinal: usize) -> Result<String, LinkError> {
    let ctx = context(ordinal)?;
    let uuid = ctx
        .uuid()
        .map_err(|e| LinkError(format!("GPU {ordinal}: its UUID: {e:?}")))?;
    let hex: String = uuid
        .bytes
        .iter()
        .map(|b| format!("{:02x}", *b as u8))
        .collect();
    Ok(format!("GPU-{hex}"))
}

/// The CUDA context of GPU `ordinal`, or why there is none (the driver missing or the GPU
/// absent), without panicking.
fn context(ordinal: usize) -> Result<Arc<CudaContext>, LinkError> {
    // SAFETY: only tries to load the library.
    if !unsafe { driver::is_culib_present() } {
        return Err(LinkError("no CUDA driver here (libcuda.so)".into()));
    }
    CudaContext::new(ordinal).map_err(|e| LinkError(format!("GPU {ordinal}: {e:?}")))
}

fn failed(call: &str, e: result::NcclError) -> LinkError {
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

    fn raw(&self) -> sys::ncclUniqueId {
        sys::ncclUniqueId {
            internal: self.0.map(|b| b as ::core::ffi::c_char),
        }
    }
}

/// A communicator handle; aborted once, when dropped or when a wait fails.
struct Comm(sys::ncclComm_t);

// SAFETY: NCCL's communicator may be used from any thread, one call at a time: `NcclLink`
// keeps it under a mutex.
unsafe impl Send for Comm {}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful init and is aborted only here. Abort, not
        // destroy: destroy would wait for a peer that may be gone.
        let _ = unsafe { result::comm_abort(self.0) };
    }
}

/// This process's link to the others: one NCCL communicator of one GPU per process.
pub struct NcclLink {
    /// `None` once a failed wait has aborted it: every later call fails.
    comm: Mutex<Option<Comm>>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    process: usize,
    processes: usize,
    timeout: Duration,
}

impl NcclLink {
    /// Joins the communicator `id` names as `process` of `processes`, from GPU `ordinal`.
    /// Every process calls it at once; one that does not come within `timeout` fails the join
    /// on the others.
    pub fn connect(
        ordinal: usize,
        process: usize,
        processes: usize,
        id: UniqueId,
        timeout: Duration,
    ) -> Result<Self, LinkError> {
        version()?;
        let ctx = context(ordinal)?;
        let stream = ctx
            .new_stream()
            .map_err(|e| LinkError(format!("GPU {ordinal}: a stream: {e:?}")))?;
        let count = |n: usize| i32::try_from(n).map_err(|_| LinkError(format!("{n} processes")));
        let (nranks, rank) = (count(processes)?, count(process)?);
        // ncclCommInitRank returns once every process has joined: it runs on a thread of its
        // own, so that this one stops waiting at the deadline (the join is then left to end
        // with the process).
        let (sent, joined) = mpsc::channel();
        std::thread::Builder::new()
            .name("firemesh-nccl-join".into())
            .spawn(move || {
                let join = || -> Result<Comm, LinkError> {
                    ctx.bind_to_thread()
                        .map_err(|e| LinkError(format!("GPU {ordinal}: {e:?}")))?;
                    let mut comm = std::mem::MaybeUninit::uninit();
                    // SAFETY: a valid out-pointer; the id is the one every process was given.
                    unsafe { result::comm_init_rank(comm.as_mut_ptr(), nranks, id.raw(), rank) }
                        .map_err(|e| failed("ncclCommInitRank", e))?;
                    // SAFETY: initialised by the successful call above.
                    Ok(Comm(unsafe { comm.assume_init() }))
                };
                let _ = sent.send(join());
            })
            .map_err(|e| LinkError(format!("a thread to join NCCL: {e}")))?;
        let comm = match joined.recv_timeout(timeout) {
            Ok(comm) => comm?,
            Err(_) => {
                return Err(LinkError(format!(
                    "process {process} of {processes}: NCCL's join did not complete within {} s \
                     (a process missing, or the nodes cannot reach each other: see \
                     NCCL_SOCKET_IFNAME and NCCL_DEBUG=WARN)",
                    timeout.as_secs_f64()
                )))
            }
        };
        Ok(Self {
            comm: Mutex::new(Some(comm)),
            stream,
            ordinal,
            process,
            processes,
            timeout,
        })
    }

    /// The GPU this process joined from.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Every process's `send` (all of one length), concatenated in process order.
    fn gather_equal(&self, comm: &mut Option<Comm>, send: &[u8]) -> Result<Vec<u8>, LinkError> {
        let handle = comm
            .as_ref()
            .ok_or_else(|| {
                LinkError("NCCL's communicator was aborted by an earlier failure".into())
            })?
            .0;
        let cuda = |what: &str, e: cudarc::driver::DriverError| {
            LinkError(format!("GPU {}: {what}: {e:?}", self.ordinal))
        };
        let s = &self.stream;
        let from = s
            .clone_htod(send)
            .map_err(|e| cuda("copying to the GPU", e))?;
        let mut into = s
            .alloc_zeros::<u8>(send.len() * self.processes)
            .map_err(|e| cuda("allocating", e))?;
        {
            let (src, _src_done) = from.device_ptr(s);
            let (dst, _dst_done) = into.device_ptr_mut(s);
            // SAFETY: both buffers live on `s`'s device and outlive the call's completion
            // (waited for below); the counts match their lengths.
            unsafe {
                result::all_gather(
                    src as _,
                    dst as _,
                    send.len(),
                    sys::ncclDataType_t::ncclUint8,
                    handle,
                    s.cu_stream() as _,
                )
            }
            .map_err(|e| failed("ncclAllGather", e))?;
        }
        if let Err(e) = self.wait(handle) {
            comm.take(); // aborts it: NCCL's state after a failed or abandoned call is unknown
            return Err(e);
        }
        s.clone_dtoh(&into).map_err(|e| cuda("copying back", e))
    }

    /// Waits for the stream's work ([`wait_for_exchange`]), until the deadline or an error
    /// NCCL reports for the communicator.
    fn wait(&self, comm: sys::ncclComm_t) -> Result<(), LinkError> {
        let done = wait_for_exchange(self.timeout, || {
            // SAFETY: a valid stream of a live context.
            match unsafe { driver::cuStreamQuery(self.stream.cu_stream()) } {
                driver::CUresult::CUDA_SUCCESS => return Ok(true),
                driver::CUresult::CUDA_ERROR_NOT_READY => {}
                e => return Err(LinkError(format!("GPU {}: {e:?}", self.ordinal))),
            }
            let mut state = sys::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator and a valid out-pointer.
            unsafe { sys::ncclCommGetAsyncError(comm, &mut state) };
            match state {
                sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => Ok(false),
                e => Err(LinkError(format!(
                    "process {} of {}: NCCL failed: {e:?}",
                    self.process, self.processes
                ))),
            }
        })?;
        match done {
            true => Ok(()),
            false => Err(LinkError(no_answer(
                self.process,
                self.processes,
                self.timeout,
            ))),
        }
    }
}

impl ProcessLink for NcclLink {
    fn process(&self) -> usize {
        self.process
    }

    fn processes(&self) -> usize {
        self.processes
    }

    /// The lengths first, then every buffer padded to the longest (NCCL gathers equal counts).
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LinkError> {
        let mut comm = self.comm.lock().unwrap_or_else(|p| p.into_inner());
        let lens = self.gather_equal(&mut comm, &(bytes.len() as u64).to_le_bytes())?;
        let lens: Vec<usize> = lens
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize)
            .collect();
        let longest = lens.iter().copied().max().unwrap_or(0);
        if longest == 0 {
            return Ok(vec![Vec::new(); self.processes]);
        }
        let mut padded = bytes.to_vec();
        padded.resize(longest, 0);
        let all = self.gather_equal(&mut comm, &padded)?;
        Ok(lens
            .iter()
            .enumerate()
            .map(|(p, &len)| all[p * longest..p * longest + len].to_vec())
            .collect())
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
    }
}
