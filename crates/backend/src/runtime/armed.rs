//! What a training step arms for the ops it issues on a mesh, found by the ops: the precision
//! of products and convolutions and the early gradient buckets its backward pass fills. The
//! arming thread keeps its own list of what it armed: nothing of it lives on the mesh, and no
//! thread sees another's. Each entry lives as long as its [`Token`]: dropped anywhere (another
//! thread included), it ends; an inner entry shadows an outer one on the same mesh until it
//! ends. Meshes are named by a [`MeshKey`]; nothing here knows what a mesh is. A setting can
//! own values for as long as it is in force ([`keep_while_autocast`]): autocast's copies of the
//! parameters it cast, freed when the step's scope ends, and its latest casts of activations
//! ([`with_recent_casts`]).

use burn_backend::{DType, FloatDType};
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

/// Names one mesh: its device type and its place in that type's registry (indices repeat
/// across device types).
pub(crate) type MeshKey = (TypeId, u16);

/// One armed setting.
#[derive(Clone)]
pub(crate) enum Setting {
    /// The precision products and convolutions run in.
    Autocast(FloatDType),
    /// Sharded parameters gathered whole for the ops that read them (ZeRO-3), some ahead of
    /// use: the `ParameterGathers`' state, held weakly (its owner keeps it).
    GatherParameters(Weak<dyn Any + Send + Sync>),
    /// An `EarlyBuckets`' state, held weakly (its owner keeps it; an ended entry must not);
    /// `None` arms none (shadowing an outer one).
    Early(Option<Weak<dyn Any + Send + Sync>>),
}

struct Entry {
    mesh: MeshKey,
    setting: Setting,
    alive: Weak<Kept>,
}

/// What an armed setting owns while it is in force, each value beside the owner it serves
/// (held weakly): dropped with its [`Token`], or once its owner is gone; and, for autocast,
/// its latest casts of activations ([`with_recent_casts`]).
#[derive(Default)]
struct Kept(Mutex<Vec<KeptValue>>, Mutex<RecentCasts>);

/// The latest casts of activations an armed precision made, newest last, each under the name
/// its operand's clones share and the dtype it was cast to (`crate::autocast`). Dropped with
/// the precision's [`Token`].
#[derive(Default)]
pub(crate) struct RecentCasts(
    pub(crate) std::collections::VecDeque<((u64, DType), Box<dyn Any + Send>)>,
);

/// A kept value and the owner it serves.
type KeptValue = (Weak<dyn Any + Send + Sync>, Box<dyn Any + Send>);

thread_local! {
    /// What this thread armed, innermost last.
    static ARMED: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    /// Set while an op that keeps parameters sharded runs (see [`keeping_parameters_sharded`]).
    static KEEP_SHARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keeps one armed setting in force; dropping it (on any thread) ends it.
#[must_use = "the setting ends when this is dropped"]
pub(crate) struct Token {
    _alive: Arc<Kept>,
}

impl Token {
    /// The values this setting owns whose owners are alive (see [`keep_while_autocast`]).
    pub(crate) fn kept(&self) -> usize {
        let mut kept = (self._alive.0)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|(owner, _)| owner.strong_count() > 0);
        kept.len()
    }
}

/// Arms `setting` on the mesh `mesh` for the calling thread.
pub(crate) fn arm(mesh: MeshKey, setting: Setting) -> Token {
    let alive = Arc::new(Kept::default());
    let entry = Entry {
        mesh,
        setting,
        alive: Arc::downgrade(&alive),
    };
    ARMED.with_borrow_mut(|armed| {
        armed.retain(|e| e.alive.strong_count() > 0);
        armed.push(entry);
    });
    Token { _alive: alive }
}

/// The innermost setting in force that the calling thread armed on `mesh` and `pick` takes.
fn innermost<T>(mesh: MeshKey, pick: impl Fn(&Entry) -> Option<T>) -> Option<T> {
    ARMED
        .try_with(|armed| {
            let armed = armed.borrow();
            armed
                .iter()
                .rev()
                .filter(|e| e.mesh == mesh && e.alive.strong_count() > 0)
                .find_map(pick)
        })
        .ok()
        .flatten()
}

/// Gives `value` to the precision the calling thread armed on `mesh`, to own until it ends
/// (the step's scope, or the `Autocasting` guard) or until nothing holds `owner` (the tensors
/// that could read `value`) any more, whichever comes first: a guard kept around many steps
/// keeps no value of a step that is over. `false` (and `value` dropped) where none is armed.
pub(crate) fn keep_while_autocast(
    mesh: MeshKey,
    owner: Weak<dyn Any + Send + Sync>,
    value: Box<dyn Any + Send>,
) -> bool {
    let Some(owner_of_setting) = autocast_kept(mesh) else {
        return false;
    };
    let mut kept = (owner_of_setting.0)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    kept.retain(|(owner, _)| owner.strong_count() > 0);
    kept.push((owner, value));
    true
}

/// Runs `f` on the latest casts of activations of the precision the calling thread armed on
/// `mesh`; `None` where none is armed.
pub(crate) fn with_recent_casts<T>(
    mesh: MeshKey,
    f: impl FnOnce(&mut RecentCasts) -> T,
) -> Option<T> {
    let kept = autocast_kept(mesh)?;
    let mut recent = kept
        .1
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(f(&mut recent))
}

/// What the precision the calling thread armed on `mesh` owns, if one is armed.
fn autocast_kept(mesh: MeshKey) -> Option<Arc<Kept>> {
    innermost(mesh, |e| match e.setting {
        Setting::Autocast(_) => e.alive.upgrade(),
        _ => None,
    })
}

/// The precision the calling thread armed on `mesh`, if any.
pub(crate) fn autocast(mesh: MeshKey) -> Option<FloatDType> {
    innermost(mesh, |e| match e.setting {
        Setting::Autocast(dtype) => Some(dtype),
        _ => None,
    })
}

/// The early buckets the calling thread armed on `mesh`, if any (and still owned).
pub(crate) fn early_buckets(mesh: MeshKey) -> Option<Arc<dyn Any + Send + Sync>> {
    innermost(mesh, |e| match &e.setting {
        Setting::Early(session) => Some(session.clone()),
        _ => None,
    })
    .flatten()
    .and_then(|session| session.upgrade())
}

/// Whether the calling thread armed the gathering of sharded parameters on `mesh`.
pub(crate) fn gathers_parameters(mesh: MeshKey) -> bool {
    innermost(mesh, |e| {
        matches!(e.setting, Setting::GatherParameters(_)).then_some(())
    })
    .is_some()
}

/// The parameter gathers the calling thread armed on `mesh`, if any (and still owned).
pub(crate) fn parameter_gathers(mesh: MeshKey) -> Option<Arc<dyn Any + Send + Sync>> {
    innermost(mesh, |e| match &e.setting {
        Setting::GatherParameters(session) => Some(session.clone()),
        _ => None,
    })
    .and_then(|session| session.upgrade())
}

/// Runs `f`, an op that casts or moves a parameter's blocks (a cast, a transpose), without
/// gathering sharded parameters: the result is a sharded parameter still, which the op that
/// computes on it gathers, and which autodiff may keep for the backward pass at 1/N the bytes.
pub(crate) fn keeping_parameters_sharded<T>(f: impl FnOnce() -> T) -> T {
    let before = KEEP_SHARDED.replace(true);
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            KEEP_SHARDED.set(self.0);
        }
    }
    let _restore = Restore(before);
    f()
}

/// Whether the op the calling thread runs keeps parameters sharded.
pub(crate) fn keeps_parameters_sharded() -> bool {
    KEEP_SHARDED.get()
}
