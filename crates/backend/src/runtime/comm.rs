//! The communication thread: one per process (and one per world link a mesh crosses the
//! processes through), running sums and gathers beside the thread that issues the step's ops:
//! early gradient buckets (`buckets/early.rs`) and parameters gathered ahead of use
//! (`gathers.rs`).

use crate::mesh::{locked, Mesh};
use crate::runtime::lanes::{worker, Job, DEFAULT_POLL};
use crate::stats::{self, Counts};
use firemesh_collective::{panic_message, DeviceStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// What the communication thread counted for one job (its `comm_nanos`: the time inside
/// the sums and gathers, from when every rank's part was there), or why it failed.
pub(crate) type Summed = Result<Counts, String>;

/// A communication thread's queue, with the side channel it crosses the processes through (its
/// address; 0: none).
type CommThread = (usize, Sender<Job>);

/// Runs `job` on the communication thread of `mesh` (one per process, and one per world link
/// a mesh crosses the processes through: the exchanges on one side channel must keep one
/// order), after the jobs queued there before it, issuing to the device stream and crossing
/// the processes through the side channel.
pub(crate) fn on_comm_thread<D>(
    mesh: &Mesh<D>,
    job: impl FnOnce() + Send + 'static,
) -> Receiver<Summed> {
    static QUEUES: OnceLock<Mutex<Vec<CommThread>>> = OnceLock::new();
    let (done, result) = channel();
    let counted: Job = Box::new(move || {
        let (outcome, counts) = stats::count(|| {
            crate::across::on_side_channel(|| {
                DeviceStream::run(|| catch_unwind(AssertUnwindSafe(job)))
            })
        });
        let _ = done.send(outcome.map(|()| counts).map_err(|p| panic_message(&*p)));
    });
    // Keyed by the side channel's address (0: no world).
    let key = mesh
        .side_link()
        .map_or(0, |l| Arc::as_ptr(l) as *const () as usize);
    let mut queues = locked(QUEUES.get_or_init(Default::default));
    let at = match queues.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            let name = format!("firemesh-comm-{}", queues.len());
            queues.push((key, worker(name, DEFAULT_POLL)));
            queues.len() - 1
        }
    };
    queues[at]
        .1
        .send(counted)
        .expect("firemesh: the communication thread has stopped");
    result
}
