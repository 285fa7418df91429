//! Stopping a run before its end, as a preemptible machine asks (a termination signal, then
//! some seconds' notice): the first SIGTERM or SIGINT asks the run to finish the step it is in,
//! write a checkpoint and end normally; a second signal, or the deadline passing first, ends the
//! process at once, naming the last good checkpoint. The handlers are installed at the program's
//! edge ([`Stop::on_signals`]) and the [`Stop`] handed down to the training loop.

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether the run was asked to stop, and the newest checkpoint it wrote (named if the process
/// has to end at once). Clones share both.
#[derive(Clone, Default)]
pub struct Stop {
    /// Signals received so far.
    signals: Arc<AtomicUsize>,
    last_checkpoint: Arc<Mutex<Option<PathBuf>>>,
}

/// Exit code of a run ended at once by a second signal or the deadline.
pub const FORCED_EXIT_CODE: i32 = 143;

impl Stop {
    /// A stop nobody asks for: the run goes to its end.
    pub fn never() -> Self {
        Self::default()
    }

    /// Asked for by SIGTERM or SIGINT. A second signal, or `deadline` after the first, ends the
    /// process with [`FORCED_EXIT_CODE`] and a line naming the last good checkpoint.
    #[cfg(unix)]
    pub fn on_signals(deadline: Duration) -> Result<Self> {
        let stop = Self::default();
        for signal in [libc::SIGTERM, libc::SIGINT] {
            let signals = stop.signals.clone();
            // SAFETY: the action only increments an atomic counter, which is async-signal-safe;
            // the process's other handlers for these signals are not touched.
            let installed = unsafe {
                signal_hook_registry::register(signal, move || {
                    signals.fetch_add(1, Ordering::SeqCst);
                })
            };
            installed.map_err(|e| Error::io("cannot install a handler for SIGTERM/SIGINT", e))?;
        }
        let watched = stop.clone();
        std::thread::Builder::new()
            .name("firemesh-stop".into())
            .spawn(move || watched.watch(deadline))
            .map_err(|e| Error::io("cannot start the signal watcher", e))?;
        Ok(stop)
    }

    /// As [`Stop::never`] where there are no such signals.
    #[cfg(not(unix))]
    pub fn on_signals(_deadline: Duration) -> Result<Self> {
        Ok(Self::never())
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.signals.load(Ordering::SeqCst) > 0
    }

    /// Records the newest checkpoint on disk.
    pub fn checkpoint_written(&self, path: &Path) {
        *self
            .last_checkpoint
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(path.into());
    }

    /// Ends the process once a second signal comes or `deadline` passes after the first.
    fn watch(&self, deadline: Duration) {
        let mut first = None;
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let signals = self.signals.load(Ordering::SeqCst);
            if signals == 0 {
                continue;
            }
            let since = *first.get_or_insert_with(Instant::now);
            let Some(why) = forced(signals, since.elapsed(), deadline) else {
                continue;
            };
            let last = self
                .last_checkpoint
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let last = match last {
                Some(p) => format!("the last good checkpoint is {}", p.display()),
                None => "no checkpoint was written in this run".into(),
            };
            eprintln!("firemesh: stopped at once by {why}; {last} (resume with --resume)");
            std::process::exit(FORCED_EXIT_CODE);
        }
    }
}

/// Why the process must end at once, if it must: `signals` received so far, the first of them
/// `since` ago (the policy [`Stop::on_signals`] applies).
pub fn forced(signals: usize, since: Duration, deadline: Duration) -> Option<String> {
    if signals > 1 {
        Some("a second signal".into())
    } else if signals == 1 && since >= deadline {
        Some(format!(
            "the stop deadline of {} s passing",
            deadline.as_secs_f64()
        ))
    } else {
        None
    }
}
