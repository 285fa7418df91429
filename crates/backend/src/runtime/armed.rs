//! What a training step arms for the ops it issues on a mesh, found by the ops: the precision
//! of products and convolutions and the early gradient buckets its backward pass fills. The
//! arming thread keeps its own list of what it armed: nothing of it lives on the mesh, and no
//! thread sees another's. Each entry lives as long as its [`Token`]: dropped anywhere (another
//! thread included), it ends; an inner entry shadows an outer one on the same mesh until it
//! ends. Meshes are named by their index; nothing here knows what a mesh is.

use burn_backend::FloatDType;
use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// One armed setting.
#[derive(Clone)]
pub(crate) enum Setting {
    /// The precision products and convolutions run in.
    Autocast(FloatDType),
    /// An `EarlyBuckets`' state; `None` arms none (shadowing an outer one).
    Early(Option<Arc<dyn Any + Send + Sync>>),
}

struct Entry {
    mesh: u16,
    setting: Setting,
    alive: Weak<()>,
}

thread_local! {
    /// What this thread armed, innermost last.
    static ARMED: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// Keeps one armed setting in force; dropping it (on any thread) ends it.
#[must_use = "the setting ends when this is dropped"]
pub(crate) struct Token {
    _alive: Arc<()>,
}

/// Arms `setting` on the mesh with index `mesh` for the calling thread.
pub(crate) fn arm(mesh: u16, setting: Setting) -> Token {
    let alive = Arc::new(());
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
fn innermost<T>(mesh: u16, pick: impl Fn(&Setting) -> Option<T>) -> Option<T> {
    ARMED
        .try_with(|armed| {
            let armed = armed.borrow();
            armed
                .iter()
                .rev()
                .filter(|e| e.mesh == mesh && e.alive.strong_count() > 0)
                .find_map(|e| pick(&e.setting))
        })
        .ok()
        .flatten()
}

/// The precision the calling thread armed on `mesh`, if any.
pub(crate) fn autocast(mesh: u16) -> Option<FloatDType> {
    innermost(mesh, |s| match s {
        Setting::Autocast(dtype) => Some(*dtype),
        Setting::Early(_) => None,
    })
}

/// The early buckets the calling thread armed on `mesh`, if any.
pub(crate) fn early_buckets(mesh: u16) -> Option<Arc<dyn Any + Send + Sync>> {
    innermost(mesh, |s| match s {
        Setting::Early(session) => Some(session.clone()),
        Setting::Autocast(_) => None,
    })
    .flatten()
}
