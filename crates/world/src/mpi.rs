//! The processes of a world joined by MPI (the `mpi` feature), the engine the field trusts
//! to start, bootstrap and (on CPU meshes) carry data between processes. [`Mpi::init`] joins
//! the world `mpirun`, `mpiexec` or `srun` started; its [`MpiLink`] is the
//! [`ProcessLink`] a `Mesh::in_world` takes.
//!
//! MPI is initialised with `MPI_THREAD_SERIALIZED`: one lock, shared by the link and its side
//! channel, is held around every MPI call, so any thread may call MPI, one at a time. An
//! exchange is started, then tested under the lock until it is done, the lock let go between
//! tests: the world's link (MPI's world communicator) and its side channel (a duplicate of it,
//! for the early gradient buckets' communication thread) exchange at the same time, each
//! communicator keeping its own order. Every exchange has a deadline: a process that waits
//! longer for the others (one lost, stopped, or running other code) ends the whole world with
//! `MPI_Abort`, naming itself and the wait, instead of hanging.

use crate::link::{check_all_to_all, no_answer, wait_for_exchange, LinkError, ProcessLink};
use ::mpi::collective::CommunicatorCollectives;
use ::mpi::datatype::{Partition, PartitionMut};
use ::mpi::environment::Universe;
use ::mpi::request::{Request, Scope};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use ::mpi::Threading;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// MPI, initialised: dropping it finalises MPI (after which no link may be used), which a
/// process must do before it exits normally, or `mpirun` reports the job as failed.
pub struct Mpi {
    _universe: Universe,
    link: Arc<MpiLink>,
}

/// This process's link to the others: MPI's world communicator, or (its side channel) a
/// duplicate of it.
pub struct MpiLink {
    /// Never freed by the link: a link may outlive [`Mpi`] (a mesh keeps its link for the
    /// life of the process), and freeing a duplicate after `MPI_Finalize` aborts; finalising
    /// releases it.
    comm: ManuallyDrop<SimpleCommunicator>,
    /// Held around every MPI call, by this link and its side channel alike.
    calls: Arc<Mutex<()>>,
    process: usize,
    processes: usize,
    /// Longest wait for the other processes at one exchange.
    timeout: Duration,
    /// The duplicate communicator ([`ProcessLink::side_channel`]); `None` on the side channel.
    side: Option<Arc<MpiLink>>,
}

// SAFETY: MPI was initialised with at least `MPI_THREAD_SERIALIZED`, and every MPI call on the
// communicator handle (or on a request made from it) is made under `calls`, which the link
// shares with its side channel, so calls never overlap; the handle is a process-wide value
// (MPI_COMM_WORLD or a duplicate of it), valid on any thread.
unsafe impl Send for MpiLink {}
unsafe impl Sync for MpiLink {}

impl Mpi {
    /// Initialises MPI and joins its world: the processes the launcher started (one, started
    /// without a launcher); an exchange that waits longer than `timeout` for the others ends
    /// the world. Fails if MPI was initialised already, or cannot serialise calls from several
    /// threads.
    pub fn init(timeout: Duration) -> Result<Self, LinkError> {
        let (universe, threading) = ::mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| LinkError("MPI was initialised already in this process".into()))?;
        if threading < Threading::Serialized {
            return Err(LinkError(format!(
                "this MPI library gives {threading:?} thread support; firemesh needs Serialized"
            )));
        }
        let world = universe.world();
        let side = world.duplicate();
        let calls = Arc::new(Mutex::new(()));
        let link = |comm: SimpleCommunicator, side| MpiLink {
            process: comm.rank() as usize,
            processes: comm.size() as usize,
            comm: ManuallyDrop::new(comm),
            calls: calls.clone(),
            timeout,
            side,
        };
        let side = Arc::new(link(side, None));
        let link = link(world, Some(side));
        Ok(Self {
            _universe: universe,
            link: Arc::new(link),
        })
    }

    /// The link, for `Mesh::in_world` and for the run's own agreements.
    pub fn link(&self) -> Arc<MpiLink> {
        self.link.clone()
    }

    /// The MPI library's version line.
    pub fn library_version() -> String {
        ::mpi::environment::library_version().unwrap_or_else(|_| "MPI".into())
    }
}

impl Drop for Mpi {
    /// Takes the call lock for good before MPI is finalised (the universe drops after this):
    /// a thread still exchanging (an early bucket's, while the step thread unwinds) must not
    /// call MPI during or after `MPI_Finalize`; it waits on the lock until the process ends.
    fn drop(&mut self) {
        std::mem::forget(self.link.calling());
    }
}

impl MpiLink {
    /// Holds the lock every MPI call is made under.
    fn calling(&self) -> std::sync::MutexGuard<'_, ()> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `request` ([`wait_for_exchange`]), testing it under the call lock and letting
    /// the lock go between tests; past the timeout the world ends.
    fn wait<'a, R: ?Sized, S: Scope<'a>>(&self, request: Request<'a, R, S>) {
        let mut pending = Some(request);
        let done = wait_for_exchange(self.timeout, || {
            let request = pending.take().expect("tested only while pending");
            let _call = self.calling();
            match request.test() {
                Ok(_) => Ok(true),
                Err(request) => {
                    pending = Some(request);
                    Ok(false)
                }
            }
        });
        if done != Ok(true) {
            let line = format!(
                "firemesh: {}; ending the world\n",
                no_answer(self.process, self.processes, self.timeout)
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            let _call = self.calling();
            self.comm.abort(1);
        }
    }
}

impl ProcessLink for MpiLink {
    fn process(&self) -> usize {
        self.process
    }

