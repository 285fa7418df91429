//! [`NcclLink`]: one NCCL communicator per process, kept by a thread of its own.
//!
//! The thread joins the communicator and then serves the link's all-gathers and all-to-alls
//! (NCCL's sends and receives, one group) one at a time, each staged through the host. The
//! caller hands it a buffer and waits for the answer with a deadline, so a call that blocks
//! inside NCCL cannot hold the caller past it. Once a call fails or is given up, the link is
//! failed for good: NCCL's state after a failed or abandoned collective is unknown, and a
//! process that went on would match its next collective against another call of its peers.

use super::{context, failed, UniqueId};
use crate::link::{check_all_to_all, no_answer, wait_for_exchange, LinkError, ProcessLink};
use cudarc::driver::{sys as driver, CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::{result, sys};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// This process's link to the others: one NCCL communicator of one GPU per process.
pub struct NcclLink {
    calls: Mutex<Calls>,
    process: usize,
    processes: usize,
    timeout: Duration,
    /// A second communicator of the same processes ([`NcclLink::with_side_channel`]).
    side: Option<Arc<NcclLink>>,
}

/// What the link asks its communicator's thread to do.
enum Request {
    Gather(Vec<u8>),
    /// [`ProcessLink::all_to_all`]'s arguments.
    AllToAll {
        send: Vec<u8>,
        send_lens: Vec<usize>,
        recv_lens: Vec<usize>,
    },
}

/// The way to the communicator's thread.
struct Calls {
    requests: Sender<Request>,
    answers: Receiver<Result<Vec<Vec<u8>>, LinkError>>,
    /// Why the link failed, once it has: every later call fails with it.
    failed: Option<LinkError>,
}

/// What the communicator's thread knows.
struct Communicator {
    /// `None` once aborted.
    comm: Option<Comm>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    process: usize,
    processes: usize,
    timeout: Duration,
}

/// A communicator handle, aborted once, when dropped.
struct Comm(sys::ncclComm_t);

// SAFETY: the handle is used by one thread at a time (the communicator's thread, after the
// join); NCCL's communicators are not tied to a thread.
unsafe impl Send for Comm {}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful init and is dropped once. Abort, not
        // destroy: destroy would wait for a peer that may be gone.
        let _ = unsafe { result::comm_abort(self.0) };
    }
}

impl NcclLink {
    /// Joins the communicator `id` names as `process` of `processes`, from GPU `ordinal`.
    /// Every process calls it at once; where the others do not all come within `timeout`, it
    /// fails (the join is left to end with the process).
    pub fn connect(
        ordinal: usize,
        process: usize,
        processes: usize,
        id: UniqueId,
        timeout: Duration,
    ) -> Result<Self, LinkError> {
        super::version()?;
        let ctx = context(ordinal)?;
        let stream = ctx
            .new_stream()
            .map_err(|e| LinkError(format!("GPU {ordinal}: a stream: {e:?}")))?;
        let int = |n: usize, what: &str| {
            i32::try_from(n).map_err(|_| LinkError(format!("{what} {n}: over NCCL's range")))
        };
        let (nranks, rank) = (int(processes, "processes")?, int(process, "process")?);
        let (requests, asked) = channel::<Request>();
        let (answer, answers) = channel();
        std::thread::Builder::new()
            .name("firemesh-nccl".into())
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
                let comm = match join() {
                    Ok(comm) => comm,
                    Err(e) => {
                        let _ = answer.send(Err(e));
                        return;
                    }
                };
                let mut communicator = Communicator {
                    comm: Some(comm),
                    stream,
                    ordinal,
                    process,
                    processes,
                    timeout,
                };
                if answer.send(Ok(Vec::new())).is_err() {
                    return; // the caller gave up on the join
                }
                for request in asked {
                    if answer.send(communicator.serve(request)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| LinkError(format!("a thread for NCCL: {e}")))?;
        let mut calls = Calls {
            requests,
            answers,
            failed: None,
        };
        let joined = calls.answer(timeout, || {
            format!(
                "process {process} of {processes}: NCCL's join did not complete within {} s \
                 (a process missing, or the nodes cannot reach each other: see \
                 NCCL_SOCKET_IFNAME and NCCL_DEBUG=WARN)",
                timeout.as_secs_f64()
            )
        });
        joined?;
        Ok(Self {
            calls: Mutex::new(calls),
            process,
            processes,
            timeout,
            side: None,
        })
    }

    /// This link with `side` (another communicator of the same processes, joined with another
    /// id) as its side channel ([`ProcessLink::side_channel`]): the early gradient buckets'
    /// thread gathers through it while the step's own sums take this one, each communicator
    /// on its own thread and stream. NCCL's documentation warns that collectives of two
    /// communicators running at once on one GPU can deadlock where their kernels cannot all
    /// be resident; PyTorch runs several process groups so, and gathers of a few blocks fit
    /// any GPU here many times over.
    pub fn with_side_channel(mut self, side: NcclLink) -> Result<Self, LinkError> {
        if (side.process, side.processes) != (self.process, self.processes) {
            return Err(LinkError(format!(
                "a side channel as process {} of {}, for a link of process {} of {}",
                side.process, side.processes, self.process, self.processes
            )));
        }
        self.side = Some(Arc::new(side));
        Ok(self)
    }
}

impl Calls {
    /// The communicator's thread's answer, waited for at most `timeout` (then `late` says
    /// why); a failure fails the link for good.
    fn answer(
        &mut self,
        timeout: Duration,
        late: impl FnOnce() -> String,
    ) -> Result<Vec<Vec<u8>>, LinkError> {
        let got = match self.answers.recv_timeout(timeout) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => Err(LinkError(late())),
            Err(RecvTimeoutError::Disconnected) => Err(LinkError(
                "NCCL's thread ended without an answer (it panicked: see above)".into(),
            )),
        };
        if let Err(e) = &got {
            self.failed = Some(e.clone());
        }
        got
    }
}

