//! Stream-ordered copies between CUDA devices: each copy is queued on raw driver streams and
//! ordered against CubeCL's streams with flag words ([`super::flags`]), so that neither the host
//! nor a whole device waits for it.
//!
//! CubeCL 0.10 gives no handle of its streams, so its streams and ours meet in device memory.
//! A copy from rank f to rank t, S being the device stream ([`crate::stream`]) of each device:
//! 1. on S of f: the source is copied into a staging buffer that nothing else writes, then a
//!    flag of f is set (the staging buffer is ready);
//! 2. on S of t: the landing buffer is allocated, then a flag of t is set (it is free);
//! 3. on raw streams: f's stream waits for f's flag and hands over with an event; t's stream
//!    waits for that event and t's flag, copies (`cuMemcpyPeerAsync`, peer to peer where
//!    [`PeerAccess`] opened the pair), then sets a second flag of t (landed);
//! 4. the reader queues [`FlagWait`] on S of t before the kernel that reads the landing buffer,
//!    so that kernels queued on S in between keep running while the bytes move.
//!
//! A raw wait is pushed to the driver only once the kernel that sets its flag has been: CubeCL
//! queues launches on a host thread of its own, and a blocking call on a client (here
//! `get_resource`) hands them all to the driver first. So every wait, on a raw stream or a
//! CubeCL one, is on work the driver received before it, and the order cannot deadlock, even
//! where streams share a hardware queue. The staging buffer is what lets S of f go on writing
//! the source at once; it is held until the copy has landed. Nothing times out on the device:
//! a copy that never comes (a device fault upstream) stalls the reader's stream. Pairs whose
//! devices refuse the driver's stream memory operations take [`CudaPeerCopy`].

use super::cuda_driver::{check, PeerAccess, PrimaryContext};
use super::flags::{self, FlagWait};
use super::{Arrival, CudaPeerCopy, Rank, Transport};
use crate::error::{catch_runtime, try_runtime};
use crate::{kernels, CollectiveError, DType, Result};
use cubecl::cuda::CudaRuntime;
use cubecl::server::Handle;
use cudarc::driver::sys;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Copies kept in flight per lane before the host waits for the oldest to land (bounds the
/// staging memory a lane holds).
const MAX_IN_FLIGHT: usize = 64;

/// How long dropping the transport waits for copies still in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Copies a stream-ordered transport made synchronously since the process started, because
/// the driver refused a stream memory operation for their pair of devices.
static FELL_BACK: AtomicU64 = AtomicU64::new(0);

/// Copies that [`CudaStreamCopy`] made synchronously in this process (their pair's driver
/// refused a stream memory operation, with a `tracing` warning naming the pair): 0 where every
/// copy was stream-ordered. The GPU check's stream-ordered suites fail on any.
pub fn synchronous_fallbacks() -> u64 {
    FELL_BACK.load(Ordering::Relaxed)
}

/// Stream-ordered CUDA copies (see the module docs); [`crate::Transfer::StreamOrdered`].
#[derive(Default)]
pub struct CudaStreamCopy {
    peers: PeerAccess,
    lanes: Mutex<HashMap<LaneKey, Arc<Mutex<Slot>>>>,
    fallback: CudaPeerCopy,
}

/// One lane per ordered pair of ranks: the flags of a lane are written by one CubeCL stream (the
/// device stream, whichever thread issues the copy) and one raw stream each, so they only grow.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct LaneKey {
    from: usize,
    to: usize,
}

enum Slot {
    Lane(Box<Lane>),
    /// The devices cannot run stream memory operations: synchronous copies.
    Synchronous,
}

impl CudaStreamCopy {
    /// The copy, taking ranks on one device as two GPUs where `one_device_as_peers`
    /// ([`crate::CollectiveConfig::one_device_as_peers`]).
    pub fn new(one_device_as_peers: bool) -> Self {
        Self {
            peers: PeerAccess::new(one_device_as_peers),
            fallback: CudaPeerCopy::new(one_device_as_peers),
            ..Self::default()
        }
    }

