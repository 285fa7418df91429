//! Counts of the work placement rules could not avoid: ops that fell back to running replicated,
//! redistributions between placements, and the routes their sums and gathers took. Every event
//! is also a `tracing` event (targets `firemesh::fallback`, `firemesh::redistribute`,
//! `firemesh::route`), so a profile shows missing rules.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

/// The path a sum or gather of parts took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Route {
    /// Every rank on one device: in place, no copy.
    OneDevice,
    /// The collective group registered on the mesh.
    MeshGroup,
    /// firemesh-collective's portable group (Burn tensor ops; host copies between devices).
    PortableGroup,
    /// Int and bool parts between devices: through host memory.
    ThroughHost,
    /// A mesh that is one process's share of a world: its ranks on rank 0, then one buffer per
    /// process through the world's link (`across.rs`).
    AcrossProcesses,
}

/// A change of placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Redistribution {
    /// An all-gather.
    ShardToReplicated,
    /// An all-reduce.
    PartialToReplicated,
    /// A local slice.
    ReplicatedToShard,
    /// Rank 0 keeps the value, the others hold zeros.
    ReplicatedToPartial,
}

/// What was counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Ops with no placement rule for their inputs, by op name: inputs were made `Replicated`
    /// and the op ran on every rank.
    pub fallbacks: BTreeMap<&'static str, u64>,
    /// Placement changes.
    pub redistributions: BTreeMap<Redistribution, u64>,
    /// The same, by the op whose operands they prepared (`"buckets"` for gradient buckets,
    /// `"api"` for the placement API).
    pub redistributions_by_op: BTreeMap<(&'static str, Redistribution), u64>,
    /// Sums and gathers of parts across ranks, by the route they took.
    pub routes: BTreeMap<Route, u64>,
    /// Ops issued through `Sharded` (each runs once per rank): counted on the calling thread
    /// inside [`count`] only, so that counting costs the hot path one thread-local add.
    pub ops: u64,
    /// Of those, the ops whose ranks 1.. ran on their own threads (`Mesh::set_parallel`): all
    /// but the ops whose ranks' shares differ in shape (uneven blocks), which run in turn.
    /// Counted as `ops` is.
    pub on_rank_threads: u64,
    /// Wall time the calling thread spent inside sums and gathers across ranks, in
    /// nanoseconds, from when every rank's part was there. Counted as `ops` is. It includes
    /// work still queued on the devices unless the mesh settles first
    /// (`MeshConfig::settle_before_comm`).
    pub comm_nanos: u64,
    /// Elements each rank contributed to sums across ranks (gradient buckets included).
    /// Counted as `ops` is.
    pub summed_elements: u64,
    /// The bytes of those elements, in the dtype they were summed in (half of f32's for
    /// gradient buckets summed in bf16). Counted as `ops` is.
    pub summed_bytes: u64,
    /// Products that ran in f32 while a lower precision was armed (`Mesh::autocast`), by op
    /// name: convolutions on CubeCL devices that no kernel adding in f32 took (their direct
    /// kernels add in the element type; `autocast/convs.rs`).
    pub products_in_f32: BTreeMap<&'static str, u64>,
    /// Sums of a `Partial` tensor not taken because a clone of it had been summed already.
    pub sums_reused: u64,
    /// Sharded parameters gathered whole for an op that needed them, while a step armed it
    /// (ZeRO-3: `StepScope::set_gather_parameters`); each gather is in `routes` too.
    pub parameter_gathers: u64,
    /// Of `parameter_gathers`, those issued ahead of use on the communication thread (while
    /// the ops before them ran) and taken by their op (`ParameterGathers`).
    pub parameter_gathers_ahead: u64,
    /// Of `parameter_gathers_ahead`, those still under way when their op needed them (it
    /// waited for the rest): the others were hidden whole behind the ops before them.
    pub parameter_gathers_waited: u64,
    /// Gradient buckets summed during the backward pass
    /// (`EarlyBuckets`), counted where they were started. Their
    /// collectives are in `routes` too: they run on the communication thread and are counted
    /// where they were waited for (`EarlyBuckets::close`), with the time they
    /// took there
    /// (`early_comm_nanos`) and the time the waiting thread spent waiting (`early_wait_nanos`,
    /// also in `comm_nanos`). The difference is communication hidden behind other work.
    pub early_buckets: u64,
    pub early_comm_nanos: u64,
    pub early_wait_nanos: u64,
    /// Autocast's casts (each on every rank that holds a part): f32 operands cast down to the
    /// armed precision, and tensors held narrow widened back to f32 where an op read them in
    /// f32 (or a `Partial` product result cast back for its bucket). Counted as `ops` is. (A
    /// convolution run in f32 on CubeCL devices widens its operands inside the op: counted in
    /// `products_in_f32`, not here.)
    pub casts_down: u64,
    pub casts_up: u64,
    /// Of `casts_down`, those of parameters (`ShardedTensor::mark_parameter`): each parameter
    /// a product reads is cast once per step. Counted as `ops` is.
    pub parameter_casts: u64,
    /// Parameter casts not made again: a clone of the parameter (read again by the backward
    /// pass) had been cast already in the step. Counted as `ops` is.
    pub casts_reused: u64,
    /// Of `casts_up`'s readers, those that took the widening a clone had made already (a
    /// narrow result read by several f32 ops, as Burn's BatchNorm reads its input): each
    /// narrow tensor is widened once for all its clones. Counted as `ops` is.
    pub casts_up_reused: u64,
    /// Casts down of activations not made again: a clone of the tensor (a gradient that the
    /// backward pass's two products of a layer read) had been cast by one of the latest
    /// products. Counted as `ops` is.
    pub activation_casts_reused: u64,
    /// The bytes those casts read and wrote, over all ranks. Counted as `ops` is.
    pub cast_bytes: u64,
    /// Elementwise ops and activations that ran on operands held narrow and kept their result
    /// narrow, casting nothing (`autocast/narrow.rs`). Counted as `ops` is.
    pub ops_kept_narrow: u64,
}

