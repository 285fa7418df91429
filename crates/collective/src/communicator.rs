//! One handle per rank, for programs that run each rank on its own thread (as NCCL does):
//! every rank calls the same collective; the last to arrive runs it for all. A rank that
//! fails, disagrees or never comes makes the collective fail on every rank within the timeout.

use crate::{CollectiveError, Collectives, ReduceOp, Result};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a rank asks the group to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    AllReduce(ReduceOp),
    ReduceScatter(ReduceOp),
    AllGather,
    Broadcast(usize),
}

struct State<B> {
    round: u64,
    slots: Vec<Option<(Request, B)>>,
    done: HashMap<u64, Vec<Option<Result<B>>>>,
}

struct Shared<G: Collectives> {
    group: G,
    timeout: Duration,
    state: Mutex<State<G::Buf>>,
    arrived: Condvar,
}

/// Rank `rank`'s handle on a group. Move each into the thread that drives that rank.
pub struct Communicator<G: Collectives> {
    shared: Arc<Shared<G>>,
    rank: usize,
}

impl<G: Collectives> Communicator<G> {
    /// One communicator per rank of `group`; ranks wait for each other at most `timeout`.
    pub fn split(group: G, timeout: Duration) -> Vec<Self> {
        let n = group.size();
        let shared = Arc::new(Shared {
            group,
            timeout,
            state: Mutex::new(State {
                round: 0,
                slots: (0..n).map(|_| None).collect(),
                done: HashMap::new(),
            }),
            arrived: Condvar::new(),
        });
        (0..n)
            .map(|rank| Self {
                shared: shared.clone(),
                rank,
            })
            .collect()
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.shared.group.size()
    }

    /// This rank's part of an all-reduce; returns this rank's reduced buffer.
    pub fn all_reduce(&self, buf: G::Buf, op: ReduceOp) -> Result<G::Buf> {
        self.join(Request::AllReduce(op), buf)
    }

    /// This rank's part of a reduce-scatter; returns this rank's reduced part.
    pub fn reduce_scatter(&self, buf: G::Buf, op: ReduceOp) -> Result<G::Buf> {
        self.join(Request::ReduceScatter(op), buf)
    }

    /// This rank's part of an all-gather; returns the concatenation of all shards.
    pub fn all_gather(&self, shard: G::Buf) -> Result<G::Buf> {
        self.join(Request::AllGather, shard)
    }

    /// This rank's part of a broadcast from `root`; returns the root's data.
    pub fn broadcast(&self, buf: G::Buf, root: usize) -> Result<G::Buf> {
        self.join(Request::Broadcast(root), buf)
    }

    fn join(&self, request: Request, buf: G::Buf) -> Result<G::Buf> {
        let s = &self.shared;
        let mut state = s.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.slots[self.rank].is_some() {
            return Err(CollectiveError::RankJoinedTwice { rank: self.rank });
        }
        let round = state.round;
        state.slots[self.rank] = Some((request, buf));
        if state.slots.iter().all(Option::is_some) {
            let entries: Vec<(Request, G::Buf)> = state
                .slots
                .iter_mut()
                .map(|e| e.take().expect("all present"))
                .collect();
            let results = run(&s.group, entries);
            finish(&mut state, round, results);
            s.arrived.notify_all();
        } else {
            let deadline = Instant::now() + s.timeout;
            while !state.done.contains_key(&round) {
                let now = Instant::now();
                if now >= deadline {
                    let missing: Vec<usize> = state
                        .slots
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| e.is_none())
                        .map(|(r, _)| r)
                        .collect();
                    for e in state.slots.iter_mut() {
                        *e = None;
                    }
                    let err = CollectiveError::Timeout {
                        missing,
                        timeout: s.timeout,
                    };
                    let n = state.slots.len();
                    finish(
                        &mut state,
                        round,
                        (0..n).map(|_| Err(err.clone())).collect(),
                    );
                    s.arrived.notify_all();
                    break;
                }
                state = s
                    .arrived
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        let results = state.done.get_mut(&round).expect("round finished");
        let mine = results[self.rank]
            .take()
            .expect("each rank takes its result once");
        if results.iter().all(Option::is_none) {
            state.done.remove(&round);
        }
        mine
    }
}

fn finish<B>(state: &mut State<B>, round: u64, results: Vec<Result<B>>) {
    state
        .done
        .insert(round, results.into_iter().map(Some).collect());
    state.round = round + 1;
}

/// Run one collective for all ranks; any failure is every rank's failure.
fn run<G: Collectives>(group: &G, entries: Vec<(Request, G::Buf)>) -> Vec<Result<G::Buf>> {
    let n = entries.len();
    let request = entries[0].0;
    let (requests, mut bufs): (Vec<Request>, Vec<G::Buf>) = entries.into_iter().unzip();
    let outcome = match requests.iter().position(|r| *r != request) {
        Some(rank) => Err(CollectiveError::RankFailed {
            rank,
            reason: format!(
                "rank {rank} called {:?} while rank 0 called {request:?}",
                requests[rank]
            ),
        }),
        None => match request {
            Request::AllReduce(op) => group.all_reduce(&mut bufs, op).map(|()| bufs),
            Request::ReduceScatter(op) => group.reduce_scatter(&mut bufs, op),
            Request::AllGather => group.all_gather(&bufs),
            Request::Broadcast(root) => group.broadcast(&mut bufs, root).map(|()| bufs),
        },
    };
    match outcome {
        Ok(outs) => outs.into_iter().map(Ok).collect(),
        Err(e) => (0..n).map(|_| Err(e.clone())).collect(),
    }
}
