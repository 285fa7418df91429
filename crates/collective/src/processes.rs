//! The level above one machine's ranks: the processes of a world (one per node, or several on
//! one machine), joined by a transport the field already trusts (MPI on CPU meshes; NCCL for
//! GPU data across nodes). This crate's collectives stay inside a process; a [`ProcessLink`]
//! carries the one buffer per process that crosses the processes.
//!
//! [`ThreadWorld`] stands processes in with threads of one process (tests, and the reference a
//! real transport is checked against).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Why a step across the processes failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("across the processes: {0}")]
pub struct LinkError(pub String);

/// The processes of one world: every process holds one link, and every process calls its
/// methods the same number of times, in the same order (SPMD).
pub trait ProcessLink: Send + Sync + 'static {
    /// This process, from 0.
    fn process(&self) -> usize;
    /// The processes of the world.
    fn processes(&self) -> usize;
    /// Every process's `bytes` (lengths may differ), in process order, on every process.
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LinkError>;

    /// A second link over the same processes, made with this one, whose exchanges may run on
    /// another thread while this link's run (each link keeps its own order of exchanges, which
    /// every process follows). The early gradient buckets' communication thread crosses the
    /// processes through it, beside the step's own sums on this link. `None`: the link has
    /// none (NCCL's, for now), and a world on it sums its gradient buckets after the backward
    /// pass.
    fn side_channel(&self) -> Option<Arc<dyn ProcessLink>> {
        None
    }

    /// Whether [`ProcessLink::all_to_all`] is the link's own, each part travelling to its
    /// process only (or, for [`ThreadLink`], no bytes travelling at all): then large sums cross
    /// the processes by blocks, else whole.
    fn has_all_to_all(&self) -> bool {
        false
    }

    /// From every process, `send_lens[q]` bytes of `send` (its parts laid end to end, in
    /// process order) to process `q`: the parts sent to this one, in process order;
    /// `recv_lens[q]` is exactly the length process `q` sends here (every process can say
    /// it). The default goes through [`ProcessLink::all_gather`], so every part reaches every
    /// process (P times the bytes of a true all-to-all); a link with its own all-to-all
    /// overrides it and says so in [`ProcessLink::has_all_to_all`].
    fn all_to_all(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, LinkError> {
        check_all_to_all(self.process(), self.processes(), send, send_lens, recv_lens)?;
        let mut message = Vec::with_capacity(8 * send_lens.len() + send.len());
        let mut at = 0;
        for &len in send_lens {
            message.extend((len as u64).to_le_bytes());
            message.extend_from_slice(&send[at..at + len]);
            at += len;
        }
        let all = self.all_gather(&message)?;
        let me = self.process();
        let broken = |q: usize| LinkError(format!("process {q} sent a malformed all-to-all"));
        (all.iter().enumerate())
            .map(|(q, m)| {
                let mut at = 0;
                for to in 0..=me {
                    let head = m.get(at..at + 8).ok_or_else(|| broken(q))?;
                    let len = u64::from_le_bytes(head.try_into().expect("8 bytes")) as usize;
                    let body = m.get(at + 8..at + 8 + len).ok_or_else(|| broken(q))?;
                    if to == me {
                        if recv_lens[q] != len {
                            return Err(LinkError(format!(
                                "process {q} sent {len} bytes here, {} were expected",
                                recv_lens[q]
                            )));
                        }
                        return Ok(body.to_vec());
                    }
                    at += 8 + len;
                }
                Err(broken(q))
            })
            .collect()
    }
}

/// Where each of the pieces of `lens` starts, laid end to end.
pub fn offsets(lens: &[usize]) -> Vec<usize> {
    lens.iter()
        .scan(0, |at, len| Some(std::mem::replace(at, *at + len)))
        .collect()
}

/// Checks the arguments of an all-to-all of `process` in a world of `processes`: one send and
/// one receive length per process, send lengths that add up to `send`, and as many bytes sent
/// to this process as it expects.
pub fn check_all_to_all(
    process: usize,
    processes: usize,
    send: &[u8],
    send_lens: &[usize],
    recv_lens: &[usize],
) -> Result<(), LinkError> {
    if send_lens.len() != processes || recv_lens.len() != processes {
        return Err(LinkError(format!(
            "an all-to-all of {} parts and {} lengths in a world of {processes}",
            send_lens.len(),
            recv_lens.len()
        )));
    }
    let total: usize = send_lens.iter().sum();
    if total != send.len() {
        return Err(LinkError(format!(
            "an all-to-all of {} bytes whose parts add up to {total}",
            send.len()
        )));
    }
    if send_lens[process] != recv_lens[process] {
        return Err(LinkError(format!(
            "an all-to-all sending {} bytes to this process, which expects {}",
            send_lens[process], recv_lens[process]
        )));
    }
    Ok(())
}

