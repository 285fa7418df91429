//! Counts of the work placement rules could not avoid: ops that fell back to running replicated,
//! and redistributions between placements. Every event is also a `tracing` event
//! (target `firemesh::fallback` / `firemesh::redistribute`), so a profile shows missing rules.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// What was counted, by op name and by redistribution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Ops with no placement rule for their inputs: inputs were made `Replicated` and the op ran
    /// on every rank.
    pub fallbacks: BTreeMap<&'static str, u64>,
    /// Placement changes, keyed "from->to" ("Partial->Replicated" is an all-reduce), and the
    /// collectives that moved data between devices ("collective: mesh group" or
    /// "collective: portable group").
    pub redistributions: BTreeMap<&'static str, u64>,
}

impl Counts {
    pub fn total_fallbacks(&self) -> u64 {
        self.fallbacks.values().sum()
    }

    pub fn total_redistributions(&self) -> u64 {
        self.redistributions.values().sum()
    }
}

static GLOBAL: Mutex<Option<Counts>> = Mutex::new(None);

thread_local! {
    static SCOPES: RefCell<Vec<Counts>> = const { RefCell::new(Vec::new()) };
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

pub(crate) fn redistribution(kind: &'static str) {
    tracing::trace!(target: "firemesh::redistribute", kind);
    record(|c| *c.redistributions.entry(kind).or_default() += 1);
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
    let out = f();
    let counts = SCOPES.with(|s| s.borrow().last().cloned().unwrap_or_default());
    drop(guard);
    (out, counts)
}
