//! firemesh-mpi: the processes of a firemesh world joined by MPI, the engine the field trusts
//! to start, bootstrap and (on CPU meshes) carry data between processes. [`Mpi::init`] joins
//! the world `mpirun`, `mpiexec` or `srun` started; its [`MpiLink`] is the
//! [`ProcessLink`] a `Mesh::in_world` takes.
//!
//! MPI is initialised with `MPI_THREAD_SERIALIZED`: the link takes a lock around every call,
//! so any thread may use it, one at a time. Every exchange has a deadline: a process that waits
//! longer for the others (one lost, stopped, or running other code) ends the whole world with
//! `MPI_Abort`, naming itself and the wait, instead of hanging.

use firemesh_collective::{no_answer, wait_for_exchange, LinkError, ProcessLink};
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::request::{Request, Scope};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// MPI, initialised: dropping it finalises MPI (after which no link may be used), which a
/// process must do before it exits normally, or `mpirun` reports the job as failed.
pub struct Mpi {
    _universe: Universe,
    link: Arc<MpiLink>,
}

/// This process's link to the others: MPI's world communicator.
pub struct MpiLink {
    world: Mutex<SimpleCommunicator>,
    process: usize,
    processes: usize,
    /// Longest wait for the other processes at one exchange.
    timeout: Duration,
}

// SAFETY: MPI was initialised with at least `MPI_THREAD_SERIALIZED`, and every use of the
// communicator handle is under the mutex, so calls never overlap; the handle itself is a
// process-wide value (MPI_COMM_WORLD), valid on any thread.
unsafe impl Send for MpiLink {}
unsafe impl Sync for MpiLink {}

impl Mpi {
    /// Initialises MPI and joins its world: the processes the launcher started (one, started
    /// without a launcher); an exchange that waits longer than `timeout` for the others ends
    /// the world. Fails if MPI was initialised already, or cannot serialise calls from several
    /// threads.
    pub fn init(timeout: Duration) -> Result<Self, LinkError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| LinkError("MPI was initialised already in this process".into()))?;
        if threading < Threading::Serialized {
            return Err(LinkError(format!(
                "this MPI library gives {threading:?} thread support; firemesh needs Serialized"
            )));
        }
        let world = universe.world();
        let link = MpiLink {
            process: world.rank() as usize,
            processes: world.size() as usize,
            world: Mutex::new(world),
            timeout,
        };
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
        mpi::environment::library_version().unwrap_or_else(|_| "MPI".into())
    }
}

impl MpiLink {
    /// Waits for `request` ([`wait_for_exchange`]); past the timeout the world ends.
    fn wait<'a, R: ?Sized, S: Scope<'a>>(
        &self,
        request: Request<'a, R, S>,
        world: &SimpleCommunicator,
    ) {
        let mut pending = Some(request);
        let done = wait_for_exchange(self.timeout, || {
            let request = pending.take().expect("tested only while pending");
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
            world.abort(1);
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
        let world = self.world.lock().unwrap_or_else(|p| p.into_inner());
        let len = i32::try_from(bytes.len()).map_err(|_| too_long(bytes.len()))?;
        let mut lens = vec![0i32; n];
        mpi::request::scope(|scope| {
            let request = world.immediate_all_gather_into(scope, &len, &mut lens[..]);
            self.wait(request, &world);
        });
        let starts = starts(&lens)?;
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut all = vec![0u8; total];
        // Every process sees the same lengths: with no byte to move, none calls MPI (OpenMPI
        // refuses the empty buffers' equal dangling addresses as aliased).
        if total > 0 {
            let mut into = PartitionMut::new(&mut all[..], &lens[..], &starts[..]);
            mpi::request::scope(|scope| {
                let request =
                    world.immediate_all_gather_varcount_into(scope, sendable(bytes), &mut into);
                self.wait(request, &world);
            });
        }
        Ok(split(&all, &lens, &starts))
    }

    fn has_all_to_all(&self) -> bool {
        true
    }

    /// MPI's own all-to-all: each part travels to its process only.
    fn all_to_all(&self, parts: &[Vec<u8>], lens: &[usize]) -> Result<Vec<Vec<u8>>, LinkError> {
        let n = self.processes;
        if parts.len() != n || lens.len() != n {
            return Err(LinkError(format!(
                "an all-to-all of {} parts and {} lengths in a world of {n}",
                parts.len(),
                lens.len()
            )));
        }
        let counts = |lens: &mut dyn Iterator<Item = usize>| -> Result<Vec<i32>, LinkError> {
            lens.map(|l| i32::try_from(l).map_err(|_| too_long(l)))
                .collect()
        };
        let send_lens = counts(&mut parts.iter().map(Vec::len))?;
        let recv_lens = counts(&mut lens.iter().copied())?;
        let (send_starts, recv_starts) = (starts(&send_lens)?, starts(&recv_lens)?);
        let send = parts.concat();
        let mut all = vec![0u8; lens.iter().sum()];
        let world = self.world.lock().unwrap_or_else(|p| p.into_inner());
        {
            let from = Partition::new(sendable(&send), &send_lens[..], &send_starts[..]);
            let mut into = PartitionMut::new(&mut all[..], &recv_lens[..], &recv_starts[..]);
            mpi::request::scope(|scope| {
                let request = world.immediate_all_to_all_varcount_into(scope, &from, &mut into);
                self.wait(request, &world);
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
        let parts = [b"xyz".to_vec()];
        assert_eq!(
            link.all_to_all(&parts, &[3]).unwrap(),
            vec![b"xyz".to_vec()]
        );
        assert!(
            link.all_to_all(&parts, &[3, 1]).is_err(),
            "one length per process"
        );
        assert!(
            Mpi::init(Duration::from_secs(1)).is_err(),
            "a second init is refused"
        );
        assert!(!Mpi::library_version().is_empty());
    }
}
