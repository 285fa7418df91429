//! firemesh-world: the processes of a firemesh world, in one room.
//!
//! A mesh's ranks live in one process; a world is several processes (one per node, or several
//! on one machine) training one run, each on its own ranks. Inside a process the ranks sum
//! through firemesh's collectives; between processes one buffer per process crosses a
//! [`ProcessLink`]. This crate holds everything about the processes:
//!
//! - the link ([`ProcessLink`], `link.rs`) and its transports: threads of one process standing
//!   in for processes ([`ThreadWorld`], the tests' world), MPI ([`mpi`], the `mpi` feature) and
//!   NCCL ([`nccl`], the `nccl` feature, EXPERIMENTAL: it has not run on GPUs yet);
//! - the world a launcher started, read from its variables ([`World::from_env`]), and the join
//!   ([`World::join`], [`World::join_by_nccl`]);
//! - what the joined processes agree on ([`Processes`]: the same settings, one verdict, a stop);
//! - the exchanges of the sums and gathers across the processes ([`exchange`]: a tensor's bytes
//!   whole, by blocks, or in byte ranges). The additions stay with the tensors they add:
//!   `firemesh-backend`'s `across.rs` adds each process's buffer on its devices, in process
//!   order, under its two-level route (`route/in_world.rs`: inside the process, across the
//!   processes, inside again), reached through `Mesh::in_world`.

mod error;
pub mod exchange;
mod join;
mod launcher;
mod link;
mod processes;
mod threads;

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;

pub use error::{Error, Result};
pub use join::Joined;
pub use launcher::{Launcher, World};
pub use link::{check_all_to_all, no_answer, wait_for_exchange, LinkError, ProcessLink};
pub use processes::{Processes, Verdict};
pub use threads::{ThreadLink, ThreadWorld};
