//! Stream-ordered copies between devices: each copy is queued on raw driver streams and
//! ordered against CubeCL's streams with flag words ([`super::flags`]), so that neither the host
//! nor a whole device waits for it. Written once against [`StreamDriver`]; `CudaStreamCopy` is
//! this transport over CUDA's driver.
//!
//! CubeCL 0.10 gives no handle of its streams, so its streams and ours meet in device memory.
//! A copy from rank f to rank t, S being the device stream ([`crate::stream`]) of each device:
//! 1. on S of f: the source is copied into a staging buffer that nothing else writes, then a
//!    flag of f is set (the staging buffer is ready);
//! 2. on S of t: the landing buffer is allocated, then a flag of t is set (it is free);
//! 3. on raw streams: f's stream waits for f's flag and hands over with an event; t's stream
//!    waits for that event and t's flag, copies (peer to peer where the driver opened the
//!    pair), then sets a second flag of t (landed);
//! 4. the reader queues [`FlagWait`] on S of t before the kernel that reads the landing buffer,
//!    so that kernels queued on S in between keep running while the bytes move.
//!
//! A raw wait is pushed to the driver only once the kernel that sets its flag has been: CubeCL
//! queues launches on a host thread of its own, and a blocking call on a client
//! ([`StreamDriver::address`]) hands them all to the driver first. So every wait, on a raw
//! stream or a CubeCL one, is on work the driver received before it, and the order cannot
//! deadlock, even where streams share a hardware queue. The staging buffer is what lets S of f
//! go on writing the source at once; it is held until the copy has landed. Nothing times out on
//! the device: a copy that never comes (a device fault upstream) stalls the reader's stream.
//! Pairs whose devices refuse the driver's stream memory operations take the fallback
//! transport (synchronous copies).

use super::flags::{self, FlagWait};
use super::stream_driver::{Raw, StreamDriver};
use super::{AddressCell, Arrival, Cast, Rank, Target, Transport};
use crate::error::{catch_runtime, try_runtime};
use crate::{CollectiveError, DType, Result};
use cubecl::server::Handle;
use cubecl::Runtime;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Copies kept in flight per lane before the host waits for the oldest to land (bounds the
/// staging memory a lane holds).
const MAX_IN_FLIGHT: usize = 64;

/// How long dropping the transport waits for copies still in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Copies a stream-ordered transport made synchronously since the process started, because
/// the driver refused a stream memory operation for their pair of devices.
static FELL_BACK: AtomicU64 = AtomicU64::new(0);

/// Copies that a stream-ordered transport made synchronously in this process (their pair's
/// driver refused a stream memory operation, with a `tracing` warning naming the pair): 0
/// where every copy was stream-ordered. The GPU check's stream-ordered suites fail on any.
pub fn synchronous_fallbacks() -> u64 {
    FELL_BACK.load(Ordering::Relaxed)
}

/// Stream-ordered copies (see the module docs) through the driver `D`;
/// [`crate::Transfer::StreamOrdered`].
pub struct StreamOrderedCopy<R: Runtime, D: StreamDriver<R>> {
    name: &'static str,
    driver: Arc<D>,
    lanes: Mutex<HashMap<LaneKey, SharedSlot<R, D>>>,
    /// Copies of zero bytes, and all copies of a pair whose driver refuses the stream memory
    /// operations.
    fallback: Arc<dyn Transport<R>>,
}

/// One lane per ordered pair of ranks: the flags of a lane are written by one CubeCL stream (the
/// device stream, whichever thread issues the copy) and one raw stream each, so they only grow.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct LaneKey {
    from: usize,
    to: usize,
}

impl LaneKey {
    fn of<R: Runtime>(from: &Rank<R>, to: &Rank<R>) -> Self {
        Self {
            from: from.index,
            to: to.index,
        }
    }
}

/// A lane's slot, shared by the transport's map and the copies using it.
type SharedSlot<R, D> = Arc<Mutex<Slot<R, D>>>;