    fn processes(&self) -> usize {
        self.processes
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LinkError> {
        let n = self.processes;
        let len = i32::try_from(bytes.len()).map_err(|_| too_long(bytes.len()))?;
        let mut lens = vec![0i32; n];
        ::mpi::request::scope(|scope| {
            let request = {
                let _call = self.calling();
                self.comm
                    .immediate_all_gather_into(scope, &len, &mut lens[..])
            };
            self.wait(request);
        });
        let starts = starts(&lens)?;
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut all = vec![0u8; total];
        // Every process sees the same lengths: with no byte to move, none calls MPI (OpenMPI
        // refuses the empty buffers' equal dangling addresses as aliased).
        if total > 0 {
            let mut into = PartitionMut::new(&mut all[..], &lens[..], &starts[..]);
            ::mpi::request::scope(|scope| {
                let request = {
                    let _call = self.calling();
                    (self.comm).immediate_all_gather_varcount_into(
                        scope,
                        sendable(bytes),
                        &mut into,
                    )
                };
                self.wait(request);
            });
        }
        Ok(split(&all, &lens, &starts))
    }

    fn has_all_to_all(&self) -> bool {
        true
    }

    /// The duplicate of the world communicator made at [`Mpi::init`].
    fn side_channel(&self) -> Option<Arc<dyn ProcessLink>> {
        self.side.clone().map(|side| side as Arc<dyn ProcessLink>)
    }

    /// MPI's own all-to-all: each part travels to its process only.
    fn all_to_all(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, LinkError> {
        check_all_to_all(self.process, self.processes, send, send_lens, recv_lens)?;
        let counts = |lens: &[usize]| -> Result<Vec<i32>, LinkError> {
            (lens.iter())
                .map(|&l| i32::try_from(l).map_err(|_| too_long(l)))
                .collect()
        };
        let (send_lens, recv_lens) = (counts(send_lens)?, counts(recv_lens)?);
        let (send_starts, recv_starts) = (starts(&send_lens)?, starts(&recv_lens)?);
        let mut all = vec![0u8; recv_lens.iter().map(|&l| l as usize).sum()];
        {
            let from = Partition::new(sendable(send), &send_lens[..], &send_starts[..]);
            let mut into = PartitionMut::new(&mut all[..], &recv_lens[..], &recv_starts[..]);
            ::mpi::request::scope(|scope| {
                let request = {
                    let _call = self.calling();
                    (self.comm).immediate_all_to_all_varcount_into(scope, &from, &mut into)
                };
                self.wait(request);
            });
        }
        Ok(split(&all, &recv_lens, &recv_starts))
    }
}

fn too_long(len: usize) -> LinkError {
    LinkError(format!("{len} bytes: MPI counts are 32-bit"))
}

/// Where each of the buffers of `lens` starts, laid end to end.
fn starts(lens: &[i32]) -> Result<Vec<i32>, LinkError> {
    let mut starts = Vec::with_capacity(lens.len());
    let mut total = 0i64;
    for &l in lens {
        starts.push(i32::try_from(total).map_err(|_| too_long(total as usize))?);
        total += i64::from(l);
    }
    i32::try_from(total).map_err(|_| too_long(total as usize))?;
    Ok(starts)
}

/// The buffers of `lens` at `starts` in `all`.
fn split(all: &[u8], lens: &[i32], starts: &[i32]) -> Vec<Vec<u8>> {
    lens.iter()
        .zip(starts)
        .map(|(&l, &s)| all[s as usize..(s + l) as usize].to_vec())
        .collect()
}

/// `bytes`, or where empty a slice with an address of its own (OpenMPI refuses two empty
/// buffers' equal dangling addresses as aliased).
fn sendable(bytes: &[u8]) -> &[u8] {
    static NOTHING: [u8; 1] = [0];
    if bytes.is_empty() {
        &NOTHING[..0]
    } else {
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Started without a launcher, MPI's world is this one process (a singleton).
    #[test]
    fn without_a_launcher_the_world_is_this_process_and_gathers_its_own_bytes() {
        let mpi = Mpi::init(Duration::from_secs(10)).expect("MPI starts as a singleton");
        let link = mpi.link();
        assert_eq!((link.process(), link.processes()), (0, 1));
        assert_eq!(link.all_gather(b"abc").unwrap(), vec![b"abc".to_vec()]);
        assert_eq!(link.all_gather(b"").unwrap(), vec![Vec::<u8>::new()]);
        assert_eq!(
            link.all_to_all(b"xyz", &[3], &[3]).unwrap(),
            vec![b"xyz".to_vec()]
        );
        assert!(
            link.all_to_all(b"xyz", &[3], &[3, 1]).is_err(),
            "one length per process"
        );
        assert!(
            link.all_to_all(b"xyz", &[2], &[2]).is_err(),
            "parts that add up to the buffer"
        );
        let side = link.side_channel().expect("MPI links have a side channel");
        assert_eq!((side.process(), side.processes()), (0, 1));
        assert_eq!(side.all_gather(b"side").unwrap(), vec![b"side".to_vec()]);
        assert!(side.side_channel().is_none());
        assert!(
            Mpi::init(Duration::from_secs(1)).is_err(),
            "a second init is refused"
        );
        assert!(!Mpi::library_version().is_empty());
    }
}
