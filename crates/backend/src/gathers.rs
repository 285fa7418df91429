//! ZeRO-3's parameter gathers, issued ahead of use.
//!
//! Under ZeRO-3 every op that reads a sharded parameter gathers it whole first
//! (`exec/operands.rs`, `settled`). Gathered when the op runs, the gather stalls the step; so a
//! step's [`ParameterGathers`] remembers the order in which the step before gathered its
//! parameters, and while the step gathers one, it issues the next ones on the communication
//! thread (`runtime/comm.rs`), beside the ops that follow: the next gather of that order, and
//! the ones after it until `ahead_bytes` are in flight (as DeepSpeed's prefetch bucket; PyTorch
//! FSDP prefetches one unit). An op that finds its parameter gathered ahead takes that copy
//! (waiting for it if it is still under way); any other gathers it then.
//!
//! What is gathered ahead is the parameter itself, as its model holds it (its blocks cast to the
//! dtype the op reads it in), keyed by its place in its model and that dtype: an op reads a
//! view of it (a transpose, a reshape that adds unit dims: what autodiff kept), made by layout
//! ops that keep it sharded. Each such view carries its [`Origin`]: the parameter and the layout
//! ops that made it, replayed on the gathered copy (the same values as a gather of the view's
//! blocks: layout ops move values without computing on them).
//!
//! The gathers of a step are the same at every step of a training loop (the same ops on the
//! same parameters), so the order recorded by one step serves the next; a step that reads its
//! parameters in another order just gathers more at use. Only parameters marked with their
//! place ([`ShardedTensor::mark_parameter_at`]) are gathered ahead. Across the processes of a
//! world the communication thread crosses them through the link's side channel, as early
//! buckets do; where the link has none, every gather is made at use.

use crate::kind::{FloatKind, Kind};
use crate::mesh::{locked, Mesh};
use crate::origin::{Layout, Origin};
use crate::placement::Placement;
use crate::redistribute::apply_want;
use crate::rules::Want;
use crate::runtime::armed::{self, MeshKey, Setting, Token};
use crate::runtime::comm::{on_comm_thread, Summed};
use crate::stats;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, DType, TensorMetadata};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};

type F<B> = ShardedTensor<B, FloatKind>;

/// A parameter gathered in a dtype: its place in its model and the dtype.
type Key = (u64, DType);

/// A training loop's parameter gathers under ZeRO-3 (see the module's documentation): the order
/// of the last step's gathers, the parameters of this step, and the gathers issued ahead of
/// use. A loop owns one in its `StepScope` (`StepScope::set_parameter_gathers`); clones share it.
#[derive(Clone)]
pub struct ParameterGathers {
    session: Arc<Session>,
}

struct Session {
    ahead_bytes: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The last closed step's gathers, in order.
    order: Vec<Key>,
    /// This step's, so far.
    seen: Vec<Key>,
    /// Where this step has got to in `order`.
    cursor: usize,
    /// This step's parameters by place, each with its mark (`Origin::mark`) and as an `F<B>`,
    /// registered as they are marked (the last marked at a place).
    parameters: HashMap<u64, (u64, Box<dyn Any + Send>)>,
    /// Gathers issued ahead, not taken yet.
    ahead: Vec<(Key, InFlight)>,
    bytes_ahead: usize,
    /// Gathers of this step taken from ahead.
    taken: usize,
}

/// A gather issued ahead: the mark of the parameter gathered, its bytes (whole, on one rank),
/// the gathered `F<B>` when it is there, and what the communication thread counted.
struct InFlight {
    mark: u64,
    bytes: usize,
    result: Receiver<Box<dyn Any + Send>>,
    done: Receiver<Summed>,
}

