//! Per-rank threads ("lanes"). A mesh that runs its ranks concurrently gives every rank but the
//! first one long-lived thread, which runs that rank's share of each op in the order the ops were
//! issued. The issuing thread runs rank 0's share itself and goes on to the next op without
//! waiting: the other ranks' results are [`Later`] values, read (and waited for) only where their
//! data is needed — a sum or gather across ranks, a read back to the host. There is no fork-join
//! per op: an op costs the issuing thread rank 0's work plus one queue push per other rank.
//!
//! Order is all the lanes need: rank r's operands were made by earlier jobs of the same lane, or
//! were ready when the job was queued (results of sums and gathers, uploads). On CubeCL devices
//! a job issues to the device stream (`firemesh_collective::stream`), as the thread that queued
//! it does, so that a rank's device sees one stream in issue order.

use burn_backend::Backend;
use firemesh_collective::{panic_message, DeviceStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Runs `f` on the device stream where the inner backend's devices have CubeCL streams (wgpu,
/// CUDA): every rank's work on a device goes to one stream, whichever thread issues it
/// (`firemesh_collective::stream` says why). Every entry into the inner backend goes through
/// here: the ops (`run`), host data, draws, sums in buckets, syncs.
pub(crate) fn on_device_stream<B: Backend, T>(f: impl FnOnce() -> T) -> T {
    if firemesh_collective::stream::has_streams::<B::Device>() {
        firemesh_collective::DeviceStream::run(f)
    } else {
        f()
    }
}

pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// The threads of ranks 1..N of one mesh.
pub(crate) struct Lanes {
    /// Entry r - 1 queues rank r's jobs.
    queues: Vec<Sender<Job>>,
}

impl Lanes {
    /// Starts one thread for each of the ranks 1..`ranks`; an idle one polls for `poll` before
    /// it sleeps ([`next_job`]).
    pub(crate) fn start(ranks: usize, mesh: u16, poll: Duration) -> Self {
        let queues = (1..ranks)
            .map(|rank| worker(format!("firemesh-mesh{mesh}-rank{rank}"), poll))
            .collect();
        Self { queues }
    }

    /// Queues `f` on rank `rank`'s thread (`rank` ≥ 1); its result is the returned [`Later`].
    /// A panic in `f` is kept and raised again, naming the rank, where the result is read.
    pub(crate) fn submit<T: Send + 'static>(
        &self,
        rank: usize,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Later<T> {
        let slot = Arc::new(Slot::new(rank));
        let filled = slot.clone();
        let job: Job = Box::new(move || {
            let result = DeviceStream::run(|| catch_unwind(AssertUnwindSafe(f)))
                .map_err(|p| panic_message(&*p));
            filled.fill(result);
        });
        self.queues[rank - 1]
            .send(job)
            .expect("firemesh: a rank thread has stopped");
        Later::from_slot(slot)
    }

    /// Waits until every lane has run all the jobs queued before this call.
    pub(crate) fn flush(&self) {
        let done: Vec<Later<()>> = (1..=self.queues.len())
            .map(|rank| self.submit(rank, || ()))
            .collect();
        for d in done {
            d.read(&mut |_| ());
        }
    }
}

/// A long-lived thread named `name` that runs the jobs sent to it, in order, polling for
/// `budget` when idle ([`next_job`]); it ends when the returned queue is dropped (never, for
/// registered meshes and the communication thread).
pub(crate) fn worker(name: String, budget: Duration) -> Sender<Job> {
    let (send, receive) = channel::<Job>();
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            while let Some(job) = next_job(&receive, budget) {
                job();
            }
        })
        .expect("firemesh: cannot start a thread");
    send
}