enum Slot<R: Runtime, D: StreamDriver<R>> {
    Lane(Box<Lane<R, D>>),
    /// The devices cannot run stream memory operations: synchronous copies.
    Synchronous,
}

impl<R: Runtime, D: StreamDriver<R>> StreamOrderedCopy<R, D> {
    /// The transport named `name` (logs, benchmark tables) over `driver`, copying through
    /// `fallback` where it cannot order a copy on the devices.
    pub fn with_driver(name: &'static str, driver: D, fallback: Arc<dyn Transport<R>>) -> Self {
        Self {
            name,
            driver: Arc::new(driver),
            lanes: Mutex::default(),
            fallback,
        }
    }

    /// The driver the copies go through.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The lane for `from` → `to`, made on first use.
    fn slot(&self, from: &Rank<R>, to: &Rank<R>) -> Result<SharedSlot<R, D>> {
        let key = LaneKey {
            from: from.index,
            to: to.index,
        };
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = lanes.get(&key) {
            return Ok(slot.clone());
        }
        let slot = match Lane::new(from, to, self.driver.clone())? {
            Some(lane) => Slot::Lane(Box::new(lane)),
            None => {
                tracing::warn!(target: "firemesh::transport", "ranks {} -> {}: the driver refuses a stream memory operation (above); synchronous copies for this pair", from.index, to.index);
                Slot::Synchronous
            }
        };
        let slot = Arc::new(Mutex::new(slot));
        lanes.insert(key, slot.clone());
        Ok(slot)
    }
}