    /// The lane for `from` → `to`, made on first use.
    fn slot(&self, from: &Rank<CudaRuntime>, to: &Rank<CudaRuntime>) -> Result<Arc<Mutex<Slot>>> {
        let key = LaneKey {
            from: from.index,
            to: to.index,
        };
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = lanes.get(&key) {
            return Ok(slot.clone());
        }
        let slot = match Lane::new(from, to, &self.peers)? {
            Some(lane) => Slot::Lane(Box::new(lane)),
            None => {
                tracing::warn!(target: "firemesh::transport", "CUDA ranks {} -> {}: the driver refuses a stream memory operation (above); synchronous copies for this pair", from.index, to.index);
                Slot::Synchronous
            }
        };
        let slot = Arc::new(Mutex::new(slot));
        lanes.insert(key, slot.clone());
        Ok(slot)
    }
}

impl Transport<CudaRuntime> for CudaStreamCopy {
    fn name(&self) -> &'static str {
        "cuda-stream"
    }

    fn waits_on_host(&self) -> bool {
        false
    }

    fn copy(
        &self,
        from: &Rank<CudaRuntime>,
        src: Handle,
        to: &Rank<CudaRuntime>,
        dtype: DType,
    ) -> Result<Arrival<CudaRuntime>> {
        let mut one = self.copy_many(from, src, &[to], dtype)?;
        Ok(one.pop().expect("one arrival per destination"))
    }

    fn copy_many(
        &self,
        from: &Rank<CudaRuntime>,
        src: Handle,
        to: &[&Rank<CudaRuntime>],
        dtype: DType,
    ) -> Result<Vec<Arrival<CudaRuntime>>> {
        let bytes = src.size_in_used() as usize;
        let slots = to
            .iter()
            .map(|dst| self.slot(from, dst))
            .collect::<Result<Vec<_>>>()?;
        // Each lane stays locked from its first flag to its raw copy, so that its numbers are
        // queued in order; lanes are locked in rank order.
        let mut order: Vec<usize> = (0..to.len()).collect();
        order.sort_by_key(|&i| to[i].index);
        let mut guards: Vec<Option<std::sync::MutexGuard<'_, Slot>>> =
            to.iter().map(|_| None).collect();
        for &i in &order {
            guards[i] = Some(slots[i].lock().unwrap_or_else(|e| e.into_inner()));
        }
        let mut lanes: Vec<(usize, &mut Lane)> = Vec::new();
        let mut arrivals: Vec<Option<Arrival<CudaRuntime>>> = to.iter().map(|_| None).collect();
        for (i, guard) in guards.iter_mut().enumerate() {
            match &mut **guard.as_mut().expect("every lane is locked") {
                Slot::Lane(lane) if bytes > 0 => lanes.push((i, lane)),
                Slot::Lane(_) => {
                    arrivals[i] = Some(self.fallback.copy(from, src.clone(), to[i], dtype)?)
                }
                Slot::Synchronous => {
                    FELL_BACK.fetch_add(1, Ordering::Relaxed);
                    arrivals[i] = Some(self.fallback.copy(from, src.clone(), to[i], dtype)?)
                }
            }
        }
        if !lanes.is_empty() {
            let stage = stage(from, &src, bytes)?;
            for (_, lane) in &mut lanes {
                lane.source_ready(from)?;
            }
            // Also hands the flags just queued to the driver.
            let stage_ptr = device_address(from, &stage)?;
            for (i, lane) in lanes {
                arrivals[i] = Some(lane.copy(&stage, stage_ptr, to[i], bytes)?);
            }
        }
        Ok(arrivals
            .into_iter()
            .map(|a| a.expect("one arrival per destination"))
            .collect())
    }
}

/// The staging copy of `src` on `from` (step 1 of the module docs), queued on the device
/// stream.
fn stage(from: &Rank<CudaRuntime>, src: &Handle, bytes: usize) -> Result<Handle> {
    let stage = catch_runtime(from.index, || from.client.empty(bytes))?;
    catch_runtime(from.index, || {
        kernels::copy_words(&from.client, &stage, src, bytes / 4)
    })?;
    Ok(stage)
}