impl ProcessLink for NcclLink {
    fn process(&self) -> usize {
        self.process
    }

    fn processes(&self) -> usize {
        self.processes
    }

    fn side_channel(&self) -> Option<Arc<dyn ProcessLink>> {
        self.side.clone().map(|side| side as Arc<dyn ProcessLink>)
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LinkError> {
        self.call(Request::Gather(bytes.to_vec()))
    }

    fn has_all_to_all(&self) -> bool {
        true
    }

    /// NCCL's point-to-point sends and receives, one of each per other process, in one group
    /// (this process's own part stays on the host).
    fn all_to_all(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, LinkError> {
        check_all_to_all(self.process, self.processes, send, send_lens, recv_lens)?;
        self.call(Request::AllToAll {
            send: send.to_vec(),
            send_lens: send_lens.to_vec(),
            recv_lens: recv_lens.to_vec(),
        })
    }
}

impl NcclLink {
    /// Hands `request` to the communicator's thread and waits for its answer.
    fn call(&self, request: Request) -> Result<Vec<Vec<u8>>, LinkError> {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = &calls.failed {
            return Err(LinkError(format!("NCCL's link failed earlier: {}", e.0)));
        }
        if calls.requests.send(request).is_err() {
            calls.failed = Some(LinkError("NCCL's thread has ended".into()));
            return Err(LinkError("NCCL's thread has ended".into()));
        }
        // The thread's own wait for the device ends at the same deadline; this one also bounds
        // a call that blocks inside NCCL before it reaches the device.
        let (p, n, timeout) = (self.process, self.processes, self.timeout);
        calls.answer(timeout * 2, || no_answer(p, n, timeout))
    }
}

impl Communicator {
    /// Does what the link asks. Any failure aborts the communicator.
    fn serve(&mut self, request: Request) -> Result<Vec<Vec<u8>>, LinkError> {
        let got = match request {
            Request::Gather(bytes) => self.gather_padded(&bytes),
            Request::AllToAll {
                send,
                send_lens,
                recv_lens,
            } => self.all_to_all(&send, &send_lens, &recv_lens),
        };
        if got.is_err() {
            self.comm.take(); // aborts it
        }
        got
    }

    /// The communicator, unless aborted.
    fn comm(&self) -> Result<sys::ncclComm_t, LinkError> {
        (self.comm.as_ref())
            .map(|c| c.0)
            .ok_or_else(|| LinkError("NCCL's communicator was aborted".into()))
    }

    fn cuda_failed(&self, what: &str, e: cudarc::driver::DriverError) -> LinkError {
        LinkError(format!("GPU {}: {what}: {e:?}", self.ordinal))
    }

    /// [`ProcessLink::all_to_all`] through the GPU: the parts for the other processes copied
    /// to it, sent and received in one NCCL group, the received parts copied back; this
    /// process's own part does not leave the host.
    fn all_to_all(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, LinkError> {
        let me = self.process;
        let (send_at, recv_at) = (offsets(send_lens), offsets(recv_lens));
        let received: usize = recv_lens.iter().sum();
        let moved = (0..self.processes).any(|q| q != me && (send_lens[q] > 0 || recv_lens[q] > 0));
        let mut all = vec![0u8; received];
        if moved {
            let comm = self.comm()?;
            let s = &self.stream;
            // At least one byte each: CUDA allocates nothing for none.
            let mut staged = send.to_vec();
            staged.resize(send.len().max(1), 0);
            let from = s
                .clone_htod(&staged)
                .map_err(|e| self.cuda_failed("copying to the GPU", e))?;
            // SAFETY: every byte read back is written by a receive first.
            let mut into = unsafe { s.alloc::<u8>(received.max(1)) }
                .map_err(|e| self.cuda_failed("allocating", e))?;
            {
                let (src, _src_done) = from.device_ptr(s);
                let (dst, _dst_done) = into.device_ptr_mut(s);
                let stream = s.cu_stream() as _;
                let uint8 = sys::ncclDataType_t::ncclUint8;
                result::group_start().map_err(|e| failed("ncclGroupStart", e))?;
                let queued = (0..self.processes).filter(|&q| q != me).try_for_each(|q| {
                    let peer = q as i32;
                    // SAFETY: each range lies inside its buffer, both on `s`'s device and
                    // alive until the group completes (waited for below).
                    unsafe {
                        if send_lens[q] > 0 {
                            let at = (src + send_at[q] as u64) as *const _;
                            result::send(at, send_lens[q], uint8, peer, comm, stream)
                                .map_err(|e| failed("ncclSend", e))?;
                        }
                        if recv_lens[q] > 0 {
                            let at = (dst + recv_at[q] as u64) as *mut _;
                            result::recv(at, recv_lens[q], uint8, peer, comm, stream)
                                .map_err(|e| failed("ncclRecv", e))?;
                        }
                    }
                    Ok(())
                });
                // The group is closed whatever happened in it (a failure aborts the
                // communicator next).
                let ended = result::group_end().map_err(|e| failed("ncclGroupEnd", e));
                queued.and(ended.map(|_| ()))?;
            }
            self.wait(comm)?;
            let back = s
                .clone_dtoh(&into)
                .map_err(|e| self.cuda_failed("copying back", e))?;
            all.copy_from_slice(&back[..received]);
        }
        let own = &send[send_at[me]..send_at[me] + send_lens[me]];
        all[recv_at[me]..recv_at[me] + recv_lens[me]].copy_from_slice(own);
        Ok((recv_at.iter().zip(recv_lens))
            .map(|(&at, &len)| all[at..at + len].to_vec())
            .collect())
    }

    fn gather_padded(&mut self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LinkError> {
        let lens = self.gather_equal(&(bytes.len() as u64).to_le_bytes())?;
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
        let all = self.gather_equal(&padded)?;
        Ok(lens
            .iter()
            .enumerate()
            .map(|(p, &len)| all[p * longest..p * longest + len].to_vec())
            .collect())
    }

    /// Every process's `send` (all of one length), concatenated in process order.
    fn gather_equal(&self, send: &[u8]) -> Result<Vec<u8>, LinkError> {
        let comm = self.comm()?;
        let cuda = |what: &str, e| self.cuda_failed(what, e);
        let s = &self.stream;
        let from = s
            .clone_htod(send)
            .map_err(|e| cuda("copying to the GPU", e))?;
        // SAFETY: every byte is written by the all-gather before it is read back.
        let mut into = unsafe { s.alloc::<u8>(send.len() * self.processes) }
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
                    comm,
                    s.cu_stream() as _,
                )
            }
            .map_err(|e| failed("ncclAllGather", e))?;
        }
        self.wait(comm)?;
        s.clone_dtoh(&into).map_err(|e| cuda("copying back", e))
    }

    /// Waits for the stream's work ([`wait_for_exchange`]), until the deadline or an error
    /// NCCL reports for the communicator.
    fn wait(&self, comm: sys::ncclComm_t) -> Result<(), LinkError> {
        let done = wait_for_exchange(self.timeout, || {
            let mut state = sys::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator and a valid out-pointer.
            unsafe { sys::ncclCommGetAsyncError(comm, &mut state) };
            if !matches!(
                state,
                sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress
            ) {
                return Err(LinkError(format!(
                    "process {} of {}: NCCL failed: {state:?}",
                    self.process, self.processes
                )));
            }
            // SAFETY: a valid stream of a live context.
            match unsafe { driver::cuStreamQuery(self.stream.cu_stream()) } {
                driver::CUresult::CUDA_SUCCESS => Ok(true),
                driver::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                e => Err(LinkError(format!("GPU {}: {e:?}", self.ordinal))),
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

/// Where each of the pieces of `lens` starts, laid end to end.
fn offsets(lens: &[usize]) -> Vec<usize> {
    lens.iter()
        .scan(0, |at, len| Some(std::mem::replace(at, *at + len)))
        .collect()
}