/// The next job of a worker (a rank thread, the communication thread): an idle worker polls its
/// queue for up to `budget` (yielding its core every 64 polls) before it sleeps, because waking a
/// sleeping thread costs more than a small op (`op_host_time`); a zero budget sleeps at once.
/// `None` once the queue is dropped.
fn next_job(queue: &Receiver<Job>, budget: Duration) -> Option<Job> {
    if budget.is_zero() {
        return queue.recv().ok();
    }
    let start = Instant::now();
    let mut polls = 0u32;
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(64) {
            if start.elapsed() >= budget {
                return queue.recv().ok();
            }
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// How long an idle worker polls before it sleeps unless the mesh's configuration says
/// otherwise (`MeshConfig::lane_poll`).
pub(crate) const DEFAULT_POLL: Duration = Duration::from_micros(50);

/// Where a lane leaves one job's result.
struct Slot<T> {
    rank: usize,
    state: Mutex<SlotState<T>>,
    filled: Condvar,
}

struct SlotState<T> {
    value: Option<Result<T, String>>,
    /// Readers asleep on `filled`: a fill that finds none skips the wake-up, which is a system
    /// call even when nobody sleeps.
    sleepers: usize,
}

impl<T> Slot<T> {
    fn new(rank: usize) -> Self {
        Self {
            rank,
            state: Mutex::new(SlotState {
                value: None,
                sleepers: 0,
            }),
            filled: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fill(&self, result: Result<T, String>) {
        let mut state = self.lock();
        state.value = Some(result);
        let asleep = state.sleepers > 0;
        drop(state);
        if asleep {
            self.filled.notify_all();
        }
    }

    /// The result of a filled slot.
    fn into_value(self) -> T {
        let rank = self.rank;
        match self
            .state
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .value
        {
            Some(Ok(v)) => v,
            Some(Err(message)) => panic!("firemesh: rank {rank}: {message}"),
            None => unreachable!("only filled slots are taken"),
        }
    }

    /// Waits for the result and lends it to `f`.
    fn with(&self, f: &mut dyn FnMut(&T)) {
        let mut state = self.lock();
        while state.value.is_none() {
            state.sleepers += 1;
            state = self.filled.wait(state).unwrap_or_else(|p| p.into_inner());
            state.sleepers -= 1;
        }
        match state.value.as_ref() {
            Some(Ok(v)) => f(v),
            Some(Err(message)) => panic!("firemesh: rank {}: {message}", self.rank),
            None => unreachable!("the loop above waits for the value"),
        }
    }
}

/// A value a lane is computing (or a field of one): reading it waits for the lane to get there.
pub(crate) struct Later<T: 'static> {
    source: Source<T>,
}

/// Lends a value to a reader when it is there.
type Lender<T> = Arc<dyn Fn(&mut dyn FnMut(&T)) + Send + Sync>;

enum Source<T: 'static> {
    /// A job's whole result.
    Job(Arc<Slot<T>>),
    /// A field of another job's result.
    Field(Lender<T>),
}

impl<T: Send + 'static> Later<T> {
    fn from_slot(slot: Arc<Slot<T>>) -> Self {
        Self {
            source: Source::Job(slot),
        }
    }
}

impl<T: Send + 'static> Later<T> {
    /// The field `field` of the value, when it is there.
    pub(crate) fn project<U: 'static>(&self, field: fn(&T) -> &U) -> Later<U> {
        let whole = self.clone();
        Later {
            source: Source::Field(Arc::new(move |f: &mut dyn FnMut(&U)| {
                whole.read(&mut |t: &T| f(field(t)))
            })),
        }
    }

    /// Waits for the value and lends it to `f`.
    pub(crate) fn read(&self, f: &mut dyn FnMut(&T)) {
        match &self.source {
            Source::Job(slot) => slot.with(f),
            Source::Field(read) => read(f),
        }
    }
}

impl<T: Clone + Send + 'static> Later<T> {
    /// Waits for the value and returns a copy of it.
    pub(crate) fn get(&self) -> T {
        let mut out = None;
        self.read(&mut |v: &T| out = Some(v.clone()));
        out.expect("a lane's value is lent once")
    }

    /// Waits for the value and returns it: moved out when nothing else refers to it (so that
    /// the inner backend may reuse its buffer in place), a copy otherwise.
    pub(crate) fn take(self) -> T {
        match self.source {
            Source::Job(slot) => {
                slot.with(&mut |_| ());
                match Arc::try_unwrap(slot) {
                    Ok(slot) => slot.into_value(),
                    Err(shared) => Later::from_slot(shared).get(),
                }
            }
            Source::Field(_) => self.get(),
        }
    }
}

impl<T: 'static> Clone for Later<T> {
    fn clone(&self) -> Self {
        let source = match &self.source {
            Source::Job(slot) => Source::Job(slot.clone()),
            Source::Field(read) => Source::Field(read.clone()),
        };
        Self { source }
    }
}