/// The device address of `handle`'s first byte; valid while `handle` lives. A blocking call:
/// every command queued on the client before it has been handed to the driver when it returns.
fn device_address(rank: &Rank<CudaRuntime>, handle: &Handle) -> Result<u64> {
    let resource = try_runtime(rank.index, || rank.client.get_resource(handle.clone()))?;
    Ok(resource.resource().ptr)
}

/// The raw streams, event and flags of one ordered pair of ranks.
struct Lane {
    from: usize,
    to: usize,
    src: PrimaryContext,
    dst: PrimaryContext,
    /// In `src`: waits for the staging buffer, then hands over to `dst_stream`.
    src_stream: sys::CUstream,
    /// In `dst`: waits, copies, announces.
    dst_stream: sys::CUstream,
    /// Recorded on `src_stream` once a staging buffer is ready.
    ready: sys::CUevent,
    /// On `from`, 1 word: the number of the last staging buffer made ready.
    src_flags: Handle,
    src_flag: u64,
    /// On `to`, 2 words: the last landing buffer allocated, the last copy landed.
    dst_flags: Handle,
    dst_flag: u64,
    /// The number of the last copy queued.
    seq: u32,
    /// Each queued copy's completion on `dst_stream`, with the staging buffer it reads.
    in_flight: VecDeque<(sys::CUevent, Handle)>,
    spare_events: Vec<sys::CUevent>,
    /// Why the lane stopped, after a failure half way through queuing a copy.
    broken: Option<String>,
    /// Whether copies go between two devices' memories (`cuMemcpyPeerAsync`), or within one.
    as_peers: bool,
}

// SAFETY: the raw streams and events are driver objects usable from any thread; a lane is only
// used under its mutex.
unsafe impl Send for Lane {}