impl Counts {
    pub fn total_fallbacks(&self) -> u64 {
        self.fallbacks.values().sum()
    }

    pub fn total_products_in_f32(&self) -> u64 {
        self.products_in_f32.values().sum()
    }

    pub fn total_redistributions(&self) -> u64 {
        self.redistributions.values().sum()
    }

    /// Sums and gathers that took `route`.
    pub fn route(&self, route: Route) -> u64 {
        self.routes.get(&route).copied().unwrap_or(0)
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counts) {
        for (k, v) in &other.fallbacks {
            *self.fallbacks.entry(k).or_default() += v;
        }
        for (k, v) in &other.redistributions {
            *self.redistributions.entry(*k).or_default() += v;
        }
        for (k, v) in &other.redistributions_by_op {
            *self.redistributions_by_op.entry(*k).or_default() += v;
        }
        for (k, v) in &other.routes {
            *self.routes.entry(*k).or_default() += v;
        }
        for (k, v) in &other.products_in_f32 {
            *self.products_in_f32.entry(k).or_default() += v;
        }
        self.ops += other.ops;
        self.on_rank_threads += other.on_rank_threads;
        self.comm_nanos += other.comm_nanos;
        self.summed_elements += other.summed_elements;
        self.summed_bytes += other.summed_bytes;
        self.sums_reused += other.sums_reused;
        self.parameter_gathers += other.parameter_gathers;
        self.parameter_gathers_ahead += other.parameter_gathers_ahead;
        self.parameter_gathers_waited += other.parameter_gathers_waited;
        self.early_buckets += other.early_buckets;
        self.early_comm_nanos += other.early_comm_nanos;
        self.early_wait_nanos += other.early_wait_nanos;
        self.casts_down += other.casts_down;
        self.casts_up += other.casts_up;
        self.parameter_casts += other.parameter_casts;
        self.casts_reused += other.casts_reused;
        self.casts_up_reused += other.casts_up_reused;
        self.activation_casts_reused += other.activation_casts_reused;
        self.cast_bytes += other.cast_bytes;
        self.ops_kept_narrow += other.ops_kept_narrow;
    }
}

static GLOBAL: Mutex<Option<Counts>> = Mutex::new(None);