impl ParameterGathers {
    /// Gathers issued ahead of use until `ahead_bytes` (whole parameters' bytes, on one rank)
    /// are in flight, and always the next one; 0: each made when its op runs.
    pub fn new(ahead_bytes: usize) -> Self {
        Self {
            session: Arc::new(Session {
                ahead_bytes,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Arms the gathering of sharded parameters on `mesh` for the calling thread, with these
    /// gathers ahead of use.
    pub(crate) fn arm_on(&self, mesh: MeshKey) -> Token {
        let session: Arc<dyn Any + Send + Sync> = self.session.clone();
        armed::arm(mesh, Setting::GatherParameters(Arc::downgrade(&session)))
    }

    /// Ends a step: waits for the gathers issued ahead that no op took (their counts join the
    /// calling thread's), forgets the step's parameters, and keeps the order of its gathers for
    /// the next step (a step that gathered nothing keeps the last order). Returns how many of
    /// the step's gathers were taken from ahead.
    pub fn close(&self) -> usize {
        self.end(true)
    }

    /// Starts a step: ends one left open (a step that failed half-way) without keeping its
    /// order, which may stop short.
    pub fn begin(&self) {
        self.end(false);
    }

    fn end(&self, keep_order: bool) -> usize {
        let (unused, taken) = {
            let mut state = locked(&self.session.state);
            let state = &mut *state;
            let seen = std::mem::take(&mut state.seen);
            if keep_order && !seen.is_empty() {
                state.order = seen;
            }
            state.cursor = 0;
            state.parameters.clear();
            state.bytes_ahead = 0;
            (
                std::mem::take(&mut state.ahead),
                std::mem::take(&mut state.taken),
            )
        };
        for (_, flight) in unused {
            let _ = flight.result.recv();
            counted(&flight.done);
        }
        taken
    }
}

/// Keeps parameter `t` (at place `index` of its model, marked `mark`) for the gathers the
/// calling thread armed on its mesh, if any, for the rest of their step.
pub(crate) fn register<B: Backend>(t: &F<B>, index: u64, mark: u64) {
    if let Some(session) = session_of(&t.mesh) {
        locked(&session.state)
            .parameters
            .insert(index, (mark, Box::new(t.clone())));
    }
}

/// The gathers armed on `mesh` by the calling thread.
fn session_of<D>(mesh: &Mesh<D>) -> Option<Arc<Session>> {
    armed::parameter_gathers(mesh.key()).and_then(|s| s.downcast::<Session>().ok())
}

/// Sharded parameter (or view of one) `t` gathered whole for the op that reads it: its
/// parameter gathered (taken from ahead where it was gathered so, else now) and moved as `t`
/// was made from it; the next gathers are issued ahead. Either way the op gets the same
/// tensor, values and layout, as a replicated parameter's view. A tensor whose parameter these
/// gathers do not hold (not marked in this step, or another model's at the same place) is
/// gathered from its own blocks.
pub(crate) fn gathered<B: Backend>(t: F<B>) -> F<B> {
    let (Some(session), Some(origin)) = (session_of(&t.mesh), t.origin().cloned()) else {
        return apply_want(t, &Want::Replicated);
    };
    let key = (origin.index, t.dtype());
    let flight = session.take(key, origin.mark);
    let parameter = session.parameter::<B>(origin.index, origin.mark);
    session.issue_after::<B>(key, &t.mesh);
    let whole = match (flight, parameter) {
        (Some(flight), _) => {
            let ready = flight.result.try_recv();
            let waited = ready.is_err();
            let whole = ready
                .or_else(|_| flight.result.recv())
                .ok()
                .and_then(|w| w.downcast::<F<B>>().ok());
            counted(&flight.done);
            stats::parameter_gathered_ahead(waited);
            *whole.expect("a gather that failed panics in `counted`")
        }
        (None, Some(parameter)) => whole_parameter(parameter, key.1),
        (None, None) => return apply_want(t, &Want::Replicated),
    };
    let view = origin.layout.iter().fold(whole, |w, op| replayed(op, w));
    match view.shape() == t.shape() {
        true => view,
        false => apply_want(t, &Want::Replicated),
    }
}

/// [`gathered`] for a tensor of any kind: only float tensors are parameters with an origin.
pub(crate) fn gathered_parameter<B: Backend, K: Kind<B>>(
    t: ShardedTensor<B, K>,
) -> ShardedTensor<B, K> {
    if TypeId::of::<K>() != TypeId::of::<FloatKind>() {
        return apply_want(t, &Want::Replicated);
    }
    let float: Box<dyn Any> = Box::new(t);
    let float = float.downcast::<F<B>>().expect("a float tensor");
    let out: Box<dyn Any> = Box::new(gathered(*float));
    *out.downcast::<ShardedTensor<B, K>>()
        .expect("the operand's kind")
}

/// Layout op `op` on `t`, whole on every rank: the op on each rank's part, as the placement
/// rules run it on a `Replicated` tensor.
fn replayed<B: Backend>(op: &Layout, t: F<B>) -> F<B> {
    let (parts, placement, mesh) = t.into_split();
    debug_assert_eq!(placement, Placement::Replicated);
    let parts = parts.into_iter().map(|p| op.applied::<B>(p)).collect();
    ShardedTensor::new(parts, placement, mesh)
}

impl<B: Backend> ShardedTensor<B, FloatKind> {
    /// [`ShardedTensor::mark_parameter`], for the parameter at place `index` of its model (the
    /// order a module visits its parameters: the same at every step). Under ZeRO-3 the step's
    /// gathers of it are then issued ahead of use, in the order the step before needed them
    /// (`StepScope::set_parameter_gathers`): the gathers the calling thread armed on this mesh
    /// keep it for this step. firemesh's `Trainer` marks its model so before every step.
    pub fn mark_parameter_at(&mut self, index: u64) {
        self.mark_parameter();
        let origin = Origin::parameter(index);
        let mark = origin.mark;
        self.set_origin(Some(Arc::new(origin)));
        register(self, index, mark);
    }
}

/// Counts here what the communication thread counted for a gather; raises its panic.
fn counted(done: &Receiver<Summed>) {
    match done.recv() {
        Ok(Ok(counts)) => stats::gathered_elsewhere(&counts),
        Ok(Err(message)) => panic!("firemesh: gathering a parameter ahead of use: {message}"),
        Err(_) => panic!("firemesh: the communication thread stopped"),
    }
}

impl Session {
    /// This step's parameter at place `index`, if the one registered there is marked `mark`.
    fn parameter<B: Backend>(&self, index: u64, mark: u64) -> Option<F<B>> {
        let state = locked(&self.state);
        let (registered, parameter) = state.parameters.get(&index)?;
        (*registered == mark)
            .then(|| parameter.downcast_ref::<F<B>>().cloned())
            .flatten()
    }

    /// The gather of `key` issued ahead for the parameter marked `mark`, if there is one.
    fn take(&self, key: Key, mark: u64) -> Option<InFlight> {
        let mut state = locked(&self.state);
        let at = (state.ahead.iter()).position(|(k, f)| *k == key && f.mark == mark)?;
        let (_, flight) = state.ahead.swap_remove(at);
        state.bytes_ahead -= flight.bytes;
        state.taken += 1;
        Some(flight)
    }

    /// Records the gather of `key`, and issues the gathers that followed it in the last step:
    /// the next one, and more until `ahead_bytes` are in flight.
    fn issue_after<B: Backend>(&self, key: Key, mesh: &Mesh<B::Device>) {
        let crossing = mesh.processes() == 1 || mesh.side_link().is_some();
        if self.ahead_bytes == 0 || !crossing {
            return;
        }
        let mut state = locked(&self.state);
        let state = &mut *state;
        state.seen.push(key);
        let Some(at) = (state.cursor..state.order.len()).find(|&i| state.order[i] == key) else {
            return;
        };
        state.cursor = at + 1;
        for i in at + 1..state.order.len() {
            let next = state.order[i];
            if i > at + 1 && state.bytes_ahead >= self.ahead_bytes {
                break;
            }
            if state.ahead.iter().any(|(k, _)| *k == next) {
                continue;
            }
            let Some((mark, parameter)) = state.parameters.get(&next.0) else {
                continue;
            };
            let Some(parameter) = parameter.downcast_ref::<F<B>>() else {
                continue;
            };
            let flight = issue(parameter.clone(), next.1, *mark);
            state.bytes_ahead += flight.bytes;
            state.ahead.push((next, flight));
        }
    }
}

/// Gathers `parameter` (marked `mark`), its blocks cast to `dtype`, on the communication thread.
fn issue<B: Backend>(parameter: F<B>, dtype: DType, mark: u64) -> InFlight {
    let bytes = parameter.shape().num_elements() * dtype.size();
    let mesh = parameter.mesh.clone();
    let (send, result) = channel();
    let done = on_comm_thread(&mesh, move || {
        let _span = tracing::debug_span!(target: "firemesh::comm", "parameter ahead").entered();
        let whole: Box<dyn Any + Send> = Box::new(whole_parameter(parameter, dtype));
        let _ = send.send(whole);
    });
    InFlight {
        mark,
        bytes,
        result,
        done,
    }
}

/// `parameter` whole on every rank, in `dtype`: its blocks cast, then gathered.
fn whole_parameter<B: Backend>(parameter: F<B>, dtype: DType) -> F<B> {
    let blocks = match parameter.dtype() == dtype {
        true => parameter,
        false => {
            let (parts, placement, mesh) = parameter.into_split();
            let to = dtype.into();
            let parts = parts.into_iter().map(|p| B::float_cast(p, to)).collect();
            ShardedTensor::new(parts, placement, mesh)
        }
    };
    debug_assert!(blocks.placement() != Placement::Replicated);
    apply_want(blocks, &Want::Replicated)
}