impl Lane {
    /// A lane from `from` to `to`, or `None` where the driver refuses stream memory operations.
    fn new(
        from: &Rank<CudaRuntime>,
        to: &Rank<CudaRuntime>,
        peers: &PeerAccess,
    ) -> Result<Option<Self>> {
        let src = PrimaryContext::retain(from.index, &from.device)?;
        let dst = PrimaryContext::retain(to.index, &to.device)?;
        peers.open(&src, &dst);
        let as_peers = peers.as_peers(&src, &dst);
        let src_flags = catch_runtime(from.index, || flags::new_flags(&from.client, 1))?;
        let dst_flags = catch_runtime(to.index, || flags::new_flags(&to.client, 2))?;
        // Load the flag kernels (a signal of the number a flag holds, a wait that passes at
        // once) before any copy depends on them, then let the flags' zeros reach memory
        // before any raw stream reads them.
        for (rank, flags) in [(from, &src_flags), (to, &dst_flags)] {
            catch_runtime(rank.index, || flags::signal(&rank.client, flags, 0, 0))?;
            FlagWait::new(flags.clone(), 0, 0, rank.index, rank.client.clone()).enqueue()?;
            try_runtime(rank.index, || cubecl::future::block_on(rank.client.sync()))?;
        }
        let src_flag = device_address(from, &src_flags)?;
        let dst_flag = device_address(to, &dst_flags)?;
        // The driver objects are made into the lane, so that dropping it on a failure half way
        // destroys those made so far (`Drop` skips the null ones).
        let mut lane = Self {
            from: from.index,
            to: to.index,
            src,
            dst,
            src_stream: std::ptr::null_mut(),
            dst_stream: std::ptr::null_mut(),
            ready: std::ptr::null_mut(),
            src_flags,
            src_flag,
            dst_flags,
            dst_flag,
            seq: 0,
            in_flight: VecDeque::new(),
            spare_events: Vec::new(),
            broken: None,
            as_peers,
        };
        lane.src_stream = new_stream(from.index, &lane.src)?;
        lane.dst_stream = new_stream(to.index, &lane.dst)?;
        lane.ready = new_event(from.index, &lane.src)?;
        // Every stream memory operation a copy makes, once on each device, on words whose value
        // it leaves as it is (they hold 0): a wait for the number a flag holds passes at once,
        // and a write of 0 to a word that holds 0. They probe whether the driver waits on and
        // writes words of CubeCL's memory pools.
        for (rank, ctx, stream, wait_at, write_at) in [
            (
                from.index,
                &lane.src,
                lane.src_stream,
                lane.src_flag,
                lane.src_flag,
            ),
            (
                to.index,
                &lane.dst,
                lane.dst_stream,
                lane.dst_flag,
                lane.dst_flag + 4,
            ),
        ] {
            ctx.make_current(rank)?;
            // SAFETY: a live stream of the current context, and live flag words (whose values
            // no copy reads yet: none is queued).
            let (waited, written, done) = unsafe {
                (
                    wait_value(stream, wait_at, 0),
                    write_value(stream, write_at, 0),
                    sys::cuStreamSynchronize(stream),
                )
            };
            for (call, code) in [
                ("cuStreamWaitValue32", waited),
                ("cuStreamWriteValue32", written),
                ("cuStreamSynchronize", done),
            ] {
                if code != sys::CUresult::CUDA_SUCCESS {
                    tracing::warn!(target: "firemesh::transport", "CUDA rank {rank}: {call} refused ({code:?})");
                    return Ok(None);
                }
            }
        }
        // The calls between the two raw streams, once: the hand-over event, and the copy of one
        // word (the source's flag, 0, onto the landed word, which holds 0).
        lane.src.make_current(from.index)?;
        // SAFETY: live streams and event of the contexts made current before each call, and
        // live flag words of at least 4 bytes.
        let recorded = unsafe { sys::cuEventRecord(lane.ready, lane.src_stream) };
        lane.dst.make_current(to.index)?;
        let (waited, copied, done) = unsafe {
            let waited = sys::cuStreamWaitEvent(lane.dst_stream, lane.ready, 0);
            let copied = lane.copy_async(lane.dst_flag + 4, lane.src_flag, 4);
            (waited, copied, sys::cuStreamSynchronize(lane.dst_stream))
        };
        for (call, code) in [
            ("cuEventRecord", recorded),
            ("cuStreamWaitEvent", waited),
            (lane.copy_call(), copied),
            ("cuStreamSynchronize", done),
        ] {
            if code != sys::CUresult::CUDA_SUCCESS {
                tracing::warn!(target: "firemesh::transport", "CUDA ranks {} -> {}: {call} refused ({code:?})", from.index, to.index);
                return Ok(None);
            }
        }
        Ok(Some(lane))
    }