impl<R: Runtime, D: StreamDriver<R>> Transport<R> for StreamOrderedCopy<R, D> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn waits_on_host(&self) -> bool {
        false
    }

    fn copy(&self, from: &Rank<R>, src: Handle, to: &Rank<R>, dtype: DType) -> Result<Arrival<R>> {
        let mut one = self.copy_many(from, src, &[to], dtype)?;
        Ok(one.pop().expect("one arrival per destination"))
    }

    fn copy_many(
        &self,
        from: &Rank<R>,
        src: Handle,
        to: &[&Rank<R>],
        dtype: DType,
    ) -> Result<Vec<Arrival<R>>> {
        let cast = Cast {
            from,
            src,
            held: None,
            to: to.to_vec(),
        };
        let mut one = self.copy_round(&[cast], dtype)?;
        Ok(one.pop().expect("one cast"))
    }

    fn copy_round(&self, casts: &[Cast<'_, R>], dtype: DType) -> Result<Vec<Vec<Arrival<R>>>> {
        let issued = self.issue(casts, None, dtype)?;
        Ok((issued.into_iter())
            .map(|a| {
                a.into_iter()
                    .map(|a| a.expect("one arrival per destination"))
                    .collect()
            })
            .collect())
    }

    /// Lands in place where every copy of the round can go on a lane (else nothing).
    fn copy_round_into(
        &self,
        casts: &[Cast<'_, R>],
        into: &[Vec<Target<'_>>],
        dtype: DType,
    ) -> Result<bool> {
        for cast in casts {
            for to in &cast.to {
                let usable = matches!(
                    *self
                        .slot(cast.from, to)?
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()),
                    Slot::Lane(_)
                );
                if !usable || cast.src.size_in_used() == 0 || cast.held.is_none() {
                    return Ok(false);
                }
            }
        }
        self.issue(casts, Some(into), dtype)?;
        Ok(true)
    }
    /// Each lane from `rank` whose last copy read a held source: its source stream marks the
    /// copy's end on `rank`'s flags, and `rank`'s device stream waits for the mark.
    fn settle(&self, rank: &Rank<R>) -> Result<()> {
        let lanes: Vec<SharedSlot<R, D>> = {
            let lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
            let mut from: Vec<_> = lanes.iter().filter(|(k, _)| k.from == rank.index).collect();
            from.sort_by_key(|(k, _)| k.to);
            from.into_iter().map(|(_, slot)| slot.clone()).collect()
        };
        // Every lane, even after one fails; the first failure is returned.
        let settled: Vec<Result<()>> = (lanes.iter())
            .map(
                |slot| match &mut *slot.lock().unwrap_or_else(|e| e.into_inner()) {
                    Slot::Lane(lane) => lane.settle(rank),
                    Slot::Synchronous => Ok(()),
                },
            )
            .collect();
        settled.into_iter().collect()
    }
}

/// One copy of a round between its passes: its lane and number, the buffer it reads and the
/// one it lands in, and their addresses once resolved.
struct Move {
    cast: usize,
    to: usize,
    key: LaneKey,
    seq: u32,
    read: Handle,
    read_ptr: u64,
    landing: Handle,
    landing_ptr: u64,
}

impl<R: Runtime, D: StreamDriver<R>> StreamOrderedCopy<R, D> {
    /// A round of copies, in three passes, so that the round's flags reach the driver with as
    /// few blocking calls as there are ranks it touches: every source made ready and every
    /// landing buffer made (or, `into`, named), with their flags; then the addresses, each
    /// blocking call handing a device's flags to the driver, and a flush of the devices no
    /// address call reached; then the raw copies. Landed in place (`into`), each copy's wait
    /// is queued on its destination's stream once the whole round is, and no arrival is given.
    fn issue(
        &self,
        casts: &[Cast<'_, R>],
        into: Option<&[Vec<Target<'_>>]>,
        dtype: DType,
    ) -> Result<Vec<Vec<Option<Arrival<R>>>>> {
        // Each lane stays locked from its first flag to its raw copies, so that its numbers
        // are queued in order; lanes are locked in (from, to) order, each once.
        let mut slots = BTreeMap::new();
        for cast in casts {
            for to in &cast.to {
                if let Entry::Vacant(e) = slots.entry(LaneKey::of(cast.from, to)) {
                    e.insert(self.slot(cast.from, to)?);
                }
            }
        }
        let mut guards: BTreeMap<LaneKey, MutexGuard<'_, Slot<R, D>>> = slots
            .iter()
            .map(|(&key, slot)| (key, slot.lock().unwrap_or_else(|e| e.into_inner())))
            .collect();
        let mut arrivals: Vec<Vec<Option<Arrival<R>>>> = (casts.iter())
            .map(|c| c.to.iter().map(|_| None).collect())
            .collect();
        let mut moves: Vec<Move> = Vec::new();
        let mut signalled: BTreeSet<usize> = BTreeSet::new();
        for (c, cast) in casts.iter().enumerate() {
            let bytes = cast.src.size_in_used() as usize;
            let mut read: Option<Handle> = None;
            for (t, &to) in cast.to.iter().enumerate() {
                let key = LaneKey::of(cast.from, to);
                let lane = match &mut **guards.get_mut(&key).expect("locked above") {
                    Slot::Lane(lane) if bytes > 0 => lane,
                    slot => {
                        if matches!(slot, Slot::Synchronous) {
                            FELL_BACK.fetch_add(1, Ordering::Relaxed);
                        }
                        let copy = self.fallback.copy(cast.from, cast.src.clone(), to, dtype)?;
                        arrivals[c][t] = Some(copy);
                        continue;
                    }
                };
                if read.is_none() {
                    read = Some(match cast.held {
                        Some(_) => cast.src.clone(),
                        None => self.stage(cast.from, &cast.src, bytes)?,
                    });
                }
                lane.source_ready(cast.from)?;
                let landing = match into {
                    Some(into) => lane.land_in(to, into[c][t].0.clone())?,
                    None => lane.land_new(to, bytes)?,
                };
                signalled.extend([cast.from.index, to.index]);
                moves.push(Move {
                    cast: c,
                    to: t,
                    key,
                    seq: lane.seq,
                    read: read.clone().expect("set above"),
                    read_ptr: 0,
                    landing,
                    landing_ptr: 0,
                });
            }
        }
        // Addresses: a held source's buffer, and a buffer landed in, is resolved once for all
        // its clones; a staging or new landing buffer, each time.
        let mut handed: BTreeSet<usize> = BTreeSet::new();
        for m in &mut moves {
            let cast = &casts[m.cast];
            let to = cast.to[m.to];
            m.read_ptr = match cast.held {
                Some(base) => self.held_address(cast.from, &cast.src, base, &mut handed)?,
                None => {
                    handed.insert(cast.from.index);
                    self.driver.address(cast.from, &m.read)?
                }
            };
            m.landing_ptr = match into {
                Some(into) => {
                    self.held_address(to, &m.landing, into[m.cast][m.to].1, &mut handed)?
                }
                None => {
                    handed.insert(to.index);
                    self.driver.address(to, &m.landing)?
                }
            };
        }
        for index in signalled.difference(&handed) {
            let rank = (casts.iter())
                .flat_map(|c| std::iter::once(c.from).chain(c.to.iter().copied()))
                .find(|r| r.index == *index)
                .expect("a rank of the round");
            self.driver.flush(rank)?;
        }
        let mut failure = None;
        let mut queued = Vec::with_capacity(moves.len());
        for m in moves {
            let Slot::Lane(lane) = &mut **guards.get_mut(&m.key).expect("locked above") else {
                unreachable!("moves are made on lanes")
            };
            if let Err(e) = lane.queue(&m) {
                failure = Some(e);
                break;
            }
            if casts[m.cast].held.is_some() {
                lane.unsettled = Some(m.seq);
            }
            queued.push(m);
        }
        // The copies queued get their waits even when a later one failed: a landing buffer is
        // held until its reader's stream has passed the wait, so that no other buffer takes its
        // memory while the copy may still write it.
        for m in queued {
            let Slot::Lane(lane) = &mut **guards.get_mut(&m.key).expect("locked above") else {
                unreachable!("moves are made on lanes")
            };
            let to = casts[m.cast].to[m.to];
            if into.is_some() {
                self.driver.wait(to, &lane.dst_flags, 1, m.seq)?;
            } else {
                let wait = FlagWait::new(
                    lane.dst_flags.clone(),
                    1,
                    m.seq,
                    to.index,
                    to.client.clone(),
                );
                arrivals[m.cast][m.to] = Some(Arrival {
                    handle: m.landing.clone(),
                    pending: Some(wait.guarding(m.landing)),
                });
            }
        }
        match failure {
            // Dropped, the arrivals queue their waits.
            Some(e) => Err(e),
            None => Ok(arrivals),
        }
    }

    /// The address of `slice` (on `rank`), from its buffer's, which `base` holds once
    /// resolved; notes `rank` in `handed` where resolving it made a blocking call.
    fn held_address(
        &self,
        rank: &Rank<R>,
        slice: &Handle,
        base: &AddressCell,
        handed: &mut BTreeSet<usize>,
    ) -> Result<u64> {
        let mut whole = slice.clone();
        (whole.offset_start, whole.offset_end) = (None, None);
        let address = base.get_or_resolve(|| {
            handed.insert(rank.index);
            self.driver.address(rank, &whole)
        })?;
        Ok(address + slice.offset_start.unwrap_or(0))
    }

    /// The staging copy of `src` on `from` (step 1 of the module docs), queued on the device
    /// stream.
    fn stage(&self, from: &Rank<R>, src: &Handle, bytes: usize) -> Result<Handle> {
        let stage = catch_runtime(from.index, || from.client.empty(bytes))?;
        self.driver.copy_words(from, &stage, src, bytes / 4)?;
        Ok(stage)
    }
}

/// The raw streams, event and flags of one ordered pair of ranks.
struct Lane<R: Runtime, D: StreamDriver<R>> {
    driver: Arc<D>,
    from: usize,
    to: usize,
    src: D::Device,
    dst: D::Device,
    /// On `src`: waits for the staging buffer, then hands over to `dst_stream`.
    src_stream: Option<D::Stream>,
    /// On `dst`: waits, copies, announces.
    dst_stream: Option<D::Stream>,
    /// Recorded on `src_stream` once a staging buffer is ready.
    ready: Option<D::Event>,
    /// On `from`, 2 words: the number of the last source made ready, and of the last held
    /// source read ([`Lane::settle`]).
    src_flags: Handle,
    src_flag: u64,
    /// On `to`, 2 words: the last landing buffer allocated, the last copy landed.
    dst_flags: Handle,
    dst_flag: u64,
    /// The number of the last copy queued.
    seq: u32,
    /// Each queued copy's number and completion on `dst_stream`, with the buffer it reads.
    in_flight: VecDeque<(u32, D::Event, Handle)>,
    /// The number of the last copy of a held source, until the lane is settled.
    unsettled: Option<u32>,
    spare_events: Vec<D::Event>,
    /// Why the lane stopped, after a failure half way through queuing a copy.
    broken: Option<String>,
    /// Whether copies go between two devices' memories, or within one.
    as_peers: bool,
}

/// A driver call's outcome as this crate's error, naming the rank and the call.
fn check<T>(rank: usize, what: &str, outcome: Raw<T>) -> Result<T> {
    outcome.map_err(|code| CollectiveError::Runtime {
        rank,
        reason: format!("{what} failed: {code}"),
    })
}

impl<R: Runtime, D: StreamDriver<R>> Lane<R, D> {
    /// A lane from `from` to `to`, or `None` where the driver refuses stream memory operations.
    fn new(from: &Rank<R>, to: &Rank<R>, driver: Arc<D>) -> Result<Option<Self>> {
        let src = driver.device(from)?;
        let dst = driver.device(to)?;
        let as_peers = driver.pair(&src, &dst);
        let src_flags = catch_runtime(from.index, || flags::new_flags(&from.client, 2))?;
        let dst_flags = catch_runtime(to.index, || flags::new_flags(&to.client, 2))?;
        // Load the flag kernels (a signal of the number a flag holds, a wait that passes at
        // once) before any copy depends on them, then let the flags' zeros reach memory
        // before any raw stream reads them.
        for (rank, flags) in [(from, &src_flags), (to, &dst_flags)] {
            driver.signal(rank, flags, 0, 0)?;
            driver.wait(rank, flags, 0, 0)?;
            try_runtime(rank.index, || cubecl::future::block_on(rank.client.sync()))?;
        }
        let src_flag = driver.address(from, &src_flags)?;
        let dst_flag = driver.address(to, &dst_flags)?;
        // The driver objects are made into the lane, so that dropping it on a failure half way
        // destroys those made so far (`Drop` skips the ones never made).
        let mut lane = Self {
            driver: driver.clone(),
            from: from.index,
            to: to.index,
            src,
            dst,
            src_stream: None,
            dst_stream: None,
            ready: None,
            src_flags,
            src_flag,
            dst_flags,
            dst_flag,
            seq: 0,
            in_flight: VecDeque::new(),
            unsettled: None,
            spare_events: Vec::new(),
            broken: None,
            as_peers,
        };
        lane.src_stream = Some(check(
            from.index,
            "new stream",
            driver.new_stream(&lane.src),
        )?);
        lane.dst_stream = Some(check(to.index, "new stream", driver.new_stream(&lane.dst))?);
        lane.ready = Some(check(from.index, "new event", driver.new_event(&lane.src))?);
        let (src_stream, dst_stream, ready) = lane.raw();
        // Every stream memory operation a copy makes, once on each device, on words whose value
        // it leaves as it is (they hold 0): a wait for the number a flag holds passes at once,
        // and a write of 0 to a word that holds 0. They probe whether the driver waits on and
        // writes words of CubeCL's memory pools.
        for (rank, device, stream, wait_at, write_at) in [
            (from.index, &lane.src, src_stream, src_flag, src_flag),
            (to.index, &lane.dst, dst_stream, dst_flag, dst_flag + 4),
        ] {
            for (call, outcome) in [
                ("wait value", driver.wait_value(device, stream, wait_at, 0)),
                (
                    "write value",
                    driver.write_value(device, stream, write_at, 0),
                ),
                (
                    "synchronize stream",
                    driver.synchronize_stream(device, stream),
                ),
            ] {
                if let Err(code) = outcome {
                    tracing::warn!(target: "firemesh::transport", "rank {rank}: {call} refused ({code})");
                    return Ok(None);
                }
            }
        }
        // The calls between the two raw streams, once: the hand-over event, and the copy of one
        // word (the source's flag, 0, onto the landed word, which holds 0).
        let (src_dev, dst_dev) = (&lane.src, &lane.dst);
        for (call, outcome) in [
            ("record", driver.record(src_dev, ready, src_stream)),
            ("wait event", driver.wait_event(dst_dev, dst_stream, ready)),
            (
                "copy",
                driver.copy(
                    dst_dev,
                    src_dev,
                    as_peers,
                    dst_flag + 4,
                    src_flag,
                    4,
                    dst_stream,
                ),
            ),
            (
                "synchronize stream",
                driver.synchronize_stream(dst_dev, dst_stream),
            ),
        ] {
            if let Err(code) = outcome {
                tracing::warn!(target: "firemesh::transport", "ranks {} -> {}: {call} refused ({code})", from.index, to.index);
                return Ok(None);
            }
        }
        Ok(Some(lane))
    }

    /// The lane's raw streams and hand-over event, made in [`Lane::new`].
    fn raw(&self) -> (D::Stream, D::Stream, D::Event) {
        match (self.src_stream, self.dst_stream, self.ready) {
            (Some(s), Some(d), Some(e)) => (s, d, e),
            _ => unreachable!("a lane in use has its streams and event"),
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
    fn source_ready(&mut self, from: &Rank<R>) -> Result<()> {
        self.check_usable()?;
        self.release_landed()?;
        // A number is never used twice, even by a copy that fails half way.
        self.seq = self.seq.wrapping_add(1);
        let signalled = self.driver.signal(from, &self.src_flags, 0, self.seq);
        self.note_failure(signalled)
    }

    /// A new landing buffer of `bytes` on `to` for the number just taken, and the flag that
    /// says it is free, queued on `to`'s stream.
    fn land_new(&mut self, to: &Rank<R>, bytes: usize) -> Result<Handle> {
        let landing = catch_runtime(to.index, || to.client.empty(bytes));
        let landing = self.note_failure(landing)?;
        self.land_in(to, landing)
    }

    /// `landing` (on `to`) for the number just taken, and the flag that says the work queued
    /// on `to`'s stream before, which may read or write it, is done.
    fn land_in(&mut self, to: &Rank<R>, landing: Handle) -> Result<Handle> {
        let signalled = self.driver.signal(to, &self.dst_flags, 0, self.seq);
        self.note_failure(signalled)?;
        Ok(landing)
    }

    /// Queue `m`'s raw copy, its flags handed to the driver.
    fn queue(&mut self, m: &Move) -> Result<()> {
        self.check_usable()?;
        let queued = self.queue_raw(&m.read, m.read_ptr, &m.landing, m.landing_ptr, m.seq);
        self.note_failure(queued)
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
        seq: u32,
    ) -> Result<()> {
        let bytes = landing.size_in_used() as usize;
        let (from, to) = (self.from, self.to);
        let (src_stream, dst_stream, ready) = self.raw();
        let d = &*self.driver;
        let done = match self.spare_events.pop() {
            Some(event) => event,
            None => check(to, "new event", d.new_event(&self.dst))?,
        };
        let queued = (|| {
            check(
                from,
                "wait value",
                d.wait_value(&self.src, src_stream, self.src_flag, seq),
            )?;
            check(from, "record", d.record(&self.src, ready, src_stream))?;
            check(to, "wait event", d.wait_event(&self.dst, dst_stream, ready))?;
            check(
                to,
                "wait value",
                d.wait_value(&self.dst, dst_stream, self.dst_flag, seq),
            )?;
            check(
                to,
                "copy",
                d.copy(
                    &self.dst,
                    &self.src,
                    self.as_peers,
                    landing_ptr,
                    stage_ptr,
                    bytes,
                    dst_stream,
                ),
            )?;
            check(
                to,
                "write value",
                d.write_value(&self.dst, dst_stream, self.dst_flag + 4, seq),
            )?;
            check(to, "record", d.record(&self.dst, done, dst_stream))
        })();
        match queued {
            Ok(()) => {
                self.in_flight.push_back((seq, done, stage.clone()));
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

    /// Orders `from`'s device stream after the last copy of a held source: the source stream
    /// waits for the copy's end and marks it on `from`'s flags, and the device stream waits for
    /// the mark. Nothing where that copy has landed already.
    fn settle(&mut self, from: &Rank<R>) -> Result<()> {
        let Some(seq) = self.unsettled.take() else {
            return Ok(());
        };
        self.check_usable()?;
        self.release_landed()?;
        let Some(&(_, done, _)) = self.in_flight.iter().find(|(s, _, _)| *s == seq) else {
            return Ok(());
        };
        let (src_stream, _, _) = self.raw();
        let d = &*self.driver;
        let marked = check(
            self.from,
            "wait event",
            d.wait_event(&self.src, src_stream, done),
        )
        .and_then(|()| {
            let mark = d.write_value(&self.src, src_stream, self.src_flag + 4, seq);
            check(self.from, "write value", mark)
        })
        .and_then(|()| d.wait(from, &self.src_flags, 1, seq));
        self.note_failure(marked)
    }

    /// Drop the staging buffers of copies that have landed; past [`MAX_IN_FLIGHT`] copies,
    /// wait on the host for the oldest.
    fn release_landed(&mut self) -> Result<()> {
        while let Some(&(_, event, _)) = self.in_flight.front() {
            let landed = if self.in_flight.len() >= MAX_IN_FLIGHT {
                let waited = self.driver.synchronize_event(&self.dst, event);
                check(self.to, "synchronize event", waited).map(|()| true)?
            } else {
                matches!(self.driver.landed(event), Ok(true))
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

impl<R: Runtime, D: StreamDriver<R>> Drop for Lane<R, D> {
    fn drop(&mut self) {
        // Wait (bounded) for the copies in flight: their staging buffers must not be reused
        // before they have been read.
        let start = Instant::now();
        while let Some(&(_, event, _)) = self.in_flight.front() {
            let landed = self.driver.landed(event);
            if landed == Ok(true) {
                self.in_flight.pop_front();
                self.spare_events.push(event);
            } else if landed == Ok(false) && start.elapsed() < DRAIN_TIMEOUT {
                std::thread::sleep(Duration::from_millis(1));
            } else {
                tracing::error!(target: "firemesh::transport", "ranks {} -> {}: {} copies still in flight at shutdown ({landed:?}); their buffers are leaked", self.from, self.to, self.in_flight.len());
                for (_, _, stage) in self.in_flight.drain(..) {
                    std::mem::forget(stage);
                }
                // The raw streams may still wait on and write the flags.
                std::mem::forget(self.src_flags.clone());
                std::mem::forget(self.dst_flags.clone());
                // The streams may still run: leave them and their events to the driver.
                return;
            }
        }
        let d = &*self.driver;
        // A settle's mark (`Lane::settle`) follows the last copy on the source's raw stream:
        // let it land before the flags go back to CubeCL's pool.
        if let (Some(stream), Some(_)) = (self.src_stream, self.ready) {
            if let Err(code) = d.synchronize_stream(&self.src, stream) {
                tracing::error!(target: "firemesh::transport", "ranks {} -> {}: the source stream did not finish ({code}); its flags are leaked", self.from, self.to);
                std::mem::forget(self.src_flags.clone());
                return;
            }
        }
        // Each object on the device it was made on, skipping those a lane that failed half way
        // through `new` never made. Nothing is queued on the streams any more.
        if let Some(ready) = self.ready {
            d.destroy_event(&self.src, ready);
        }
        if let Some(stream) = self.src_stream {
            d.destroy_stream(&self.src, stream);
        }
        // The spare events are the copies' completions, made on `dst`.
        for event in self.spare_events.drain(..) {
            d.destroy_event(&self.dst, event);
        }
        if let Some(stream) = self.dst_stream {
            d.destroy_stream(&self.dst, stream);
        }
    }
}