thread_local! {
    static SCOPES: RefCell<Vec<Counts>> = const { RefCell::new(Vec::new()) };
    static OPS: Cell<u64> = const { Cell::new(0) };
    static ON_RANK_THREADS: Cell<u64> = const { Cell::new(0) };
    static COMM_NANOS: Cell<u64> = const { Cell::new(0) };
    static SUMMED_ELEMENTS: Cell<u64> = const { Cell::new(0) };
    static SUMMED_BYTES: Cell<u64> = const { Cell::new(0) };
    /// Casts down, casts up, bytes they moved, casts reused, parameter casts, ops kept narrow,
    /// widenings reused, activation casts reused.
    static CASTS: Cell<[u64; 8]> = const { Cell::new([0; 8]) };
    /// The op whose operands are being redistributed on this thread, if any.
    static PREPARING: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Runs `f`, the redistribution of `op`'s operands: what it redistributes is counted for `op`.
pub(crate) fn preparing<T>(op: &'static str, f: impl FnOnce() -> T) -> T {
    let outer = PREPARING.with(|p| p.replace(Some(op)));
    let out = f();
    PREPARING.with(|p| p.set(outer));
    out
}

/// Counts a sum of `elements` per rank, of `bytes` per rank.
pub(crate) fn summed(elements: usize, bytes: usize) {
    SUMMED_ELEMENTS.with(|c| c.set(c.get() + elements as u64));
    SUMMED_BYTES.with(|c| c.set(c.get() + bytes as u64));
}

/// Times one sum or gather on the calling thread, until it drops.
pub(crate) struct CommClock(Instant);

pub(crate) fn comm_clock<B: burn_backend::Backend>(
    mesh: &crate::mesh::Mesh<B::Device>,
) -> CommClock {
    if mesh.settles_before_comm() {
        mesh.wait_issued();
        if !mesh.single_device() {
            for d in mesh.devices() {
                // A device that cannot sync fails again, with its error, in the collective.
                let _ = B::sync(d);
            }
        }
    }
    CommClock(Instant::now())
}

impl Drop for CommClock {
    fn drop(&mut self) {
        let nanos = self.0.elapsed().as_nanos() as u64;
        COMM_NANOS.with(|c| c.set(c.get() + nanos));
    }
}

/// Counts one autocast cast, to f32 (`up`) or from it, that read and wrote `bytes` in all;
/// `parameter`: a marked parameter's.
pub(crate) fn cast(up: bool, bytes: usize, parameter: bool) {
    add_casts([
        u64::from(!up),
        u64::from(up),
        bytes as u64,
        0,
        u64::from(parameter),
        0,
        0,
        0,
    ]);
}

/// Counts a parameter's cast taken from a clone that was cast already.
pub(crate) fn cast_reused() {
    add_casts([0, 0, 0, 1, 0, 0, 0, 0]);
}

/// Counts an op that ran on narrow operands and kept its result narrow.
pub(crate) fn kept_narrow() {
    add_casts([0, 0, 0, 0, 0, 1, 0, 0]);
}

/// Counts a read of a narrow tensor that took the widening a clone of it had made.
pub(crate) fn widening_reused() {
    add_casts([0, 0, 0, 0, 0, 0, 1, 0]);
}

/// Counts an activation's cast taken from the latest casts of the armed precision.
pub(crate) fn activation_cast_reused() {
    add_casts([0, 0, 0, 0, 0, 0, 0, 1]);
}

fn add_casts(more: [u64; 8]) {
    CASTS.with(|c| {
        let mut casts = c.get();
        casts.iter_mut().zip(more).for_each(|(n, m)| *n += m);
        c.set(casts);
    });
}

pub(crate) fn op() {
    OPS.with(|c| c.set(c.get() + 1));
}

pub(crate) fn on_rank_threads() {
    ON_RANK_THREADS.with(|c| c.set(c.get() + 1));
}

fn record(f: impl Fn(&mut Counts)) {
    f(GLOBAL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(Counts::default));
    SCOPES.with(|s| s.borrow_mut().iter_mut().for_each(&f));
}

pub(crate) fn fallback(op: &'static str) {
    tracing::debug!(target: "firemesh::fallback", op, "no placement rule; running replicated");
    record(|c| *c.fallbacks.entry(op).or_default() += 1);
}

pub(crate) fn product_in_f32(op: &'static str) {
    tracing::debug!(target: "firemesh::autocast", op, "products added in f32: run in f32");
    record(|c| *c.products_in_f32.entry(op).or_default() += 1);
}

pub(crate) fn redistribution(kind: Redistribution) {
    let op = PREPARING.with(Cell::get).unwrap_or("api");
    tracing::trace!(target: "firemesh::redistribute", ?kind, op);
    record(|c| {
        *c.redistributions.entry(kind).or_default() += 1;
        *c.redistributions_by_op.entry((op, kind)).or_default() += 1;
    });
}

pub(crate) fn parameter_gathered() {
    record(|c| c.parameter_gathers += 1);
}

/// A gather taken from ahead; `waited`: it was not done when its op needed it.
pub(crate) fn parameter_gathered_ahead(waited: bool) {
    record(|c| {
        c.parameter_gathers_ahead += 1;
        c.parameter_gathers_waited += u64::from(waited);
    });
}

/// Counts here what the communication thread counted for a parameter gathered ahead (it is in
/// the global counts already); its time is not this thread's.
pub(crate) fn gathered_elsewhere(there: &Counts) {
    let there = Counts {
        comm_nanos: 0,
        ..there.clone()
    };
    SCOPES.with(|s| s.borrow_mut().iter_mut().for_each(|c| c.add(&there)));
}

pub(crate) fn sum_reused() {
    record(|c| c.sums_reused += 1);
}

pub(crate) fn early_bucket() {
    record(|c| c.early_buckets += 1);
}

/// Counts here what the communication thread counted for an early bucket (it is in the
/// global counts already); its time inside the sums is early communication.
pub(crate) fn early_bucket_summed(there: &Counts) {
    let there = Counts {
        early_comm_nanos: there.comm_nanos,
        ..there.clone()
    };
    // A scope's ops, comm_nanos and summed_elements are read from this thread's counters
    // when it closes ([`count`]): what `add` puts there is replaced, so add the elements here.
    SCOPES.with(|s| s.borrow_mut().iter_mut().for_each(|c| c.add(&there)));
    summed(there.summed_elements as usize, there.summed_bytes as usize);
}

/// Time this thread waited for early buckets to be summed: communication it did not hide.
pub(crate) fn early_buckets_waited(waited: std::time::Duration) {
    let nanos = waited.as_nanos() as u64;
    COMM_NANOS.with(|c| c.set(c.get() + nanos));
    SCOPES.with(|s| {
        for c in s.borrow_mut().iter_mut() {
            c.early_wait_nanos += nanos;
        }
    });
}

pub(crate) fn route(route: Route) {
    tracing::trace!(target: "firemesh::route", ?route);
    record(|c| *c.routes.entry(route).or_default() += 1);
}

/// Everything counted in this process so far.
pub fn global_counts() -> Counts {
    GLOBAL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default()
}

/// Runs `f` and returns what it (on this thread) counted, whatever other threads do meanwhile.
pub fn count<T>(f: impl FnOnce() -> T) -> (T, Counts) {
    SCOPES.with(|s| s.borrow_mut().push(Counts::default()));
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            // Leaves the scope balanced even if `f` panics.
            let _ = SCOPES.try_with(|s| s.borrow_mut().pop());
        }
    }
    let guard = Pop;
    let ops_before = OPS.with(Cell::get);
    let threads_before = ON_RANK_THREADS.with(Cell::get);
    let comm_before = COMM_NANOS.with(Cell::get);
    let summed_before = SUMMED_ELEMENTS.with(Cell::get);
    let bytes_before = SUMMED_BYTES.with(Cell::get);
    let casts_before = CASTS.with(Cell::get);
    let out = f();
    let mut counts = SCOPES.with(|s| s.borrow().last().cloned().unwrap_or_default());
    counts.ops = OPS.with(Cell::get) - ops_before;
    counts.on_rank_threads = ON_RANK_THREADS.with(Cell::get) - threads_before;
    counts.comm_nanos = COMM_NANOS.with(Cell::get) - comm_before;
    counts.summed_elements = SUMMED_ELEMENTS.with(Cell::get) - summed_before;
    counts.summed_bytes = SUMMED_BYTES.with(Cell::get) - bytes_before;
    let casts = CASTS.with(Cell::get);
    counts.casts_down = casts[0] - casts_before[0];
    counts.casts_up = casts[1] - casts_before[1];
    counts.cast_bytes = casts[2] - casts_before[2];
    counts.casts_reused = casts[3] - casts_before[3];
    counts.parameter_casts = casts[4] - casts_before[4];
    counts.ops_kept_narrow = casts[5] - casts_before[5];
    counts.casts_up_reused = casts[6] - casts_before[6];
    counts.activation_casts_reused = casts[7] - casts_before[7];
    drop(guard);
    (out, counts)
}