    /// The driver call that copies between the lane's devices.
    fn copy_call(&self) -> &'static str {
        if self.as_peers {
            "cuMemcpyPeerAsync"
        } else {
            "cuMemcpyDtoDAsync"
        }
    }

    /// Queues the copy of `bytes` from `src` (on the source device) to `dst` (on the
    /// destination) on `dst_stream`.
    ///
    /// # Safety
    /// The destination's context is current; both addresses are live device memory of at least
    /// `bytes` bytes until the copy has run.
    unsafe fn copy_async(&self, dst: u64, src: u64, bytes: usize) -> sys::CUresult {
        if self.as_peers {
            sys::cuMemcpyPeerAsync(dst, self.dst.ctx, src, self.src.ctx, bytes, self.dst_stream)
        } else {
            sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.dst_stream)
        }
    }

    fn check_usable(&self) -> Result<()> {
        match &self.broken {
            None => Ok(()),
            Some(why) => Err(CollectiveError::Runtime {
                rank: self.from,
                reason: format!(
                    "the stream-ordered lane to rank {} failed before: {why}",
                    self.to
                ),
            }),
        }
    }

    /// Takes the next number and queues, on `from`'s stream, the flag that says the staging
    /// buffer queued before it is ready (the raw stream waits for it once [`Lane::copy`] has
    /// made sure the driver has it).
    fn source_ready(&mut self, from: &Rank<CudaRuntime>) -> Result<()> {
        self.check_usable()?;
        self.release_landed()?;
        // A number is never used twice, even by a copy that fails half way.
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let signalled = catch_runtime(from.index, || {
            flags::signal(&from.client, &self.src_flags, 0, seq)
        });
        self.note_failure(signalled)
    }

    /// Queue the copy of `bytes` from the staging buffer `stage` (at `stage_ptr` on the
    /// source, made ready by [`Lane::source_ready`]) to a new landing buffer on `to`.
    fn copy(
        &mut self,
        stage: &Handle,
        stage_ptr: u64,
        to: &Rank<CudaRuntime>,
        bytes: usize,
    ) -> Result<Arrival<CudaRuntime>> {
        self.check_usable()?;
        let seq = self.seq;
        let landing = (|| -> Result<Handle> {
            let landing = catch_runtime(to.index, || to.client.empty(bytes))?;
            catch_runtime(to.index, || {
                flags::signal(&to.client, &self.dst_flags, 0, seq)
            })?;
            // Also hands the flag just queued to the driver.
            let landing_ptr = device_address(to, &landing)?;
            self.queue_raw(stage, stage_ptr, &landing, landing_ptr, bytes, seq)?;
            Ok(landing)
        })();
        let landing = self.note_failure(landing)?;
        let wait = FlagWait::new(self.dst_flags.clone(), 1, seq, to.index, to.client.clone())
            .guarding(landing.clone());
        Ok(Arrival {
            handle: landing,
            pending: Some(wait),
        })
    }

    /// `result`, after marking the lane broken where it is an error.
    fn note_failure<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.broken = Some(e.to_string());
        }
        result
    }

    /// Step 3 of the module docs. Where a call fails after the first was queued, the staging
    /// and landing buffers are leaked, since the raw streams may still use them.
    fn queue_raw(
        &mut self,
        stage: &Handle,
        stage_ptr: u64,
        landing: &Handle,
        landing_ptr: u64,
        bytes: usize,
        seq: u32,
    ) -> Result<()> {
        let (from, to) = (self.from, self.to);
        let done = match self.spare_events.pop() {
            Some(event) => event,
            None => new_event(to, &self.dst)?,
        };
        self.src.make_current(from)?;
        // SAFETY: live streams and events of the contexts made current before each group of
        // calls; the flag words, the staging and the landing buffer are live allocations of at
        // least the sizes used (the staging buffer is kept in `in_flight` until the copy has
        // landed; the landing buffer is not read before its flag says so).
        let queued = unsafe {
            (|| {
                check(
                    from,
                    "cuStreamWaitValue32",
                    wait_value(self.src_stream, self.src_flag, seq),
                )?;
                check(
                    from,
                    "cuEventRecord",
                    sys::cuEventRecord(self.ready, self.src_stream),
                )?;
                self.dst.make_current(to)?;
                check(
                    to,
                    "cuStreamWaitEvent",
                    sys::cuStreamWaitEvent(self.dst_stream, self.ready, 0),
                )?;
                check(
                    to,
                    "cuStreamWaitValue32",
                    wait_value(self.dst_stream, self.dst_flag, seq),
                )?;
                check(
                    to,
                    self.copy_call(),
                    self.copy_async(landing_ptr, stage_ptr, bytes),
                )?;
                check(
                    to,
                    "cuStreamWriteValue32",
                    write_value(self.dst_stream, self.dst_flag + 4, seq),
                )?;
                check(
                    to,
                    "cuEventRecord",
                    sys::cuEventRecord(done, self.dst_stream),
                )
            })()
        };
        match queued {
            Ok(()) => {
                self.in_flight.push_back((done, stage.clone()));
                Ok(())
            }
            Err(e) => {
                std::mem::forget(stage.clone());
                std::mem::forget(landing.clone());
                self.spare_events.push(done);
                Err(e)
            }
        }
    }

    /// Drop the staging buffers of copies that have landed; past [`MAX_IN_FLIGHT`] copies,
    /// wait on the host for the oldest.
    fn release_landed(&mut self) -> Result<()> {
        while let Some(&(event, _)) = self.in_flight.front() {
            // SAFETY: a live event recorded on `dst_stream`.
            let landed = if self.in_flight.len() >= MAX_IN_FLIGHT {
                unsafe {
                    check(
                        self.to,
                        "cuEventSynchronize",
                        sys::cuEventSynchronize(event),
                    )
                }
                .map(|()| true)?
            } else {
                unsafe { sys::cuEventQuery(event) == sys::CUresult::CUDA_SUCCESS }
            };
            if !landed {
                break;
            }
            self.in_flight.pop_front();
            self.spare_events.push(event);
        }
        Ok(())
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Wait (bounded) for the copies in flight: their staging buffers must not be reused
        // before they have been read.
        let start = Instant::now();
        while let Some(&(event, _)) = self.in_flight.front() {
            // SAFETY: a live event.
            match unsafe { sys::cuEventQuery(event) } {
                sys::CUresult::CUDA_SUCCESS => {
                    self.in_flight.pop_front();
                    self.spare_events.push(event);
                }
                sys::CUresult::CUDA_ERROR_NOT_READY if start.elapsed() < DRAIN_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                code => {
                    tracing::error!(target: "firemesh::transport", "CUDA ranks {} -> {}: {} copies still in flight at shutdown ({code:?}); their buffers are leaked", self.from, self.to, self.in_flight.len());
                    for (_, stage) in self.in_flight.drain(..) {
                        std::mem::forget(stage);
                    }
                    // The raw streams may still wait on and write the flags.
                    std::mem::forget(self.src_flags.clone());
                    std::mem::forget(self.dst_flags.clone());
                    // The streams may still run: leave them and their events to the driver.
                    return;
                }
            }
        }
        // Each object in the context it was made in (the contexts are fields, released after
        // this), skipping those a lane that failed half way through `new` never made.
        // SAFETY: nothing is queued on the streams any more; each object is destroyed once.
        let (from, to) = (self.from, self.to);
        unsafe {
            if self.src.make_current(from).is_ok() {
                if !self.ready.is_null() {
                    sys::cuEventDestroy_v2(self.ready);
                }
                if !self.src_stream.is_null() {
                    sys::cuStreamDestroy_v2(self.src_stream);
                }
            }
            if self.dst.make_current(to).is_ok() {
                // The spare events are the copies' completions, made in `dst`.
                for event in self.spare_events.drain(..) {
                    sys::cuEventDestroy_v2(event);
                }
                if !self.dst_stream.is_null() {
                    sys::cuStreamDestroy_v2(self.dst_stream);
                }
            }
        }
    }
}

