//! Processes stood in by threads of one process ([`ThreadWorld`]): the tests' world, and the
//! reference a real transport is checked against.

use crate::link::{LinkError, ProcessLink};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

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

/// `f` on every process of a world of `n` threads, each on its own thread with its link;
/// their answers in process order.
#[cfg(test)]
pub(crate) fn on_each<T: Send + 'static>(
    n: usize,
    f: impl Fn(ThreadLink) -> T + Send + Sync + Copy + 'static,
) -> Vec<T> {
    let links = ThreadWorld::links(n, Duration::from_secs(10));
    let handles: Vec<_> = (links.into_iter())
        .map(|l| std::thread::spawn(move || f(l)))
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_gets_every_buffer_in_process_order_round_after_round() {
        let answers = on_each(3, |l| {
            (0..50u8)
                .map(|i| l.all_gather(&vec![i; l.process() + 1]).unwrap())
                .collect::<Vec<_>>()
        });
        for rounds in answers {
            for (i, all) in rounds.into_iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..3).map(|p| vec![i as u8; p + 1]).collect();
                assert_eq!(all, want);
            }
        }
    }

    #[test]
    fn an_all_to_all_brings_each_process_the_parts_sent_to_it() {
        let answers = on_each(3, |l| {
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
        });
        for (p, got, wrong) in answers {
            let want: Vec<Vec<u8>> = (0..3u8).map(|q| vec![10 * q + p; p as usize + 1]).collect();
            assert_eq!(got, want);
            assert!(wrong.unwrap_err().0.contains("were expected"));
        }
    }

    /// Each process crosses its side channel on a thread of its own while its main thread
    /// crosses the main link: neither waits for the other, and each keeps its own rounds.
    #[test]
    fn a_side_channel_exchanges_beside_the_main_link() {
        let answers = on_each(3, |l| {
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
        });
        for (main, side) in answers {
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