/// Polls `ready` until it says the exchange is done (`Ok(true)`), spinning at first (most
/// exchanges of a step take microseconds), then sleeping a millisecond at a time. `Ok(false)`:
/// `timeout` passed first, and [`no_answer`] says so; an error of `ready` ends the wait.
pub fn wait_for_exchange(
    timeout: Duration,
    mut ready: impl FnMut() -> Result<bool, LinkError>,
) -> Result<bool, LinkError> {
    let start = std::time::Instant::now();
    loop {
        if ready()? {
            return Ok(true);
        }
        let waited = start.elapsed();
        if waited > timeout {
            return Ok(false);
        }
        if waited < Duration::from_millis(10) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The line a process that waited past `timeout` at an exchange ends with.
pub fn no_answer(process: usize, processes: usize, timeout: Duration) -> String {
    format!(
        "process {process} of {processes}: no answer from the other processes within {} s at \
         an exchange (one of them lost, stopped, or running other code)",
        timeout.as_secs_f64()
    )
}

/// Processes stood in by threads of this process: [`ThreadWorld::links`] gives one link per
/// thread. A process that does not come to an all-gather within `timeout` fails it on every
/// other process (a lost peer), so a test never hangs.
pub struct ThreadWorld {
    state: Mutex<Round>,
    arrived: Condvar,
    processes: usize,
    timeout: Duration,
}

/// One all-gather in progress: the buffers given so far, and how many have been taken.
#[derive(Default)]
struct Round {
    /// Counts the all-gathers started, so a fast process cannot join the next one early.
    number: u64,
    given: Vec<Option<Vec<u8>>>,
    taken: usize,
    failed: Option<String>,
}

/// One process's handle to a [`ThreadWorld`].
#[derive(Clone)]
pub struct ThreadLink {
    world: Arc<ThreadWorld>,
    process: usize,
    /// This process's link of the twin world ([`ProcessLink::side_channel`]).
    side: Option<Arc<ThreadLink>>,
}

impl ThreadWorld {
    /// One link per process, for `processes` threads; each has a side channel (a link of a
    /// twin world of the same threads).
    pub fn links(processes: usize, timeout: Duration) -> Vec<ThreadLink> {
        let sides = Self::world(processes, timeout);
        Self::world(processes, timeout)
            .into_iter()
            .zip(sides)
            .map(|(link, side)| ThreadLink {
                side: Some(Arc::new(side)),
                ..link
            })
            .collect()
    }

    /// One link per process of a new world, without side channels.
    fn world(processes: usize, timeout: Duration) -> Vec<ThreadLink> {
        let world = Arc::new(ThreadWorld {
            state: Mutex::new(Round {
                given: vec![None; processes],
                ..Round::default()
            }),
            arrived: Condvar::new(),
            processes,
            timeout,
        });
        (0..processes)
            .map(|process| ThreadLink {
                world: world.clone(),
                process,
                side: None,
            })
            .collect()
    }
}

impl ProcessLink for ThreadLink {
    fn process(&self) -> usize {
        self.process
    }

    /// Threads share memory: the sums by blocks are what a world with a real all-to-all runs.
    fn has_all_to_all(&self) -> bool {
        true
    }

    fn processes(&self) -> usize {
        self.world.processes
    }

    fn side_channel(&self) -> Option<Arc<dyn ProcessLink>> {
        self.side.clone().map(|side| side as Arc<dyn ProcessLink>)
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LinkError> {
        let w = &*self.world;
        let lost = |round: &Round| LinkError(round.failed.clone().unwrap_or_default());
        let mut round = w.state.lock().unwrap_or_else(|p| p.into_inner());
        // Wait until the previous all-gather has been taken by every process.
        while round.given[self.process].is_some() && round.failed.is_none() {
            round = wait(w, round)?;
        }
        if round.failed.is_some() {
            return Err(lost(&round));
        }
        let number = round.number;
        round.given[self.process] = Some(bytes.to_vec());
        w.arrived.notify_all();
        while round.number == number && round.given.iter().any(Option::is_none) {
            round = wait(w, round)?;
            if round.failed.is_some() {
                return Err(lost(&round));
            }
        }
        let all: Vec<Vec<u8>> = round
            .given
            .iter()
            .map(|g| g.clone().unwrap_or_default())
            .collect();
        round.taken += 1;
        if round.taken == w.processes {
            round.given.iter_mut().for_each(|g| *g = None);
            round.taken = 0;
            round.number += 1;
            w.arrived.notify_all();
        }
        Ok(all)
    }
}

/// Waits for another process, failing the world if none comes within its timeout.
fn wait<'a>(
    w: &'a ThreadWorld,
    round: std::sync::MutexGuard<'a, Round>,
) -> Result<std::sync::MutexGuard<'a, Round>, LinkError> {
    let (mut round, timed_out) = w
        .arrived
        .wait_timeout(round, w.timeout)
        .unwrap_or_else(|p| p.into_inner());
    if timed_out.timed_out() {
        let missing: Vec<String> = (round.given.iter().enumerate())
            .filter(|(_, g)| g.is_none())
            .map(|(p, _)| p.to_string())
            .collect();
        let why = format!(
            "no answer from process {} within {} s",
            missing.join(", "),
            w.timeout.as_secs_f64()
        );
        round.failed.get_or_insert(why);
        w.arrived.notify_all();
        return Err(LinkError(round.failed.clone().unwrap_or_default()));
    }
    Ok(round)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_gets_every_buffer_in_process_order_round_after_round() {
        let links = ThreadWorld::links(3, Duration::from_secs(10));
        let handles: Vec<_> = links
            .into_iter()
            .map(|l| {
                std::thread::spawn(move || {
                    (0..50u8)
                        .map(|i| l.all_gather(&vec![i; l.process() + 1]).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            let rounds = h.join().unwrap();
            for (i, all) in rounds.into_iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..3).map(|p| vec![i as u8; p + 1]).collect();
                assert_eq!(all, want);
            }
        }
    }

    #[test]
    fn an_exchange_wait_ends_when_ready_at_its_deadline_or_on_an_error() {
        let mut polls = 0;
        let ready = wait_for_exchange(Duration::from_secs(10), || {
            polls += 1;
            Ok(polls == 3)
        });
        assert_eq!((ready, polls), (Ok(true), 3));
        let start = std::time::Instant::now();
        let late = wait_for_exchange(Duration::from_millis(30), || Ok(false));
        assert_eq!(late, Ok(false));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let failed = wait_for_exchange(Duration::from_secs(10), || Err(LinkError("x".into())));
        assert_eq!(failed, Err(LinkError("x".into())));
        let line = no_answer(1, 2, Duration::from_secs(3));
        assert!(
            line.starts_with("process 1 of 2: no answer") && line.contains("3 s"),
            "{line}"
        );
    }

    #[test]
    fn an_all_to_all_brings_each_process_the_parts_sent_to_it() {
        let links = ThreadWorld::links(3, Duration::from_secs(10));
        let handles: Vec<_> = links
            .into_iter()
            .map(|l| {
                std::thread::spawn(move || {
                    let p = l.process() as u8;
                    // Process p sends q + 1 bytes of value 10 p + q to process q.
                    let send: Vec<u8> = (0..3u8)
                        .flat_map(|q| vec![10 * p + q; q as usize + 1])
                        .collect();
                    let lens = [1, 2, 3];
                    let got = l.all_to_all(&send, &lens, &[p as usize + 1; 3]).unwrap();
                    // Every length but this process's own wrong: found after the exchange.
                    let mut expected = [0; 3];
                    expected[p as usize] = p as usize + 1;
                    let wrong = l.all_to_all(&send, &lens, &expected);
                    let own = l.all_to_all(&send, &lens, &[0; 3]).unwrap_err();
                    assert!(own.0.contains("which expects 0"), "{own}");
                    assert!(l.all_to_all(&send, &[1, 2], &[1; 3]).is_err());
                    assert!(l.all_to_all(&send, &[1, 2, 2], &[1; 3]).is_err());
                    (p, got, wrong)
                })
            })
            .collect();
        for h in handles {
            let (p, got, wrong) = h.join().unwrap();
            let want: Vec<Vec<u8>> = (0..3u8).map(|q| vec![10 * q + p; p as usize + 1]).collect();
            assert_eq!(got, want);
            assert!(wrong.unwrap_err().0.contains("were expected"));
        }
    }

    /// Each process crosses its side channel on a thread of its own while its main thread
    /// crosses the main link: neither waits for the other, and each keeps its own rounds.
    #[test]
    fn a_side_channel_exchanges_beside_the_main_link() {
        let links = ThreadWorld::links(3, Duration::from_secs(10));
        let handles: Vec<_> = links
            .into_iter()
            .map(|l| {
                std::thread::spawn(move || {
                    let side = l.side_channel().expect("thread links have a side channel");
                    assert!(side.side_channel().is_none());
                    assert_eq!((side.process(), side.processes()), (l.process(), 3));
                    let beside = std::thread::spawn(move || {
                        (0..40u8)
                            .map(|i| side.all_gather(&[100 + i]).unwrap())
                            .collect::<Vec<_>>()
                    });
                    let main: Vec<_> = (0..40u8).map(|i| l.all_gather(&[i]).unwrap()).collect();
                    (main, beside.join().unwrap())
                })
            })
            .collect();
        for h in handles {
            let (main, side) = h.join().unwrap();
            for i in 0..40u8 {
                assert_eq!(main[i as usize], vec![vec![i]; 3]);
                assert_eq!(side[i as usize], vec![vec![100 + i]; 3]);
            }
        }
    }

    #[test]
    fn a_missing_process_fails_the_others_within_the_timeout() {
        let mut links = ThreadWorld::links(2, Duration::from_millis(200));
        let _absent = links.pop();
        let err = links[0].all_gather(b"x").unwrap_err();
        assert!(err.0.contains("process 1"), "{err}");
    }
}