/// `cuStreamWaitValue32`: `stream` waits until the word at `address` has reached `value`.
///
/// # Safety
/// `stream` is live in the current context and `address` a live device word.
unsafe fn wait_value(stream: sys::CUstream, address: u64, value: u32) -> sys::CUresult {
    sys::cuStreamWaitValue32_v2(
        stream,
        address,
        value,
        sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
    )
}

/// `cuStreamWriteValue32`: `stream` writes `value` to the word at `address`.
///
/// # Safety
/// `stream` is live in the current context and `address` a live device word.
unsafe fn write_value(stream: sys::CUstream, address: u64, value: u32) -> sys::CUresult {
    sys::cuStreamWriteValue32_v2(
        stream,
        address,
        value,
        sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
    )
}

fn new_stream(rank: usize, ctx: &PrimaryContext) -> Result<sys::CUstream> {
    ctx.make_current(rank)?;
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: an out-pointer, in the current context.
    unsafe {
        check(
            rank,
            "cuStreamCreate",
            sys::cuStreamCreate(
                &mut stream,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            ),
        )?;
    }
    Ok(stream)
}

fn new_event(rank: usize, ctx: &PrimaryContext) -> Result<sys::CUevent> {
    ctx.make_current(rank)?;
    let mut event: sys::CUevent = std::ptr::null_mut();
    // SAFETY: an out-pointer, in the current context.
    unsafe {
        check(
            rank,
            "cuEventCreate",
            sys::cuEventCreate(
                &mut event,
                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            ),
        )?;
    }
    Ok(event)
}
