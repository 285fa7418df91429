//! The link between the processes of a world: [`ProcessLink`], which every transport
//! implements (in-process threads: `threads.rs`; MPI: `mpi.rs`; NCCL: `nccl/`), and the checks
//! and waits they share. A link carries bytes only: what they mean (a tensor's sum, a
//! setting the processes compare) is its caller's.

use std::sync::Arc;
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
    /// process only (or, for [`ThreadLink`](crate::ThreadLink), no bytes travelling at all): then large sums cross
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
